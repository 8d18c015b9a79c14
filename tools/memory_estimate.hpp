// What a training config will allocate, estimated before anything large is
// built, so that a config that cannot fit (env.num_envs=1000000 on a long
// chunk) is refused in seconds with the numbers instead of swapping the
// machine to a halt or dying to the OOM killer minutes later.
//
// The estimate counts the big buffers, each from its shape: the envs (state
// bytes of one env, measured, times B, plus their obs buffers), the chunks
// (T x B x per-step fields, plus the context's obs; two per actor in async mode), the recurrent state
// (B x state_size, actor and chunk copies), the parameters (weights, gradients,
// two AdamW moments, one copy per actor), the learner's gathered minibatch, and
// its activations: bptt_len x B/minibatches x D x L x a per-type factor (floats the
// block keeps per token for backward, rounded up). It is a lower-bound-minded
// estimate: it refuses only what surely does not fit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mambarl {

struct MemoryInputs {
  long long num_envs = 0;     // B, all actors
  int actors = 1;             // K (1 in sync mode)
  bool sync = true;           // async: two chunks per actor
  int chunk_len = 0;          // T
  int bptt_len = 0;           // the learner's sequence length (T plus context)
  int minibatches = 1;
  int obs_dim = 0, act_width = 0;
  long long state_size = 0;   // recurrent floats per env
  long long num_params = 0;
  std::string policy_type;    // mlp | gru | mamba1 | mamba3 | a plugin's
  int d_model = 0, n_layers = 0;
  size_t env_state_bytes = 0;  // one env's save_state() size
  bool policy_on_device = false;  // runtime.device resolved to cuda: learner and actors on the GPU
  bool envs_on_device = false;    // env.backend: cuda: envs and chunk on the GPU too
};

struct MemoryEstimate {
  size_t host = 0, device = 0;                            // bytes
  std::vector<std::pair<std::string, size_t>> host_parts, device_parts;  // (what, bytes), largest first
};

MemoryEstimate estimate_training_memory(const MemoryInputs& in);

// MemAvailable of /proc/meminfo (else free pages by sysconf); nullopt if neither answers.
std::optional<size_t> host_memory_available();
// Free memory of the current CUDA device (cudaMemGetInfo); nullopt in a build
// without CUDA or on a machine without a device.
std::optional<size_t> cuda_memory_available();

// "2.0 TiB", "1.5 GiB", "300.0 MiB": for messages.
std::string format_bytes(size_t bytes);

}  // namespace mambarl
