#include "tools/memory_estimate.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#if MAMBARL_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace mambarl {

namespace {

// Floats a block keeps per token and per d_model for its backward pass,
// rounded up from its forward: an MLP block its hidden layer and norms; a GRU
// its gates; Mamba-1 and Mamba-3 the expanded (x2) in_proj output, conv,
// gates, dt/B/C and output, which come to about 20 D. A type we do not know
// (a plugin's) counts as the largest.
double activation_factor(const std::string& type) {
  if (type == "mlp") return 4;
  if (type == "gru") return 8;
  return 24;
}

size_t bytes(double n) { return static_cast<size_t>(std::max(n, 0.0)); }

}  // namespace

MemoryEstimate estimate_training_memory(const MemoryInputs& in) {
  const double B = static_cast<double>(in.num_envs), T = in.chunk_len, O = in.obs_dim, W = in.act_width;
  const double S = static_cast<double>(in.state_size), f = sizeof(float);
  // Env buffers besides the state: obs and final_obs (B, O), reward and
  // episode return/length (B), terminated/truncated (B) bytes.
  const double envs = B * (static_cast<double>(in.env_state_bytes) + (2 * O + 3) * f + 2);
  // Per step: obs, actions, logp, values, rewards, final_values, advantages,
  // returns (floats) and starts, terminated, truncated (bytes); per column the
  // initial state and next value.
  // The learner context (bptt_len - T steps): obs and starts, kept by each
  // worker and copied into each chunk, and one start state per context chunk.
  const double Tall = std::max<double>(in.bptt_len, T), Tc = Tall - T;
  const double context = Tc * B * (O * f + 1) + (Tc / std::max(T, 1.0)) * B * S * f;
  const double chunks = (in.sync ? 1.0 : 2.0) * (T * B * ((O + W + 6) * f + 3) + B * (S + 1) * f + context) + context;
  const double actor_state = B * S * f;  // the actors' recurrent state
  const double params = static_cast<double>(in.num_params) * f * (4 + in.actors);
  const double Bm = B / std::max(in.minibatches, 1);
  const double gathered = T * Bm * (W + 3) * f + Tall * Bm * (O * f + 1) + Bm * S * f;
  const double activations = Tall * Bm * in.d_model * in.n_layers * activation_factor(in.policy_type) * f;

  MemoryEstimate e;
  const auto add = [&](bool on_device, const char* what, double n) {
    (on_device ? e.device_parts : e.host_parts).emplace_back(what, bytes(n));
    (on_device ? e.device : e.host) += bytes(n);
  };
  add(in.envs_on_device, "envs", envs);
  add(in.envs_on_device, "rollout chunks", chunks);
  add(in.policy_on_device, "recurrent state", actor_state);
  add(in.policy_on_device, "parameters + optimizer", params);
  add(in.envs_on_device, "minibatch gather", gathered);  // the device learner gathers on the GPU
  add(in.policy_on_device, "learner activations", activations);
  for (auto* parts : {&e.host_parts, &e.device_parts})
    std::sort(parts->begin(), parts->end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  return e;
}

std::optional<size_t> host_memory_available() {
  std::ifstream f("/proc/meminfo");
  for (std::string line; std::getline(f, line);) {
    unsigned long long kib = 0;
    if (std::sscanf(line.c_str(), "MemAvailable: %llu kB", &kib) == 1) return static_cast<size_t>(kib) * 1024;
  }
  const long pages = ::sysconf(_SC_AVPHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) return static_cast<size_t>(pages) * static_cast<size_t>(page);
  return std::nullopt;
}

std::optional<size_t> cuda_memory_available() {
#if MAMBARL_HAVE_CUDA
  size_t free_b = 0, total_b = 0;
  if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
    cudaGetLastError();  // clear the error so that later CUDA calls do not see it
    return std::nullopt;
  }
  return free_b;
#else
  return std::nullopt;
#endif
}

std::string format_bytes(size_t n) {
  std::ostringstream os;
  os.setf(std::ios::fixed);
  os.precision(1);
  if (n >= (size_t{1} << 40)) os << static_cast<double>(n) / static_cast<double>(size_t{1} << 40) << " TiB";
  else if (n >= (size_t{1} << 30)) os << static_cast<double>(n) / (1 << 30) << " GiB";
  else os << static_cast<double>(n) / (1 << 20) << " MiB";
  return os.str();
}

}  // namespace mambarl
