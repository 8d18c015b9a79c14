#include "kernels/mamba1_step.cuh"

#include <algorithm>

#include "kernels/block_reduce.cuh"
#include "kernels/cuda_check.cuh"
#include "kernels/launch.cuh"
#include "kernels/state_rows.cuh"

namespace mambarl::cuda {

namespace {

constexpr int kPreThreads = 256, kStateThreads = 128, kNegExpThreads = 256;
// Below this batch a tile of kMamba1PreEnvs envs leaves most SMs idle (B = 64
// gave 16 blocks, each running the serial phase chain over 4 envs): one env per
// block then, W_x and W_dt read per env from L2 instead. 512 envs in tiles of
// 4 are 128 blocks, about one per SM of an H100/H200.
constexpr int kPreTiledMinEnvs = 512;
int pre_envs(int B) { return B >= kPreTiledMinEnvs ? kMamba1PreEnvs : 1; }
// Chunks of H one state thread loads before its first use: with VW = 4 and
// d_state 16 the whole row is in flight at once.
constexpr int kStateChunks = 4;

__device__ __forceinline__ float to_f32(float v) { return v; }
__device__ __forceinline__ float to_f32(__nv_bfloat16 v) { return __bfloat162float(v); }

// Shared memory of the pre kernel: xc (TB, E), [δ B C] (TB, R+2N), r (TB).
size_t pre_smem_bytes(const Mamba1Dims& d, int TB) {
  return static_cast<size_t>(TB) * (d.E + d.R + 2 * d.N + 1) * sizeof(float);
}

// TB envs per block (pre_envs).
template <class Wt, int TB>
__global__ void __launch_bounds__(kPreThreads)
    mamba1_pre_kernel(Mamba1Dims d, Mamba1Weights<Wt> w, int B, const float* __restrict__ h,
                      const float* __restrict__ xz, const uint8_t* __restrict__ starts,
                      const float* state_in, float* state_out, size_t stride,
                      float* __restrict__ act) {
  pdl_enter();
  extern __shared__ float smem[];
  const int E = d.E, N = d.N, K = d.K, R = d.R, J = R + 2 * N, W = d.act_floats();
  float* xs = smem;             // (TB, E)
  float* dbc = xs + TB * E;     // (TB, J)
  float* rs = dbc + TB * J;     // (TB)
  const int b0 = static_cast<int>(blockIdx.x) * TB, nb = min(TB, B - b0);
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const int nwarps = static_cast<int>(blockDim.x) >> 5;

  // r = 1/rms(h_b): one warp per env, as the CPU's rmsnorm_forward.
  for (int t = warp; t < nb; t += nwarps) {
    const float* hb = h + static_cast<size_t>(b0 + t) * d.D;
    float s = 0.f;
    for (int i = lane; i < d.D; i += 32) s += hb[i] * hb[i];
    s = warp_sum(s);
    if (lane == 0) rs[t] = 1.f / sqrtf(s / static_cast<float>(d.D) + kNormEpsF);
  }
  __syncthreads();

  // Causal depthwise conv over [window, x_t], then the window shifts by one;
  // silu(z) for the state kernel's gate.
  for (int i = tid; i < nb * E; i += blockDim.x) {
    const int t = i / E, e = i % E, b = b0 + t;
    const bool start = starts[b] != 0;
    const float r = rs[t];
    const float* xzb = xz + static_cast<size_t>(b) * 2 * E;
    const float* win_in = state_in + static_cast<size_t>(b) * stride + static_cast<size_t>(E) * N;
    float* win_out = state_out + static_cast<size_t>(b) * stride + static_cast<size_t>(E) * N;
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
    const float xc = acc * sigmoidf_ref(acc);
    const float z = r * xzb[E + e];
    xs[t * E + e] = xc;
    float* ab = act + static_cast<size_t>(b) * W;
    ab[e] = xc;
    ab[2 * E + e] = z * sigmoidf_ref(z);
  }
  __syncthreads();

  // [δ B C] = W_x xc: one warp per row of W_x, lanes over E, every env of
  // the tile against the same loaded weight.
  for (int j = warp; j < J; j += nwarps) {
    const Wt* wr = w.x_proj + static_cast<size_t>(j) * E;
    float acc[TB] = {};
    for (int e = lane; e < E; e += 32) {
      const float wv = to_f32(wr[e]);
#pragma unroll
      for (int t = 0; t < TB; ++t)
        if (t < nb) acc[t] = fmaf(wv, xs[t * E + e], acc[t]);
    }
#pragma unroll
    for (int t = 0; t < TB; ++t) acc[t] = warp_sum(acc[t]);
    if (lane == 0)
#pragma unroll
      for (int t = 0; t < TB; ++t)
        if (t < nb) dbc[t * J + j] = acc[t];
  }
  __syncthreads();

  // Δ = softplus(W_dt δ + b_dt), in the CPU's overflow-free form.
  for (int i = tid; i < nb * E; i += blockDim.x) {
    const int t = i / E, e = i % E;
    const Wt* we = w.dt_w + static_cast<size_t>(e) * R;
    const float* dl = dbc + t * J;
    float v = 0.f;
    for (int k = 0; k < R; ++k) v += to_f32(we[k]) * dl[k];
    v += __ldg(w.dt_b + e);
    act[static_cast<size_t>(b0 + t) * W + E + e] = fmaxf(v, 0.f) + log1pf(expf(-fabsf(v)));
  }
  for (int i = tid; i < nb * 2 * N; i += blockDim.x) {
    const int t = i / (2 * N), n = i % (2 * N);
    const int col = n < N ? d.b_off() + n : d.c_off() + n - N;
    act[static_cast<size_t>(b0 + t) * W + col] = dbc[t * J + R + n];
  }
}

// One thread per (env b, channel e): H[e, :] in kStateChunks chunks of VW
// states at a time, all loaded before the first is used.
template <int VW>
__global__ void __launch_bounds__(kStateThreads)
    mamba1_state_kernel(Mamba1Dims d, const float* __restrict__ a, const float* __restrict__ d_skip,
                        int B, const uint8_t* __restrict__ starts, const float* state_in,
                        float* state_out, size_t stride, const float* __restrict__ act,
                        float* __restrict__ gated) {
  pdl_enter();
  const int E = d.E, N = d.N;
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<size_t>(B) * E) return;
  const int b = static_cast<int>(i / E), e = static_cast<int>(i % E);
  const bool start = starts[b] != 0;
  const float* h_in = state_in + static_cast<size_t>(b) * stride + static_cast<size_t>(e) * N;
  float* h_out = state_out + static_cast<size_t>(b) * stride + static_cast<size_t>(e) * N;
  const float* ab = act + static_cast<size_t>(b) * d.act_floats();
  const float* bv = ab + d.b_off();
  const float* cv = ab + d.c_off();
  const float* ae = a + static_cast<size_t>(e) * N;
  const float xc = ab[e], delta = ab[E + e], gate = ab[2 * E + e];
  const float dx = delta * xc;

  float y = 0.f;
  for (int n0 = 0; n0 < N; n0 += kStateChunks * VW) {
    Chunk<VW> old[kStateChunks];
#pragma unroll
    for (int c = 0; c < kStateChunks; ++c) {
      const int n = n0 + c * VW;
      if (n < N && !start) {
        old[c] = load_chunk<VW>(h_in + n);
      } else {
#pragma unroll
        for (int j = 0; j < VW; ++j) old[c].v[j] = 0.f;
      }
    }
#pragma unroll
    for (int c = 0; c < kStateChunks; ++c) {
      const int n = n0 + c * VW;
      if (n >= N) continue;
      const Chunk<VW> av = load_param_chunk<VW>(ae + n);
      const Chunk<VW> bc = load_param_chunk<VW>(bv + n);
      const Chunk<VW> cc = load_param_chunk<VW>(cv + n);
      Chunk<VW> nv;
#pragma unroll
      for (int j = 0; j < VW; ++j) {
        nv.v[j] = expf(delta * av.v[j]) * old[c].v[j] + dx * bc.v[j];
        y += nv.v[j] * cc.v[j];
      }
      store_chunk<VW>(h_out + n, nv);
    }
  }
  y += __ldg(d_skip + e) * xc;
  gated[i] = y * gate;
}

__global__ void neg_exp_kernel(int n, const float* __restrict__ in, float* __restrict__ out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = -expf(in[i]);
}

bool vector_ok(const Mamba1Dims& d, const float* a, const float* in, const float* out,
               const float* act, size_t stride) {
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return d.N % 4 == 0 && stride % 4 == 0 && aligned(in) && aligned(out) && aligned(a) &&
         aligned(act);
}

template <class Wt, int TB>
void set_pre_smem_limit(const Mamba1Dims& d) {
  MAMBARL_CUDA_CHECK(cudaFuncSetAttribute(mamba1_pre_kernel<Wt, TB>,
                                          cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(pre_smem_bytes(d, TB))));
}

}  // namespace

void mamba1_derive_a(int n, const float* a_log, float* a, cudaStream_t stream) {
  MAMBARL_CHECK(n > 0, "mamba1_derive_a: n must be positive, got " << n);
  neg_exp_kernel<<<(n + kNegExpThreads - 1) / kNegExpThreads, kNegExpThreads, 0, stream>>>(n, a_log, a);
  MAMBARL_CUDA_LAUNCH_CHECK(stream);
}

void mamba1_step_configure(const Mamba1Dims& d) {
  MAMBARL_CHECK(d.D > 0 && d.E > 0 && d.N > 0 && d.R > 0,
                "mamba1 step: dims must be positive (D " << d.D << ", E " << d.E << ", N " << d.N
                                                         << ", R " << d.R << ")");
  MAMBARL_CHECK(d.K >= 1 && d.K <= kMamba1MaxConv,
                "mamba1 step: d_conv must be in [1, " << kMamba1MaxConv << "], got " << d.K);
  const size_t bytes = pre_smem_bytes(d, kMamba1PreEnvs);
  const size_t limit = max_smem_per_block_optin();
  MAMBARL_CHECK(bytes <= limit,
                "mamba1 step: d_inner " << d.E << " needs " << bytes
                                        << " bytes of shared memory per block, the device has "
                                        << limit);
  set_pre_smem_limit<float, kMamba1PreEnvs>(d);
  set_pre_smem_limit<float, 1>(d);
  set_pre_smem_limit<__nv_bfloat16, kMamba1PreEnvs>(d);
  set_pre_smem_limit<__nv_bfloat16, 1>(d);
}

template <class Wt>
void mamba1_pre(const Mamba1Dims& d, const Mamba1Weights<Wt>& w, int B, const float* h,
                const float* xz, const uint8_t* starts, const float* state_in, float* state_out,
                size_t stride, float* act, cudaStream_t stream, bool pdl) {
  MAMBARL_CHECK(B > 0, "mamba1 step: batch must be positive, got " << B);
  const int tb = pre_envs(B);
  launch_kernel(pdl, tb == 1 ? mamba1_pre_kernel<Wt, 1> : mamba1_pre_kernel<Wt, kMamba1PreEnvs>,
                (B + tb - 1) / tb, kPreThreads, pre_smem_bytes(d, tb), stream, d, w, B, h, xz, starts,
                state_in, state_out, stride, act);
}

template <class Wt>
void mamba1_state(const Mamba1Dims& d, const Mamba1Weights<Wt>& w, int B, const uint8_t* starts,
                  const float* state_in, float* state_out, size_t stride, const float* act,
                  float* gated, cudaStream_t stream, bool pdl) {
  MAMBARL_CHECK(B > 0, "mamba1 step: batch must be positive, got " << B);
  const size_t threads = static_cast<size_t>(B) * d.E;
  const unsigned blocks = static_cast<unsigned>((threads + kStateThreads - 1) / kStateThreads);
  launch_kernel(pdl,
                vector_ok(d, w.a, state_in, state_out, act, stride) ? mamba1_state_kernel<4>
                                                                    : mamba1_state_kernel<1>,
                blocks, kStateThreads, 0, stream, d, w.a, w.d_skip, B, starts, state_in, state_out,
                stride, act, gated);
}

template <class Wt>
void mamba1_step(const Mamba1Dims& d, const Mamba1Weights<Wt>& w, int B, const float* h,
                 const float* xz, const uint8_t* starts, const float* state_in, float* state_out,
                 size_t stride, float* act, float* gated, cudaStream_t stream, bool pdl) {
  mamba1_pre(d, w, B, h, xz, starts, state_in, state_out, stride, act, stream, pdl);
  mamba1_state(d, w, B, starts, state_in, state_out, stride, act, gated, stream, pdl);
}

#define MAMBARL_MAMBA1_INSTANTIATE(Wt)                                                              \
  template void mamba1_pre<Wt>(const Mamba1Dims&, const Mamba1Weights<Wt>&, int, const float*,     \
                               const float*, const uint8_t*, const float*, float*, size_t, float*, \
                               cudaStream_t, bool);                                               \
  template void mamba1_state<Wt>(const Mamba1Dims&, const Mamba1Weights<Wt>&, int, const uint8_t*, \
                                 const float*, float*, size_t, const float*, float*, cudaStream_t,  \
                                 bool);                                                             \
  template void mamba1_step<Wt>(const Mamba1Dims&, const Mamba1Weights<Wt>&, int, const float*,    \
                                const float*, const uint8_t*, const float*, float*, size_t, float*, \
                                float*, cudaStream_t, bool);
MAMBARL_MAMBA1_INSTANTIATE(float)
MAMBARL_MAMBA1_INSTANTIATE(__nv_bfloat16)
#undef MAMBARL_MAMBA1_INSTANTIATE

}  // namespace mambarl::cuda
