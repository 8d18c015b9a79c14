#include "tools/bench/bench_rollout_gpu.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <exception>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/clock_probe.cuh"
#include "kernels/cuda_check.cuh"
#include "kernels/cuda_graph.cuh"
#include "kernels/cuda_handles.cuh"
#include "kernels/device_buffer.cuh"
#include "kernels/event_timing.cuh"
#include "policy/gpu_actor.hpp"
#include "policy/io/strict_json.hpp"
#include "policy/policy_config.hpp"
#include "tools/bench/bench_kernels_gpu.hpp"

namespace mambarl {

namespace {

struct GpuShape {
  const char* type;
  int B, D, L;
};

// The rollout issue's shapes; the first is the one with the 40 µs target;
// the last two, the actor at 16k GPU envs (the throughput issue's shape).
const GpuShape kShapes[] = {
    {"mamba1", 1024, 128, 2}, {"mamba1", 4096, 64, 2}, {"mamba1", 64, 256, 4},
    {"mamba1", 1, 128, 3},    {"mamba1", 64, 128, 3},  {"mamba3", 1, 128, 4},
    {"mamba3", 64, 128, 4},   {"mamba3", 1024, 128, 2}, {"mamba1", 16384, 64, 2},
    {"mamba3", 16384, 64, 2},
};
constexpr int kObs = 4, kActions = 2;  // as the CPU bench: CartPole-sized heads
// Warm-up per shape and mode: replays for at least this long, so that the SM
// clock has ramped from idle to boost before anything is timed.
constexpr double kWarmupUs = 500e3;
// Steps per timing sample (kernels/event_timing.cuh).
constexpr int kGroup = 10;

// time(): samples of kGroup steps each, µs per step.
template <class Time>
void warm_up(Time&& time) {
  double us = 0;
  for (int i = 0; i < 1000 && us < kWarmupUs; ++i)
    for (double t : time()) us += kGroup * t;
}

void warm_up(GpuActor& actor) {
  warm_up([&] { return actor.time_steps_us(10, kGroup); });
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

PolicyConfig policy_for(const GpuShape& s) {
  YAML::Node n;
  n["type"] = s.type;
  n["d_model"] = s.D;
  n["n_layers"] = s.L;
  if (std::string(s.type) == "mamba3") n["headdim"] = 16;
  return PolicyConfig::from_yaml(ConfigNode(n, "<bench>", "policy"));
}

// Device-to-device copy of 1 GiB, counting bytes read plus written (TB/s).
double copy_bandwidth_tbps() {
  constexpr size_t kBytes = size_t{1} << 30;
  DeviceBuffer<uint8_t> a(kBytes), b(kBytes);
  MAMBARL_CUDA_CHECK(cudaMemset(a.data(), 1, kBytes));
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  MAMBARL_CUDA_CHECK(cudaEventCreate(&e0));
  MAMBARL_CUDA_CHECK(cudaEventCreate(&e1));
  std::vector<double> tbps;
  for (int i = 0; i < 12; ++i) {
    MAMBARL_CUDA_CHECK(cudaEventRecord(e0));
    MAMBARL_CUDA_CHECK(cudaMemcpyAsync(b.data(), a.data(), kBytes, cudaMemcpyDeviceToDevice));
    MAMBARL_CUDA_CHECK(cudaEventRecord(e1));
    MAMBARL_CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0.f;
    MAMBARL_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    if (i >= 2) tbps.push_back(2.0 * kBytes / (ms * 1e-3) / 1e12);
  }
  (void)cudaEventDestroy(e0);
  (void)cudaEventDestroy(e1);
  return median(tbps);
}

// The same step with device-resident inputs and outputs: enqueue_act
// captured into a graph of its own, with no copy from or to pinned host
// memory. Beside us_per_step_graph it separates the kernels' time from that
// of the own-stream step's host copies (kernels/ROLLOUT_PERF.md, session 5).
double device_io_step_us(GpuActor& actor, const std::vector<float>& obs, const std::vector<uint8_t>& starts,
                         int reps) {
  const size_t B = starts.size();
  const DeviceBuffer<float> obs_d = to_device(obs);
  const DeviceBuffer<uint8_t> starts_d = to_device(starts);
  DeviceBuffer<float> act_d(B), logp_d(B), val_d(B);
  CudaStream stream;
  CudaGraph graph("bench device-io step");
  graph.capture(stream.get(), {}, [&](cudaStream_t st) {
    actor.enqueue_act(st, obs_d.data(), starts_d.data(), act_d.data(), logp_d.data(), val_d.data());
  });
  const auto replay = [&] { graph.launch(stream.get()); };
  const auto time_us = [&](int groups) {
    std::vector<double> us = cuda::time_repetitions_ms(stream.get(), groups, kGroup, replay);
    for (double& t : us) t *= 1e3;
    return us;
  };
  warm_up([&] { return time_us(10); });
  return median(time_us(reps / kGroup));
}

std::string bench_shape(const GpuShape& s, int reps, double copy_tbps, bool bf16) {
  const PolicyConfig cfg = policy_for(s);
  std::shared_ptr<const ActorCritic<float>> model =
      make_actor_critic<float>(cfg, kObs, HeadSpec{true, kActions});
  std::vector<float> w(model->layout().size());
  model->init_params(w.data(), 1);
  GpuActor actor(model, cfg, s.B, 2, bf16);
  actor.set_weights(w.data(), w.size(), 0);
  // Random non-zero inputs; a few envs start an episode every step, as in a real rollout.
  Rng rng(3, 0);
  const size_t B = static_cast<size_t>(s.B);
  std::vector<float> obs(B * kObs), act(B), logp(B), val(B);
  std::vector<uint8_t> starts(B, 0);
  for (auto& o : obs) o = static_cast<float>(rng.normal());
  for (int i = 0; i < 20; ++i) actor.act(obs.data(), starts.data(), act.data(), logp.data(), val.data());
  for (size_t b = 0; b < B; b += 64) starts[b] = 1;
  actor.act(obs.data(), starts.data(), act.data(), logp.data(), val.data());  // staged for the replays

  warm_up(actor);
  const double mhz_before = cuda::sm_clock_mhz(nullptr);
  const double graph_us = median(actor.time_steps_us(reps / kGroup, kGroup));
  const double mhz_after = cuda::sm_clock_mhz(nullptr);
  // PDL is new in this graph: if the device refuses it, say so in the row
  // and keep the other numbers.
  double pdl_us = 0;
  std::string pdl_error;
  try {
    actor.set_launch(GpuActor::Launch::graph_pdl);
    warm_up(actor);
    pdl_us = median(actor.time_steps_us(reps / kGroup, kGroup));
  } catch (const std::exception& e) {
    pdl_error = e.what();
  }
  actor.set_launch(GpuActor::Launch::eager);
  warm_up(actor);
  const double eager_us = median(actor.time_steps_us(reps / kGroup, kGroup));
  const double device_io_us = device_io_step_us(actor, obs, starts, reps);  // eager mode: no PDL

  const double state_bytes = static_cast<double>(B) * actor.state_size() * sizeof(float);
  std::ostringstream os;
  os << "{\"policy\":\"" << s.type << "\",\"B\":" << s.B << ",\"d_model\":" << s.D
     << ",\"n_layers\":" << s.L << ",\"weights\":\"" << (bf16 ? "bf16" : "f32") << "\"";
  if (std::string(s.type) == "mamba3") os << ",\"headdim\":16";
  os << ",\"us_per_step_graph\":" << graph_us;
  if (pdl_error.empty())
    os << ",\"us_per_step_graph_pdl\":" << pdl_us;
  else
    os << ",\"graph_pdl_error\":" << json_quote(pdl_error);
  os << ",\"us_per_step_eager\":" << eager_us << ",\"us_per_step_device_io_graph\":" << device_io_us
     << ",\"env_steps_per_s\":" << s.B * 1e6 / graph_us << ",\"state_bytes\":" << state_bytes
     << ",\"sm_mhz\":[" << mhz_before << "," << mhz_after << "]";
  // The floor: read once + write once of the whole recurrent state at the copy bandwidth.
  const double floor_us = 2 * state_bytes / (copy_tbps * 1e12) * 1e6;
  os << ",\"state_floor_us\":" << floor_us << ",\"graph_over_floor\":" << graph_us / floor_us;
  if (pdl_error.empty()) os << ",\"graph_pdl_over_floor\":" << pdl_us / floor_us;
  os << "}";
  return os.str();
}

}  // namespace

std::string bench_rollout_gpu_json(int reps, int only_shape) {
  MAMBARL_USER_CHECK(reps >= 1000, "bench rollout --device cuda: --reps " << reps << " is too few: the medians want 1000 or more steps");
  int dev = 0;
  MAMBARL_CUDA_CHECK(cudaGetDevice(&dev));
  cudaDeviceProp prop{};
  MAMBARL_CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
  const double copy_tbps = copy_bandwidth_tbps();
  std::ostringstream os;
  os << "{\"bench\":\"rollout\",\"device\":\"cuda\",\"gpu\":\"" << prop.name
     << "\",\"sms\":" << prop.multiProcessorCount << ",\"l2_MB\":" << prop.l2CacheSize / 1e6
     << ",\"copy_TBps\":" << copy_tbps << ",\"reps\":" << reps << ",\"steps_per_sample\":" << kGroup
     << ",\"results\":[";
  const int n = static_cast<int>(sizeof(kShapes) / sizeof(kShapes[0]));
  MAMBARL_CHECK(only_shape >= -1 && only_shape < n, "bench: shape index " << only_shape << " not in [-1, " << n << ")");
  bool first = true;
  for (int i = 0; i < n; ++i) {
    if (only_shape >= 0 && i != only_shape) continue;
    for (const bool bf16 : {false, true}) {
      os << (first ? "" : ",") << bench_shape(kShapes[i], reps, copy_tbps, bf16);
      first = false;
    }
  }
  // One Mamba-1 layer of the first shape, kernel by kernel (see bench_kernels_gpu.hpp).
  // A diagnostic: if it fails, the rows above still come out.
  os << "],\"mamba1_layer_kernels\":{\"B\":" << kShapes[0].B << ",\"d_model\":" << kShapes[0].D;
  try {
    const std::string rows = bench_kernels_gpu_json(kShapes[0].B, kShapes[0].D);
    os << ",\"rows\":" << rows << "}}";
  } catch (const std::exception& e) {
    os << ",\"error\":" << json_quote(e.what()) << "}}";
  }
  return os.str();
}

}  // namespace mambarl
