#include "kernels/rollout_record.cuh"

#include "kernels/cuda_check.cuh"

namespace mambarl::cuda {

namespace {

constexpr int kThreads = 256;

__global__ void record_env_step_kernel(EnvStepRecord r) {
  const int b = static_cast<int>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (b >= r.B) return;
  const uint8_t term = r.terminated[b], trunc = r.truncated[b];
  const bool done = term || trunc;
  r.row_reward[b] = r.reward[b];
  r.row_terminated[b] = term;
  r.row_truncated[b] = trunc;
  r.row_final_value[b] = trunc ? r.final_value[b] : 0.f;
  r.row_episode_return[b] = done ? r.episode_return[b] : 0.f;
  r.row_episode_length[b] = done ? r.episode_length[b] : 0;
  r.next_starts[b] = done ? 1 : 0;
}

}  // namespace

void record_env_step(const EnvStepRecord& r, cudaStream_t stream) {
  MAMBARL_CHECK(r.B > 0, "record_env_step: batch must be positive, got " << r.B);
  MAMBARL_CHECK(r.reward && r.terminated && r.truncated && r.episode_return && r.episode_length &&
                    r.final_value && r.row_reward && r.row_terminated && r.row_truncated &&
                    r.row_final_value && r.row_episode_return && r.row_episode_length && r.next_starts,
                "record_env_step: a null buffer");
  record_env_step_kernel<<<(r.B + kThreads - 1) / kThreads, kThreads, 0, stream>>>(r);
  MAMBARL_CUDA_LAUNCH_CHECK(stream);
}

}  // namespace mambarl::cuda
