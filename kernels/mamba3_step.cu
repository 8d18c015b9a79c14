#include "kernels/mamba3_step.cuh"

#include <algorithm>

#include "kernels/block_reduce.cuh"
#include "kernels/cuda_check.cuh"
#include "kernels/launch.cuh"
#include "kernels/state_rows.cuh"

namespace mambarl::cuda {

namespace {

constexpr int kMaxThreads = 256;
constexpr float kPiF = 3.14159265358979323846f;
constexpr float kTwoPiF = 6.28318530717958647692f;

// The trapezoid update of one row (h, p) of S_h, on chunks of VW states n.
struct Mamba3RowOp {
  const float *alpha, *beta, *gamma;  // (H) shared
  const float *vp, *x;                // (E) shared: v_prev, x_t
  const float *kp, *k, *q;            // (H, N) shared: k_prev, k_t, q_t
  int P, N;

  // S = α S + (β v_prev) k_prev + (γ x) k, grouped as the CPU's ssm_update.
  template <int VW>
  __device__ Chunk<VW> step(int row, int n0, const Chunk<VW>& old) const {
    const int h = row / P, base = h * N + n0;
    const float al = alpha[h], bv = beta[h] * vp[row], gx = gamma[h] * x[row];
    Chunk<VW> nv;
#pragma unroll
    for (int j = 0; j < VW; ++j) nv.v[j] = al * old.v[j] + bv * kp[base + j] + gx * k[base + j];
    return nv;
  }
  template <int VW>
  __device__ float dot(int row, int n0, const Chunk<VW>& nv) const {
    const int base = (row / P) * N + n0;
    float s = 0.f;
#pragma unroll
    for (int j = 0; j < VW; ++j) s += nv.v[j] * q[base + j];
    return s;
  }
};

struct Smem {
  float *red, *alpha, *beta, *gamma, *dt, *braw, *craw, *brs, *crs, *cos, *sin, *k, *q, *kp, *vp,
      *x, *y, *part;
};

__device__ Smem carve(float* base, const Mamba3Dims& d) {
  Smem s;
  const int H = d.H, HN = d.H * d.N, GN = d.G * d.N, HA = d.H * d.Na;
  s.red = base;
  s.alpha = s.red + 32;
  s.beta = s.alpha + H;
  s.gamma = s.beta + H;
  s.dt = s.gamma + H;
  s.braw = s.dt + H;
  s.craw = s.braw + GN;
  s.brs = s.craw + GN;
  s.crs = s.brs + d.G;
  s.cos = s.crs + d.G;
  s.sin = s.cos + HA;
  s.k = s.sin + HA;
  s.q = s.k + HN;
  s.kp = s.q + HN;
  s.vp = s.kp + HN;
  s.x = s.vp + d.E;
  s.y = s.x + d.E;
  s.part = s.y + d.E;
  return s;
}

size_t smem_bytes(const Mamba3Dims& d, int threads) {
  const size_t floats = 32 + 4 * static_cast<size_t>(d.H) + 2 * d.G * d.N + 2 * d.G +
                        2 * d.H * d.Na + 3 * d.H * d.N + 3 * static_cast<size_t>(d.E) +
                        StateRows<1>::scratch_floats(threads);
  return floats * sizeof(float);
}

__device__ __forceinline__ float softplus_ref(float v) { return v > 20.f ? v : log1pf(expf(v)); }
__device__ __forceinline__ float heavy_tail(float v) { return v >= 0.f ? 1.f + v : 1.f / (1.f - v); }

// RMSNorm(raw_g) w + bias_h at n, rotated by φ_{h, n/2} when n < 2 Na.
__device__ __forceinline__ float biased_rotated(const float* raw, const float* norm_w, float rs,
                                                const float* bias, int n, int Na, float co,
                                                float si) {
  const auto at = [&](int m) { return raw[m] * __ldg(norm_w + m) * rs + __ldg(bias + m); };
  if (n >= 2 * Na) return at(n);
  const int n0 = n & ~1;
  const float v0 = at(n0), v1 = at(n0 + 1);
  return (n & 1) ? v0 * si + v1 * co : v0 * co - v1 * si;
}

template <int VW>
__global__ void __launch_bounds__(kMaxThreads)
    mamba3_step_kernel(Mamba3Dims d, Mamba3Weights w, const float* __restrict__ h,
                       const float* __restrict__ zx, StepFlags flags, const float* state_in, float* state_out,
                       size_t stride, float* __restrict__ gated) {
  pdl_enter();
  if (flags.skip(static_cast<int>(blockIdx.x))) {  // the whole block is one env
    for (int e = threadIdx.x; e < d.E; e += blockDim.x)
      gated[static_cast<size_t>(blockIdx.x) * d.E + e] = 0.f;
    return;
  }
  extern __shared__ float smem[];
  const Smem s = carve(smem, d);
  const int b = blockIdx.x, E = d.E, N = d.N, P = d.P, H = d.H, G = d.G, Na = d.Na;
  const int HN = H * N, HA = H * Na, heads_per_group = H / G;
  const int o_x = E, o_b = 2 * E, o_c = o_b + G * N, o_dt = o_c + G * N, o_a = o_dt + H,
            o_lam = o_a + H, o_th = o_lam + H;
  const bool start = flags.start(b);
  const float* st_in = state_in + static_cast<size_t>(b) * stride;  // S (H, P, N)
  // null for a peek; offset only when set (a ternary on the whole pointer
  // made ptxas spill the VW = 4 kernel)
  float* st_out = state_out + (state_out ? static_cast<size_t>(b) * stride : 0);
  const size_t kp_off = static_cast<size_t>(E) * N, vp_off = kp_off + HN, phi_off = vp_off + E;

  // The first tile of S is independent of everything below: start its loads now.
  StateRows<VW> rows(E, N);
  rows.load(st_in, start, 0);

  const float r = block_rms_inv(h + static_cast<size_t>(b) * d.D, d.D, s.red);
  const float* zxb = zx + static_cast<size_t>(b) * (o_th + Na);  // in_rows() is host-only

  // Per-head scalars, the raw B/C, x, and the carried k_prev / v_prev.
  for (int i = threadIdx.x; i < H; i += blockDim.x) {
    const float dt = softplus_ref(r * zxb[o_dt + i] + __ldg(w.dt_bias + i));
    const float ht = -heavy_tail(r * zxb[o_a + i]), neg_floor = -d.a_floor;
    const float a = neg_floor < ht ? neg_floor : ht;  // std::min(-heavy_tail, -a_floor)
    const float lam = sigmoidf_ref(r * zxb[o_lam + i]);
    const float alpha = expf(a * dt);
    s.dt[i] = dt;
    s.alpha[i] = alpha;
    s.beta[i] = alpha * dt * (1.f - lam);
    s.gamma[i] = lam * dt;
  }
  for (int i = threadIdx.x; i < G * N; i += blockDim.x) {
    s.braw[i] = r * zxb[o_b + i];
    s.craw[i] = r * zxb[o_c + i];
  }
  for (int i = threadIdx.x; i < HN; i += blockDim.x) s.kp[i] = start ? 0.f : st_in[kp_off + i];
  for (int e = threadIdx.x; e < E; e += blockDim.x) {
    s.x[e] = r * zxb[o_x + e];
    s.vp[e] = start ? 0.f : st_in[vp_off + e];
  }
  __syncthreads();

  // B/C RMSNorm scale per group (a serial sum: N is small), and the angles.
  for (int i = threadIdx.x; i < 2 * G; i += blockDim.x) {
    const float* raw = (i < G ? s.braw : s.craw) + (i % G) * N;
    float ss = 0.f;
    for (int n = 0; n < N; ++n) ss += raw[n] * raw[n];
    (i < G ? s.brs : s.crs)[i % G] = 1.f / sqrtf(ss / static_cast<float>(N) + kNormEpsF);
  }
  for (int i = threadIdx.x; i < HA; i += blockDim.x) {
    const float rate = kPiF * tanhf(r * zxb[o_th + i % Na]);
    const float v = (start ? 0.f : st_in[phi_off + i]) + rate * s.dt[i / Na];
    const float wrapped = v - kTwoPiF * floorf(v / kTwoPiF);
    if (st_out) st_out[phi_off + i] = wrapped;
    s.cos[i] = cosf(wrapped);
    s.sin[i] = sinf(wrapped);
  }
  __syncthreads();

  // k, q: normed, biased, rotated. Then the new k_prev / v_prev go out, each
  // element by the thread that read its old value above (in-place safe).
  for (int i = threadIdx.x; i < HN; i += blockDim.x) {
    const int hh = i / N, n = i % N, g = hh / heads_per_group;
    const int ai = hh * Na + (n >> 1);
    const float co = n < 2 * Na ? s.cos[ai] : 0.f, si = n < 2 * Na ? s.sin[ai] : 0.f;
    s.k[i] = biased_rotated(s.braw + g * N, w.b_norm, s.brs[g], w.b_bias + hh * N, n, Na, co, si);
    s.q[i] = biased_rotated(s.craw + g * N, w.c_norm, s.crs[g], w.c_bias + hh * N, n, Na, co, si);
  }
  __syncthreads();
  if (st_out) {
    for (int i = threadIdx.x; i < HN; i += blockDim.x) st_out[kp_off + i] = s.k[i];
    for (int e = threadIdx.x; e < E; e += blockDim.x) st_out[vp_off + e] = s.x[e];
  }

  const Mamba3RowOp op{s.alpha, s.beta, s.gamma, s.vp, s.x, s.kp, s.k, s.q, P, N};
  rows.run(st_in, st_out, start, op, s.part, s.y);

  // y = S q + D x, then y ⊙ silu(z) or the gated RMSNorm per head.
  for (int e = threadIdx.x; e < E; e += blockDim.x) s.y[e] += __ldg(w.d_skip + e / P) * s.x[e];
  if (w.norm) __syncthreads();  // the per-head norm reads other threads' y
  for (int e = threadIdx.x; e < E; e += blockDim.x) {
    const float z = r * zxb[e];
    float g = s.y[e];
    if (w.norm) {
      const float* yh = s.y + (e / P) * P;
      float ss = 0.f;
      for (int p = 0; p < P; ++p) ss += yh[p] * yh[p];
      const float rs = 1.f / sqrtf(ss / static_cast<float>(P) + kNormEpsF);
      g = g * __ldg(w.norm + e) * rs;
    }
    gated[static_cast<size_t>(b) * E + e] = g * z * sigmoidf_ref(z);
  }
}

int vector_width(const Mamba3Dims& d, const float* in, const float* out, size_t stride) {
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return (d.N % 4 == 0 && stride % 4 == 0 && aligned(in) && aligned(out)) ? 4 : 1;
}

int threads_for(const Mamba3Dims& d, int vw) {
  const int q = d.N / vw, chunks = d.E * q, u = kStateRowsUnroll;
  int t = (chunks + u - 1) / u;
  t = std::max(t, (q + u - 1) / u);  // one row must fit in a tile
  t = (t + 31) / 32 * 32;
  return std::min(std::max(t, 32), kMaxThreads);
}

template <int VW>
void set_smem_limit(size_t bytes) {
  MAMBARL_CUDA_CHECK(cudaFuncSetAttribute(mamba3_step_kernel<VW>,
                                          cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(bytes)));
}

}  // namespace

void mamba3_step_configure(const Mamba3Dims& d) {
  MAMBARL_CHECK(d.D > 0 && d.E > 0 && d.N > 0 && d.P > 0 && d.H > 0 && d.G > 0 && d.Na > 0,
                "mamba3 step: dims must be positive");
  MAMBARL_CHECK(d.H * d.P == d.E && d.H % d.G == 0 && 2 * d.Na <= d.N,
                "mamba3 step: inconsistent dims (E " << d.E << ", H " << d.H << ", P " << d.P
                                                     << ", G " << d.G << ", N " << d.N << ", Na "
                                                     << d.Na << ")");
  MAMBARL_CHECK(d.N <= kMaxThreads * kStateRowsUnroll,
                "mamba3 step: d_state " << d.N << " exceeds " << kMaxThreads * kStateRowsUnroll);
  const size_t bytes = smem_bytes(d, kMaxThreads);
  const size_t limit = max_smem_per_block_optin();
  MAMBARL_CHECK(bytes <= limit,
                "mamba3 step: d_inner " << d.E << " needs " << bytes
                                        << " bytes of shared memory per block, the device has "
                                        << limit);
  set_smem_limit<1>(bytes);
  set_smem_limit<4>(bytes);
}

void mamba3_step(const Mamba3Dims& d, const Mamba3Weights& w, int B, const float* h, const float* zx,
                 StepFlags flags, const float* state_in, float* state_out, size_t stride, float* gated,
                 cudaStream_t stream, bool pdl) {
  MAMBARL_CHECK(B > 0, "mamba3 step: batch must be positive, got " << B);
  const int vw = vector_width(d, state_in, state_out, stride);
  const int threads = threads_for(d, vw);
  const size_t smem = smem_bytes(d, threads);
  launch_kernel(pdl, vw == 4 ? mamba3_step_kernel<4> : mamba3_step_kernel<1>, B, threads, smem, stream, d, w,
                h, zx, flags, state_in, state_out, stride, gated);
}

}  // namespace mambarl::cuda
