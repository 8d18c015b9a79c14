#include "kernels/mamba1_step.cuh"

#include <algorithm>

#include "kernels/block_reduce.cuh"
#include "kernels/cuda_check.cuh"
#include "kernels/launch.cuh"
#include "kernels/state_rows.cuh"

namespace mambarl::cuda {

namespace {

// 512 pre threads: two (env, channel) items per thread in the conv and Δ
// phases of a 4-env tile at d_inner 256. With 256, each thread ran 4 items
// one after another, each waiting on DRAM (the conv window) or L2 (W_dt),
// and the pre kernel took 13.3 µs at B = 1024 on the H200. (1024 threads
// made ptxas spill the 4-env kernel at 32 registers.)
constexpr int kPreThreads = 512, kStateThreads = 128, kNegExpThreads = 256;
// Unroll depth of the pre kernel's loops over L2-resident weights and h, so
// their loads issue together instead of one latency per iteration.
constexpr int kPreUnroll = 8;
// Below this batch a tile of kMamba1PreEnvs envs leaves most SMs idle (B = 64
// gave 16 blocks, each running the serial phase chain over 4 envs): one env per
// block then, W_x and W_dt read per env from L2 instead. 512 envs in tiles of
// 4 are 128 blocks, about one per SM of an H100/H200.
constexpr int kPreTiledMinEnvs = 512;
int pre_envs(int B) { return B >= kPreTiledMinEnvs ? kMamba1PreEnvs : 1; }
// State kernel mapping. kStateLanes lanes share a row (env b, channel e) of
// H: lane q takes chunks q, q + kStateLanes, ... of VW states, so with VW = 4
// and d_state 16 a row is 64 contiguous bytes and a warp's 16-byte accesses
// cover 8 consecutive rows, 512 contiguous bytes. Each lane group takes
// kStateRows rows kStateGroups apart and loads all of them before the first
// use. One thread per row with its 4 chunks in flight measured 2.4 TB/s on
// the H200: each warp access touched 32 half-used sectors 64 bytes apart.
// 2 rows at 64 registers (capped through kStateBlocksPerSm, no spills) give
// 8 blocks per SM, 32 KB in flight per SM; 4 rows took 113 registers and
// 4 blocks, the same bytes in flight with half the warps.
constexpr int kStateLanes = 4, kStateRows = 2, kStateBlocksPerSm = 8;
constexpr int kStateGroups = kStateThreads / kStateLanes;
constexpr int kStateBlockRows = kStateGroups * kStateRows;
static_assert((kStateLanes & (kStateLanes - 1)) == 0 && kStateLanes <= 32,
              "the y shuffle tree halves a group inside one warp");

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
                      const float* __restrict__ xz, StepFlags flags, const float* state_in, float* state_out,
                      size_t stride, float* __restrict__ act) {
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
#pragma unroll kPreUnroll
    for (int i = lane; i < d.D; i += 32) s += hb[i] * hb[i];
    s = warp_sum(s);
    if (lane == 0) rs[t] = 1.f / sqrtf(s / static_cast<float>(d.D) + kNormEpsF);
  }
  __syncthreads();

  // Causal depthwise conv over [window, x_t], then the window shifts by one;
  // silu(z) for the state kernel's gate. A skipped env's xc is zero (the
  // phases below then run on zeros) and its window is neither read nor written.
  for (int i = tid; i < nb * E; i += blockDim.x) {
    const int t = i / E, e = i % E, b = b0 + t;
    if (flags.skip(b)) {
      xs[t * E + e] = 0.f;
      continue;
    }
    const bool start = flags.start(b);
    const float r = rs[t];
    const float* xzb = xz + static_cast<size_t>(b) * 2 * E;
    const float* win_in = state_in + static_cast<size_t>(b) * stride + static_cast<size_t>(E) * N;
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
    if (state_out) {
      float* win_out = state_out + static_cast<size_t>(b) * stride + static_cast<size_t>(E) * N;
#pragma unroll
      for (int k = 0; k < kMamba1MaxConv - 2; ++k)
        if (k < K - 2) win_out[static_cast<size_t>(k) * E + e] = win[k + 1];
      if (K >= 2) win_out[static_cast<size_t>(K - 2) * E + e] = x;
    }
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
#pragma unroll kPreUnroll
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
#pragma unroll kPreUnroll
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

// kStateRows rows of H per lane group (see kStateLanes); the row's y
// partials meet in a fixed xor shuffle tree (deterministic).
template <int VW>
__global__ void __launch_bounds__(kStateThreads, kStateBlocksPerSm)
    mamba1_state_kernel(Mamba1Dims d, const float* __restrict__ a, const float* __restrict__ d_skip, int B,
                        StepFlags flags, const float* state_in, float* state_out, size_t stride,
                        const float* __restrict__ act, float* __restrict__ gated) {
  pdl_enter();
  const int E = d.E, N = d.N;
  const int tid = static_cast<int>(threadIdx.x), q = tid % kStateLanes, g = tid / kStateLanes;
  const size_t rows = static_cast<size_t>(B) * E;
  const size_t r0 = static_cast<size_t>(blockIdx.x) * kStateBlockRows + g;
  // Per row r: i = b * E + e. No early return: the shuffles need every lane
  // of the warp; a row past the end or of a skipped env only skips the
  // memory work (its whole lane group agrees, so the shuffle tree mixes no
  // invalid partials in).
  bool in_range[kStateRows], valid[kStateRows], start[kStateRows];
  int b[kStateRows], e[kStateRows];
  float xc[kStateRows], delta[kStateRows], gate[kStateRows], y[kStateRows];
#pragma unroll
  for (int r = 0; r < kStateRows; ++r) {
    const size_t i = r0 + static_cast<size_t>(r) * kStateGroups;
    in_range[r] = i < rows;
    b[r] = in_range[r] ? static_cast<int>(i / E) : 0;
    e[r] = in_range[r] ? static_cast<int>(i % E) : 0;
    valid[r] = in_range[r] && !flags.skip(b[r]);
    const float* ab = act + static_cast<size_t>(b[r]) * d.act_floats();
    start[r] = valid[r] && flags.start(b[r]);
    xc[r] = valid[r] ? ab[e[r]] : 0.f;
    delta[r] = valid[r] ? ab[E + e[r]] : 0.f;
    gate[r] = valid[r] ? ab[2 * E + e[r]] : 0.f;
    y[r] = 0.f;
  }
  constexpr int kStep = kStateLanes * VW;  // states between one lane's chunks
  for (int n = q * VW; n < N; n += kStep) {
    Chunk<VW> old[kStateRows];
#pragma unroll
    for (int r = 0; r < kStateRows; ++r) {
      if (valid[r] && !start[r]) {
        old[r] = load_chunk<VW>(state_in + static_cast<size_t>(b[r]) * stride +
                                static_cast<size_t>(e[r]) * N + n);
      } else {
#pragma unroll
        for (int j = 0; j < VW; ++j) old[r].v[j] = 0.f;
      }
    }
#pragma unroll
    for (int r = 0; r < kStateRows; ++r) {
      if (!valid[r]) continue;
      const float* ab = act + static_cast<size_t>(b[r]) * d.act_floats();
      const Chunk<VW> av = load_param_chunk<VW>(a + static_cast<size_t>(e[r]) * N + n);
      const Chunk<VW> bc = load_param_chunk<VW>(ab + d.b_off() + n);
      const Chunk<VW> cc = load_param_chunk<VW>(ab + d.c_off() + n);
      const float dx = delta[r] * xc[r];
      Chunk<VW> nv;
#pragma unroll
      for (int j = 0; j < VW; ++j) {
        nv.v[j] = expf(delta[r] * av.v[j]) * old[r].v[j] + dx * bc.v[j];
        y[r] += nv.v[j] * cc.v[j];
      }
      if (state_out)
        store_chunk<VW>(state_out + static_cast<size_t>(b[r]) * stride + static_cast<size_t>(e[r]) * N + n,
                        nv);
    }
  }
#pragma unroll
  for (int r = 0; r < kStateRows; ++r) {
#pragma unroll
    for (int o = 1; o < kStateLanes; o <<= 1) y[r] += __shfl_xor_sync(0xffffffffu, y[r], o);
    if (in_range[r] && q == 0)
      gated[r0 + static_cast<size_t>(r) * kStateGroups] =
          valid[r] ? (y[r] + __ldg(d_skip + e[r]) * xc[r]) * gate[r] : 0.f;
  }
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
void mamba1_pre(const Mamba1Dims& d, const Mamba1Weights<Wt>& w, int B, const float* h, const float* xz,
                StepFlags flags, const float* state_in, float* state_out, size_t stride, float* act,
                cudaStream_t stream, bool pdl) {
  MAMBARL_CHECK(B > 0, "mamba1 step: batch must be positive, got " << B);
  const int tb = pre_envs(B);
  launch_kernel(pdl, tb == 1 ? mamba1_pre_kernel<Wt, 1> : mamba1_pre_kernel<Wt, kMamba1PreEnvs>,
                (B + tb - 1) / tb, kPreThreads, pre_smem_bytes(d, tb), stream, d, w, B, h, xz, flags,
                state_in, state_out, stride, act);
}

template <class Wt>
void mamba1_state(const Mamba1Dims& d, const Mamba1Weights<Wt>& w, int B, StepFlags flags,
                  const float* state_in, float* state_out, size_t stride, const float* act, float* gated,
                  cudaStream_t stream, bool pdl) {
  MAMBARL_CHECK(B > 0, "mamba1 step: batch must be positive, got " << B);
  const size_t rows = static_cast<size_t>(B) * d.E;
  const unsigned blocks = static_cast<unsigned>((rows + kStateBlockRows - 1) / kStateBlockRows);
  launch_kernel(
      pdl,
      vector_ok(d, w.a, state_in, state_out, act, stride) ? mamba1_state_kernel<4> : mamba1_state_kernel<1>,
      blocks, kStateThreads, 0, stream, d, w.a, w.d_skip, B, flags, state_in, state_out, stride, act, gated);
}

template <class Wt>
void mamba1_step(const Mamba1Dims& d, const Mamba1Weights<Wt>& w, int B, const float* h, const float* xz,
                 StepFlags flags, const float* state_in, float* state_out, size_t stride, float* act,
                 float* gated, cudaStream_t stream, bool pdl) {
  mamba1_pre(d, w, B, h, xz, flags, state_in, state_out, stride, act, stream, pdl);
  mamba1_state(d, w, B, flags, state_in, state_out, stride, act, gated, stream, pdl);
}

#define MAMBARL_MAMBA1_INSTANTIATE(Wt)                                                                       \
  template void mamba1_pre<Wt>(const Mamba1Dims&, const Mamba1Weights<Wt>&, int, const float*, const float*, \
                               StepFlags, const float*, float*, size_t, float*, cudaStream_t, bool);         \
  template void mamba1_state<Wt>(const Mamba1Dims&, const Mamba1Weights<Wt>&, int, StepFlags, const float*,  \
                                 float*, size_t, const float*, float*, cudaStream_t, bool);                  \
  template void mamba1_step<Wt>(const Mamba1Dims&, const Mamba1Weights<Wt>&, int, const float*,              \
                                const float*, StepFlags, const float*, float*, size_t, float*, float*,       \
                                cudaStream_t, bool);
MAMBARL_MAMBA1_INSTANTIATE(float)
MAMBARL_MAMBA1_INSTANTIATE(__nv_bfloat16)
#undef MAMBARL_MAMBA1_INSTANTIATE

}  // namespace mambarl::cuda
