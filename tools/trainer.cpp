#include "tools/trainer.hpp"

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <limits>
#include <map>
#include <mutex>
#include <numeric>
#include <optional>
#include <ostream>
#include <sstream>
#include <thread>

#include "envs/builtin_envs.hpp"
#include "kernels/base/check.hpp"
#include "policy/io/posix_file.hpp"
#include "policy/policy_config.hpp"
#include "tools/actor_watchdog.hpp"
#include "tools/bounded_queue.hpp"
#include "tools/learner_loop.hpp"
#include "tools/memory_estimate.hpp"
#include "tools/metrics_log.hpp"
#include "tools/policy_session.hpp"
#include "tools/stop_signals.hpp"

#if MAMBARL_HAVE_CUDA
#include "envs/gpu_vec_env.hpp"
#include "tools/device_learner.hpp"
#include "tools/device_rollout.hpp"
#endif
#if MAMBARL_HAVE_NCCL
#include "tools/nccl_collective.hpp"
#endif

namespace mambarl {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

uint64_t derive_seed(uint64_t seed, uint64_t stream) {
  uint64_t x = seed ^ (0xA24BAED4963EE407ULL * (stream + 1));
  return splitmix64(x);
}

// The env config of one actor: the experiment's `env:` map with num_envs set
// to that actor's share.
ConfigNode env_share(const Experiment& exp, int num_envs) {
  YAML::Node n = YAML::Clone(exp.root["env"]);
  n["num_envs"] = num_envs;
  return ConfigNode(n, exp.file, "env", exp.override_log);
}

// runtime.overlap_envs resolved for workers of `envs_per_actor` envs: split
// each in two lanes (tools/rollout.hpp)? auto only where the actor step runs
// on a GPU: a CPU actor does its whole step in act_begin, so there is nothing
// to overlap with.
bool overlap_envs(const RuntimeConfig& rt, const ConfigNode& rtn, const std::string& device, int envs_per_actor) {
  if (rt.overlap_envs == "off") return false;
  const bool even = envs_per_actor % 2 == 0;
  if (rt.overlap_envs == "on" && !even)
    rtn.fail("overlap_envs", "'on' splits each actor's envs in two halves, so needs an even number of envs per "
                             "actor (env.num_envs / runtime.num_actors), got " + std::to_string(envs_per_actor));
  return rt.overlap_envs == "on" || (device == "cuda" && even);
}

// The files a run leaves in its out_dir; a checkpoint or metrics file there
// means an earlier run, which only --resume (continue) or --force (replace) may touch.
constexpr const char* kCheckpointFile = "checkpoint.safetensors";
constexpr const char* kRunFiles[] = {kCheckpointFile, "metrics.csv", "metrics.jsonl", "curve.svg", "config.yaml"};

// A vector's elements as bytes and back, for gathering them across ranks.
template <typename T>
std::vector<uint8_t> bytes_of(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  if (!b.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}
template <typename T>
std::vector<T> values_of(const std::vector<uint8_t>& b) {
  std::vector<T> v(b.size() / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), b.data(), v.size() * sizeof(T));
  return v;
}

// Versioned weights the learner publishes and actors copy before a chunk.
struct WeightsBoard {
  std::mutex m;
  std::vector<float> w;
  long long version = 0;
};

// Running state of a training run: what a checkpoint stores besides the
// learner, so that --resume continues where the run stopped.
struct RunState {
  long long update = 0, env_steps = 0, episodes = 0, version = 0, dropped = 0;
  double wall_s = 0, max_return = -INFINITY;
  std::deque<float> window;  // last return_window episode returns
  void add_episodes(const std::vector<float>& returns, int window_size) {
    for (float r : returns) {
      window.push_back(r);
      if (static_cast<int>(window.size()) > window_size) window.pop_front();
      max_return = std::max(max_return, static_cast<double>(r));
    }
    episodes += static_cast<long long>(returns.size());
  }
  double mean_return() const {
    return window.empty() ? NAN : std::accumulate(window.begin(), window.end(), 0.0) / window.size();
  }
};

std::string fmt(double v, int prec = 3) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(prec) << v;
  return os.str();
}

// Every digit a double has, so that it parses back to the same bits: a resumed
// run must continue bit for bit (fixed 9 decimals turned a max return of
// -0.20833334326744... into -0.208333343, and the metrics rows differed).
std::string exact(double v) {
  std::ostringstream os;
  os << std::setprecision(std::numeric_limits<double>::max_digits10) << v;
  return os.str();
}

#if MAMBARL_HAVE_CUDA
// The GPU rollout's learner context (algo.bptt_len > chunk_len) as checkpoint
// tensors, so that a resume continues with the same context bit for bit (CPU
// workers' contexts go through add_worker_states' gather instead).
void save_context(std::vector<ExtraTensor>& extra, const std::string& prefix, std::vector<float> obs,
                  std::vector<uint8_t> starts, std::vector<float> states) {
  extra.push_back(ExtraTensor::f32(prefix + "context_obs", std::move(obs)));
  extra.push_back(ExtraTensor::u8(prefix + "context_starts", std::move(starts)));
  extra.push_back(ExtraTensor::f32(prefix + "context_states", std::move(states)));
}
#endif

// Into `ctx`, already shaped by this run's config (a mismatch is an error naming the tensor).
void load_context(const LoadedCheckpoint& ck, const std::string& prefix, RolloutContext& ctx) {
  ck.tensor(prefix + "context_obs").copy_f32(ctx.obs());
  ck.tensor(prefix + "context_starts").copy_u8(ctx.starts());
  ck.tensor(prefix + "context_states").copy_f32(ctx.states());
}

class Run {
 public:
  Run(const Experiment& exp, const TrainOptions& opts, std::ostream& log)
      : exp_(exp),
        opts_(opts),
        log_(log),
        rt_(exp.runtime),
        al_(exp.algo),
        own_ranks_(opts.ranks ? nullptr : one_process_ranks()),
        ranks_(opts.ranks ? *opts.ranks : *own_ranks_),
        ckpt_path_(checkpoint_file_in(rt_.out_dir)),
        curve_path_((fs::path(rt_.out_dir) / "curve.svg").string()) {
    // Before the first collective: a rank that dies or hangs ends the job.
    ranks_.bound_collectives(CollectiveTimeout(rt_.collective_timeout_s));
  }

  TrainSummary go();

 private:
  void build();
  void prepare_out_dir() const;
  void check_memory(const VecEnv& probe) const;
  bool check_env_backend() const;
  void check_ranks() const;
  const mambarl_collective* learner_collective();
  void build_gpu_envs();
  Rng& shuffle_rng();
  std::vector<double> reward_scaler_state() const;
  std::vector<double> global_reward_scaler_state();
  bool set_reward_scaler_state(const std::vector<double>& s);
  // (mean, var, count): the same on every rank.
  std::vector<double> return_normalizer_state() const;
  bool set_return_normalizer_state(const std::vector<double>& s);
  void add_worker_states(std::vector<ExtraTensor>& extra);
  void save_checkpoint();
#if MAMBARL_HAVE_CUDA
  RolloutContext empty_context() const;  // the learner context's shape for one worker
#endif
  void save_checkpoint_and_curve();
  void restore(const std::string& path);
  void publish_weights();
  // Wall seconds of one update's two phases (metrics columns collect_s, learn_s).
  struct UpdateTimes {
    double collect_s = 0, learn_s = 0;
  };
  std::vector<float> all_episode_returns(const Chunk& c);
  void after_update(const Chunk& c, const UpdateStats& st, double lr, long long lag,
                    const UpdateTimes& times);
  void learn_on(Chunk& chunk, long long lag);
  void run_loop();  // the loop of this run's mode, until done()
  void run_sync();
  void run_async();
#if MAMBARL_HAVE_CUDA
  void run_gpu_envs();
#endif
  [[noreturn]] void fail_stalled(const ActorWatchdog::Stall& stall, const std::atomic<int>& running,
                                 std::vector<std::thread>& threads);
  bool budget_spent() const { return s_.env_steps >= al_.total_env_steps; }
  // Checked between updates by every loop (sync, async, GPU envs): a stop
  // signal (tools/stop_signals.hpp) ends the run as its budget would. Ranks
  // stop together: when any of them would (a signal or a clock of its own).
  bool done() {
    const bool mine = budget_spent() || stop_signal() != 0 ||
                      (opts_.stop_after_s > 0 &&
                       std::chrono::duration<double>(Clock::now() - t0_).count() >= opts_.stop_after_s) ||
                      (rt_.stop_after_updates > 0 && s_.update >= rt_.stop_after_updates);
    return ranks_.size() == 1 ? mine : ranks_.any(mine, "the check whether any rank stops");
  }
  double lr_now() const {
    if (al_.lr_schedule == "constant") return al_.lr;
    const double frac = 1.0 - static_cast<double>(s_.env_steps) / static_cast<double>(al_.total_env_steps);
    return al_.lr * std::max(frac, 0.0);
  }

  const Experiment& exp_;
  const TrainOptions& opts_;
  std::ostream& log_;
  const RuntimeConfig& rt_;
  const AlgoConfig& al_;
  const std::unique_ptr<Ranks> own_ranks_;  // one process, when the caller gave no ranks
  Ranks& ranks_;
#if MAMBARL_HAVE_NCCL
  // Several ranks with GPU learners: their device sums. Declared before the
  // policy (in session_), which holds its collective and is destroyed first.
  std::unique_ptr<NcclCollective> nccl_;
#endif

  std::unique_ptr<PolicySession> session_;
  EnvSpec spec_;
  int num_envs_ = 0, K_ = 1, Bk_ = 0;  // all ranks' envs; actors per rank; envs per actor
  int lanes_ = 1;  // env lanes per worker: 2 with runtime.overlap_envs
  std::vector<std::unique_ptr<RolloutWorker>> workers_;
  std::unique_ptr<LearnerLoop> learner_;
  // env.backend: cuda (one actor): rollouts and learning stay on the GPU;
  // workers_ and learner_ are then empty.
  bool gpu_envs_ = false;
#if MAMBARL_HAVE_CUDA
  std::unique_ptr<DeviceRollout> gpu_rollout_;
  std::unique_ptr<DeviceLearner> gpu_learner_;
  // Async mode: the chunk the learner trains on while the rollout collects
  // the next one into its own (run_gpu_envs).
  std::unique_ptr<DeviceChunk> gpu_learner_chunk_;
#endif
  std::unique_ptr<MetricsLog> metrics_;  // rank 0's only
  WeightsBoard board_;
  RunState s_;
  const std::string ckpt_path_, curve_path_;
  // The experiment as this run resolved it (config.yaml and every checkpoint's
  // "experiment"): fixed once build() has the plugin and the envs.
  std::string resolved_yaml_;
  Clock::time_point t0_;
  double wall_before_ = 0;  // wall time of the run before a resume
  // When the last update's bookkeeping ended: the time from there to the
  // next learner call is that update's collect_s (sync: the rollout; async:
  // waiting for a chunk), which tells an env-bound run from a learner-bound one.
  Clock::time_point last_update_end_;
  size_t queue_high_water_ = 0;  // most chunks ever waiting for the learner (async mode)
};

void Run::prepare_out_dir() const {
  const fs::path dir(rt_.out_dir);
  if (opts_.resume) return;
  std::vector<std::string> found;
  for (const char* f : {kCheckpointFile, "metrics.csv", "metrics.jsonl"})
    if (fs::exists(dir / f)) found.push_back(f);
  if (found.empty()) return;
  if (!opts_.force) {
    std::string list;
    for (const std::string& f : found) list += (list.empty() ? "" : ", ") + f;
    exp_.section("runtime").fail("out_dir", "'" + rt_.out_dir + "' already holds a previous run (" + list +
                                                "); --resume continues it, --force replaces it (or choose "
                                                "another runtime.out_dir)");
  }
  // Only the files a run writes: out_dir may hold the user's own (a sweep's train.log, notes).
  for (const char* f : kRunFiles) fs::remove(dir / f);
  log_ << "--force: removed the previous run's files in " << rt_.out_dir << "\n";
}

// Refuses a config whose buffers cannot fit, before any large one is
// allocated; `probe` is a one-env instance of the run's env type.
void Run::check_memory(const VecEnv& probe) const {
  const ConfigNode pol = exp_.section("policy");
  MemoryInputs in;
  in.num_envs = num_envs_ / ranks_.size();  // this rank's
  in.actors = K_;
  in.sync = rt_.sync;
  in.chunk_len = al_.chunk_len;
  in.bptt_len = al_.bptt_len;
  in.minibatches = al_.minibatches;
  in.obs_dim = spec_.obs_dim;
  in.act_width = static_cast<int>(session_->info.act_width);
  in.state_size = session_->info.state_size;
  in.num_params = session_->info.num_params;
  in.policy_type = session_->info.type ? session_->info.type : "";
  in.d_model = pol.get<int>("d_model", PolicyConfig{}.d_model);  // the plugin has checked them by now
  in.n_layers = pol.get<int>("n_layers", PolicyConfig{}.n_layers);
  in.env_state_bytes = probe.save_state().size();
  in.policy_on_device = session_->device == "cuda";
  in.envs_on_device = gpu_envs_;
  const MemoryEstimate e = estimate_training_memory(in);
  const auto refuse = [&](size_t need, size_t have, const std::vector<std::pair<std::string, size_t>>& parts,
                          const std::string& where) {
    std::string detail;
    for (const auto& [what, n] : parts) detail += (detail.empty() ? "" : ", ") + what + " " + format_bytes(n);
    const std::string lengths = "algo.chunk_len " + std::to_string(al_.chunk_len) +
                                (al_.context_len() > 0 ? " and algo.bptt_len " + std::to_string(al_.bptt_len) : "");
    exp_.section("env").fail("num_envs", std::to_string(num_envs_) + " envs with " + lengths + " need an estimated " +
                                             format_bytes(need) + " of " + where + " memory (" + detail +
                                             "), more than the " + format_bytes(have) +
                                             " available; lower env.num_envs, algo.chunk_len or algo.bptt_len "
                                             "(or raise algo.minibatches)");
  };
  if (const auto have = host_memory_available(); have && e.host > *have)
    refuse(e.host, *have, e.host_parts, "host");
  if (in.policy_on_device)
    if (const auto have = cuda_memory_available(); have && e.device > *have)
      refuse(e.device, *have, e.device_parts, "GPU");
}

void Run::build() {
  if (ranks_.is_root()) {  // the one writer of out_dir
    prepare_out_dir();
    fs::create_directories(rt_.out_dir);
    // Temp files of a run killed mid-write (checkpoint, config, curve) would pile up otherwise.
    if (const int stale = remove_stale_temp_files(rt_.out_dir))
      log_ << "removed " << stale << " temp file(s) left by a killed run in " << rt_.out_dir << "\n";
  }
  session_ = load_plugins(exp_);  // first: plugins may add env types
  // One env first: it validates the env section and gives the spec and an
  // env's state size for the memory check, before B of them are allocated.
  const auto probe = make_vec_env(env_share(exp_, 1));
  spec_ = probe->spec();
  num_envs_ = read_env_head(exp_.section("env")).num_envs;
  check_ranks();
  gpu_envs_ = check_env_backend();
  K_ = rt_.sync ? 1 : rt_.num_actors;
  const ConfigNode rtn = exp_.section("runtime"), aln = exp_.section("algo");
  if (num_envs_ % K_ != 0)
    rtn.fail("num_actors", "must divide env.num_envs (" + std::to_string(num_envs_) + "), got " + std::to_string(K_));
  Bk_ = num_envs_ / K_ / ranks_.size();
  if (Bk_ % al_.minibatches != 0)
    aln.fail("minibatches", "must divide the envs per " + std::string(ranks_.size() > 1 ? "rank" : "actor") +
                                " (" + std::to_string(Bk_) +
                                (ranks_.size() > 1 ? " = env.num_envs " + std::to_string(num_envs_) + " / " +
                                                         std::to_string(ranks_.size()) + " ranks"
                                                   : std::string()) +
                                "), got " + std::to_string(al_.minibatches));
  // (runtime.device: auto resolving to cuda without NCCL is refused by the
  // plugin, whose GPU learner needs a collective with device sums.)
  if (ranks_.size() > 1 && rt_.device == "cuda" && !built_with_nccl())
    rtn.fail("device", "cuda under " + std::to_string(ranks_.size()) +
                           " data-parallel ranks (mpirun) needs NCCL, which the GPU learners sum through, and "
                           "this build of mambarl has none: install NCCL (the CUDA toolkit's, or libnccl-dev) "
                           "and reconfigure with -DMAMBARL_NCCL=ON, or set runtime.device: cpu");
  create_policy(*session_, exp_, spec_, learner_collective());
  if (ranks_.size() > 1) {
    // Every rank's learner must sum through the same transport: on one
    // device for all, never CPU here and GPU there.
    const bool gpu = session_->device != "cpu";
    const char* what = "the check that every rank's learner is on one device kind";
    if (ranks_.any(gpu, what) && ranks_.any(!gpu, what))
      rtn.fail("device", rt_.device + " resolved to " + session_->device + " on rank " +
                             std::to_string(ranks_.rank()) +
                             " but not on every rank: data-parallel ranks need one device kind for all "
                             "(set runtime.device: cpu, or give every rank a usable GPU)");
  }
  if (gpu_envs_ && session_->device != "cuda") {
    // runtime.device auto on a machine it cannot use: the CPU envs go with the CPU policy.
    if (rt_.device != "auto")
      exp_.section("env").fail("backend", "cuda needs the policy on the GPU, but runtime.device: " + rt_.device +
                                              " resolved to the CPU (" + session_->device_note + ")");
    log_ << "env.backend: cuda, but runtime.device: auto chose the CPU: the envs run on the CPU" << std::endl;
    gpu_envs_ = false;
  }
  check_memory(*probe);
  // Building a large batch takes a while: say what is happening.
  constexpr int kLargeBatch = 100000;
  if (num_envs_ >= kLargeBatch)
    log_ << "building " << num_envs_ << " " << spec_.id << " envs (env.num_envs)..." << std::endl;
  if (gpu_envs_) build_gpu_envs();
  // GPU envs have no host lanes to overlap: the whole chunk is one graph.
  // Ranks neither (check_ranks refuses `on`; auto, which GPU actors would
  // turn on, stays off): a rank's envs are one slice of the one-process run's.
  lanes_ = !gpu_envs_ && ranks_.size() == 1 && overlap_envs(rt_, rtn, session_->device, Bk_) ? 2 : 1;
  // A rank's envs are the global envs [first_env, first_env + Bk_) of the
  // one-process run (sync: one actor), seeded and sampled as they are there.
  const uint64_t first_env = static_cast<uint64_t>(ranks_.rank()) * static_cast<uint64_t>(Bk_);
  for (int k = 0; k < (gpu_envs_ ? 0 : K_); ++k) {
    const uint64_t env_seed = derive_seed(rt_.seed, static_cast<uint64_t>(k));
    const uint64_t actor_seed = derive_seed(rt_.seed, 100 + static_cast<uint64_t>(k));
    std::vector<RolloutLane> lanes;
    for (int h = 0; h < lanes_; ++h) {
      // One lane is the worker as it always was; each of two draws its own seed streams.
      const auto seed = [&](uint64_t s) { return lanes_ == 1 ? s : derive_seed(s, static_cast<uint64_t>(h)); };
      auto env = make_vec_env(env_share(exp_, Bk_ / lanes_));
      lanes.push_back(
          {std::move(env),
           session_->policy->create_actor(Bk_ / lanes_, seed(actor_seed), static_cast<int64_t>(first_env)),
           seed(env_seed), first_env});
    }
    workers_.push_back(std::make_unique<RolloutWorker>(std::move(lanes), al_.chunk_len, al_.context_len()));
  }
  if (!gpu_envs_)
    learner_ =
        std::make_unique<LearnerLoop>(*session_->policy, al_, derive_seed(rt_.seed, 7), K_, Bk_, ranks_,
                                      /*even_shares=*/ranks_.size() > 1 && session_->device == "cuda");
  resolved_yaml_ = exp_.resolved_yaml(resolved_env_config(exp_.section("env")),
                                     session_->policy->resolved_config(), session_->device);
  if (ranks_.is_root())
    write_file_atomically((fs::path(rt_.out_dir) / "config.yaml").string(), resolved_yaml_ + "\n");
}

// What data-parallel ranks need from the config, checked before anything is
// built: the synchronous loop (one actor per rank, whose envs are a slice of
// the one-process run's), CPU envs, and env.num_envs split evenly.
void Run::check_ranks() const {
  const int n = ranks_.size();
  if (n == 1) return;
  const std::string under =
      " under " + std::to_string(n) + " data-parallel ranks (mpirun -np " + std::to_string(n) + ")";
  const ConfigNode rt = exp_.section("runtime"), env = exp_.section("env");
  if (!rt_.sync)
    rt.fail("sync", "false" + under + ": ranks run the synchronous loop only (set runtime.sync: true)");
  if (env_backend(env) == "cuda")
    env.fail("backend", "cuda" + under + ": ranks step CPU envs only (set env.backend: cpu)");
  if (rt_.overlap_envs == "on")
    rt.fail("overlap_envs", "on" + under +
                                ": a rank's envs are one slice of the one-process run's; "
                                "set runtime.overlap_envs: off");
  if (num_envs_ % n != 0)
    env.fail("num_envs", std::to_string(num_envs_) + " is not divisible by the " + std::to_string(n) +
                             " ranks (mpirun -np " + std::to_string(n) + ")");
}

// The collective the learner sums through: none for one process; under
// several ranks NCCL when the learner may run on a GPU (runtime.device cuda
// or auto, a build with NCCL, a GPU on every rank), joined before the policy
// is created so that its engines run on this rank's GPU; otherwise the
// ranks' host sums (MPI).
const mambarl_collective* Run::learner_collective() {
#if MAMBARL_HAVE_NCCL
  if (ranks_.size() > 1 && rt_.device != "cpu" &&
      !ranks_.any(!this_process_sees_a_gpu(), "the check whether every rank sees a GPU")) {
    nccl_ = std::make_unique<NcclCollective>(ranks_, rank_gpu(), rt_.collective_timeout_s);
    return nccl_->collective();
  }
#endif
  return ranks_.collective();
}

// env.backend: cuda asks for GPU-resident envs. Everything it needs from the
// config is checked here, before any GPU call, so a wrong config fails fast
// on any machine. Returns whether the envs are to run on the GPU.
bool Run::check_env_backend() const {
  const ConfigNode env = exp_.section("env");
  if (env_backend(env) != "cuda") return false;
  if (rt_.device == "cpu")
    env.fail("backend", "cuda needs the policy on the GPU, but runtime.device is cpu (set runtime.device: cuda)");
  // Async mode runs one rollout graph over all the envs, one chunk ahead of
  // the learner (run_gpu_envs): no actor threads, and every chunk but the
  // first is one update old.
  if (!rt_.sync && rt_.num_actors != 1)
    exp_.section("runtime").fail("num_actors",
                                 std::to_string(rt_.num_actors) +
                                     " actor threads with env.backend: cuda, whose one rollout graph steps every "
                                     "env (set runtime.num_actors: 1)");
  if (!rt_.sync && rt_.max_policy_lag < 1)
    exp_.section("runtime").fail("max_policy_lag",
                                 std::to_string(rt_.max_policy_lag) +
                                     " with env.backend: cuda and runtime.sync: false, where the next chunk is "
                                     "collected while the learner trains on this one, so every chunk after the "
                                     "first is 1 update old and would be dropped (set 1 or more, or runtime.sync: "
                                     "true)");
  if (rt_.overlap_envs == "on")
    exp_.section("runtime").fail("overlap_envs", "on overlaps CPU envs with the actor step; env.backend: cuda "
                                                 "steps the envs inside the rollout graph (use auto or off)");
  const std::string type = env.require<std::string>("type");
  const auto& plugin_envs = session_->registry.envs();
  if (const auto it = plugin_envs.find(type); it != plugin_envs.end())
    env.fail("type", "'" + type + "' is an env of plugin " + it->second.file +
                         " and has no CUDA version (env.backend: cuda); use env.backend: cpu");
#if MAMBARL_HAVE_CUDA
  if (!has_gpu_env(type)) env.fail("type", "'" + type + "' has no CUDA version (env.backend: cuda); use env.backend: cpu");
#endif
  // A build without CUDA resolves runtime.device to the CPU, which build() then reports.
  return true;
}

void Run::build_gpu_envs() {
#if MAMBARL_HAVE_CUDA
  auto env = make_gpu_vec_env(exp_.section("env"));
  auto actor = session_->policy->create_actor(Bk_, derive_seed(rt_.seed, 100));
  gpu_rollout_ = std::make_unique<DeviceRollout>(std::move(env), std::move(actor), derive_seed(rt_.seed, 0),
                                                 al_.chunk_len, al_,
                                                 static_cast<size_t>(session_->info.state_size));
  gpu_learner_ = std::make_unique<DeviceLearner>(*session_->policy, al_, derive_seed(rt_.seed, 7), gpu_rollout_->chunk());
  if (!rt_.sync) {
    const DeviceChunk& c = gpu_rollout_->chunk();
    gpu_learner_chunk_ = std::make_unique<DeviceChunk>(c.T, c.B, c.obs_dim, c.act_width, c.state_size, c.context_T);
  }
#endif
}

Rng& Run::shuffle_rng() {
#if MAMBARL_HAVE_CUDA
  if (gpu_envs_) return gpu_learner_->rng();
#endif
  return learner_->rng();
}

std::vector<double> Run::reward_scaler_state() const {
#if MAMBARL_HAVE_CUDA
  if (gpu_envs_) return gpu_rollout_->reward_scaler_state();
#endif
  return learner_->reward_scaler().state();
}

// The reward scaler as one process would hold it, on rank 0: the statistics
// (the same on every rank) and every rank's running returns in env order.
std::vector<double> Run::global_reward_scaler_state() {
  std::vector<double> s = reward_scaler_state();
  if (ranks_.size() == 1) return s;
  const auto all = ranks_.gather(bytes_of(std::vector<double>(s.begin() + 3, s.end())),
                                 "gathering the reward scaler's returns for the checkpoint");
  s.resize(3);
  for (const auto& b : all) {
    const std::vector<double> returns = values_of<double>(b);
    s.insert(s.end(), returns.begin(), returns.end());
  }
  return s;
}

// Takes the one-process state of global_reward_scaler_state(): a rank keeps
// its envs' running returns.
bool Run::set_reward_scaler_state(const std::vector<double>& global) {
  std::vector<double> s = global;
  if (ranks_.size() > 1) {
    if (global.size() != 3 + static_cast<size_t>(num_envs_)) return false;
    const auto first = global.begin() + 3 + static_cast<std::ptrdiff_t>(ranks_.rank()) * Bk_;
    s.assign(global.begin(), global.begin() + 3);
    s.insert(s.end(), first, first + Bk_);
  }
#if MAMBARL_HAVE_CUDA
  if (gpu_envs_) {
    if (s.size() != 3 + static_cast<size_t>(Bk_)) return false;
    gpu_rollout_->set_reward_scaler_state(s);
    return true;
  }
#endif
  return learner_->reward_scaler().set_state(s);
}

std::vector<double> Run::return_normalizer_state() const {
#if MAMBARL_HAVE_CUDA
  if (gpu_envs_) return gpu_rollout_->return_normalizer_state();
#endif
  return learner_->return_normalizer().state();
}

bool Run::set_return_normalizer_state(const std::vector<double>& s) {
#if MAMBARL_HAVE_CUDA
  if (gpu_envs_) return gpu_rollout_->set_return_normalizer_state(s);
#endif
  return learner_->return_normalizer().set_state(s);
}

void Run::publish_weights() {
  std::lock_guard<std::mutex> lk(board_.m);
  session_->policy->get_weights(board_.w);
  board_.version = s_.version;
}

#if MAMBARL_HAVE_CUDA
RolloutContext Run::empty_context() const {
  return RolloutContext(al_.chunk_len, al_.context_len(), Bk_, spec_.obs_dim,
                        static_cast<size_t>(session_->info.state_size));
}
#endif

void Run::save_checkpoint() {
  std::map<std::string, std::string> meta{
      {"experiment", resolved_yaml_},
      {"runner.update", std::to_string(s_.update)},
      {"runner.env_steps", std::to_string(s_.env_steps)},
      {"runner.episodes", std::to_string(s_.episodes)},
      {"runner.version", std::to_string(s_.version)},
      {"runner.dropped", std::to_string(s_.dropped)},
      {"runner.wall_s", fmt(wall_before_ + std::chrono::duration<double>(Clock::now() - t0_).count(), 6)},
      {"runner.max_return", exact(s_.max_return)},
      {"runner.sync", rt_.sync ? "1" : "0"},
      {"runner.env_lanes", std::to_string(lanes_)},
      {"runner.ranks", std::to_string(ranks_.size())}};
  std::vector<ExtraTensor> extra;
  std::vector<float> window(s_.window.begin(), s_.window.end());
  extra.push_back(ExtraTensor::f32("runner.return_window", window, {static_cast<int64_t>(window.size())}));
  extra.push_back(ExtraTensor::u8("runner.shuffle_rng", shuffle_rng()));
  const std::vector<double> scaler = global_reward_scaler_state();
  const auto* sb = reinterpret_cast<const uint8_t*>(scaler.data());
  extra.push_back(ExtraTensor::u8("runner.reward_scaler", std::vector<uint8_t>(sb, sb + scaler.size() * sizeof(double))));
  extra.push_back(ExtraTensor::u8("runner.return_normalizer", bytes_of(return_normalizer_state())));
  // Env, actor and rollout state: exact only in sync mode, where actors are
  // quiescent between updates (async resume restarts the envs, and an async
  // GPU rollout may be collecting now).
#if MAMBARL_HAVE_CUDA
  if (gpu_envs_ && rt_.sync) {  // the same tensors as a CPU worker 0, read back from the device
    auto& g = *gpu_rollout_;
    std::vector<float> state;
    g.actor().get_state(state);
    std::vector<uint8_t> rng;
    g.actor().get_rng(rng);
    const std::vector<float> obs = g.obs();
    extra.push_back(ExtraTensor::u8("runner.0.env_state", g.env().save_state(g.stream())));
    extra.push_back(ExtraTensor::f32("runner.0.obs", obs, {static_cast<int64_t>(obs.size())}));
    extra.push_back(ExtraTensor::u8("runner.0.starts", g.starts()));
    extra.push_back(ExtraTensor::f32("runner.0.actor_state", state, {static_cast<int64_t>(state.size())}));
    extra.push_back(ExtraTensor::u8("runner.0.actor_rng", rng));
    if (al_.context_len() > 0) save_context(extra, "runner.0.", g.context_obs(), g.context_starts(), g.context_states());
  }
#endif
  if (rt_.sync) add_worker_states(extra);
  // Every rank took part in the gathers above; rank 0 alone writes (atomically).
  if (ranks_.is_root()) session_->policy->save(ckpt_path_, meta, extra);
}

// Each worker's env, actor and rollout state as runner.<w>.*, w numbering the
// workers of all ranks in env order (rank r's worker k is r * K_ + k), so a
// one-process checkpoint and one of N ranks of one worker each name the same
// envs' state alike. Collective: on rank 0, every rank's tensors.
void Run::add_worker_states(std::vector<ExtraTensor>& extra) {
  const char* const what = "gathering every rank's env and actor state for the checkpoint";
  for (size_t k = 0; k < workers_.size(); ++k) {
    auto& w = *workers_[k];
    const auto prefix = [&](size_t r) {
      return "runner." + std::to_string(r * static_cast<size_t>(K_) + k) + ".";
    };
    const auto add_u8 = [&](const std::string& name, const std::vector<uint8_t>& mine) {
      const auto all = ranks_.gather(mine, what);
      for (size_t r = 0; r < all.size(); ++r) extra.push_back(ExtraTensor::u8(prefix(r) + name, all[r]));
    };
    const auto add_f32 = [&](const std::string& name, const std::vector<float>& mine) {
      const auto all = ranks_.gather(bytes_of(mine), what);
      for (size_t r = 0; r < all.size(); ++r) {
        std::vector<float> v = values_of<float>(all[r]);
        const auto n = static_cast<int64_t>(v.size());
        extra.push_back(ExtraTensor::f32(prefix(r) + name, std::move(v), {n}));
      }
    };
    std::vector<float> state;
    w.get_actor_state(state);
    std::vector<uint8_t> rng;
    w.get_actor_rng(rng);
    add_u8("env_state", w.save_env_state());
    add_f32("obs", w.obs());
    add_u8("starts", w.starts());
    add_f32("actor_state", state);
    add_u8("actor_rng", rng);
    if (al_.context_len() > 0) {
      add_f32("context_obs", w.context().obs());
      add_u8("context_starts", w.context().starts());
      add_f32("context_states", w.context().states());
    }
  }
}

// The curve goes with every checkpoint, so a run stopped at any point
// (signal, crash after this) has a picture of what it reached.
void Run::save_checkpoint_and_curve() {
  save_checkpoint();
  if (ranks_.is_root())
    write_learning_curve_svg(curve_path_,
                             spec_.id + " / " + policy_type(exp_.section("policy")),
                             metrics_->curve());
}

void Run::restore(const std::string& path) {
  LoadedCheckpoint ck = session_->policy->load(path);
  const auto num = [&](const std::string& k) -> double {
    auto it = ck.metadata.find(k);
    MAMBARL_CHECK(it != ck.metadata.end(), path << ": checkpoint has no '" << k << "' (not written by `mambarl train`?)");
    size_t used = 0;
    double v = 0;
    try {
      v = std::stod(it->second, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    MAMBARL_CHECK(used == it->second.size() && used > 0,
                  path << ": metadata '" << k << "' is '" << it->second << "', not a number");
    return v;
  };
  s_.update = static_cast<long long>(num("runner.update"));
  s_.env_steps = static_cast<long long>(num("runner.env_steps"));
  s_.episodes = static_cast<long long>(num("runner.episodes"));
  s_.version = static_cast<long long>(num("runner.version"));
  s_.dropped = static_cast<long long>(num("runner.dropped"));
  s_.max_return = num("runner.max_return");
  wall_before_ = num("runner.wall_s");
  const auto& win = ck.tensor("runner.return_window");
  s_.window.assign(win.f32().begin(), win.f32().end());
  ck.tensor("runner.shuffle_rng").to_pod(shuffle_rng());
  // Each rank's envs are its slice of the checkpoint's; another split of
  // them would pair env state with other actors' and learners' columns.
  // (Checkpoints from before data-parallel ranks have one.)
  const int saved_ranks = ck.metadata.count("runner.ranks") ? static_cast<int>(num("runner.ranks")) : 1;
  MAMBARL_USER_CHECK(saved_ranks == ranks_.size(),
                     "cannot resume from " << path << ": it was written by " << saved_ranks
                                           << " rank(s) and this run has " << ranks_.size()
                                           << " (mpirun -np); resume with " << saved_ranks << " rank(s)");
  // The reward scaler holds (mean, var, count) and one running return per env,
  // so it tells how many envs the checkpoint's run had.
  const std::vector<uint8_t>& sb = ck.tensor("runner.reward_scaler").bytes;
  MAMBARL_CHECK(sb.size() % sizeof(double) == 0 && sb.size() >= 3 * sizeof(double),
                path << ": runner.reward_scaler has " << sb.size() << " bytes, not 3 + one double per env");
  std::vector<double> scaler(sb.size() / sizeof(double));
  std::memcpy(scaler.data(), sb.data(), scaler.size() * sizeof(double));
  const size_t saved_envs = scaler.size() - 3;
  const ConfigNode env = exp_.section("env");
  MAMBARL_USER_CHECK(saved_envs == static_cast<size_t>(num_envs_),
                     "cannot resume from " << path << ": the checkpoint has " << saved_envs
                                           << " envs and the config " << num_envs_ << " (env.num_envs"
                                           << (env.has("num_envs") || env.override_of("num_envs")
                                                   ? " at " + env.where("num_envs")
                                                   : std::string(", the default"))
                                           << "); resume with env.num_envs=" << saved_envs
                                           << ", or train without --resume");
  MAMBARL_CHECK(set_reward_scaler_state(scaler),
                path << ": runner.reward_scaler does not fit this run's " << num_envs_ << " envs");
  // Checkpoints from before algo.normalize_returns existed have none: the
  // statistics start afresh.
  if (const ExtraTensor* norm = ck.find("runner.return_normalizer")) {
    const std::vector<uint8_t>& nb = norm->bytes;
    MAMBARL_CHECK(nb.size() == 3 * sizeof(double) && set_return_normalizer_state(values_of<double>(nb)),
                  path << ": runner.return_normalizer has " << nb.size() << " bytes, not 3 doubles");
  }
  // Checkpoints from before overlap_envs existed have one lane.
  const int saved_lanes = ck.metadata.count("runner.env_lanes") ? static_cast<int>(num("runner.env_lanes")) : 1;
  const bool exact = rt_.sync && num("runner.sync") == 1.0 && saved_lanes == lanes_;
#if MAMBARL_HAVE_CUDA
  if (exact && gpu_envs_) {  // env state bytes are the CPU env's; obs is part of them
    auto& g = *gpu_rollout_;
    g.env().load_state(ck.tensor("runner.0.env_state").bytes, g.stream());
    std::vector<uint8_t> starts(static_cast<size_t>(Bk_));
    ck.tensor("runner.0.starts").copy_u8(starts);
    g.set_starts(starts);
    g.actor().set_state(ck.tensor("runner.0.actor_state").f32());
    g.actor().set_rng(ck.tensor("runner.0.actor_rng").bytes);
    if (al_.context_len() > 0) {
      RolloutContext ctx = empty_context();
      load_context(ck, "runner.0.", ctx);
      g.set_context(ctx.obs(), ctx.starts(), ctx.states());
    }
  }
#endif
  if (exact)
    for (size_t k = 0; k < workers_.size(); ++k) {
      auto& w = *workers_[k];
      // add_worker_states' numbering: this rank's worker k among all ranks' workers.
      const std::string p = "runner." + std::to_string(static_cast<size_t>(ranks_.rank() * K_) + k) + ".";
      w.load_env_state(ck.tensor(p + "env_state").bytes);
      ck.tensor(p + "obs").copy_f32(w.obs());
      ck.tensor(p + "starts").copy_u8(w.starts());
      std::vector<float> state = ck.tensor(p + "actor_state").f32();
      w.set_actor_state(state);
      w.set_actor_rng(ck.tensor(p + "actor_rng").bytes);
      if (al_.context_len() > 0) load_context(ck, p, w.context());
    }
  log_ << "resumed from " << path << " at update " << s_.update << ", env_steps " << s_.env_steps
       << (exact ? " (bit-exact: sync mode)"
           : rt_.sync && saved_lanes != lanes_
               ? " (envs restarted: the checkpoint has " + std::to_string(saved_lanes) + " env lane(s) per actor, " +
                     "this run " + std::to_string(lanes_) + ": runtime.overlap_envs)"
               : " (envs restarted: async mode)")
       << "\n";
}

// The returns of the episodes that ended in this chunk on every rank, in the
// order one process records them (step t: env 0, 1, ... of all ranks' envs),
// so the return window and max_return are the one-process run's. A rank's
// chunk lists its episodes in (t, env) order; its done flags say how many
// ended at each t.
std::vector<float> Run::all_episode_returns(const Chunk& c) {
  if (ranks_.size() == 1) return c.episode_returns;
  std::vector<float> mine(static_cast<size_t>(c.T), 0.0f);  // (T) episodes ended at t, then the returns
  for (int t = 0; t < c.T; ++t)
    for (int b = 0; b < c.B; ++b) {
      const size_t i = static_cast<size_t>(t) * c.B + b;
      mine[static_cast<size_t>(t)] += c.terminated[i] || c.truncated[i] ? 1.0f : 0.0f;
    }
  mine.insert(mine.end(), c.episode_returns.begin(), c.episode_returns.end());
  const auto all = ranks_.all_gather(bytes_of(mine), "gathering the chunk's episode returns");
  std::vector<std::vector<float>> per_rank;
  for (const auto& b : all) per_rank.push_back(values_of<float>(b));
  std::vector<size_t> next(per_rank.size(), static_cast<size_t>(c.T));  // each rank's next return
  std::vector<float> out;
  for (int t = 0; t < c.T; ++t)
    for (size_t r = 0; r < per_rank.size(); ++r)
      for (int e = 0; e < static_cast<int>(per_rank[r][static_cast<size_t>(t)]); ++e)
        out.push_back(per_rank[r][next[r]++]);
  return out;
}

void Run::after_update(const Chunk& c, const UpdateStats& st, double lr, long long lag,
                       const UpdateTimes& times) {
  s_.add_episodes(all_episode_returns(c), rt_.return_window);
  ++s_.update;
  const double wall = wall_before_ + std::chrono::duration<double>(Clock::now() - t0_).count();
  const double sps = static_cast<double>(s_.env_steps) / std::max(wall, 1e-9);
  const TrainMetrics& m = st.mean;
  if (metrics_)
    metrics_->write({{"update", static_cast<double>(s_.update)},
                     {"env_steps", static_cast<double>(s_.env_steps)},
                     {"wall_s", wall},
                     {"steps_per_s", sps},
                     {"episodes", static_cast<double>(s_.episodes)},
                     {"mean_return", s_.mean_return()},
                     {"max_return", s_.max_return},
                     {"policy_lag", static_cast<double>(lag)},
                     {"dropped_chunks", static_cast<double>(s_.dropped)},
                     {"lr", lr},
                     {"loss", m.loss},
                     {"pg_loss", m.pg_loss},
                     {"v_loss", m.v_loss},
                     {"entropy", m.entropy},
                     {"approx_kl", m.approx_kl},
                     {"clip_frac", m.clip_frac},
                     {"grad_norm", m.grad_norm},
                     {"skipped_steps", static_cast<double>(st.skipped)},
                     {"collect_s", times.collect_s},
                     {"learn_s", times.learn_s}});
  if (s_.update % rt_.log_every == 0)
    log_ << "update " << s_.update << " | steps " << s_.env_steps << " | " << fmt(sps, 0)
         << " steps/s | episodes " << s_.episodes << " | return mean " << fmt(s_.mean_return(), 2)
         << " max " << fmt(s_.max_return, 2) << " | lag " << lag << " | loss " << fmt(m.loss, 4)
         << " pg " << fmt(m.pg_loss, 4) << " v " << fmt(m.v_loss, 4) << " ent " << fmt(m.entropy, 3)
         << " kl " << fmt(m.approx_kl, 4) << " clip " << fmt(m.clip_frac, 3) << std::endl;
  if (rt_.checkpoint_every > 0 && s_.update % rt_.checkpoint_every == 0) save_checkpoint_and_curve();
}

// One learner update on a chunk, shared by both loops: a non-finite update
// either stops the run (weights untouched, checkpoint intact) or is skipped.
void Run::learn_on(Chunk& chunk, long long lag) {
  const Clock::time_point learn_start = Clock::now();
  const double lr = lr_now();
#if MAMBARL_HAVE_NCCL
  // Its NCCL sums would wait forever for a rank that died or hangs.
  std::optional<NcclCollective::Watch> watch;
  if (nccl_) watch.emplace(*nccl_, "the learner update");
#endif
#if MAMBARL_HAVE_CUDA
  const UpdateStats st =
      gpu_envs_ ? gpu_learner_->learn(rt_.sync ? gpu_rollout_->chunk() : *gpu_learner_chunk_, lr)
                : learner_->learn(chunk, lr);
#else
  const UpdateStats st = learner_->learn(chunk, lr);
#endif
  if (st.skipped > 0) {
    const std::string why = session_->policy->last_skip_reason();
    MAMBARL_CHECK(al_.on_nonfinite != "stop",
                  "update " << s_.update + 1 << ": " << why << "; the weights were not touched. "
                            << "Stopping (algo.on_nonfinite: stop); last good checkpoint: " << ckpt_path_);
    log_ << "update " << s_.update + 1 << ": skipped " << st.skipped << " minibatch step(s): " << why << "\n";
  }
  ++s_.version;
  publish_weights();
  const auto seconds = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
  after_update(chunk, st, lr, lag,
               {seconds(learn_start - last_update_end_), seconds(Clock::now() - learn_start)});
  last_update_end_ = Clock::now();
}

#if MAMBARL_HAVE_CUDA
// env.backend: cuda. Sync mode: collect a chunk, then learn on it. Async
// mode: once a chunk is collected it is copied for the learner and the next
// one is launched on the rollout's stream at once, with the weights of the
// update before, so collecting it overlaps the learner's update (policy lag
// 1; the first chunk's 0). One thread fixes the order of every step, so an
// async run is as reproducible as a sync one; it is another run.
void Run::run_gpu_envs() {
  auto& g = *gpu_rollout_;
  Chunk stats;  // the episodes of each chunk; the chunk itself stays on the device
  bool launched = false;  // the next chunk is on its way
  while (!done()) {
    if (!launched) {
      g.actor().set_weights(board_.w, board_.version);
      g.launch();
    }
    g.finish(stats);
    launched = false;
    s_.env_steps += static_cast<long long>(stats.T) * stats.B;
    if (!rt_.sync) {
      gpu_learner_chunk_->copy_from(g.chunk(), g.stream());
      MAMBARL_CUDA_CHECK(cudaStreamSynchronize(g.stream()));
      if (!budget_spent()) {  // the chunk that spends the budget is the last
        g.actor().set_weights(board_.w, board_.version);
        g.launch();
        launched = true;
      }
    }
    learn_on(stats, s_.version - stats.policy_version);
  }
  if (launched) g.finish(stats);  // stopped early (a signal, a limit): that chunk is not learned on
}
#endif

void Run::run_loop() {
#if MAMBARL_HAVE_CUDA
  if (gpu_envs_) return run_gpu_envs();
#endif
  if (rt_.sync) run_sync();
  else run_async();
}

void Run::run_sync() {
  Chunk c;
  c.allocate(al_.chunk_len, Bk_, spec_.obs_dim, static_cast<int>(session_->info.act_width),
             static_cast<size_t>(session_->info.state_size), al_.context_len());
  auto& w = *workers_[0];
  while (!done()) {
    w.set_weights(board_.w, board_.version);
    w.collect(c);
    s_.env_steps += static_cast<long long>(c.T) * c.B * ranks_.size();
    learn_on(c, 0);
  }
}

void Run::run_async() {
  // Each actor owns two chunks: one it fills while the other waits in the queue.
  const int per_actor = 2;
  std::vector<std::vector<Chunk>> pools(static_cast<size_t>(K_));
  std::vector<std::unique_ptr<BoundedQueue<Chunk*>>> free_q;
  BoundedQueue<Chunk*> full_q(static_cast<size_t>(rt_.queue_size));
  for (int k = 0; k < K_; ++k) {
    auto& pool = pools[static_cast<size_t>(k)];
    pool.resize(per_actor);
    free_q.push_back(std::make_unique<BoundedQueue<Chunk*>>(per_actor));
    for (auto& c : pool) {
      c.allocate(al_.chunk_len, Bk_, spec_.obs_dim, static_cast<int>(session_->info.act_width),
                 static_cast<size_t>(session_->info.state_size), al_.context_len());
      free_q.back()->push(&c);
    }
  }
  std::atomic<bool> failed{false};
  std::string failure;
  std::mutex failure_m;
  ActorWatchdog watchdog(K_, rt_.actor_stall_s);
  std::atomic<int> running{K_};  // actor threads that have not returned yet
  std::vector<std::thread> threads;
  for (int k = 0; k < K_; ++k)
    threads.emplace_back([&, k] {
      try {
        auto& w = *workers_[static_cast<size_t>(k)];
        std::vector<float> local;
        long long have = -1;
        Chunk* c = nullptr;
        while (free_q[static_cast<size_t>(k)]->pop(c)) {
          watchdog.begin_chunk(k);
          c->worker = k;
          {
            std::lock_guard<std::mutex> lk(board_.m);
            if (board_.version != have) local = board_.w, have = board_.version;
          }
          w.set_weights(local, have);
          w.collect(*c);
          watchdog.end_chunk(k);  // a full queue (slow learner) is waiting, not stalling
          if (!full_q.push(c)) break;
        }
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lk(failure_m);
        failure = "actor " + std::to_string(k) + ": " + e.what();
        failed = true;
        full_q.close();
      }
      --running;
    });
  const auto owner = [&](const Chunk* c) {
    for (int k = 0; k < K_; ++k)
      for (const auto& p : pools[static_cast<size_t>(k)])
        if (&p == c) return k;
    return -1;
  };
  const auto stop_actors = [&] {
    full_q.close();
    for (auto& q : free_q) q->close();
  };
  // Polled while waiting for chunks, so a stall is seen even when no chunk comes.
  const auto poll = std::chrono::duration<double>(std::min(rt_.actor_stall_s / 4, 0.5));
  try {
    Chunk* c = nullptr;
    while (!done()) {
      if (const auto stall = watchdog.check()) {
        stop_actors();
        fail_stalled(*stall, running, threads);
      }
      const auto got = full_q.pop_for(c, poll);
      if (got == BoundedQueue<Chunk*>::Pop::closed) break;
      if (got == BoundedQueue<Chunk*>::Pop::timeout) continue;
      s_.env_steps += static_cast<long long>(c->T) * c->B;
      const long long lag = s_.version - c->policy_version;
      if (lag > rt_.max_policy_lag) {
        ++s_.dropped;
      } else {
        learn_on(*c, lag);
      }
      free_q[static_cast<size_t>(owner(c))]->push(c);
    }
  } catch (...) {
    stop_actors();
    for (auto& t : threads)
      if (t.joinable()) t.join();  // fail_stalled() may have joined them already
    throw;
  }
  stop_actors();
  for (auto& t : threads) t.join();
  queue_high_water_ = full_q.high_water();
  MAMBARL_CHECK(!failed, failure);
}

// A stalled actor is inside a plugin's env or policy call that nothing can
// interrupt. The queues are closed, so every other actor returns; if the
// stalled one also returns within a grace period, this is an ordinary Error.
// If not, its thread cannot be joined and the objects it uses cannot be freed
// under it, so the process ends here (exit status 1, like any error) after
// reporting; the last checkpoint on disk is intact.
void Run::fail_stalled(const ActorWatchdog::Stall& stall, const std::atomic<int>& running,
                       std::vector<std::thread>& threads) {
  const double run_s = wall_before_ + std::chrono::duration<double>(stall.since - t0_).count();
  std::ostringstream msg;
  msg << "actor " << stall.actor << " stalled: it has produced no chunk for " << fmt(stall.stalled_s, 1)
      << " s (runtime.actor_stall_s: " << rt_.actor_stall_s << "), busy since run second " << fmt(run_s, 1)
      << ", stuck at its env step " << workers_[static_cast<size_t>(stall.actor)]->env_steps()
      << " (run env_steps " << s_.env_steps << ", update " << s_.update
      << "); stopping. The last checkpoint written (if any) is intact: " << ckpt_path_;
  constexpr auto kGrace = std::chrono::seconds(2);
  const auto deadline = Clock::now() + kGrace;
  while (running > 0 && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  if (running == 0) {
    for (auto& t : threads) t.join();
    MAMBARL_FAIL(msg.str());
  }
  log_.flush();
  std::cerr << "mambarl train: error: " << msg.str() << " (the stalled thread cannot be stopped; exiting)"
            << std::endl;
  std::_Exit(EXIT_FAILURE);
}

TrainSummary Run::go() {
  const std::string resume_from = opts_.resume_from.empty() ? ckpt_path_ : opts_.resume_from;
  // Before build(), which writes config.yaml into out_dir: a mistyped out_dir
  // must not look like a run that started.
  MAMBARL_USER_CHECK(
      !opts_.resume || fs::exists(resume_from),
      "no checkpoint to resume: " << resume_from << " does not exist (train without --resume to start)");
  build();
  t0_ = Clock::now();
  if (opts_.resume) restore(resume_from);
  if (ranks_.is_root())
    metrics_ = std::make_unique<MetricsLog>(
        (fs::path(rt_.out_dir) / (rt_.metrics_format == "csv" ? "metrics.csv" : "metrics.jsonl")).string(),
        rt_.metrics_format, opts_.resume ? s_.update : -1);
  publish_weights();
  last_update_end_ = Clock::now();
  if (!session_->device_note.empty()) log_ << session_->device_note << std::endl;
  log_ << "training " << policy_type(exp_.section("policy")) << " on " << spec_.id
       << ": " << num_envs_ << " envs on the " << (gpu_envs_ ? "GPU" : "CPU") << ", "
       << (ranks_.size() > 1 ? std::to_string(ranks_.size()) + " data-parallel ranks of " +
                                   std::to_string(Bk_) + " envs each, "
                             : std::string())
       << session_->info.num_params << " params, "
       << (rt_.sync   ? std::string("sync")
           : gpu_envs_ ? std::string("async (each chunk collected while the learner trains on the last)")
                       : std::to_string(K_) + " actor threads")
       << ", device "
       << session_->device
       // The plugin runs both roles on the device it was given (plugin/engine_roles.hpp).
       << (session_->device == "cuda" ? " (actors and learner)" : "") << ", dtype " << rt_.dtype
       << ", plugin " << session_->plugin_path << std::endl;
  if (lanes_ > 1)
    log_ << "overlapped envs: each actor's " << Bk_ << " envs in 2 halves, one stepping on the CPU while the "
         << "other's actor step runs (runtime.overlap_envs: " << rt_.overlap_envs << ")" << std::endl;
  run_loop();
  save_checkpoint_and_curve();
  TrainSummary sum;
  // A signal that came after the last update of the budget stopped nothing.
  sum.stopped_by_signal = budget_spent() ? 0 : stop_signal();
  sum.update = s_.update;
  sum.mean_return = s_.mean_return();
  sum.env_steps = s_.env_steps;
  sum.episodes = s_.episodes;
  sum.num_params = session_->info.num_params;
  sum.wall_s = wall_before_ + std::chrono::duration<double>(Clock::now() - t0_).count();
  sum.checkpoint = ckpt_path_;
  sum.metrics = metrics_ ? metrics_->path() : "";
  sum.curve = curve_path_;
  sum.queue_high_water = queue_high_water_;
  sum.queue_capacity = rt_.sync ? 0 : static_cast<size_t>(rt_.queue_size);
  sum.overlap_envs = lanes_ > 1;
  return sum;
}

}  // namespace

std::string checkpoint_file_in(const std::string& run_dir) {
  return (fs::path(run_dir) / kCheckpointFile).string();
}

TrainSummary run_training(const Experiment& exp, const TrainOptions& opts, std::ostream& log) {
  return Run(exp, opts, log).go();
}

}  // namespace mambarl
