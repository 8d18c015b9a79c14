#include "kernels/adamw.cuh"
#include "kernels/block_reduce.cuh"
#include "kernels/cuda_check.cuh"

namespace mambarl::cuda {

namespace {

constexpr int kThreads = 256;

__global__ void grad_sq_partials_kernel(size_t n, const float* __restrict__ g,
                                        double* __restrict__ partials) {
  __shared__ double scratch[32];
  double s = 0;  // double, as the CPU: a float sum over 1e6 terms loses digits
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    s += static_cast<double>(g[i]) * g[i];
  s = block_sum(s, scratch);
  if (threadIdx.x == 0) partials[blockIdx.x] = s;
}

__global__ void adamw_decide_kernel(AdamWCoefs c, AdamWScalars s) {
  __shared__ double scratch[32];
  double v = 0;
  for (int i = threadIdx.x; i < kGradNormBlocks; i += blockDim.x) v += s.partials[i];
  const double norm = sqrt(block_sum(v, scratch));
  if (threadIdx.x != 0) return;
  *s.grad_norm = norm;
  const bool finite = isfinite(norm);
  *s.grad_not_finite = finite ? 0 : 1;
  if (!finite || *s.loss_not_finite) return;
  const long long t = ++*s.step;
  const double lr = *s.lr;
  const double bc1 = 1.0 - pow(c.beta1, static_cast<double>(t));
  const double bc2 = 1.0 - pow(c.beta2, static_cast<double>(t));
  // PyTorch's clip_grad_norm_: scale by max_norm / (norm + 1e-6) when above.
  s.step_scalars[0] = c.max_grad_norm > 0 && norm > c.max_grad_norm
                          ? static_cast<float>(c.max_grad_norm / (norm + 1e-6))
                          : 1.f;
  s.step_scalars[1] = static_cast<float>(lr / bc1);
  s.step_scalars[2] = static_cast<float>(1.0 / sqrt(bc2));
  s.step_scalars[3] = static_cast<float>(lr * c.weight_decay);
}

__global__ void adamw_step_kernel(size_t n, float b1, float b2, float eps, AdamWScalars s,
                                  float* __restrict__ p, const float* __restrict__ grads,
                                  float* __restrict__ m, float* __restrict__ v,
                                  const float* __restrict__ decay) {
  if (*s.loss_not_finite || *s.grad_not_finite) return;
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float scale = s.step_scalars[0], step_size = s.step_scalars[1];
  const float inv_sqrt_bc2 = s.step_scalars[2], wd = s.step_scalars[3];
  const float g = grads[i] * scale;  // scale is exactly 1 when the norm is within bounds
  float w = p[i];
  w -= wd * decay[i] * w;  // decoupled decay, before the Adam step (PyTorch order)
  const float mi = b1 * m[i] + (1.f - b1) * g;
  const float vi = b2 * v[i] + (1.f - b2) * g * g;
  m[i] = mi;
  v[i] = vi;
  p[i] = w - step_size * mi / (sqrtf(vi) * inv_sqrt_bc2 + eps);
}

}  // namespace

void adamw_update(size_t n, const AdamWCoefs& c, const AdamWScalars& s, float* params, const float* grads,
                  float* exp_avg, float* exp_avg_sq, const float* decay, cudaStream_t stream) {
  MAMBARL_CHECK(n > 0, "adamw_update: empty parameter buffer");
  grad_sq_partials_kernel<<<kGradNormBlocks, kThreads, 0, stream>>>(n, grads, s.partials);
  MAMBARL_CUDA_LAUNCH_CHECK(stream);
  adamw_decide_kernel<<<1, kThreads, 0, stream>>>(c, s);
  MAMBARL_CUDA_LAUNCH_CHECK(stream);
  adamw_step_kernel<<<static_cast<unsigned>((n + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
      n, static_cast<float>(c.beta1), static_cast<float>(c.beta2), static_cast<float>(c.eps), s, params,
      grads, exp_avg, exp_avg_sq, decay);
  MAMBARL_CUDA_LAUNCH_CHECK(stream);
}

}  // namespace mambarl::cuda
