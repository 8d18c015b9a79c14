#include "tools/bench/bench_soak.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#if defined(MAMBARL_HAVE_CUDA)
#include <cuda_runtime_api.h>
#endif

#include "kernels/base/check.hpp"
#include "policy/policy_config.hpp"  // policy_type
#include "tools/experiment.hpp"
#include "tools/svg_plot.hpp"
#include "tools/trainer.hpp"

namespace mambarl {

namespace {

using Clock = std::chrono::steady_clock;
// The report's fields in the order written (a json object would sort them).
using json = nlohmann::ordered_json;

// Growth allowed after warm-up before the verdict is "fail". Resident memory
// moves by a few MB from allocator caching and page faults on buffers touched
// late; a leak of even one small buffer per update exceeds these within minutes.
constexpr double kMaxGrowthMb = 16.0;
constexpr double kMaxSlopeMbPerMin = 2.0;

const char* kDefaultConfig =
    "env: {type: cartpole, num_envs: 64}\n"
    "policy: {type: mamba1, d_model: 64, n_layers: 2}\n"
    "algo: {chunk_len: 32, epochs: 1, minibatches: 2}\n"
    "runtime: {num_actors: 2, log_every: 1000000, checkpoint_every: 20}\n";

double resident_mb() {
  std::ifstream f("/proc/self/statm");
  long long size = 0, resident = 0;
  f >> size >> resident;
  MAMBARL_CHECK(f, "bench soak: cannot read /proc/self/statm");
  return static_cast<double>(resident) * static_cast<double>(::sysconf(_SC_PAGESIZE)) / (1 << 20);
}

// Device memory in use (all processes), or nullopt without CUDA or a device.
std::optional<double> device_used_mb() {
#if defined(MAMBARL_HAVE_CUDA)
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    cudaGetLastError();  // clear the sticky "no device" error
    return std::nullopt;
  }
  size_t free_b = 0, total_b = 0;
  if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) return std::nullopt;
  return static_cast<double>(total_b - free_b) / (1 << 20);
#else
  return std::nullopt;
#endif
}

struct Sample {
  double t_s;
  double rss_mb;
  std::optional<double> device_mb;
};

struct Growth {
  double slope_mb_per_min = 0, growth_mb = 0;
};

// Least-squares slope and max - min of y over the samples at t >= from_s.
Growth growth_after(const std::vector<std::pair<double, double>>& ty, double from_s) {
  std::vector<std::pair<double, double>> pts;
  for (const auto& p : ty)
    if (p.first >= from_s) pts.push_back(p);
  Growth g;
  if (pts.size() < 2) return g;
  double mt = 0, my = 0;
  for (const auto& [t, y] : pts) mt += t, my += y;
  mt /= static_cast<double>(pts.size());
  my /= static_cast<double>(pts.size());
  double stt = 0, sty = 0, lo = pts[0].second, hi = pts[0].second;
  for (const auto& [t, y] : pts) {
    stt += (t - mt) * (t - mt);
    sty += (t - mt) * (y - my);
    lo = std::min(lo, y), hi = std::max(hi, y);
  }
  g.slope_mb_per_min = stt > 0 ? sty / stt * 60.0 : 0.0;
  g.growth_mb = hi - lo;
  return g;
}

}  // namespace

int run_soak(const SoakOptions& o, std::ostream& out) {
  const std::string& config = o.config;
  const std::string& plot = o.plot;
  const double minutes = o.minutes, sample_s = o.sample_s;
  const auto scratch = std::filesystem::temp_directory_path() / ("mambarl_soak_" + std::to_string(::getpid()));
  // User overrides first (an out_dir of theirs wins over the scratch dir), then what makes it a soak.
  std::vector<std::string> ovs{"runtime.out_dir=" + scratch.string()};
  ovs.insert(ovs.end(), o.overrides.begin(), o.overrides.end());
  ovs.push_back("runtime.sync=false");
  ovs.push_back("algo.total_env_steps=" + std::to_string(1LL << 50));
  const Experiment exp = config.empty() ? parse_experiment(kDefaultConfig, "<soak default>", ovs)
                                        : load_experiment(config, ovs);

  std::vector<Sample> samples;
  std::mutex m;
  std::condition_variable cv;
  bool stop = false;
  const Clock::time_point t0 = Clock::now();
  std::thread sampler([&] {
    std::unique_lock<std::mutex> lk(m);
    for (;;) {
      const double t = std::chrono::duration<double>(Clock::now() - t0).count();
      samples.push_back(Sample{t, resident_mb(), device_used_mb()});
      if (cv.wait_for(lk, std::chrono::duration<double>(sample_s), [&] { return stop; })) break;
    }
  });
  TrainOptions opts;
  opts.stop_after_s = minutes * 60.0;
  std::ostringstream log;
  TrainSummary s;
  try {
    s = run_training(exp, opts, log);
  } catch (...) {
    {
      std::lock_guard<std::mutex> lk(m);
      stop = true;
    }
    cv.notify_all();
    sampler.join();
    throw;
  }
  {
    // No sample after the run: its memory is already freed by now.
    std::lock_guard<std::mutex> lk(m);
    stop = true;
  }
  cv.notify_all();
  sampler.join();
  if (exp.runtime.out_dir == scratch.string()) std::filesystem::remove_all(scratch);  // never a dir of theirs

  const double warmup_s = minutes * 60.0 / 2;
  std::vector<std::pair<double, double>> rss, dev;
  for (const Sample& x : samples) {
    rss.emplace_back(x.t_s, x.rss_mb);
    if (x.device_mb) dev.emplace_back(x.t_s, *x.device_mb);
  }
  const Growth gr = growth_after(rss, warmup_s);
  const bool have_dev = !dev.empty();
  const Growth gd = have_dev ? growth_after(dev, warmup_s) : Growth{};
  const bool queue_ok = s.queue_high_water <= s.queue_capacity;
  const auto ok = [](const Growth& g) { return g.growth_mb <= kMaxGrowthMb && g.slope_mb_per_min <= kMaxSlopeMbPerMin; };
  const bool pass = ok(gr) && (!have_dev || ok(gd)) && queue_ok;

  std::vector<PlotSeries> series{{"resident (MB)", rss}};
  if (have_dev) series.push_back({"device in use (MB)", dev});
  write_line_plot_svg(plot, "soak: " + exp.section("env").get<std::string>("type", "?") + " / " +
                                policy_type(exp.section("policy")) + ", async",
                      "seconds", "memory (MB)", series);

  const auto number_or_null = [](const std::optional<double>& v) { return v ? json(*v) : json(nullptr); };
  json samples_json = json::array();
  for (const Sample& x : samples)
    samples_json.push_back({{"t_s", x.t_s}, {"rss_mb", x.rss_mb}, {"device_mb", number_or_null(x.device_mb)}});
  const json report = {
      {"bench", "soak"},
      {"config", config.empty() ? "<default>" : config},
      {"minutes", minutes},
      {"sample_s", sample_s},
      {"actors", exp.runtime.num_actors},
      {"env_steps", s.env_steps},
      {"wall_s", s.wall_s},
      {"samples", std::move(samples_json)},
      {"warmup_s", warmup_s},
      {"rss_slope_mb_per_min", gr.slope_mb_per_min},
      {"rss_growth_mb", gr.growth_mb},
      {"device_slope_mb_per_min", number_or_null(have_dev ? std::optional(gd.slope_mb_per_min) : std::nullopt)},
      {"device_growth_mb", number_or_null(have_dev ? std::optional(gd.growth_mb) : std::nullopt)},
      {"limits", {{"growth_mb", kMaxGrowthMb}, {"slope_mb_per_min", kMaxSlopeMbPerMin}}},
      {"queue_max", s.queue_high_water},
      {"queue_bound", s.queue_capacity},
      {"plot", plot},
      {"verdict", pass ? "pass" : "fail"},
  };
  // A path that is not UTF-8 is shown with U+FFFD rather than failing a finished soak.
  out << report.dump(-1, ' ', false, json::error_handler_t::replace) << std::endl;
  return pass ? 0 : 1;
}

}  // namespace mambarl
