#include "tools/bench/bench_train_gpu.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <vector>

#include "kernels/base/rng.hpp"
#include "kernels/cuda_check.cuh"
#include "kernels/device_buffer.cuh"
#include "policy/gpu_learner.hpp"
#include "policy/gpu_mixer.hpp"
#include "policy/policy_config.hpp"

namespace mambarl {

namespace {

// The learner issue's shapes; the first carries the <= 3 ms (H200, f32) target.
const std::vector<GpuTrainShape> kShapes = {{64, 256, 128, 2}, {32, 1024, 64, 2}, {32, 1, 128, 3}};
constexpr int kObs = 4, kActions = 2;  // as the CPU bench: CartPole-sized heads
// Warm-up per shape and mode: updates for at least this long, so the SM
// clock has ramped from idle to boost before anything is timed.
constexpr double kWarmupMs = 300;
// Small: hundreds of replays on one chunk must not drive the weights anywhere odd.
constexpr double kLr = 1e-5;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

size_t free_device_bytes() {
  size_t free = 0, total = 0;
  MAMBARL_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  return free;
}

double timed_median_ms(GpuLearner& learner, int reps) {
  double ms = 0;
  for (int i = 0; i < 1000 && ms < kWarmupMs; ++i)
    for (double t : learner.time_updates_ms(10)) ms += t;
  return median(learner.time_updates_ms(reps));
}

std::string bench_shape(const std::string& type, const GpuTrainShape& s, Precision precision, int reps) {
  YAML::Node n;
  n["type"] = type;
  n["d_model"] = s.D;
  n["n_layers"] = s.L;
  const PolicyConfig cfg = PolicyConfig::from_yaml(ConfigNode(n, "<bench>", "policy"));
  MAMBARL_CUDA_CHECK(cudaDeviceSynchronize());
  const size_t free_before = free_device_bytes();
  GpuLearner learner(cfg, kObs, HeadSpec{true, kActions}, PpoLossConfig{}, AdamWConfig{}, 1, precision);

  // A chunk as the rollout makes them: random observations, an episode start
  // per env somewhere in it, old log-probs near the initial policy's.
  const int M = s.T * s.B;
  const size_t m = static_cast<size_t>(M);
  Rng rng(5, 0);
  std::vector<float> obs(m * kObs), actions(m), logp(m), adv(m), ret(m),
      state0(std::max<size_t>(static_cast<size_t>(s.B) * learner.model().state_size(), 1));
  std::vector<uint8_t> starts(m, 0);
  for (auto& v : obs) v = static_cast<float>(rng.normal());
  for (int b = 0; b < s.B; ++b) starts[static_cast<size_t>((b * 7) % s.T) * s.B + b] = 1;
  for (size_t i = 0; i < m; ++i) {
    actions[i] = static_cast<float>(rng.below(kActions));
    logp[i] = static_cast<float>(std::log(0.5) + 0.1 * rng.normal());
    adv[i] = static_cast<float>(rng.normal());
    ret[i] = static_cast<float>(rng.normal());
  }
  for (auto& v : state0) v = static_cast<float>(0.1 * rng.normal());
  const ChunkView cv{s.T,        s.B,        obs.data(),    actions.data(), logp.data(),
                     adv.data(), ret.data(), starts.data(), state0.data()};
  // Eager warm-up, capture, one replay: the graph exists before timing.
  // First from host memory: each timed update then includes the chunk's
  // H2D copy (the initial states dominate it: B x state_size floats).
  TrainResult last;
  for (int i = 0; i < 3; ++i) last = learner.train_step(cv, kLr);
  const double graph_host_ms = timed_median_ms(learner, reps);
  MAMBARL_CUDA_CHECK(cudaDeviceSynchronize());
  // Free memory can also grow (another process released some): clamp at 0.
  const size_t free_after = free_device_bytes();
  const size_t held = free_before > free_after ? free_before - free_after : 0;

  // Then the same chunk resident on the device, as GPU-resident rollouts
  // (env.backend: cuda) hand it over: the update alone.
  const auto d_obs = to_device(obs), d_actions = to_device(actions), d_logp = to_device(logp),
             d_adv = to_device(adv), d_ret = to_device(ret), d_state0 = to_device(state0);
  const auto d_starts = to_device(starts);
  ChunkView dv{s.T,          s.B,          d_obs.data(),    d_actions.data(), d_logp.data(),
               d_adv.data(), d_ret.data(), d_starts.data(), d_state0.data()};
  dv.on_device = true;
  last = learner.train_step(dv, kLr);
  const double graph_ms = timed_median_ms(learner, reps);
  learner.set_launch(GpuLearner::Launch::eager);
  const double eager_ms = timed_median_ms(learner, reps);

  std::ostringstream os;
  os << "{\"policy\":\"" << type << "\",\"dtype\":\"" << precision_name(precision) << "\",\"T\":" << s.T
     << ",\"B\":" << s.B << ",\"d_model\":" << s.D << ",\"n_layers\":" << s.L
     << ",\"params\":" << learner.model().layout().size() << ",\"ms_per_update_graph\":" << graph_ms
     << ",\"ms_per_update_eager\":" << eager_ms << ",\"ms_per_update_graph_host_chunk\":" << graph_host_ms
     << ",\"device_bytes\":" << held;
  // float16: the scale after warm-up, and whether the last warm-up update
  // overflowed (a skipped update skips AdamW's elementwise pass: slightly cheaper).
  if (precision == Precision::float16)
    os << ",\"loss_scale\":" << last.loss_scale
       << ",\"warmup_skipped\":" << (last.skipped ? "true" : "false");
  os << "}";
  return os.str();
}

}  // namespace

std::string bench_train_gpu_json(int reps, const std::vector<GpuTrainShape>& shapes, const std::string& policy,
                                 const std::string& dtype) {
  MAMBARL_USER_CHECK(reps >= 20, "bench train --device cuda: --reps " << reps << " is too few: the medians want 20 or more updates");
  int dev = 0;
  MAMBARL_CUDA_CHECK(cudaGetDevice(&dev));
  cudaDeviceProp prop{};
  MAMBARL_CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
  std::ostringstream os;
  os << "{\"bench\":\"train\",\"device\":\"cuda\",\"gpu\":\"" << prop.name
     << "\",\"sms\":" << prop.multiProcessorCount << ",\"reps\":" << reps << ",\"results\":[";
  std::vector<std::string> types = gpu_mixer_types();
  if (!policy.empty()) {
    std::string known;
    for (const std::string& t : types) known += " " + t;
    MAMBARL_USER_CHECK(std::find(types.begin(), types.end(), policy) != types.end(),
                       "bench train --device cuda: --policy " << policy << " has no GPU engine (known:" << known
                                                              << ")");
    types = {policy};
  }
  std::vector<Precision> precisions{Precision::float32, Precision::bfloat16, Precision::float16};
  if (!dtype.empty()) precisions = {precision_from_name(dtype)};
  bool first = true;
  for (const std::string& type : types)
    for (const GpuTrainShape& s : shapes.empty() ? kShapes : shapes)
      for (Precision p : precisions) {
        os << (first ? "\n  " : ",\n  ") << bench_shape(type, s, p, reps);
        first = false;
      }
  os << "]}";
  return os.str();
}

}  // namespace mambarl
