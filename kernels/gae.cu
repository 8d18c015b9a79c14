#include "kernels/gae.cuh"

#include "kernels/cuda_check.cuh"

namespace mambarl::cuda {

namespace {

constexpr int kThreads = 256;

// One thread per env b; row-major (T, B), so a warp reads 32 consecutive envs of one t.
__global__ void gae_kernel(GaeInputs a, double gamma, double lambda, float* __restrict__ advantages,
                           float* __restrict__ returns) {
  const int b = static_cast<int>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (b >= a.B) return;
  double next_adv = 0;  // Â_{t+1}
  for (int t = a.T - 1; t >= 0; --t) {
    const size_t i = static_cast<size_t>(t) * a.B + b;
    const bool term = a.terminated[i] != 0, trunc = a.truncated[i] != 0;
    const double v_next = trunc ? a.final_values[i]
                                : (t == a.T - 1 ? a.next_values[b] : a.values[i + a.B]);
    const double delta = a.rewards[i] + gamma * (term ? 0.0 : v_next) - a.values[i];
    const double adv = delta + gamma * lambda * ((term || trunc) ? 0.0 : next_adv);
    advantages[i] = static_cast<float>(adv);
    returns[i] = static_cast<float>(adv + a.values[i]);
    next_adv = adv;
  }
}

}  // namespace

void gae(const GaeInputs& a, double gamma, double lambda, float* advantages, float* returns,
         cudaStream_t stream) {
  MAMBARL_CHECK(a.T > 0 && a.B > 0, "gae: T and B must be positive, got " << a.T << " x " << a.B);
  MAMBARL_CHECK(a.rewards && a.values && a.terminated && a.truncated && a.final_values && a.next_values &&
                    advantages && returns,
                "gae: a null buffer");
  gae_kernel<<<(a.B + kThreads - 1) / kThreads, kThreads, 0, stream>>>(a, gamma, lambda, advantages, returns);
  MAMBARL_CUDA_LAUNCH_CHECK(stream);
}

}  // namespace mambarl::cuda
