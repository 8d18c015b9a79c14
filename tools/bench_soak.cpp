#include "tools/bench_soak.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#if defined(MAMBARL_HAVE_CUDA)
#include <cuda_runtime_api.h>
#endif

#include "kernels/check.hpp"
#include "tools/experiment.hpp"
#include "tools/svg_plot.hpp"
#include "tools/trainer.hpp"

namespace mambarl {

namespace {

using Clock = std::chrono::steady_clock;

// Growth allowed after warm-up before the verdict is "fail". Resident memory
// moves by a few MB from allocator caching and page faults on buffers touched
// late; a leak of even one small buffer per update exceeds these within minutes.
constexpr double kMaxGrowthMb = 16.0;
constexpr double kMaxSlopeMbPerMin = 2.0;

const char* kUsage =
    "usage: mambarl bench soak [config.yaml] [--minutes M] [--sample-s S] [--out plot.svg] [key=value ...]\n"
    "  Runs the actor-learner loop in async mode for M minutes (default 10), sampling resident\n"
    "  memory (/proc/self/statm) and, in a CUDA build with a device, device memory in use\n"
    "  (cudaMemGetInfo; else null) every S seconds (default 5). The first half is warm-up; over\n"
    "  the second half it reports the slope (MB/min) and max - min of each, and the most chunks\n"
    "  ever queued for the learner against runtime.queue_size. Prints one JSON object with a\n"
    "  pass/fail verdict (exit status 1 on fail) and writes an SVG plot of memory over time to\n"
    "  --out (default soak.svg). Without a config: CartPole, mamba1 d_model 64 x 2 layers, 64 envs,\n"
    "  2 actor threads. Overrides apply as in `mambarl train`; runtime.sync is forced to false.\n";

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

std::string json_num(const std::optional<double>& v) {
  if (!v) return "null";
  std::ostringstream os;
  os << *v;
  return os.str();
}

std::string json_str(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o + "\"";
}

}  // namespace

int run_soak(int argc, char** argv, std::ostream& out) {
  std::string config, plot = "soak.svg";
  double minutes = 10, sample_s = 5;
  std::vector<std::string> overrides;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    const auto number = [&]() {
      MAMBARL_CHECK(i + 1 < argc, "bench soak: " << a << " needs a value");
      return std::stod(argv[++i]);
    };
    if (a == "--help" || a == "-h") {
      out << kUsage;
      return 0;
    } else if (a == "--minutes") {
      minutes = number();
    } else if (a == "--sample-s") {
      sample_s = number();
    } else if (a == "--out") {
      MAMBARL_CHECK(i + 1 < argc, "bench soak: --out needs a path");
      plot = argv[++i];
    } else if (is_override(a)) {
      overrides.push_back(a);
    } else if (config.empty() && a.rfind("--", 0) != 0) {
      config = a;
    } else {
      MAMBARL_FAIL("bench soak: unexpected argument '" << a << "'");
    }
  }
  MAMBARL_CHECK(minutes > 0 && std::isfinite(minutes), "bench soak: --minutes must be positive");
  MAMBARL_CHECK(sample_s > 0 && std::isfinite(sample_s), "bench soak: --sample-s must be positive");
  const auto scratch = std::filesystem::temp_directory_path() / ("mambarl_soak_" + std::to_string(::getpid()));
  // User overrides first (an out_dir of theirs wins over the scratch dir), then what makes it a soak.
  std::vector<std::string> ovs{"runtime.out_dir=" + scratch.string()};
  ovs.insert(ovs.end(), overrides.begin(), overrides.end());
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
                                exp.section("policy").get<std::string>("type", "mamba1") + ", async",
                      "seconds", "memory (MB)", series);

  out << "{\"bench\":\"soak\",\"config\":" << json_str(config.empty() ? "<default>" : config)
      << ",\"minutes\":" << minutes << ",\"sample_s\":" << sample_s << ",\"actors\":" << exp.runtime.num_actors
      << ",\"env_steps\":" << s.env_steps << ",\"wall_s\":" << s.wall_s << ",\n\"samples\":[";
  for (size_t i = 0; i < samples.size(); ++i)
    out << (i ? ",\n  " : "\n  ") << "{\"t_s\":" << samples[i].t_s << ",\"rss_mb\":" << samples[i].rss_mb
        << ",\"device_mb\":" << json_num(samples[i].device_mb) << "}";
  out << "],\n\"warmup_s\":" << warmup_s << ",\"rss_slope_mb_per_min\":" << gr.slope_mb_per_min
      << ",\"rss_growth_mb\":" << gr.growth_mb
      << ",\"device_slope_mb_per_min\":" << json_num(have_dev ? std::optional<double>(gd.slope_mb_per_min) : std::nullopt)
      << ",\"device_growth_mb\":" << json_num(have_dev ? std::optional<double>(gd.growth_mb) : std::nullopt)
      << ",\"limits\":{\"growth_mb\":" << kMaxGrowthMb << ",\"slope_mb_per_min\":" << kMaxSlopeMbPerMin << "}"
      << ",\"queue_max\":" << s.queue_high_water << ",\"queue_bound\":" << s.queue_capacity
      << ",\"plot\":" << json_str(plot) << ",\"verdict\":\"" << (pass ? "pass" : "fail") << "\"}" << std::endl;
  return pass ? 0 : 1;
}

}  // namespace mambarl
