#include "kernels/heads_sample.cuh"

#include "kernels/block_reduce.cuh"
#include "kernels/cuda_check.cuh"
#include "kernels/launch.cuh"

namespace mambarl::cuda {

namespace {

constexpr int kThreads = 128;
constexpr double kLog2Pi = 1.8378770664093453;  // as DiagGaussian

size_t smem_bytes(const HeadDims& d) {
  return (32 + static_cast<size_t>(d.D) + 2 * (static_cast<size_t>(d.A) + 1)) * sizeof(float);
}

// The categorical draw of CpuActor::act: log-softmax in float with the max
// subtracted, then the inverse CDF of one uniform in double.
__device__ void sample_categorical(const float* logits, int A, float* lp, Rng& rng, float* action,
                                   float* logp) {
  float m = logits[0];
  for (int i = 1; i < A; ++i) m = logits[i] > m ? logits[i] : m;
  float z = 0.f;
  for (int i = 0; i < A; ++i) z += expf(logits[i] - m);
  const float lz = m + logf(z);
  for (int i = 0; i < A; ++i) lp[i] = logits[i] - lz;
  const double u = rng.uniform();
  double c = 0;
  int a = A - 1;  // rounding: the cumulative sum may end just below 1
  for (int i = 0; i < A; ++i) {
    c += exp(static_cast<double>(lp[i]));
    if (u < c) {
      a = i;
      break;
    }
  }
  *action = static_cast<float>(a);
  *logp = lp[a];
}

// The Gaussian draw of CpuActor::act and DiagGaussian::log_prob.
__device__ void sample_gaussian(const float* mu, const float* log_std, int A, Rng& rng,
                                float* action, float* logp) {
  float lpv = 0.f;
  for (int j = 0; j < A; ++j) {
    const float ls = __ldg(log_std + j);
    const float a = mu[j] + expf(ls) * static_cast<float>(rng.normal());
    action[j] = a;
    const float z = (a - mu[j]) * expf(-ls);
    lpv += -0.5f * z * z - ls - static_cast<float>(0.5 * kLog2Pi);
  }
  *logp = lpv;
}

__global__ void __launch_bounds__(kThreads)
    heads_sample_kernel(HeadDims d, HeadWeights w, const float* __restrict__ h, Rng* rngs,
                        bool sample, float* actions, float* logp, float* values) {
  extern __shared__ float smem[];
  float* red = smem;              // (32)
  float* f = red + 32;            // (D)
  float* out = f + d.D;           // (A+1) head, then V
  float* lp = out + d.A + 1;      // (A+1) log-probs
  pdl_enter();
  const int b = blockIdx.x, D = d.D, A = d.A;
  const float* hb = h + static_cast<size_t>(b) * D;
  // The env's generator is loaded first so its latency hides behind the heads.
  Rng rng;
  if (sample && threadIdx.x == 0) rng = rngs[b];
  const float r = block_rms_inv(hb, D, red);
  for (int i = threadIdx.x; i < D; i += blockDim.x) f[i] = hb[i] * __ldg(w.norm_f + i) * r;
  __syncthreads();

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  for (int j = warp; j <= A; j += nwarps) {
    const float* wr = j < A ? w.pi_w + static_cast<size_t>(j) * D : w.v_w;
    float acc = 0.f;
    for (int i = lane; i < D; i += 32) acc += __ldg(wr + i) * f[i];
    acc = warp_sum(acc);
    if (lane == 0) out[j] = acc + __ldg(j < A ? w.pi_b + j : w.v_b);
  }
  __syncthreads();
  if (threadIdx.x != 0) return;

  values[b] = out[A];
  if (!sample) return;
  if (d.discrete)
    sample_categorical(out, A, lp, rng, actions + b, logp + b);
  else
    sample_gaussian(out, w.log_std, A, rng, actions + static_cast<size_t>(b) * A, logp + b);
  rngs[b] = rng;
}

}  // namespace

void heads_sample_configure(const HeadDims& d) {
  MAMBARL_CHECK(d.D > 0 && d.A > 0, "heads: d_model (" << d.D << ") and action_dim (" << d.A
                                                       << ") must be positive");
  const size_t limit = max_smem_per_block_optin();
  const size_t bytes = smem_bytes(d);
  MAMBARL_CHECK(bytes <= limit, "heads: d_model " << d.D << " and action_dim "
                                                                       << d.A << " need " << bytes
                                                                       << " bytes of shared memory");
  MAMBARL_CUDA_CHECK(cudaFuncSetAttribute(heads_sample_kernel,
                                          cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(bytes)));
}

void heads_sample(const HeadDims& d, const HeadWeights& w, int B, const float* h, Rng* rngs,
                  bool sample, float* actions, float* logp, float* values, cudaStream_t stream,
                  bool pdl) {
  MAMBARL_CHECK(B > 0, "heads: batch must be positive, got " << B);
  MAMBARL_CHECK(d.discrete || w.log_std, "heads: a Gaussian head needs log_std");
  launch_kernel(pdl, heads_sample_kernel, B, kThreads, smem_bytes(d), stream, d, w, h, rngs, sample,
                actions, logp, values);
}

}  // namespace mambarl::cuda
