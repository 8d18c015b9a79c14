#include "kernels/mamba1_step.cuh"

#include <algorithm>

#include "kernels/block_reduce.cuh"
#include "kernels/cuda_check.cuh"
#include "kernels/state_rows.cuh"

namespace mambarl::cuda {

namespace {

constexpr int kMaxThreads = 256;

// The per-element SSM update of one channel e, on chunks of VW states n.
struct Mamba1RowOp {
  const float* a;      // (E, N) global, read-only
  const float* delta;  // (E) shared: Δ
  const float* dx;     // (E) shared: Δ ⊙ xc
  const float* bvec;   // (N) shared: B_t
  const float* cvec;   // (N) shared: C_t
  int N;

  // H = exp(Δ A) ⊙ H + (Δ xc) B, as the CPU's ssm_step.
  template <int VW>
  __device__ Chunk<VW> step(int e, int n0, const Chunk<VW>& old) const {
    const Chunk<VW> av = load_param_chunk<VW>(a + static_cast<size_t>(e) * N + n0);
    const float dl = delta[e], x = dx[e];
    Chunk<VW> nv;
#pragma unroll
    for (int j = 0; j < VW; ++j) nv.v[j] = expf(dl * av.v[j]) * old.v[j] + x * bvec[n0 + j];
    return nv;
  }
  template <int VW>
  __device__ float dot(int, int n0, const Chunk<VW>& nv) const {
    float s = 0.f;
#pragma unroll
    for (int j = 0; j < VW; ++j) s += nv.v[j] * cvec[n0 + j];
    return s;
  }
};

struct Smem {
  float *red, *xc, *delta, *dx, *y, *dbc, *part;
};

__device__ Smem carve(float* base, const Mamba1Dims& d) {
  Smem s;
  s.red = base;
  s.xc = s.red + 32;
  s.delta = s.xc + d.E;
  s.dx = s.delta + d.E;
  s.y = s.dx + d.E;
  s.dbc = s.y + d.E;
  s.part = s.dbc + d.R + 2 * d.N;
  return s;
}

size_t smem_bytes(const Mamba1Dims& d, int threads) {
  const size_t floats = 32 + 4 * static_cast<size_t>(d.E) + d.R + 2 * d.N +
                        StateRows<1>::scratch_floats(threads);
  return floats * sizeof(float);
}

template <int VW>
__global__ void __launch_bounds__(kMaxThreads)
    mamba1_step_kernel(Mamba1Dims d, Mamba1Weights w, const float* __restrict__ h,
                       const float* __restrict__ xz, const uint8_t* __restrict__ starts,
                       const float* state_in, float* state_out, size_t stride,
                       float* __restrict__ gated) {
  extern __shared__ float smem[];
  const Smem s = carve(smem, d);
  const int b = blockIdx.x, E = d.E, N = d.N, K = d.K, R = d.R;
  const bool start = starts[b] != 0;
  const float* st_in = state_in + static_cast<size_t>(b) * stride;
  float* st_out = state_out + static_cast<size_t>(b) * stride;

  // The first tile of H is independent of everything below: start its loads now.
  StateRows<VW> rows(E, N);
  rows.load(st_in, start, 0);

  const float r = block_rms_inv(h + static_cast<size_t>(b) * d.D, d.D, s.red);
  const float* xzb = xz + static_cast<size_t>(b) * 2 * E;

  // Causal depthwise conv over [window, x_t], then the window shifts by one.
  const float* win_in = st_in + static_cast<size_t>(E) * N;  // (K-1, E)
  float* win_out = st_out + static_cast<size_t>(E) * N;
  for (int e = threadIdx.x; e < E; e += blockDim.x) {
    float win[kMamba1MaxConv - 1];
#pragma unroll
    for (int k = 0; k < kMamba1MaxConv - 1; ++k)
      win[k] = (k < K - 1 && !start) ? win_in[static_cast<size_t>(k) * E + e] : 0.f;
    const float x = r * xzb[e];
    const float* we = w.conv_w + static_cast<size_t>(e) * K;
    float acc = __ldg(w.conv_b + e);
#pragma unroll
    for (int k = 0; k < kMamba1MaxConv - 1; ++k)
      if (k < K - 1) acc += __ldg(we + k) * win[k];
    acc += __ldg(we + K - 1) * x;
#pragma unroll
    for (int k = 0; k < kMamba1MaxConv - 2; ++k)
      if (k < K - 2) win_out[static_cast<size_t>(k) * E + e] = win[k + 1];
    if (K >= 2) win_out[static_cast<size_t>(K - 2) * E + e] = x;
    s.xc[e] = acc * sigmoidf_ref(acc);
  }
  __syncthreads();

  // [δ B C] = W_x xc: one warp per output row, lanes over E.
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  for (int j = warp; j < R + 2 * N; j += nwarps) {
    const float* wr = w.x_proj + static_cast<size_t>(j) * E;
    float acc = 0.f;
    for (int e = lane; e < E; e += 32) acc += __ldg(wr + e) * s.xc[e];
    acc = warp_sum(acc);
    if (lane == 0) s.dbc[j] = acc;
  }
  __syncthreads();

  // Δ = softplus(W_dt δ + b_dt), in the CPU's overflow-free form.
  for (int e = threadIdx.x; e < E; e += blockDim.x) {
    const float* we = w.dt_w + static_cast<size_t>(e) * R;
    float v = 0.f;
    for (int k = 0; k < R; ++k) v += __ldg(we + k) * s.dbc[k];
    v += __ldg(w.dt_b + e);
    const float delta = fmaxf(v, 0.f) + log1pf(expf(-fabsf(v)));
    s.delta[e] = delta;
    s.dx[e] = delta * s.xc[e];
  }
  __syncthreads();

  const Mamba1RowOp op{w.a, s.delta, s.dx, s.dbc + R, s.dbc + R + N, N};
  rows.run(st_in, st_out, start, op, s.part, s.y);

  // y = H C + D xc, gated by silu(z).
  for (int e = threadIdx.x; e < E; e += blockDim.x) {
    const float y = s.y[e] + __ldg(w.d_skip + e) * s.xc[e];
    const float z = r * xzb[E + e];
    gated[static_cast<size_t>(b) * E + e] = y * z * sigmoidf_ref(z);
  }
}

__global__ void neg_exp_kernel(int n, const float* __restrict__ in, float* __restrict__ out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = -expf(in[i]);
}

int vector_width(const Mamba1Dims& d, const Mamba1Weights& w, const float* in, const float* out,
                 size_t stride) {
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return (d.N % 4 == 0 && stride % 4 == 0 && aligned(in) && aligned(out) && aligned(w.a)) ? 4 : 1;
}

int threads_for(const Mamba1Dims& d, int vw) {
  const int q = d.N / vw, chunks = d.E * q, u = kStateRowsUnroll;
  int t = (chunks + u - 1) / u;
  t = std::max(t, (q + u - 1) / u);  // one row must fit in a tile
  t = (t + 31) / 32 * 32;
  return std::min(std::max(t, 32), kMaxThreads);
}

template <int VW>
void set_smem_limit(size_t bytes) {
  MAMBARL_CUDA_CHECK(cudaFuncSetAttribute(mamba1_step_kernel<VW>,
                                          cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(bytes)));
}

}  // namespace

void mamba1_derive_a(int n, const float* a_log, float* a, cudaStream_t stream) {
  MAMBARL_CHECK(n > 0, "mamba1_derive_a: n must be positive, got " << n);
  neg_exp_kernel<<<(n + kMaxThreads - 1) / kMaxThreads, kMaxThreads, 0, stream>>>(n, a_log, a);
  MAMBARL_CUDA_LAUNCH_CHECK(stream);
}

void mamba1_step_configure(const Mamba1Dims& d) {
  MAMBARL_CHECK(d.D > 0 && d.E > 0 && d.N > 0 && d.R > 0,
                "mamba1 step: dims must be positive (D " << d.D << ", E " << d.E << ", N " << d.N
                                                         << ", R " << d.R << ")");
  MAMBARL_CHECK(d.K >= 1 && d.K <= kMamba1MaxConv,
                "mamba1 step: d_conv must be in [1, " << kMamba1MaxConv << "], got " << d.K);
  MAMBARL_CHECK(d.N <= kMaxThreads * kStateRowsUnroll,
                "mamba1 step: d_state " << d.N << " exceeds " << kMaxThreads * kStateRowsUnroll);
  const size_t bytes = smem_bytes(d, kMaxThreads);
  const size_t limit = max_smem_per_block_optin();
  MAMBARL_CHECK(bytes <= limit,
                "mamba1 step: d_inner " << d.E << " needs " << bytes
                                        << " bytes of shared memory per block, the device has "
                                        << limit);
  set_smem_limit<1>(bytes);
  set_smem_limit<4>(bytes);
}

void mamba1_step(const Mamba1Dims& d, const Mamba1Weights& w, int B, const float* h,
                 const float* xz, const uint8_t* starts, const float* state_in, float* state_out,
                 size_t stride, float* gated, cudaStream_t stream) {
  MAMBARL_CHECK(B > 0, "mamba1 step: batch must be positive, got " << B);
  const int vw = vector_width(d, w, state_in, state_out, stride);
  const int threads = threads_for(d, vw);
  const size_t smem = smem_bytes(d, threads);
  if (vw == 4)
    mamba1_step_kernel<4><<<B, threads, smem, stream>>>(d, w, h, xz, starts, state_in, state_out,
                                                        stride, gated);
  else
    mamba1_step_kernel<1><<<B, threads, smem, stream>>>(d, w, h, xz, starts, state_in, state_out,
                                                        stride, gated);
  MAMBARL_CUDA_LAUNCH_CHECK(stream);
}

}  // namespace mambarl::cuda
