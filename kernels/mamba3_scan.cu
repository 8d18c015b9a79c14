#include "kernels/mamba3_scan.cuh"

#include <algorithm>
#include <type_traits>

#include "kernels/block_reduce.cuh"
#include "kernels/cuda_check.cuh"

namespace mambarl::cuda {

namespace {

constexpr int kThreads = 128;        // flat elementwise grids
constexpr int kRowThreads = 64;      // one block per token row
constexpr int kScanBwdThreads = 256; // launch bound of the backward scan (heads_per_block * P)
constexpr float kPiF = 3.14159265358979323846f;
constexpr float kTwoPiF = 6.28318530717958647692f;

// Column offsets into a zx row: [z x B C dd_dt dd_A λ θ] (Mamba3Dims::in_rows
// is host-only).
struct Cols {
  int x, b, c, dt, a, lam, th, R;
};
__host__ __device__ inline Cols cols_of(const Mamba3Dims& d) {
  Cols o;
  o.x = d.E;
  o.b = 2 * d.E;
  o.c = o.b + d.G * d.N;
  o.dt = o.c + d.G * d.N;
  o.a = o.dt + d.H;
  o.lam = o.a + d.H;
  o.th = o.lam + d.H;
  o.R = o.th + d.Na;
  return o;
}

// Offsets of k_prev, v_prev, φ in one env's state slice (S (H,P,N) first).
struct StateOffsets {
  size_t kp, vp, phi;
};
__host__ __device__ inline StateOffsets state_offsets(const Mamba3Dims& d) {
  StateOffsets s;
  s.kp = static_cast<size_t>(d.E) * d.N;
  s.vp = s.kp + static_cast<size_t>(d.H) * d.N;
  s.phi = s.vp + d.E;
  return s;
}

// As the CPU's head_scalars_forward: softplus(u) = max(u,0) + log1p(e^-|u|),
// A = min(-heavy_tail(v), -a_floor) with heavy_tail(v) = (1 + max(v,0)) / (1 - min(v,0)).
__device__ __forceinline__ float softplus_chunk(float u) {
  return fmaxf(u, 0.f) + log1pf(expf(-fabsf(u)));
}
__device__ __forceinline__ float decay_a(float v, float a_floor) {
  return fminf(-(1.f + fmaxf(v, 0.f)) / (1.f - fminf(v, 0.f)), -a_floor);
}

int blocks_for(size_t n, int threads) { return static_cast<int>((n + threads - 1) / threads); }

// The backward scan's block: heads of one env, P threads each, about 128
// threads in all; per head, the per-p partial sums, dk_carry and seg_len
// steps of its rows' states (the segment rebuild), in kScanBwdSmemBudget.
// Fewer heads where one step of segment would not fit beside the partials;
// then the longest segment that fits.
constexpr size_t kScanBwdSmemBudget = 96 * 1024;
int scan_bwd_partial_rows(const Mamba3Dims& d) { return 3 * d.N + 3; }
size_t scan_bwd_head_floats(const Mamba3Dims& d) {
  return static_cast<size_t>(scan_bwd_partial_rows(d)) * (d.P | 1) + d.N;
}
size_t scan_bwd_step_floats(const Mamba3Dims& d) { return static_cast<size_t>(d.N) * d.P; }
int scan_bwd_heads_per_block(const Mamba3Dims& d) {
  const size_t budget = kScanBwdSmemBudget / sizeof(float);
  const size_t per_head = scan_bwd_head_floats(d) + scan_bwd_step_floats(d);
  const int by_threads = d.P >= 128 ? 1 : 128 / d.P;
  const int by_smem = static_cast<int>(budget / per_head);
  const int hb = by_threads < by_smem ? by_threads : by_smem;
  return hb > 1 ? hb : 1;
}
int scan_bwd_max_seg_len(const Mamba3Dims& d) {
  const size_t per_head = kScanBwdSmemBudget / sizeof(float) / scan_bwd_heads_per_block(d);
  const size_t base = scan_bwd_head_floats(d), step = scan_bwd_step_floats(d);
  return per_head > base + step ? static_cast<int>((per_head - base) / step) : 1;
}
size_t scan_bwd_smem(const Mamba3Dims& d, int seg_len) {
  return (scan_bwd_head_floats(d) + seg_len * scan_bwd_step_floats(d)) * scan_bwd_heads_per_block(d) *
         sizeof(float);
}

// The register width of a row of S: the smallest instantiation holding N.
template <typename F>
void with_state_width(int N, F&& f) {
  if (N <= 16)
    f(std::integral_constant<int, 16>{});
  else if (N <= 32)
    f(std::integral_constant<int, 32>{});
  else
    f(std::integral_constant<int, kMamba3ScanMaxState>{});
}

// ---------------------------------------------------------------------------
// Forward

// One block per token row m.
__global__ void prep_kernel(Mamba3Dims d, Mamba3Weights w, Mamba3Chunk c) {
  extern __shared__ float rs[];  // (2G) 1/rms of B's groups, then C's
  const Cols o = cols_of(d);
  const size_t m = blockIdx.x;
  const int H = d.H, N = d.N, G = d.G, heads_per_group = H / G;
  const float* zr = c.zx + m * o.R;
  for (int h = threadIdx.x; h < H; h += blockDim.x) {
    const float dt = softplus_chunk(zr[o.dt + h] + __ldg(w.dt_bias + h));
    const float a = decay_a(zr[o.a + h], d.a_floor);
    const float lam = sigmoidf_ref(zr[o.lam + h]);
    const float alpha = expf(a * dt);
    const size_t mh = m * H + h;
    c.dt[mh] = dt;
    c.alpha[mh] = alpha;
    c.beta[mh] = alpha * dt * (1.f - lam);
    c.gamma[mh] = lam * dt;
  }
  // C's groups follow B's in the row, so group i of the 2G is at o.b + i*N.
  for (int i = threadIdx.x; i < 2 * G; i += blockDim.x) {
    const float* raw = zr + o.b + i * N;
    float ss = 0.f;
    for (int n = 0; n < N; ++n) ss += raw[n] * raw[n];
    const float r = 1.f / sqrtf(ss / static_cast<float>(N) + kNormEpsF);
    rs[i] = r;
    c.bc_rstd[m * 2 * G + i] = r;
  }
  __syncthreads();
  const size_t HN = static_cast<size_t>(H) * N;
  for (int i = threadIdx.x; i < H * N; i += blockDim.x) {
    const int h = i / N, n = i % N, g = h / heads_per_group;
    c.k[m * HN + i] = zr[o.b + g * N + n] * __ldg(w.b_norm + n) * rs[g] + __ldg(w.b_bias + i);
    c.q[m * HN + i] = zr[o.c + g * N + n] * __ldg(w.c_norm + n) * rs[G + g] + __ldg(w.c_bias + i);
  }
}

// The pair (v[0], v[1]) rotated by the angle (cs, sn): the official SISO
// convention (x0 c - x1 s, x0 s + x1 c).
__device__ __forceinline__ void rotate_pair(float* v, float cs, float sn) {
  const float x0 = v[0], x1 = v[1];
  v[0] = x0 * cs - x1 * sn;
  v[1] = x0 * sn + x1 * cs;
}

// The angle scans are a chain per (b, h, a) through t with a few loads a step.
// Walked one step at a time, each step waited on its loads (1.37 and 1.54 ms
// of an 11 ms update at 1024 steps x 64 envs, H100 ncu): the chain kernels
// load kAngleTile steps' inputs first, all independent, then walk them in
// registers, and the per-step rotations, which need no chain, are a flat
// grid (0.18 and 0.07 ms).
constexpr int kAngleTile = 16;

// One thread per (b, h, a), walking t: φ_t = (φ_{t-1} + π tanh(θ_a) dt_h) mod 2π,
// restarted at 0 at an episode start.
__global__ void angles_kernel(Mamba3Dims d, Mamba3Chunk c) {
  const int HA = d.H * d.Na;
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<size_t>(c.B) * HA) return;
  const int b = static_cast<int>(i / HA), ha = static_cast<int>(i % HA);
  const int h = ha / d.Na, a = ha % d.Na;
  const Cols o = cols_of(d);
  float phi = c.state0[b * c.stride + state_offsets(d).phi + ha];
  for (int t0 = 0; t0 < c.T; t0 += kAngleTile) {
    float th[kAngleTile], dt[kAngleTile];
    bool start[kAngleTile];
#pragma unroll
    for (int j = 0; j < kAngleTile; ++j) {
      const size_t m = static_cast<size_t>(min(t0 + j, c.T - 1)) * c.B + b;
      start[j] = c.starts[m] != 0;
      th[j] = tanhf(c.zx[m * o.R + o.th + a]);
      dt[j] = c.dt[m * d.H + h];
    }
#pragma unroll
    for (int j = 0; j < kAngleTile; ++j) {
      if (t0 + j >= c.T) break;
      if (start[j]) phi = 0.f;
      phi += (kPiF * th[j]) * dt[j];
      phi -= kTwoPiF * floorf(phi / kTwoPiF);
      c.phi[((static_cast<size_t>(t0 + j) * c.B + b) * d.H + h) * d.Na + a] = phi;
    }
  }
}

// The rotation kernels' thread: one per (m, h, a), i.e. per entry i of phi,
// with the offset of its pair (2a, 2a+1) in a (M, H, N) array and cos/sin φ.
struct AnglePair {
  bool active;
  size_t pair;  // mh N + 2a
  float cs, sn;
};
__device__ __forceinline__ AnglePair angle_pair(const Mamba3Dims& d, const Mamba3Chunk& c, size_t i) {
  AnglePair r{i < static_cast<size_t>(c.T) * c.B * d.H * d.Na, 0, 1.f, 0.f};
  if (!r.active) return r;
  r.pair = (i / d.Na) * d.N + 2 * (i % d.Na);
  sincosf(c.phi[i], &r.sn, &r.cs);
  return r;
}

// The pair (2a, 2a+1) of k and q rotated by φ.
__global__ void rotate_kernel(Mamba3Dims d, Mamba3Chunk c) {
  const AnglePair r = angle_pair(d, c, static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x);
  if (!r.active) return;
  rotate_pair(c.k + r.pair, r.cs, r.sn);
  rotate_pair(c.q + r.pair, r.cs, r.sn);
}

// One step of row p of S_h (NMAX >= N registers): at a start S_{t-1},
// v_prev and k_prev are zeros; else S = α S + (β v_prev) k_prev + (γ x) k.
// The forward and the backward's rebuild both call it, and the explicit
// rounding (no contraction left to the compiler) makes them agree bit for bit.
template <int NMAX>
__device__ __forceinline__ void state_row_step(int N, bool start, float al, float be, float ga, float x,
                                               float vp, const float* kp, const float* k, float (&s)[NMAX]) {
  const float bv = __fmul_rn(be, start ? 0.f : vp), gx = __fmul_rn(ga, x);
#pragma unroll
  for (int n = 0; n < NMAX; ++n)
    if (n < N)
      s[n] = __fmaf_rn(al, start ? 0.f : s[n], __fmaf_rn(bv, start ? 0.f : kp[n], __fmul_rn(gx, k[n])));
}

// Row (b, h, p) of the state the forward keeps after step t (n-major, stride
// P over n), or nullptr where t does not end a segment (or is the last step).
__device__ __forceinline__ float* segment_state_at(const Mamba3Dims& d, const Mamba3Chunk& c, int t, int b,
                                                   int h, int p) {
  const int slot = scan_segment_slot_after(t, c.T, c.seg_len);
  if (slot < 0) return nullptr;
  const size_t row = (static_cast<size_t>(slot) * c.B + b) * d.H + h;
  return c.seg_states + row * d.N * d.P + p;
}

// k_prev of step t: k of step t-1, or the initial state's at t = 0.
__device__ __forceinline__ const float* k_prev_of(const Mamba3Dims& d, const Mamba3Chunk& c, const float* st0,
                                                  int t, size_t mh) {
  return t > 0 ? c.k + (mh - static_cast<size_t>(c.B) * d.H) * d.N
               : st0 + state_offsets(d).kp + static_cast<size_t>(mh % d.H) * d.N;
}

// v_prev of step t in channel e: x of step t-1, or the initial state's at t = 0.
__device__ __forceinline__ float v_prev_of(const Mamba3Dims& d, const Mamba3Chunk& c, const float* st0, int t,
                                           size_t m, int e) {
  return t > 0 ? c.zx[(m - c.B) * cols_of(d).R + cols_of(d).x + e] : st0[state_offsets(d).vp + e];
}

// One thread per (b, h, p) with row p of S_h in registers, walking t.
template <int NMAX>
__global__ void __launch_bounds__(kThreads) scan_kernel(Mamba3Dims d, Mamba3Weights w, Mamba3Chunk c) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<size_t>(c.B) * d.E) return;
  const int E = d.E, N = d.N, P = d.P, H = d.H;
  const int b = static_cast<int>(i / E), e = static_cast<int>(i % E), h = e / P, p = e % P;
  const Cols o = cols_of(d);
  const float* st0 = c.state0 + b * c.stride;
  float s[NMAX];
#pragma unroll
  for (int n = 0; n < NMAX; ++n) s[n] = n < N ? st0[static_cast<size_t>(e) * N + n] : 0.f;
  float vp = st0[state_offsets(d).vp + e];
  const float d_skip = __ldg(w.d_skip + h);
  for (int t = 0; t < c.T; ++t) {
    const size_t m = static_cast<size_t>(t) * c.B + b, mh = m * H + h;
    const float* k = c.k + mh * N;
    const float* q = c.q + mh * N;
    const float x = c.zx[m * o.R + o.x + e];
    state_row_step<NMAX>(N, c.starts[m] != 0, c.alpha[mh], c.beta[mh], c.gamma[mh], x, vp,
                         k_prev_of(d, c, st0, t, mh), k, s);
    float acc = d_skip * x;
#pragma unroll
    for (int n = 0; n < NMAX; ++n)
      if (n < N) acc += s[n] * q[n];
    if (float* keep = segment_state_at(d, c, t, b, h, p)) {
#pragma unroll
      for (int n = 0; n < NMAX; ++n)
        if (n < N) keep[static_cast<size_t>(n) * P] = s[n];
    }
    c.y[m * E + e] = acc;
    vp = x;
  }
}

// The gate kernels' block: gate_heads_per_block(P) heads of one token row or
// consecutive rows, thread (hl, p) owning channel p of head hl, so that
// neighbouring threads touch neighbouring floats (one thread per head, looping
// over p, read and wrote P floats apart: at the 16k-env chunk the backward
// took 28 % of the Mamba-3 update). A head's sum over p is taken by its thread
// p = 0 from shared memory, in p order: deterministic, and the arithmetic of
// the thread-per-head kernels these replace.
struct GateThread {
  int hl, p;      // head within the block, channel within the head
  size_t pair;    // m * H + h
  bool active;    // pair < M H (the last block may run past)
  size_t m;
  int h;
};
__host__ __device__ inline int gate_heads_per_block(int P) { return P >= 256 ? 1 : 256 / P; }
__device__ __forceinline__ GateThread gate_thread(const Mamba3Dims& d, const Mamba3Chunk& c) {
  GateThread g;
  g.hl = static_cast<int>(threadIdx.x) / d.P;
  g.p = static_cast<int>(threadIdx.x) % d.P;
  g.pair = static_cast<size_t>(blockIdx.x) * gate_heads_per_block(d.P) + g.hl;
  g.active = g.pair < static_cast<size_t>(c.T) * c.B * d.H;
  g.m = g.pair / d.H;
  g.h = static_cast<int>(g.pair % d.H);
  return g;
}

// y ⊙ silu(z), or y w / rms_P(y) ⊙ silu(z).
__global__ void gate_kernel(Mamba3Dims d, Mamba3Weights w, Mamba3Chunk c) {
  extern __shared__ float red[];  // (hb P) each thread's y, then (hb) each head's 1/rms
  const int P = d.P;
  const GateThread t = gate_thread(d, c);
  const size_t ye = t.m * d.E + t.h * P + t.p;
  const size_t ze = t.m * cols_of(d).R + t.h * P + t.p;  // z is the first block of a zx row
  const float y = t.active ? c.y[ye] : 0.f, z = t.active ? c.zx[ze] : 0.f;
  if (!w.norm) {
    if (t.active) c.gated[ye] = y * z * sigmoidf_ref(z);
    return;  // w.norm is the whole grid's: no thread waits at a barrier below
  }
  float* head_rs = red + blockDim.x;
  red[threadIdx.x] = y;
  __syncthreads();
  if (t.p == 0 && t.active) {
    const float* yh = red + t.hl * P;
    float ss = 0.f;
    for (int q = 0; q < P; ++q) ss += yh[q] * yh[q];
    const float rs = 1.f / sqrtf(ss / static_cast<float>(P) + kNormEpsF);
    c.y_rstd[t.pair] = rs;
    head_rs[t.hl] = rs;
  }
  __syncthreads();
  if (t.active) c.gated[ye] = y * __ldg(w.norm + t.h * P + t.p) * head_rs[t.hl] * z * sigmoidf_ref(z);
}

// ---------------------------------------------------------------------------
// Backward

// dy, dz (silu'(z) = σ(z)(1 + z(1-σ(z)))), and with the norm its per-token
// weight terms and the RMSNorm backward over P (the block as gate_kernel's).
__global__ void gate_backward_kernel(Mamba3Dims d, Mamba3Weights w, Mamba3Chunk c) {
  extern __shared__ float red[];  // (hb P) each thread's y a, then (hb) each head's coef
  const int P = d.P;
  const GateThread t = gate_thread(d, c);
  const size_t ye = t.m * d.E + t.h * P + t.p;
  const size_t ze = t.m * cols_of(d).R + t.h * P + t.p;
  const float y = t.active ? c.y[ye] : 0.f, z = t.active ? c.zx[ze] : 0.f, dg = t.active ? c.dgated[ye] : 0.f;
  const float sg = sigmoidf_ref(z);
  if (!w.norm) {
    if (t.active) {
      c.dy[ye] = dg * z * sg;
      c.dzx[ze] = dg * y * sg * (1.f + z * (1.f - sg));
    }
    return;  // w.norm is the whole grid's: no thread waits at a barrier below
  }
  const float rs = t.active ? c.y_rstd[t.pair] : 0.f;
  const float wp = t.active ? __ldg(w.norm + t.h * P + t.p) : 0.f;
  const float a = dg * z * sg;  // dL/d(normed y)
  if (t.active) {
    c.dzx[ze] = dg * y * wp * rs * sg * (1.f + z * (1.f - sg));
    c.dnorm_part[ye] = a * y * rs;
  }
  float* head_coef = red + blockDim.x;
  red[threadIdx.x] = y * a;
  __syncthreads();
  if (t.p == 0 && t.active) {
    const float* ya = red + t.hl * P;
    const float* wn = w.norm + t.h * P;
    float dot = 0.f;
    for (int q = 0; q < P; ++q) dot += ya[q] * __ldg(wn + q);
    head_coef[t.hl] = rs * rs * rs * dot / static_cast<float>(P);
  }
  __syncthreads();
  if (t.active) c.dy[ye] = rs * a * wp - y * head_coef[t.hl];
}

// The recurrence's backward: a block holds heads_per_block heads of the same
// or consecutive envs, thread (hl, p) owns row p of head hl, with S_t and
// dL/dS_t for that row in registers, walking t from T-1 down. Per step, with
// r = dL/dS_t = dS_carry + dy ⊗ q:
//   per thread (local):  dx = D dy + γ (r·k) + dv_carry,  dv_carry' = β (r·k_prev),
//                        dS_carry' = α r,  dD += dy x
//   per head (sums over p, through shared memory, in p order):
//     dq[n] = Σ dy S_t[·,n],  dk[n] = dk_carry[n] + Σ γ x r[·,n],
//     dk_carry'[n] = Σ β v_prev r[·,n],  dα = Σ r·S_{t-1},  dγ = Σ x (r·k),
//     dβ = Σ v_prev (r·k_prev)
// The chunk goes a segment [t0, t1) at a time, last first: S_{t0-1} ..
// S_{t1-2} are rebuilt from the state the forward kept before the segment
// (state0 for the first) into shared memory, seg (seg_len, N, blockDim.x),
// each thread its own column; then the segment is walked backwards. At a
// start S_{t-1}, k_prev and v_prev are the zeros the forward used, and every
// carry is cut.
template <int NMAX>
__global__ void __launch_bounds__(kScanBwdThreads)
    scan_backward_kernel(Mamba3Dims d, Mamba3Weights w, Mamba3Chunk c, int heads_per_block) {
  extern __shared__ float smem[];
  const int N = d.N, P = d.P, H = d.H, E = d.E;
  const int K = 3 * N + 3, Ps = P | 1;  // odd row stride: the p-order sums read distinct banks
  const int hl = threadIdx.x / P, p = threadIdx.x % P;
  float* part = smem + static_cast<size_t>(hl) * K * Ps;                   // (K, Ps) per-p terms
  float* dkc = smem + static_cast<size_t>(heads_per_block) * K * Ps + hl * N;  // (N) dk_carry
  float* my_seg = smem + static_cast<size_t>(heads_per_block) * (K * Ps + N) + threadIdx.x;
  const size_t slot_stride = static_cast<size_t>(N) * blockDim.x;  // one step's rows in seg
  const int pair = blockIdx.x * heads_per_block + hl;  // b*H + h
  const bool active = pair < c.B * H;
  const int b = active ? pair / H : 0, h = pair % H, e = h * P + p;
  const Cols o = cols_of(d);
  const float* st0 = c.state0 + b * c.stride;
  const size_t NP = static_cast<size_t>(N) * P;
  const float d_skip = __ldg(w.d_skip + h);

  // Work items of the per-head sums: n < N is the triple (dq, dk, dk_carry)
  // of state n, N..N+2 are dα, dγ, dβ. Item j belongs to thread p = j % P
  // for every t, so dkc[n] is only ever touched by its owner.
  for (int n = p; n < N; n += P) dkc[n] = 0.f;
  float s_cur[NMAX], ds[NMAX];  // s_cur: S_t of the step being processed
#pragma unroll
  for (int n = 0; n < NMAX; ++n) ds[n] = s_cur[n] = 0.f;
  float dv_carry = 0.f, dd = 0.f;

  const int last_seg = (c.T - 1) / c.seg_len;
  for (int j = last_seg; j >= 0; --j) {
    const int t0 = j * c.seg_len, t1 = min(t0 + c.seg_len, c.T);

    // The rebuild: slot k holds S_{t0+k-1} as the forward had it (before a
    // start at t0+k zeroes it for that step).
    float sr[NMAX];
    if (active) {
      const float* src = j == 0 ? st0 + static_cast<size_t>(e) * N
                                : c.seg_states + ((static_cast<size_t>(j - 1) * c.B + b) * H + h) * NP + p;
      const size_t step = j == 0 ? 1 : static_cast<size_t>(P);
#pragma unroll
      for (int n = 0; n < NMAX; ++n) sr[n] = n < N ? src[n * step] : 0.f;
    }
    for (int t = t0; t < t1; ++t) {
      if (!active) break;
      float* slot = my_seg + (t - t0) * slot_stride;
#pragma unroll
      for (int n = 0; n < NMAX; ++n)
        if (n < N) slot[n * blockDim.x] = sr[n];
      const size_t m = static_cast<size_t>(t) * c.B + b, mh = m * H + h;
      state_row_step<NMAX>(N, c.starts[m] != 0, c.alpha[mh], c.beta[mh], c.gamma[mh], c.zx[m * o.R + o.x + e],
                           v_prev_of(d, c, st0, t, m, e), k_prev_of(d, c, st0, t, mh), c.k + mh * N, sr);
    }
    if (j == last_seg && active) {
#pragma unroll
      for (int n = 0; n < NMAX; ++n) s_cur[n] = sr[n];
    }

    for (int t = t1 - 1; t >= t0; --t) {
      const size_t m = static_cast<size_t>(t) * c.B + b, mh = m * H + h;
      const bool start = active && c.starts[m] != 0;
      if (active) {
        const float dy = c.dy[m * E + e];
        const float x = c.zx[m * o.R + o.x + e];
        const float vp = start ? 0.f : v_prev_of(d, c, st0, t, m, e);
        const float al = c.alpha[mh], be = c.beta[mh], ga = c.gamma[mh];
        const float* q = c.q + mh * N;
        const float* k = c.k + mh * N;
        const float* kp = k_prev_of(d, c, st0, t, mh);
        const float* sp = my_seg + (t - t0) * slot_stride;  // S_{t-1} (stride blockDim.x)
        const float gx = ga * x, bv = be * vp;
        float u = 0.f, wk = 0.f, dal = 0.f;
#pragma unroll
        for (int n = 0; n < NMAX; ++n) {
          if (n < N) {
            // S_{t-1} as it is (the next iteration's S_t) and as step t saw it.
            const float s_prev = sp[static_cast<size_t>(n) * blockDim.x];
            const float s_seen = start ? 0.f : s_prev;
            const float kpn = start ? 0.f : kp[n];
            const float r = ds[n] + dy * q[n];
            u += r * k[n];
            wk += r * kpn;
            dal += r * s_seen;
            part[n * Ps + p] = dy * s_cur[n];
            part[(N + n) * Ps + p] = gx * r;
            part[(2 * N + n) * Ps + p] = bv * r;
            ds[n] = start ? 0.f : al * r;
            s_cur[n] = s_prev;
          }
        }
        part[3 * N * Ps + p] = dal;
        part[(3 * N + 1) * Ps + p] = x * u;
        part[(3 * N + 2) * Ps + p] = vp * wk;
        c.dzx[m * o.R + o.x + e] = d_skip * dy + ga * u + dv_carry;
        dv_carry = start ? 0.f : be * wk;
        dd += dy * x;
      }
      __syncthreads();
      if (active) {
        for (int jj = p; jj < N + 3; jj += P) {
          if (jj < N) {
            float dq = 0.f, dk = dkc[jj], dkp = 0.f;
            for (int pp = 0; pp < P; ++pp) {
              dq += part[jj * Ps + pp];
              dk += part[(N + jj) * Ps + pp];
              dkp += part[(2 * N + jj) * Ps + pp];
            }
            c.dq[mh * N + jj] = dq;
            c.dk[mh * N + jj] = dk;
            dkc[jj] = start ? 0.f : dkp;
          } else {
            const int sc = jj - N;  // 0: dα, 1: dγ, 2: dβ
            float sum = 0.f;
            for (int pp = 0; pp < P; ++pp) sum += part[(3 * N + sc) * Ps + pp];
            (sc == 0 ? c.dalpha : sc == 1 ? c.dgamma : c.dbeta)[mh] = sum;
          }
        }
      }
      __syncthreads();  // part is rewritten by the next step
    }
  }
  if (active) c.dd_part[(static_cast<size_t>(b) * P + p) * H + h] = dd;
}

// Un-rotates the pair (2a, 2a+1) of dk and dq (Rᵀ d) and keeps step t's own
// dφ_t = Σ (-d0 r1 + d1 r0) over k and q in dphi, which
// angles_backward_kernel then carries back through t.
__global__ void unrotate_kernel(Mamba3Dims d, Mamba3Chunk c) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const AnglePair r = angle_pair(d, c, i);
  if (!r.active) return;
  float dphi = 0.f;
  for (int which = 0; which < 2; ++which) {
    float* dv = (which == 0 ? c.dk : c.dq) + r.pair;
    const float* rv = (which == 0 ? c.k : c.q) + r.pair;
    const float g0 = dv[0], g1 = dv[1];
    dphi += g1 * rv[0] - g0 * rv[1];
    dv[0] = g0 * r.cs + g1 * r.sn;
    dv[1] = g1 * r.cs - g0 * r.sn;
  }
  c.dphi[i] = dphi;
}

// One thread per (b, h, a), t descending (tiles as angles_kernel's): the mod
// 2π has derivative 1, so dΔφ_t = dφ_t + dΔφ_{t+1} unless t+1 is a start.
__global__ void angles_backward_kernel(Mamba3Dims d, Mamba3Chunk c) {
  const int HA = d.H * d.Na;
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<size_t>(c.B) * HA) return;
  const int b = static_cast<int>(i / HA);
  const size_t row = static_cast<size_t>(c.B) * HA;  // one step of dphi
  float carry = 0.f;
  for (int t1 = c.T - 1; t1 >= 0; t1 -= kAngleTile) {
    float own[kAngleTile];
    bool start[kAngleTile];
#pragma unroll
    for (int j = 0; j < kAngleTile; ++j) {
      const size_t t = static_cast<size_t>(max(t1 - j, 0));
      own[j] = c.dphi[t * row + i];
      start[j] = c.starts[t * c.B + b] != 0;
    }
#pragma unroll
    for (int j = 0; j < kAngleTile; ++j) {
      if (t1 - j < 0) break;
      const float dphi = own[j] + carry;
      c.dphi[static_cast<size_t>(t1 - j) * row + i] = dphi;
      carry = start[j] ? 0.f : dphi;
    }
  }
}

// One block per token row: from (dα, dβ, dγ, dΔφ) to the dd_dt, dd_A, λ, θ
// columns of dzx (as the CPU's head_scalars_backward).
__global__ void head_scalars_backward_kernel(Mamba3Dims d, Mamba3Weights w, Mamba3Chunk c) {
  const Cols o = cols_of(d);
  const size_t m = blockIdx.x;
  const int H = d.H, Na = d.Na;
  const float* zr = c.zx + m * o.R;
  float* dr = c.dzx + m * o.R;
  for (int h = threadIdx.x; h < H; h += blockDim.x) {
    const size_t mh = m * H + h;
    float ddt = 0.f;  // Δφ_{h,a} = π tanh(θ_a) dt_h
    for (int a = 0; a < Na; ++a) ddt += (kPiF * tanhf(zr[o.th + a])) * c.dphi[mh * Na + a];
    const float dt = c.dt[mh], alpha = c.alpha[mh];
    const float dal = c.dalpha[mh], dbe = c.dbeta[mh], dga = c.dgamma[mh];
    const float lam = sigmoidf_ref(zr[o.lam + h]);
    const float v = zr[o.a + h], a = decay_a(v, d.a_floor);
    dr[o.lam + h] = (dga - dbe * alpha) * dt * lam * (1.f - lam);
    const float g_alpha = dal + dbe * dt * (1.f - lam);  // β = α dt (1-λ) depends on α too
    ddt += g_alpha * alpha * a + dbe * alpha * (1.f - lam) + dga * lam;
    // A is the floor (no gradient) unless below it; heavy_tail'(v) = 1/(1 - min(v,0))².
    const float mv = 1.f - fminf(v, 0.f);
    dr[o.a + h] = a < -d.a_floor ? -g_alpha * alpha * dt / (mv * mv) : 0.f;
    dr[o.dt + h] = ddt * sigmoidf_ref(zr[o.dt + h] + __ldg(w.dt_bias + h));  // softplus' = σ
  }
  for (int a = threadIdx.x; a < Na; a += blockDim.x) {
    const float th = tanhf(zr[o.th + a]);
    float sum = 0.f;
    for (int h = 0; h < H; ++h) sum += c.dphi[(m * H + h) * Na + a] * c.dt[m * H + h];
    dr[o.th + a] = kPiF * (1.f - th * th) * sum;
  }
}

// One block per token row: dk̃, dq̃ (un-rotated) summed over each group's
// heads, then the RMSNorm backward over N per group into dzx's B and C
// columns, and the per-token norm-weight terms.
__global__ void bc_backward_kernel(Mamba3Dims d, Mamba3Weights w, Mamba3Chunk c) {
  extern __shared__ float sm[];
  const Cols o = cols_of(d);
  const size_t m = blockIdx.x;
  const int H = d.H, N = d.N, G = d.G, GN = G * N, heads_per_group = H / G;
  float* dn = sm;            // (2G, N) dL/d(normed B), then C, per group
  float* dot = sm + 2 * GN;  // (2G)
  const float* zr = c.zx + m * o.R;
  const size_t HN = static_cast<size_t>(H) * N;
  // Index i over (which, g, n) = (which*G + g)*N + n: B's groups then C's, as
  // in the zx row from o.b on.
  for (int i = threadIdx.x; i < 2 * GN; i += blockDim.x) {
    const int which = i / GN, g = (i % GN) / N, n = i % N;
    const float* src = (which == 0 ? c.dk : c.dq) + m * HN;
    float s = 0.f;
    for (int hh = g * heads_per_group; hh < (g + 1) * heads_per_group; ++hh) s += src[hh * N + n];
    dn[i] = s;
  }
  __syncthreads();
  for (int i = threadIdx.x; i < 2 * G; i += blockDim.x) {
    const float* wn = i < G ? w.b_norm : w.c_norm;
    const float* raw = zr + o.b + i * N;
    float s = 0.f;
    for (int n = 0; n < N; ++n) s += raw[n] * (dn[i * N + n] * __ldg(wn + n));
    dot[i] = s;
  }
  __syncthreads();
  for (int i = threadIdx.x; i < 2 * GN; i += blockDim.x) {
    const int grp = i / N, n = i % N;  // grp = which*G + g
    const float* wn = grp < G ? w.b_norm : w.c_norm;
    const float r = c.bc_rstd[m * 2 * G + grp];
    const float raw = zr[o.b + i];
    const float gv = dn[i] * __ldg(wn + n);
    c.dzx[m * o.R + o.b + i] = r * gv - raw * (r * r * r * dot[grp] / static_cast<float>(N));
    float* part = grp < G ? c.dbn_part : c.dcn_part;
    part[(m * G + grp % G) * N + n] = dn[i] * raw * r;
  }
}

// gate_kernel or gate_backward_kernel over the chunk's M rows (the block and
// shared memory of the gate kernels' comment).
template <typename Kernel>
void launch_gate(Kernel kernel, const Mamba3Dims& d, const Mamba3Weights& w, const Mamba3Chunk& c, size_t M,
                 cudaStream_t stream) {
  const int hb = gate_heads_per_block(d.P);
  const unsigned threads = static_cast<unsigned>(hb * d.P);
  kernel<<<blocks_for(M * d.H, hb), threads, (threads + hb) * sizeof(float), stream>>>(d, w, c);
}

}  // namespace

void mamba3_chunk_check(const Mamba3Dims& d) {
  MAMBARL_CHECK(d.D > 0 && d.E > 0 && d.N > 0 && d.P > 0 && d.H > 0 && d.G > 0 && d.Na > 0,
                "mamba3 chunk: dims must be positive");
  MAMBARL_CHECK(d.H * d.P == d.E && d.H % d.G == 0 && 2 * d.Na <= d.N,
                "mamba3 chunk: inconsistent dims (E " << d.E << ", H " << d.H << ", P " << d.P
                                                      << ", G " << d.G << ", N " << d.N
                                                      << ", Na " << d.Na << ")");
  MAMBARL_CHECK(d.N <= kMamba3ScanMaxState,
                "mamba3 chunk: d_state " << d.N << " is more than the " << kMamba3ScanMaxState
                                         << " the training kernels hold in registers");
  MAMBARL_CHECK(d.P <= kMamba3ScanMaxHeaddim, "mamba3 chunk: headdim "
                                                  << d.P << " is more than "
                                                  << kMamba3ScanMaxHeaddim);
}

int mamba3_max_segment_len(const Mamba3Dims& d) {
  mamba3_chunk_check(d);
  return scan_bwd_max_seg_len(d);
}

void mamba3_chunk_configure(const Mamba3Dims& d) {
  const size_t bytes = scan_bwd_smem(d, mamba3_max_segment_len(d));
  const size_t limit = max_smem_per_block_optin();
  MAMBARL_CHECK(bytes <= limit, "mamba3 chunk: the backward scan needs "
                                    << bytes << " bytes of shared memory per block (d_state "
                                    << d.N << ", headdim " << d.P << "), the device has " << limit);
  with_state_width(d.N, [&](auto width) {
    MAMBARL_CUDA_CHECK(cudaFuncSetAttribute(scan_backward_kernel<decltype(width)::value>,
                                            cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            static_cast<int>(bytes)));
  });
}

void mamba3_chunk_forward(const Mamba3Dims& d, const Mamba3Weights& w, const Mamba3Chunk& c,
                          cudaStream_t stream) {
  MAMBARL_CHECK(c.T > 0 && c.B > 0, "mamba3 chunk: T (" << c.T << ") and B (" << c.B
                                                        << ") must be positive");
  MAMBARL_CHECK(c.seg_len >= 1, "mamba3 chunk: seg_len " << c.seg_len << " must be at least 1");
  const size_t M = static_cast<size_t>(c.T) * c.B;
  prep_kernel<<<static_cast<unsigned>(M), kRowThreads, 2 * d.G * sizeof(float), stream>>>(d, w, c);
  MAMBARL_CUDA_LAUNCH_CHECK(stream);
  const size_t angle_chains = static_cast<size_t>(c.B) * d.H * d.Na;
  angles_kernel<<<blocks_for(angle_chains, kThreads), kThreads, 0, stream>>>(d, c);
  MAMBARL_CUDA_LAUNCH_CHECK(stream);
  rotate_kernel<<<blocks_for(angle_chains * c.T, kThreads), kThreads, 0, stream>>>(d, c);
  MAMBARL_CUDA_LAUNCH_CHECK(stream);
  with_state_width(d.N, [&](auto width) {
    scan_kernel<decltype(width)::value>
        <<<blocks_for(static_cast<size_t>(c.B) * d.E, kThreads), kThreads, 0, stream>>>(d, w, c);
  });
  MAMBARL_CUDA_LAUNCH_CHECK(stream);
  launch_gate(gate_kernel, d, w, c, M, stream);
  MAMBARL_CUDA_LAUNCH_CHECK(stream);
}

void mamba3_chunk_backward(const Mamba3Dims& d, const Mamba3Weights& w, const Mamba3Chunk& c,
                           cudaStream_t stream) {
  MAMBARL_CHECK(c.T > 0 && c.B > 0, "mamba3 chunk: T (" << c.T << ") and B (" << c.B
                                                        << ") must be positive");
  MAMBARL_CHECK(c.seg_len >= 1, "mamba3 chunk: seg_len " << c.seg_len << " must be at least 1");
  const size_t M = static_cast<size_t>(c.T) * c.B;
  launch_gate(gate_backward_kernel, d, w, c, M, stream);
  MAMBARL_CUDA_LAUNCH_CHECK(stream);
  const int hb = scan_bwd_heads_per_block(d);
  const size_t pairs = static_cast<size_t>(c.B) * d.H;
  const size_t smem = scan_bwd_smem(d, std::min(c.seg_len, c.T));
  with_state_width(d.N, [&](auto width) {
    scan_backward_kernel<decltype(width)::value>
        <<<blocks_for(pairs, hb), hb * d.P, smem, stream>>>(d, w, c, hb);
  });
  MAMBARL_CUDA_LAUNCH_CHECK(stream);
  const size_t angle_chains = static_cast<size_t>(c.B) * d.H * d.Na;
  unrotate_kernel<<<blocks_for(angle_chains * c.T, kThreads), kThreads, 0, stream>>>(d, c);
  MAMBARL_CUDA_LAUNCH_CHECK(stream);
  angles_backward_kernel<<<blocks_for(angle_chains, kThreads), kThreads, 0, stream>>>(d, c);
  MAMBARL_CUDA_LAUNCH_CHECK(stream);
  head_scalars_backward_kernel<<<static_cast<unsigned>(M), kRowThreads, 0, stream>>>(d, w, c);
  MAMBARL_CUDA_LAUNCH_CHECK(stream);
  bc_backward_kernel<<<static_cast<unsigned>(M), kRowThreads,
                       (2 * d.G * d.N + 2 * d.G) * sizeof(float), stream>>>(d, w, c);
  MAMBARL_CUDA_LAUNCH_CHECK(stream);
}

}  // namespace mambarl::cuda
