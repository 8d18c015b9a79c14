#include "kernels/mamba1_scan.cuh"

#include <algorithm>
#include <type_traits>

#include "kernels/block_reduce.cuh"
#include "kernels/cuda_check.cuh"

namespace mambarl::cuda {

namespace {

constexpr int kScanThreads = 128;  // a scan block: up to this many channels of one env
constexpr int kMaxState = kMamba1MaxState;  // kernels/kernel_limits.hpp
constexpr int kThreads = 256;      // elementwise and reduction kernels

int blocks_for(size_t n) { return static_cast<int>((n + kThreads - 1) / kThreads); }

// The CPU's overflow-free softplus (policy/mamba1.cpp dt_forward).
__device__ __forceinline__ float softplusf_ref(float v) {
  return fmaxf(v, 0.f) + log1pf(expf(-fabsf(v)));
}

// The earliest time whose x the conv of token (t, b) may read: its env's
// latest start in the window [t-K+1, t] (taps before a start read zero), or,
// with no start there, -(K-1), which admits every tap, the initial window's
// included (a start at any t' in [0, t] would lie in the window when a tap
// reaches back before 0, since then t < K-1). The CPU's first_valid.
__device__ __forceinline__ int first_valid_time(const uint8_t* starts, int t, int b, int B, int K) {
  for (int tt = t; tt >= 0 && tt > t - K; --tt)
    if (starts[static_cast<size_t>(tt) * B + b]) return tt;
  return -(K - 1);
}

// x of env b at time ts in channel e: a row of xz, or for ts < 0 a row of
// the initial window (row K-1+ts: ts = -1 is the newest). The CPU's conv_source.
__device__ __forceinline__ float conv_tap(const Mamba1Dims& d, const Mamba1Chunk& c,
                                          const float* xz, int ts, int b, int e) {
  if (ts >= 0) return xz[(static_cast<size_t>(ts) * c.B + b) * 2 * d.E + e];
  return c.state0[static_cast<size_t>(b) * c.state_stride + static_cast<size_t>(d.E) * d.N +
                  static_cast<size_t>(d.K - 1 + ts) * d.E + e];
}

// B_t and C_t of one token (bc: its row of dbc past δ) into registers, all
// loads issued up front: read inside the state loop they would each wait
// behind that loop's stores, which the compiler may not reorder them past.
template <int NB>
__device__ __forceinline__ void load_bc(const float* bc, int N, float (&bv)[NB], float (&cv)[NB]) {
#pragma unroll
  for (int n = 0; n < NB; ++n) {
    bv[n] = n < N ? bc[n] : 0.f;
    cv[n] = n < N ? bc[N + n] : 0.f;
  }
}

// One thread per (token, channel): pre = b_c + Σ_k w_c[e,k] x_{t-K+1+k}, xc = silu(pre).
__global__ void conv_forward_kernel(Mamba1Dims d, Mamba1Chunk c, const float* __restrict__ conv_w,
                                    const float* __restrict__ conv_b, const float* __restrict__ xz,
                                    float* __restrict__ pre, float* __restrict__ xc) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int E = d.E, K = d.K;
  if (i >= static_cast<size_t>(c.T) * c.B * E) return;
  const int e = static_cast<int>(i % E);
  const size_t r = i / E;
  const int t = static_cast<int>(r / c.B), b = static_cast<int>(r % c.B);
  const int fv = first_valid_time(c.starts, t, b, c.B, K);
  float acc = conv_b[e];
  for (int k = 0; k < K; ++k) {
    const int ts = t - K + 1 + k;
    if (ts >= fv) acc += conv_w[static_cast<size_t>(e) * K + k] * conv_tap(d, c, xz, ts, b, e);
  }
  pre[i] = acc;
  xc[i] = acc * sigmoidf_ref(acc);
}

// One token's step of channel e's N states (NB >= N registers):
// H_t = exp(Δ A) H_{t-1} + (Δ xc) B_t, with H_{t-1} = 0 at an episode start.
// The forward and the backward's recompute both call it, and the explicit
// rounding (no contraction left to the compiler) makes them agree bit for bit.
template <int NB>
__device__ __forceinline__ void state_step(int N, bool start, float delta, float dx, const float (&a)[NB],
                                           const float (&bv)[NB], float (&h)[NB]) {
#pragma unroll
  for (int n = 0; n < NB; ++n)
    if (n < N) h[n] = __fmaf_rn(expf(__fmul_rn(delta, a[n])), start ? 0.f : h[n], __fmul_rn(dx, bv[n]));
}

// Where the forward keeps H after token t of env b (n-major, stride E over
// n), or nullptr where t does not end a segment (or is the chunk's last).
__device__ __forceinline__ float* segment_state_at(const Mamba1Dims& d, const Mamba1Chunk& c,
                                                   const Mamba1Activations& act, int t, int b, int e) {
  const int slot = scan_segment_slot_after(t, c.T, act.seg_len);
  if (slot < 0) return nullptr;
  return act.seg_states + (static_cast<size_t>(slot) * c.B + b) * d.N * d.E + e;
}

// One thread per (env, channel) walking t forward with H (NB >= N states) in
// registers: Δ, H_t (kept at segment ends), y, gated. As the CPU's scan_forward.
template <int NB>
__global__ void __launch_bounds__(kScanThreads)
    scan_forward_kernel(Mamba1Dims d, Mamba1Chunk c, Mamba1Weights<float> w, Mamba1Activations act) {
  const int E = d.E, N = d.N, B = c.B, RN = d.R + 2 * d.N;
  const int b = blockIdx.x, e = blockIdx.y * blockDim.x + threadIdx.x;
  if (e >= E) return;
  float a[NB], h[NB];
  const float* h0 = c.state0 + static_cast<size_t>(b) * c.state_stride + static_cast<size_t>(e) * N;
#pragma unroll
  for (int n = 0; n < NB; ++n) {
    a[n] = n < N ? w.a[static_cast<size_t>(e) * N + n] : 0.f;
    h[n] = n < N ? h0[n] : 0.f;
  }
  const float d_skip = w.d_skip[e], dt_b = w.dt_b[e];
  for (int t = 0; t < c.T; ++t) {
    const size_t r = static_cast<size_t>(t) * B + b, re = r * E + e;
    const float delta = softplusf_ref(act.dt_lin[re] + dt_b);
    const float xc = act.xc[re];
    float bv[NB], cv[NB];
    load_bc<NB>(act.dbc + r * RN + d.R, N, bv, cv);
    state_step<NB>(N, c.starts[r] != 0, delta, delta * xc, a, bv, h);
    float y = d_skip * xc;
#pragma unroll
    for (int n = 0; n < NB; ++n)
      if (n < N) y += h[n] * cv[n];
    if (float* keep = segment_state_at(d, c, act, t, b, e)) {
#pragma unroll
      for (int n = 0; n < NB; ++n)
        if (n < N) keep[static_cast<size_t>(n) * E] = h[n];
    }
    act.delta[re] = delta;
    act.y[re] = y;
    const float z = act.xz[r * 2 * E + E + e];
    act.gated[re] = y * z * sigmoidf_ref(z);
  }
}

// One thread per (env, channel) walking t backwards with dL/dH_t (carry) in
// registers, as the CPU's scan_backward + ssm_step_backward + the gate:
//   dy = dg z σ(z), dz = dg y σ(z)(1 + z(1-σ(z)));  dH = carry + dy C;
//   dB += dH (Δ xc), dC += H_t dy (sums over e: per-warp partials);
//   d(Δxc) = Σ_n dH B;  g = dH H_{t-1} exp(ΔA): dΔ += g A, dA += g Δ;
//   carry = dH exp(ΔA), or 0 at a start (nothing crosses a reset);
//   dL/d dt_lin = (dΔ + d(Δxc) xc) σ(dt_lin + b_dt);  dxc = d(Δxc) Δ + dy D.
// The chunk goes a segment [t0, t1) at a time, last first: the states
// H_{t0-1} .. H_{t1-2} are rebuilt from the one the forward kept before the
// segment (state0 for the first) into shared memory, seg (seg_len, N,
// blockDim.x), each thread's own column; then the segment is walked
// backwards. H_t of the step being processed is the next step's H_{t-1}
// (for the chunk's last step, the rebuild's final state).
// Lanes past E take part in the warp sums with zeros.
template <int NB>
__global__ void __launch_bounds__(kScanThreads)
    scan_backward_kernel(Mamba1Dims d, Mamba1Chunk c, Mamba1Weights<float> w, Mamba1Activations act,
                         Mamba1Backward g) {
  extern __shared__ float seg[];
  const int E = d.E, N = d.N, B = c.B, RN = d.R + 2 * d.N, W = mamba1_channel_warps(E);
  const int b = blockIdx.x, e = blockIdx.y * blockDim.x + threadIdx.x;
  const int lane = threadIdx.x & 31, warp = e >> 5;  // blocks start at multiples of 32
  if (warp >= W) return;  // a whole warp past E: no partial of its own
  const bool active = e < E;
  const size_t NE = static_cast<size_t>(N) * E;
  const size_t slot_stride = static_cast<size_t>(N) * blockDim.x;  // one step's states in seg
  float* my_seg = seg + threadIdx.x;
  float a[NB], h[NB], carry[NB], da[NB];  // h: H_t of the step being processed
#pragma unroll
  for (int n = 0; n < NB; ++n) {
    a[n] = active && n < N ? w.a[static_cast<size_t>(e) * N + n] : 0.f;
    carry[n] = 0.f;
    da[n] = 0.f;
  }
  const float d_skip = active ? w.d_skip[e] : 0.f, dt_b = active ? w.dt_b[e] : 0.f;
  float sum_d = 0.f, sum_dtb = 0.f;
  const int last_seg = (c.T - 1) / act.seg_len;
  for (int j = last_seg; j >= 0; --j) {
    const int t0 = j * act.seg_len, t1 = min(t0 + act.seg_len, c.T);

    // The rebuild. Slot k holds H_{t0+k-1} as the forward had it: token
    // t0+k-1's dC needs it even when a start at t0+k keeps it out of that step.
    float hs[NB];
    {
      const float* src = j == 0 ? c.state0 + static_cast<size_t>(b) * c.state_stride + static_cast<size_t>(e) * N
                                : act.seg_states + (static_cast<size_t>(j - 1) * B + b) * NE + e;
      const size_t step = j == 0 ? 1 : static_cast<size_t>(E);
#pragma unroll
      for (int n = 0; n < NB; ++n) hs[n] = active && n < N ? src[n * step] : 0.f;
    }
    for (int t = t0; t < t1; ++t) {
      float* slot = my_seg + (t - t0) * slot_stride;
#pragma unroll
      for (int n = 0; n < NB; ++n)
        if (n < N) slot[n * blockDim.x] = hs[n];
      if (!active) continue;
      const size_t r = static_cast<size_t>(t) * B + b, re = r * E + e;
      const float delta = act.delta[re];
      float bv[NB], cv[NB];
      load_bc<NB>(act.dbc + r * RN + d.R, N, bv, cv);
      state_step<NB>(N, c.starts[r] != 0, delta, delta * act.xc[re], a, bv, hs);
    }
    if (j == last_seg) {
#pragma unroll
      for (int n = 0; n < NB; ++n) h[n] = hs[n];
    }

    for (int t = t1 - 1; t >= t0; --t) {
      const size_t r = static_cast<size_t>(t) * B + b, re = r * E + e;
      const bool start = c.starts[r] != 0;
      float dg = 0.f, z = 0.f, y = 0.f, delta = 0.f, xc = 0.f, v = 0.f;
      if (active) {
        dg = g.dgated[re];
        z = act.xz[r * 2 * E + E + e];
        y = act.y[re];
        delta = act.delta[re];
        xc = act.xc[re];
        v = act.dt_lin[re] + dt_b;
      }
      const float sz = sigmoidf_ref(z);
      const float dy = dg * z * sz;
      if (active) g.dxz[r * 2 * E + E + e] = dg * y * sz * (1.f + z * (1.f - sz));
      const float dx = delta * xc;

      float hp[NB];  // H_{t-1}
      const float* slot = my_seg + (t - t0) * slot_stride;
#pragma unroll
      for (int n = 0; n < NB; ++n) hp[n] = n < N ? slot[n * blockDim.x] : 0.f;

      float bv[NB], cv[NB];
      load_bc<NB>(act.dbc + r * RN + d.R, N, bv, cv);
      float* part = g.bc_part + (r * W + warp) * 2 * N;
      float d_dx = 0.f, d_delta = 0.f;
      // States in groups of G: the group's dB and dC terms, 2G values per lane,
      // are summed over the warp by one reduce-scatter, and lane l stores the
      // sum of value l / (32 / 2G): [dB of the group's states][dC of them].
      constexpr int G = NB < 16 ? NB : 16, V = 2 * G;
      const int mine = lane / (32 / V);
      const bool writer = lane % (32 / V) == 0;
#pragma unroll
      for (int g0 = 0; g0 < NB; g0 += G) {
        float terms[V];
#pragma unroll
        for (int i = 0; i < G; ++i) {
          const int n = g0 + i;
          terms[i] = 0.f;
          terms[G + i] = 0.f;
          if (n < N) {
            const float dh = carry[n] + dy * cv[n];
            terms[i] = dh * dx;
            terms[G + i] = h[n] * dy;
            d_dx += dh * bv[n];
            if (start) {
              carry[n] = 0.f;
            } else {
              const float decay = expf(delta * a[n]);
              const float gn = dh * hp[n] * decay;
              d_delta += gn * a[n];
              da[n] += gn * delta;
              carry[n] = dh * decay;
            }
            h[n] = hp[n];
          }
        }
        const float sum = warp_reduce_scatter<V>(terms);
        const int n = g0 + mine % G;
        if (writer && n < N) part[(mine < G ? 0 : N) + n] = sum;
      }
      const float ddt = (d_delta + d_dx * xc) * sigmoidf_ref(v);
      if (active) {
        g.ddt[re] = ddt;
        g.dxc[re] = d_dx * delta + dy * d_skip;
      }
      sum_d += dy * xc;
      sum_dtb += ddt;
    }
  }
  if (!active) return;
  const size_t be = static_cast<size_t>(b) * E + e;
#pragma unroll
  for (int n = 0; n < NB; ++n)
    if (n < N) g.sum_a[be * N + n] = da[n];
  g.sum_d[be] = sum_d;
  g.sum_dtb[be] = sum_dtb;
}

// [dB dC] of token r = Σ over the row's warps of their partials, in warp order.
__global__ void bc_reduce_kernel(int M, int N, int R, int W, const float* __restrict__ part,
                                 float* __restrict__ ddbc) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int twoN = 2 * N;
  if (i >= static_cast<size_t>(M) * twoN) return;
  const size_t r = i / twoN;
  const int j = static_cast<int>(i % twoN);
  const float* p = part + r * W * twoN + j;
  float s = 0.f;
  for (int wi = 0; wi < W; ++wi) s += p[static_cast<size_t>(wi) * twoN];
  ddbc[r * (R + twoN) + R + j] = s;
}

// One thread per (env, channel) walking t backwards, as the CPU's
// conv_backward: dpre = dxc silu'(pre); dw_c[e,k] and b_c sum dpre times the
// tap's source over t; dx_t gathers dpre of the tokens t+m (m < K) whose tap
// K-1-m read x_t, unless a start lies in (t, t+m]. later[j] holds dpre of
// t+1+j, so every index into a register array is a compile-time constant.
__global__ void __launch_bounds__(kScanThreads)
    conv_backward_kernel(Mamba1Dims d, Mamba1Chunk c, Mamba1Weights<float> w, Mamba1Activations act,
                         Mamba1Backward g) {
  constexpr int KM = kMamba1MaxConv;
  const int E = d.E, K = d.K, B = c.B;
  const int b = blockIdx.x, e = blockIdx.y * blockDim.x + threadIdx.x;
  if (e >= E) return;
  float w_rev[KM], dw[KM], later[KM - 1];  // w_rev[m] = w_c[e, K-1-m]
#pragma unroll
  for (int k = 0; k < KM; ++k) {
    w_rev[k] = k < K ? w.conv_w[static_cast<size_t>(e) * K + (K - 1 - k)] : 0.f;
    dw[k] = 0.f;
  }
#pragma unroll
  for (int j = 0; j < KM - 1; ++j) later[j] = 0.f;
  float db = 0.f;
  int next_start = c.T;  // env b's earliest start after t
  for (int t = c.T - 1; t >= 0; --t) {
    const size_t r = static_cast<size_t>(t) * B + b, re = r * E + e;
    const float p = act.pre[re], s = sigmoidf_ref(p);
    const float dp = g.dxc[re] * s * (1.f + p * (1.f - s));
    db += dp;
    const int fv = first_valid_time(c.starts, t, b, B, K);
#pragma unroll
    for (int k = 0; k < KM; ++k) {
      const int ts = t - K + 1 + k;
      if (k < K && ts >= fv) dw[k] += dp * conv_tap(d, c, act.xz, ts, b, e);
    }
    // In the CPU's order, tap k = 0 (the latest token, m = K-1) first.
    float dx = 0.f;
#pragma unroll
    for (int m = KM - 1; m >= 1; --m)
      if (m < K && t + m < next_start) dx += later[m - 1] * w_rev[m];
    dx += dp * w_rev[0];
    g.dxz[r * 2 * E + e] = dx;
#pragma unroll
    for (int j = KM - 2; j >= 1; --j) later[j] = later[j - 1];
    later[0] = dp;
    if (c.starts[r]) next_start = t;
  }
  const size_t be = static_cast<size_t>(b) * E + e;
#pragma unroll
  for (int k = 0; k < KM; ++k)
    if (k < K) g.sum_cw[be * K + k] = dw[k];
  g.sum_cb[be] = db;
}

// A block is 32 columns x kEnvSlices slices of the envs: slice j sums envs
// j, j + kEnvSlices, ... of its column, then slice 0 adds the slices in
// order. Fixed order, no atomics; kEnvSlices-fold parallelism over a
// one-thread-per-column loop, which left B serial loads per thread.
constexpr int kEnvSlices = 8;
__global__ void __launch_bounds__(32 * kEnvSlices)
    add_env_sums_kernel(int B, int C, const float* __restrict__ sums, const float* __restrict__ scale,
                        float* __restrict__ out) {
  __shared__ float part[kEnvSlices][33];
  const int col = blockIdx.x * 32 + threadIdx.x, slice = threadIdx.y;
  float s = 0.f;
  if (col < C)
    for (int b = slice; b < B; b += kEnvSlices) s += sums[static_cast<size_t>(b) * C + col];
  part[slice][threadIdx.x] = s;
  __syncthreads();
  if (slice != 0 || col >= C) return;
  float total = 0.f;
#pragma unroll
  for (int j = 0; j < kEnvSlices; ++j) total += part[j][threadIdx.x];
  out[col] += scale ? total * scale[col] : total;
}

// Calls f with the smallest register bound NB >= N the scans are built for.
template <class F>
void with_state_bound(int N, F&& f) {
  if (N <= 4)
    f(std::integral_constant<int, 4>{});
  else if (N <= 8)
    f(std::integral_constant<int, 8>{});
  else if (N <= 16)
    f(std::integral_constant<int, 16>{});
  else if (N <= 32)
    f(std::integral_constant<int, 32>{});
  else if (N <= 64)
    f(std::integral_constant<int, 64>{});
  else
    f(std::integral_constant<int, kMaxState>{});
}

// Blocks of one env's channels: grid (B, channel blocks). B goes on x, the
// only grid dimension past 65535, so 64k-env chunks launch. threads: a
// multiple of 32 (the [dB dC] partials are per warp of channels).
struct ScanLaunch {
  dim3 grid, block;
};

ScanLaunch scan_launch(const Mamba1Dims& d, const Mamba1Chunk& c, int threads) {
  return {dim3(static_cast<unsigned>(c.B), static_cast<unsigned>((d.E + threads - 1) / threads)),
          dim3(static_cast<unsigned>(threads))};
}
int scan_threads(const Mamba1Dims& d) { return std::min(kScanThreads, (d.E + 31) / 32 * 32); }

// The backward's segment buffer: seg_len steps of N states per thread, in at
// most kScanBwdSmemBudget; fewer threads per block where one step of a block
// would not fit (large d_state). 64 KB leaves room for three blocks per SM.
constexpr size_t kScanBwdSmemBudget = 64 * 1024;
size_t scan_bwd_step_bytes(const Mamba1Dims& d, int threads) {
  return static_cast<size_t>(d.N) * threads * sizeof(float);
}
int scan_bwd_threads(const Mamba1Dims& d) {
  int threads = scan_threads(d);
  while (threads > 32 && scan_bwd_step_bytes(d, threads) > kScanBwdSmemBudget) threads -= 32;
  return threads;
}

}  // namespace

void mamba1_scan_check(const Mamba1Dims& d, int T, int B) {
  MAMBARL_CHECK(T > 0 && B > 0, "mamba1 scan: T (" << T << ") and B (" << B << ") must be positive");
  MAMBARL_CHECK(d.D > 0 && d.E > 0 && d.R > 0,
                "mamba1 scan: dims must be positive (D " << d.D << ", E " << d.E << ", R " << d.R << ")");
  MAMBARL_CHECK(d.N >= 1 && d.N <= kMaxState,
                "mamba1 scan: d_state must be in [1, " << kMaxState << "], got " << d.N);
  MAMBARL_CHECK(d.K >= 1 && d.K <= kMamba1MaxConv,
                "mamba1 scan: d_conv must be in [1, " << kMamba1MaxConv << "], got " << d.K);
}

int mamba1_max_segment_len(const Mamba1Dims& d) {
  mamba1_scan_check(d, 1, 1);
  return static_cast<int>(std::max<size_t>(1, kScanBwdSmemBudget / scan_bwd_step_bytes(d, scan_bwd_threads(d))));
}

void mamba1_scan_configure(const Mamba1Dims& d) {
  const size_t bytes = scan_bwd_step_bytes(d, scan_bwd_threads(d)) * mamba1_max_segment_len(d);
  const size_t limit = max_smem_per_block_optin();
  MAMBARL_CHECK(bytes <= limit, "mamba1 scan: the backward needs " << bytes
                                    << " bytes of shared memory per block (d_state " << d.N
                                    << "), the device has " << limit);
  with_state_bound(d.N, [&](auto nb) {
    MAMBARL_CUDA_CHECK(cudaFuncSetAttribute(scan_backward_kernel<decltype(nb)::value>,
                                            cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            static_cast<int>(bytes)));
  });
}

void mamba1_conv_forward(const Mamba1Dims& d, const Mamba1Chunk& c, const Mamba1Weights<float>& w,
                         const Mamba1Activations& act, cudaStream_t stream) {
  const size_t n = static_cast<size_t>(c.T) * c.B * d.E;
  conv_forward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(d, c, w.conv_w, w.conv_b, act.xz,
                                                              act.pre, act.xc);
  MAMBARL_CUDA_LAUNCH_CHECK(stream);
}

void mamba1_scan_forward(const Mamba1Dims& d, const Mamba1Chunk& c, const Mamba1Weights<float>& w,
                         const Mamba1Activations& act, cudaStream_t stream) {
  MAMBARL_CHECK(act.seg_len >= 1, "mamba1 scan: seg_len " << act.seg_len << " must be at least 1");
  const ScanLaunch l = scan_launch(d, c, scan_threads(d));
  with_state_bound(d.N, [&](auto nb) {
    scan_forward_kernel<decltype(nb)::value><<<l.grid, l.block, 0, stream>>>(d, c, w, act);
  });
  MAMBARL_CUDA_LAUNCH_CHECK(stream);
}

void mamba1_scan_backward(const Mamba1Dims& d, const Mamba1Chunk& c, const Mamba1Weights<float>& w,
                          const Mamba1Activations& act, const Mamba1Backward& bwd,
                          cudaStream_t stream) {
  const int threads = scan_bwd_threads(d);
  const int seg_len = std::min(act.seg_len, c.T);
  MAMBARL_CHECK(seg_len >= 1, "mamba1 scan: seg_len " << act.seg_len << " must be at least 1");
  const ScanLaunch l = scan_launch(d, c, threads);
  const size_t smem = scan_bwd_step_bytes(d, threads) * seg_len;
  with_state_bound(d.N, [&](auto nb) {
    scan_backward_kernel<decltype(nb)::value><<<l.grid, l.block, smem, stream>>>(d, c, w, act, bwd);
  });
  MAMBARL_CUDA_LAUNCH_CHECK(stream);
  const int M = c.T * c.B;
  bc_reduce_kernel<<<blocks_for(static_cast<size_t>(M) * 2 * d.N), kThreads, 0, stream>>>(
      M, d.N, d.R, mamba1_channel_warps(d.E), bwd.bc_part, bwd.ddbc);
  MAMBARL_CUDA_LAUNCH_CHECK(stream);
}

void mamba1_conv_backward(const Mamba1Dims& d, const Mamba1Chunk& c, const Mamba1Weights<float>& w,
                          const Mamba1Activations& act, const Mamba1Backward& bwd,
                          cudaStream_t stream) {
  const ScanLaunch l = scan_launch(d, c, scan_threads(d));
  conv_backward_kernel<<<l.grid, l.block, 0, stream>>>(d, c, w, act, bwd);
  MAMBARL_CUDA_LAUNCH_CHECK(stream);
}

void mamba1_add_env_sums(int B, int C, const float* sums, const float* scale, float* out,
                         cudaStream_t stream) {
  MAMBARL_CHECK(B > 0 && C > 0, "mamba1_add_env_sums: B (" << B << ") and C (" << C << ") must be positive");
  add_env_sums_kernel<<<(C + 31) / 32, dim3(32, kEnvSlices), 0, stream>>>(B, C, sums, scale, out);
  MAMBARL_CUDA_LAUNCH_CHECK(stream);
}

}  // namespace mambarl::cuda
