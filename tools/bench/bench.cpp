#include "tools/bench/bench.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/base/check.hpp"
#include "policy/cpu_actor.hpp"
#include "policy/cpu_learner.hpp"
#include "policy/policy_config.hpp"
#include "tools/alloc_counter.hpp"
#if defined(MAMBARL_HAVE_CUDA)
#include "tools/bench/bench_rollout_gpu.hpp"
#include "tools/bench/bench_train_gpu.hpp"
#endif
#include "tools/bench/steady_rate.hpp"
#include "tools/experiment.hpp"
#include "tools/ranks.hpp"
#include "tools/svg_plot.hpp"
#include "tools/trainer.hpp"

namespace mambarl {

namespace {

using Clock = std::chrono::steady_clock;
// Each result's fields in the order written (a json object would sort them).
using json = nlohmann::ordered_json;

struct Shape {
  std::string type;
  int B, D, L, T;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

PolicyConfig policy_for(const Shape& s) {
  YAML::Node n;
  n["type"] = s.type;
  n["d_model"] = s.D;
  n["n_layers"] = s.L;
  return PolicyConfig::from_yaml(ConfigNode(n, "<bench>", "policy"));
}

// The first fields of a result: the shape it timed.
json shape_json(const Shape& s) { return {{"policy", s.type}, {"B", s.B}, {"d_model", s.D}, {"n_layers", s.L}}; }

constexpr int kObs = 4, kActions = 2;  // CartPole-sized heads: the mixers dominate

// T=1 actor step: median µs over `reps` steps after warm-up, and heap allocations per step.
json bench_rollout_cpu(const Shape& s, int reps) {
  const HeadSpec head{true, kActions};
  CpuLearner learner(policy_for(s), kObs, head, PpoLossConfig{}, AdamWConfig{}, 1);
  CpuActor actor(learner.shared_model(), s.B, 2);
  actor.set_weights(learner.params().data(), learner.params().size(), 0);
  Rng rng(3, 0);
  std::vector<float> obs(static_cast<size_t>(s.B) * kObs), act(static_cast<size_t>(s.B)),
      logp(static_cast<size_t>(s.B)), val(static_cast<size_t>(s.B));
  std::vector<uint8_t> starts(static_cast<size_t>(s.B), 0);
  for (auto& o : obs) o = static_cast<float>(rng.normal());
  for (int i = 0; i < 20; ++i) actor.act(obs.data(), starts.data(), act.data(), logp.data(), val.data());
  std::vector<double> us;
  us.reserve(static_cast<size_t>(reps));  // the bench's own bookkeeping must not count
  const uint64_t a0 = heap_allocations();
  for (int i = 0; i < reps; ++i) {
    starts[static_cast<size_t>(i % s.B)] = 1;  // a reset somewhere every step, as in a real rollout
    const auto t0 = Clock::now();
    actor.act(obs.data(), starts.data(), act.data(), logp.data(), val.data());
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    starts[static_cast<size_t>(i % s.B)] = 0;
  }
  const double allocs = static_cast<double>(heap_allocations() - a0) / reps;
  json r = shape_json(s);
  r["us_per_step"] = median(us);
  r["env_steps_per_s"] = s.B * 1e6 / median(us);
  r["heap_allocs_per_step"] = heap_allocations_counted() ? json(allocs) : json(nullptr);
  r["reps"] = reps;
  return r;
}

// Chunk forward+backward (model + PPO loss) and the whole learner update.
json bench_train_cpu(const Shape& s, int reps) {
  const HeadSpec head{true, kActions};
  CpuLearner learner(policy_for(s), kObs, head, PpoLossConfig{}, AdamWConfig{}, 1);
  const auto& model = learner.model();
  const int M = s.T * s.B;
  Rng rng(5, 0);
  Mat<float> obs(M, kObs);
  for (Eigen::Index i = 0; i < obs.size(); ++i) obs.data()[i] = static_cast<float>(rng.normal());
  std::vector<uint8_t> starts(static_cast<size_t>(M), 0);
  for (int b = 0; b < s.B; ++b) starts[static_cast<size_t>((b * 7) % s.T) * s.B + b] = 1;
  std::vector<float> actions(static_cast<size_t>(M)), logp(static_cast<size_t>(M)), adv(static_cast<size_t>(M)),
      ret(static_cast<size_t>(M)), state0(static_cast<size_t>(s.B) * model.state_size());
  for (int i = 0; i < M; ++i) {
    actions[static_cast<size_t>(i)] = static_cast<float>(rng.below(kActions));
    logp[static_cast<size_t>(i)] = static_cast<float>(std::log(0.5) + 0.1 * rng.normal());
    adv[static_cast<size_t>(i)] = static_cast<float>(rng.normal());
    ret[static_cast<size_t>(i)] = static_cast<float>(rng.normal());
  }
  for (auto& v : state0) v = static_cast<float>(0.1 * rng.normal());

  auto cache = model.make_cache();
  std::vector<float> grads(model.layout().size()), state;
  Mat<float> head_out, dhead;
  Vec<float> values, dvalues;
  std::vector<double> fwd_ms, fb_ms;
  for (int i = 0; i < reps + 2; ++i) {
    state = state0;
    std::fill(grads.begin(), grads.end(), 0.0f);
    const auto t0 = Clock::now();
    model.forward(learner.params().data(), obs, starts.data(), s.T, s.B, state.data(), cache, head_out, values);
    const auto t1 = Clock::now();
    const PpoLossConfig loss;
    ppo_loss<float>(model.spec().head, loss, head_out, values, nullptr,
                    PpoBatch{actions.data(), logp.data(), adv.data(), ret.data()}, dhead, dvalues, nullptr);
    model.backward(learner.params().data(), cache, dhead, dvalues, loss.vf_trunk_coef, grads.data());
    const auto t2 = Clock::now();
    if (i >= 2) {  // first two are warm-up (cache allocation)
      fwd_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      fb_ms.push_back(std::chrono::duration<double, std::milli>(t2 - t0).count());
    }
  }
  ChunkView cv{s.T, s.B, obs.data(), actions.data(), logp.data(), adv.data(), ret.data(), starts.data(), state0.data()};
  std::vector<double> upd_ms;
  for (int i = 0; i < reps + 1; ++i) {
    const auto t0 = Clock::now();
    learner.train_step(cv, 1e-4);
    if (i >= 1) upd_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  json r = shape_json(s);
  r["T"] = s.T;
  r["forward_ms"] = median(fwd_ms);
  r["forward_backward_ms"] = median(fb_ms);
  r["update_ms"] = median(upd_ms);
  r["params"] = model.layout().size();
  r["reps"] = reps;
  return r;
}

// One row of a run's metrics.csv: env steps and wall seconds after an update, and its two phases.
struct Progress {
  double env_steps = 0, wall_s = 0, collect_s = 0, learn_s = 0;
};

std::vector<Progress> read_progress(const std::filesystem::path& csv) {
  std::ifstream in(csv);
  std::string line;
  MAMBARL_CHECK(std::getline(in, line), "bench e2e: no metrics in " << csv.string());
  std::vector<std::string> header;
  {
    std::istringstream cells(line);
    for (std::string c; std::getline(cells, c, ',');) header.push_back(c);
  }
  const auto col = [&](const std::string& name) {
    const auto it = std::find(header.begin(), header.end(), name);
    MAMBARL_CHECK(it != header.end(), "bench e2e: " << csv.string() << " has no column '" << name << "'");
    return static_cast<size_t>(it - header.begin());
  };
  const size_t steps_col = col("env_steps"), wall_col = col("wall_s"), collect_col = col("collect_s"),
               learn_col = col("learn_s");
  std::vector<Progress> rows;
  while (std::getline(in, line)) {
    std::vector<double> v;
    std::istringstream cells(line);
    for (std::string c; std::getline(cells, c, ',');) v.push_back(std::atof(c.c_str()));
    MAMBARL_CHECK(v.size() == header.size(), "bench e2e: a short row in " << csv.string());
    rows.push_back({v[steps_col], v[wall_col], v[collect_col], v[learn_col]});
  }
  return rows;
}

// One end-to-end measurement: its JSON object, and what the plot needs.
struct E2eResult {
  std::string env, policy, env_backend;
  int num_envs = 0;
  double steady_env_steps_per_s = 0;
  json fields;
};

// Whole runner (actor and learner on `device`, envs on `env_backend`; CPU
// envs overlapped with the actor step as runtime.overlap_envs: auto decides),
// in sync mode or (`sync` false) async, for `updates` updates of chunk_len
// 32. Besides the whole run's rate, the steady state as PufferLib reports it
// (tools/bench/steady_rate.hpp: the slope of env steps over time after the
// first 10% of the updates), and where those updates' time went. Under several data-parallel
// ranks (`mpirun -np N mambarl bench e2e`), num_envs is split over them and
// rank 0 also reports the gradient all-reduce's share of the learner's time;
// the other ranks return an empty json.
E2eResult bench_e2e(const std::string& env, const std::string& type, int num_envs, const std::string& device,
                    const std::string& env_backend, bool sync, int updates, Ranks& ranks) {
  MAMBARL_USER_CHECK(updates >= 3, "bench e2e: --reps " << updates << ": a steady rate needs 3 or more updates");
  const auto dir = std::filesystem::temp_directory_path() /
                   ("mambarl_bench_" + env + "_" + type + "_" + device + "_" + env_backend + "_" +
                    std::to_string(num_envs));
  // The run's folder goes whatever happens below (a failed check included);
  // rank 0 writes it, and removes it.
  struct RemoveOnExit {
    std::filesystem::path p;
    ~RemoveOnExit() {
      std::error_code ec;
      if (!p.empty()) std::filesystem::remove_all(p, ec);
    }
  } cleanup{ranks.is_root() ? dir : std::filesystem::path()};
  constexpr int kChunk = 32;
  std::ostringstream y;
  y << "env: {type: " << env << ", num_envs: " << num_envs << ", backend: " << env_backend << "}\n"
    << "policy: {type: " << type << ", d_model: 64, n_layers: 2}\n"
    << "algo: {total_env_steps: " << static_cast<long long>(updates) * num_envs * kChunk
    << ", chunk_len: " << kChunk << ", epochs: 1, minibatches: 1}\n"
    << "runtime: {out_dir: " << dir.string() << ", device: " << device << ", sync: " << (sync ? "true" : "false")
    << ", log_every: 1000000, checkpoint_every: 0, metrics_format: csv}\n";
  const Experiment exp = parse_experiment(y.str(), "<bench e2e>", {});
  std::ostringstream sink;
  TrainOptions opts;
  opts.force = true;  // the folder is the bench's own: one a killed bench left is replaced
  opts.ranks = &ranks;
  const double gradient_sum_before = ranks.gradient_sum_seconds();
  const TrainSummary s = run_training(exp, opts, sink);
  const double gradient_sum_s = ranks.gradient_sum_seconds() - gradient_sum_before;
  if (!ranks.is_root()) return E2eResult{};
  // A cuda run without a usable GPU falls back to the CPU: not what was asked to be measured.
  const bool on_gpu = sink.str().find(", device cuda (actors and learner),") != std::string::npos;
  MAMBARL_CHECK(device != "cuda" || on_gpu, "bench e2e --device cuda: the run did not train on the GPU:\n"
                                                << sink.str());
  const bool envs_on_gpu = sink.str().find(" envs on the GPU,") != std::string::npos;
  MAMBARL_CHECK(envs_on_gpu == (env_backend == "cuda"),
                "bench e2e: env.backend " << env_backend << " but the envs ran elsewhere:\n" << sink.str());
  const std::vector<Progress> rows = read_progress(dir / "metrics.csv");
  std::vector<double> wall, steps;
  for (const Progress& p : rows) {
    wall.push_back(p.wall_s);
    steps.push_back(p.env_steps);
  }
  const SteadyRate rate = steady_rate(wall, steps);
  E2eResult r{env, type, env_backend, num_envs, rate.per_s, {}};
  // Where the steady updates' time went: the rollout against the learner.
  double collect_s = 0, learn_s = 0;
  for (size_t i = rate.first; i < rows.size(); ++i) {
    collect_s += rows[i].collect_s;
    learn_s += rows[i].learn_s;
  }
  const double steady = static_cast<double>(rows.size() - rate.first);
  double all_learn_s = 0;  // the gradient sums of every update happened inside these
  for (const Progress& p : rows) all_learn_s += p.learn_s;
  r.fields = {{"env", env},
              {"policy", type},
              {"device", device},
              {"env_backend", env_backend},
              {"mode", sync ? "sync" : "async"},
              {"num_envs", num_envs},
              {"d_model", 64},
              {"n_layers", 2},
              {"params", s.num_params},
              {"chunk_len", kChunk},
              {"epochs", 1},
              {"minibatches", 1},
              {"updates", rows.size()},
              {"env_steps", s.env_steps},
              {"wall_s", s.wall_s},
              {"env_steps_per_s", s.env_steps / s.wall_s},
              {"steady_from_update", rate.first + 1},
              {"steady_env_steps_per_s", r.steady_env_steps_per_s},
              {"steady_collect_ms", 1e3 * collect_s / steady},
              {"steady_learn_ms", 1e3 * learn_s / steady},
              {"overlap_envs", s.overlap_envs}};
  if (ranks.size() > 1) {
    r.fields["ranks"] = ranks.size();
    r.fields["gradient_allreduce_ms_per_update"] = 1e3 * gradient_sum_s / static_cast<double>(rows.size());
    r.fields["gradient_allreduce_share_of_learn"] = gradient_sum_s / all_learn_s;
  }
  return r;
}

// Every env x policy at each of `num_envs`: appended to `results`, their
// fields returned as an array (of empty fields on ranks other than 0).
json run_e2e(std::vector<E2eResult>& results, const std::vector<int>& num_envs, const std::string& device,
             const std::string& env_backend, bool sync, int updates, Ranks& ranks) {
  json fields = json::array();
  for (int n : num_envs)
    for (const char* env : {"cartpole", "stateless_cartpole"})
      for (const char* t : {"mamba1", "mamba3"}) {
        results.push_back(bench_e2e(env, t, n, device, env_backend, sync, updates, ranks));
        fields.push_back(results.back().fields);
      }
  return fields;
}

// Steady-state env-steps/s against log10(num_envs), one series per (env, policy, env backend).
void plot_e2e(const std::string& path, const std::vector<E2eResult>& results) {
  std::vector<PlotSeries> series;
  for (const E2eResult& r : results) {
    const std::string name = r.env + " / " + r.policy + " / " + r.env_backend + " envs";
    auto it = std::find_if(series.begin(), series.end(), [&](const PlotSeries& p) { return p.name == name; });
    if (it == series.end()) it = series.insert(series.end(), PlotSeries{name, {}});
    it->points.emplace_back(std::log10(static_cast<double>(r.num_envs)), r.steady_env_steps_per_s);
  }
  write_line_plot_svg(path, "mambarl bench e2e: training throughput", "log10(num_envs)",
                      "env-steps/s (steady state)", series);
}

template <typename F> json results_of(const std::vector<Shape>& shapes, F f) {
  json results = json::array();
  for (const Shape& s : shapes) results.push_back(f(s));
  return results;
}

// A path that is not UTF-8 shows as U+FFFD rather than failing a finished bench.
void print(std::ostream& out, const json& report) {
  out << report.dump(-1, ' ', false, json::error_handler_t::replace) << std::endl;
}

#if defined(MAMBARL_HAVE_CUDA)
// "--shape 32x16384x64x2" -> {T 32, B 16384, D 64, L 2}; empty -> the default shapes.
std::vector<GpuTrainShape> parse_train_shape(const std::string& s) {
  if (s.empty()) return {};
  GpuTrainShape t{};
  char x1 = 0, x2 = 0, x3 = 0;
  std::istringstream in(s);
  in >> t.T >> x1 >> t.B >> x2 >> t.D >> x3 >> t.L;
  MAMBARL_USER_CHECK(
      in && in.peek() == EOF && x1 == 'x' && x2 == 'x' && x3 == 'x' && t.T > 0 && t.B > 0 && t.D > 0 &&
          t.L > 0,
      "bench train: --shape wants TxBxDxL with positive integers (e.g. 32x16384x64x2), got '" << s << "'");
  return {t};
}
#endif

// One bench after its arguments were checked; `out` is where this rank prints
// (a silent stream on ranks other than 0).
int bench_what(const BenchOptions& o, Ranks& ranks, std::ostream& out) {
  const std::string& what = o.what;
  const std::string& device = o.device;
  const int reps = o.reps;
  // Which options apply to which bench, and their values, main.cpp's parser
  // checked; what depends on two of them is checked here.
  MAMBARL_USER_CHECK(o.shape.empty() || device == "cuda", "bench train: --shape is for --device cuda only");
  MAMBARL_USER_CHECK(o.dtype.empty() || device == "cuda",
                     "bench train: --dtype is for --device cuda only (the CPU learner is float32)");
  const std::string env_backend = !o.env_backend.empty() ? o.env_backend : device == "cuda" ? "both" : "cpu";
  MAMBARL_USER_CHECK(device == "cuda" || env_backend == "cpu",
                     "bench e2e: --env-backend " << env_backend << " needs --device cuda (GPU envs feed a GPU actor)");
  const std::string& plot = o.plot;
  const bool sync = !o.async;
  std::vector<E2eResult> e2e;
  if (device == "cuda") {
#if defined(MAMBARL_HAVE_CUDA)
    if (what == "e2e") {
      // Actor and learner on the GPU; CPU envs step on one host thread, GPU
      // envs inside the rollout graph. Built whole before printing:
      // a run that cannot use the GPU fails with no half-written JSON.
      json report = {
          {"bench", "e2e"}, {"device", "cuda"}, {"mode", sync ? "sync" : "async"}, {"env_backend", env_backend}};
      json& results = report["results"] = json::array();
      if (env_backend != "cuda")
        for (json& r : run_e2e(e2e, {1024, 4096, 16384}, "cuda", "cpu", sync, reps ? reps : 12, ranks))
          results.push_back(r);
      if (env_backend != "cpu")
        for (json& r : run_e2e(e2e, {1024, 4096, 16384, 65536}, "cuda", "cuda", sync, reps ? reps : 12, ranks))
          results.push_back(r);
      if (env_backend != "cuda")
        report["cpu_envs_65536"] =
            "left out: in sync mode one host thread steps every CPU env and copies obs and actions through the "
            "GPU each step, so 65536 CPU envs measure that thread, not the runner; GPU-resident envs are the "
            "path for that size";
      std::vector<E2eResult> baseline;
      report["cpu_baseline"] = run_e2e(baseline, {1024}, "cpu", "cpu", sync, 4, ranks);
      if (!plot.empty()) {
        plot_e2e(plot, e2e);
        report["plot"] = plot;
      }
      print(out, report);
      return 0;
    }
    if (what == "rollout") out << bench_rollout_gpu_json(reps ? reps : 1000) << std::endl;
    else
      out << bench_train_gpu_json(reps ? reps : 100, parse_train_shape(o.shape), o.policy, o.dtype) << std::endl;
    return 0;
#else
    MAMBARL_FAIL("bench: this build has no CUDA engines (configure with -DMAMBARL_CUDA=ON where nvcc is present)");
#endif
  }
  json report = {{"bench", what}, {"device", "cpu"}, {"threads", 1}};
  if (what == "rollout") {
    std::vector<Shape> shapes;
    for (const char* t : {"mamba1", "mamba3"})
      for (auto [B, D, L] : {std::tuple{64, 128, 2}, {1, 128, 3}, {64, 128, 3}, {1024, 128, 2}})
        shapes.push_back({t, B, D, L, 1});
    report["results"] = results_of(shapes, [&](const Shape& s) { return bench_rollout_cpu(s, reps ? reps : 300); });
  } else if (what == "train") {
    std::vector<Shape> shapes;
    for (const std::string& t : policy_type_names())
      if (o.policy.empty() || o.policy == t) shapes.push_back({t, 64, 128, 2, 64});
    report["results"] = results_of(shapes, [&](const Shape& s) { return bench_train_cpu(s, reps ? reps : 10); });
  } else {
    report["results"] = run_e2e(e2e, {64}, "cpu", "cpu", sync, reps ? reps : 8, ranks);
    if (!plot.empty() && ranks.is_root()) {
      plot_e2e(plot, e2e);
      report["plot"] = plot;
    }
  }
  print(out, report);
  return 0;
}

}  // namespace

int run_bench(const BenchOptions& o, std::ostream& out) {
  // `mpirun -np N mambarl bench e2e` (CPU) trains as N ranks; rank 0 prints.
  // The other benches time one process.
  MAMBARL_USER_CHECK(launched_ranks() == 1 || (o.what == "e2e" && o.device == "cpu"),
                     "bench " << o.what << (o.device == "cuda" ? " --device cuda" : "")
                              << ": runs in one process; only `bench e2e` on the CPU runs under mpirun");
  const std::unique_ptr<Ranks> ranks = make_ranks();
  std::ostream silent(nullptr);
  return on_every_rank(*ranks, "bench", [&] { return bench_what(o, *ranks, ranks->is_root() ? out : silent); });
}

}  // namespace mambarl
