// The GPU-resident runner path (env.backend: cuda; label gpu): the runner's
// kernels against their CPU twins (GAE, reward scaling, minibatch gather), a
// DeviceRollout chunk against the CPU worker's chunk from the same seeds,
// stop + resume == uninterrupted with GPU envs, and async mode's policy lag
// and reproducibility. Skipped without a CUDA device
// unless MAMBARL_REQUIRE_GPU=1.
#define BOOST_TEST_MODULE gpu_runner
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "envs/gpu_vec_env.hpp"
#include "kernels/device_buffer.cuh"
#include "kernels/gae.cuh"
#include "kernels/gather_columns.cuh"
#include "kernels/return_norm.cuh"
#include "kernels/reward_scale.cuh"
#include "test/gpu_test_util.hpp"
#include "test/train_util.hpp"
#include "tools/device_rollout.hpp"
#include "tools/gae.hpp"
#include "tools/policy_session.hpp"
#include "tools/return_normalizer.hpp"
#include "tools/reward_scaler.hpp"
#include "tools/rollout.hpp"

using namespace mambarl;
using namespace mambarl::test;
namespace fs = std::filesystem;
namespace utf = boost::unit_test;

BOOST_AUTO_TEST_SUITE(gpu_runner, *utf::precondition(gpu_or_required))

namespace {

// Random (T, B) episode flags: terminations, truncations, and both at once.
struct Flags {
  std::vector<uint8_t> term, trunc;
};
Flags random_flags(size_t n, std::mt19937& g) {
  std::uniform_real_distribution<float> u(0.f, 1.f);
  Flags f{std::vector<uint8_t>(n), std::vector<uint8_t>(n)};
  for (size_t i = 0; i < n; ++i) {
    const float x = u(g);
    f.term[i] = x < 0.05f || (x > 0.99f);
    f.trunc[i] = (x >= 0.05f && x < 0.08f) || (x > 0.99f);
  }
  return f;
}

std::vector<float> random_floats(size_t n, std::mt19937& g, float mean, float sd) {
  std::normal_distribution<float> d(mean, sd);
  std::vector<float> v(n);
  for (float& x : v) x = d(g);
  return v;
}

// |a - b| <= tol · max(1, |b|) elementwise; NaN never passes.
template <typename T>
void check_close(const std::vector<T>& a, const std::vector<T>& b, double tol, const char* what) {
  BOOST_REQUIRE_EQUAL(a.size(), b.size());
  size_t bad = 0, first = a.size();
  for (size_t i = 0; i < a.size(); ++i) {
    const double x = static_cast<double>(a[i]), y = static_cast<double>(b[i]);
    if (!(std::abs(x - y) <= tol * std::max(1.0, std::abs(y)))) {
      if (!bad) first = i;
      ++bad;
    }
  }
  BOOST_CHECK_MESSAGE(bad == 0, what << ": " << bad << " of " << a.size() << " differ beyond " << tol
                                     << (bad ? ", first at " + std::to_string(first) + ": " +
                                                   std::to_string(static_cast<double>(a[first])) + " vs " +
                                                   std::to_string(static_cast<double>(b[first]))
                                             : std::string()));
}

}  // namespace

// B = 300 is not a multiple of the block size, so the tail block is exercised.
BOOST_AUTO_TEST_CASE(device_gae_matches_compute_gae) {
  require_gpu();
  std::mt19937 g(3);
  for (const int T : {1, 17}) {
    const int B = 300;
    const size_t n = static_cast<size_t>(T) * B;
    const std::vector<float> r = random_floats(n, g, 0.5f, 1.f), v = random_floats(n, g, 0.f, 2.f),
                             fv = random_floats(n, g, 0.f, 2.f), nv = random_floats(B, g, 0.f, 2.f);
    const Flags f = random_flags(n, g);
    std::vector<float> adv(n), ret(n);
    compute_gae(GaeInputs{T, B, r.data(), v.data(), f.term.data(), f.trunc.data(), fv.data(), nv.data()}, 0.99, 0.95,
                adv.data(), ret.data());
    auto dr = to_device(r), dv = to_device(v), dfv = to_device(fv), dnv = to_device(nv);
    auto dterm = to_device(f.term), dtrunc = to_device(f.trunc);
    DeviceBuffer<float> dadv(n), dret(n);
    cuda::gae(GaeInputs{T, B, dr.data(), dv.data(), dterm.data(), dtrunc.data(), dfv.data(), dnv.data()}, 0.99, 0.95,
              dadv.data(), dret.data(), nullptr);
    // The same double arithmetic in the same order; only contraction into
    // FMAs may differ, far below float rounding of the results.
    check_close(copy_to_host(dadv), adv, 1e-6, "advantages");
    check_close(copy_to_host(dret), ret, 1e-6, "returns");
  }
}

// Three consecutive chunks, so the running statistics and the per-env
// returns carry over as in a run.
BOOST_AUTO_TEST_CASE(device_reward_scaling_matches_reward_scaler) {
  require_gpu();
  std::mt19937 g(5);
  const int T = 16, B = 300;
  const size_t n = static_cast<size_t>(T) * B;
  RewardScaler cpu(0.99, 1, B);
  DeviceBuffer<double> state = to_device(cpu.state());  // (3 + B): mean, var, count, G
  for (int chunk = 0; chunk < 3; ++chunk) {
    BOOST_TEST_CONTEXT("chunk " << chunk) {
      std::vector<float> r = random_floats(n, g, 1.f, 0.5f);
      const Flags f = random_flags(n, g);
      auto dr = to_device(r);
      auto dterm = to_device(f.term), dtrunc = to_device(f.trunc);
      cuda::RewardScaleArgs a;
      a.T = T, a.B = B, a.rewards = dr.data(), a.terminated = dterm.data(), a.truncated = dtrunc.data();
      a.stats = state.data(), a.returns = state.data() + 3;
      cuda::scale_rewards(a, 0.99, nullptr);
      cpu.scale(0, T, B, r.data(), f.term.data(), f.trunc.data());
      // Batch-merged vs one-at-a-time Welford statistics in double differ by
      // ~1e-13 relative, so a scaled reward differs by at most one float ulp
      // (~6e-8 relative); 1e-6 leaves room without hiding a wrong formula
      // (a batch variance off by one count is ~1e-4 off here).
      check_close(copy_to_host(dr), r, 1e-6, "scaled rewards");
      const std::vector<double> dev = copy_to_host(state), ref = cpu.state();
      BOOST_TEST(dev[2] == ref[2]);  // count: exact
      check_close(std::vector<double>(dev.begin(), dev.begin() + 2), std::vector<double>(ref.begin(), ref.begin() + 2),
                  1e-10, "mean, var");
      // G: the same recurrence; only FMA contraction may differ.
      check_close(std::vector<double>(dev.begin() + 3, dev.end()), std::vector<double>(ref.begin() + 3, ref.end()),
                  1e-12, "discounted returns");
    }
  }
}

// Three consecutive chunks, so the running statistics carry over as in a run.
BOOST_AUTO_TEST_CASE(device_return_normalization_matches_return_normalizer) {
  require_gpu();
  std::mt19937 g(11);
  const int T = 16, B = 300;
  const size_t n = static_cast<size_t>(T) * B;
  ReturnNormalizer cpu;
  DeviceBuffer<double> stats = to_device(cpu.state());
  for (int chunk = 0; chunk < 3; ++chunk) {
    BOOST_TEST_CONTEXT("chunk " << chunk) {
      std::vector<float> v = random_floats(n, g, 0.3f, 2.f), ret = random_floats(n, g, 5.f + chunk, 3.f);
      auto dv = to_device(v), dret = to_device(ret);
      cuda::denormalize_values(dv.data(), n, stats.data(), nullptr);
      cpu.denormalize(v.data(), n);
      check_close(copy_to_host(dv), v, 1e-6, "values in reward units");
      cuda::normalize_returns(dret.data(), n, stats.data(), nullptr);
      cpu.normalize(ret.data(), n, T);
      // Two-pass batch statistics in double, summed in another order: ~1e-13
      // relative, so a standardised target differs by about a float ulp.
      check_close(copy_to_host(dret), ret, 1e-5, "standardised returns");
      const std::vector<double> dev = copy_to_host(stats), ref = cpu.state();
      BOOST_TEST(dev[2] == ref[2]);  // count: exact
      check_close(std::vector<double>(dev.begin(), dev.begin() + 2), std::vector<double>(ref.begin(), ref.begin() + 2),
                  1e-10, "mean, var");
    }
  }
}

BOOST_AUTO_TEST_CASE(device_gather_matches_host_gather) {
  require_gpu();
  std::mt19937 g(7);
  const int T = 5, B = 37, Bm = 11, W = 3, S = 29;
  std::vector<int> perm(B);
  for (int i = 0; i < B; ++i) perm[i] = i;
  std::shuffle(perm.begin(), perm.end(), g);
  const std::vector<int> cols(perm.begin(), perm.begin() + Bm);
  const std::vector<float> src = random_floats(static_cast<size_t>(T) * B * W, g, 0.f, 1.f);
  const std::vector<float> states = random_floats(static_cast<size_t>(B) * S, g, 0.f, 1.f);
  const std::vector<uint8_t> flags = random_flags(static_cast<size_t>(T) * B, g).term;
  std::vector<float> want(static_cast<size_t>(T) * Bm * W), want_states(static_cast<size_t>(Bm) * S);
  std::vector<uint8_t> want_flags(static_cast<size_t>(T) * Bm);
  for (int t = 0; t < T; ++t)
    for (int j = 0; j < Bm; ++j) {
      for (int w = 0; w < W; ++w) want[(t * Bm + j) * W + w] = src[(t * B + cols[j]) * W + w];
      want_flags[t * Bm + j] = flags[t * B + cols[j]];
    }
  for (int j = 0; j < Bm; ++j)
    for (int k = 0; k < S; ++k) want_states[j * S + k] = states[cols[j] * S + k];
  auto dcols = to_device(cols);
  auto dsrc = to_device(src), dstates = to_device(states);
  auto dflags = to_device(flags);
  DeviceBuffer<float> dst(want.size()), dst_states(want_states.size());
  DeviceBuffer<uint8_t> dst_flags(want_flags.size());
  cuda::gather_columns(T, B, Bm, W, dcols.data(), dsrc.data(), dst.data(), nullptr);
  cuda::gather_columns(T, B, Bm, 1, dcols.data(), dflags.data(), dst_flags.data(), nullptr);
  cuda::gather_columns(1, B, Bm, S, dcols.data(), dstates.data(), dst_states.data(), nullptr);
  BOOST_TEST(copy_to_host(dst) == want);  // a copy: exact
  BOOST_TEST(copy_to_host(dst_flags) == want_flags);
  BOOST_TEST(copy_to_host(dst_states) == want_states);
}

namespace {

Experiment runner_experiment(const std::string& env, int B, int T, bool normalize_returns) {
  std::ostringstream y;
  y << "env: {" << env << ", num_envs: " << B << "}\n"
    << "policy: {type: mamba1, d_model: 16, n_layers: 1, d_state: 8}\n"
    << "algo: {chunk_len: " << T << ", normalize_rewards: false, normalize_returns: "
    << (normalize_returns ? "true" : "false") << "}\n"
    << "runtime: {device: cuda}\n";
  return parse_experiment(y.str(), "<test_gpu_runner>", {std::string("runtime.plugin=") + MAMBARL_TEST_PLUGIN});
}

// The CPU worker and the GPU rollout of one GPU policy over the same envs
// (env seed 5; actors of seed 11 with the policy's initial weights; one lane,
// the worker without overlap), the worker keeping the learner context that
// exp's algo.bptt_len gives the rollout.
struct TwinRollouts {
  std::unique_ptr<PolicySession> session;  // first: outlives the actors
  int O = 0, W = 0;
  size_t S = 0;
  std::unique_ptr<RolloutWorker> worker;
  std::unique_ptr<DeviceRollout> rollout;
};

TwinRollouts make_twin_rollouts(const Experiment& exp, int B, int T) {
  TwinRollouts t;
  t.session = load_plugins(exp);
  auto cpu_env = make_vec_env(exp.section("env"));
  create_policy(*t.session, exp, cpu_env->spec());
  BOOST_REQUIRE(t.session->device == "cuda");
  t.O = cpu_env->spec().obs_dim;
  t.W = static_cast<int>(t.session->info.act_width);
  t.S = static_cast<size_t>(t.session->info.state_size);
  std::vector<float> weights;
  t.session->policy->get_weights(weights);
  auto actor_cpu_env = t.session->policy->create_actor(B, 11), actor_gpu_env = t.session->policy->create_actor(B, 11);
  actor_cpu_env->set_weights(weights, 0);
  actor_gpu_env->set_weights(weights, 0);
  std::vector<RolloutLane> lanes;
  lanes.push_back({std::move(cpu_env), std::move(actor_cpu_env), 5});
  t.worker = std::make_unique<RolloutWorker>(std::move(lanes), T, exp.algo.context_len());
  t.rollout =
      std::make_unique<DeviceRollout>(make_gpu_vec_env(exp.section("env")), std::move(actor_gpu_env), 5, T, exp.algo, t.S);
  return t;
}

// The first chunk of a GPU-env rollout is the CPU worker's chunk from the
// same env seed, actor seed and weights (both actors on the GPU): the same
// actions, rewards and flags, observations within float rounding of the
// env's dynamics, and the device GAE equal to compute_gae on that chunk
// (with normalize_returns, the value targets standardised as
// ReturnNormalizer does). Returns the chunk's truncation flags.
std::vector<uint8_t> check_gpu_env_chunk(const std::string& env, int B, int T, bool normalize_returns = false) {
  const Experiment exp = runner_experiment(env, B, T, normalize_returns);
  TwinRollouts twins = make_twin_rollouts(exp, B, T);
  Chunk c;
  c.allocate(T, B, twins.O, twins.W, twins.S);
  twins.worker->collect(c);
  Chunk stats;
  twins.rollout->collect(stats);
  const DeviceChunk& d = twins.rollout->chunk();

  // Cartpole's float dynamics on the device may round differently (FMA
  // contraction) by ~1e-7 per step; 32 steps stay far below 1e-5.
  check_close(copy_to_host(d.obs), c.obs, 1e-5, "obs");
  BOOST_TEST(copy_to_host(d.actions) == c.actions);
  BOOST_TEST(copy_to_host(d.rewards) == c.rewards);
  BOOST_TEST(copy_to_host(d.terminated) == c.terminated);
  BOOST_TEST(copy_to_host(d.truncated) == c.truncated);
  BOOST_TEST(copy_to_host(d.starts) == c.starts);
  // The same engine on inputs within 1e-5: outputs within the GPU actor's own f32 tolerance.
  check_close(copy_to_host(d.logp), c.logp, 1e-4, "logp");
  check_close(copy_to_host(d.values), c.values, 1e-4, "values");
  check_close(copy_to_host(d.final_values), c.final_values, 1e-4, "final values");
  check_close(copy_to_host(d.next_values), c.next_values, 1e-4, "next values");
  check_close(copy_to_host(d.initial_state), c.initial_state, 0.0, "initial state");  // zeros at the start
  BOOST_TEST(stats.episode_returns == c.episode_returns);
  BOOST_TEST(stats.episode_lengths == c.episode_lengths);
  BOOST_TEST(!c.episode_returns.empty());  // random policies end episodes within these chunks
  BOOST_TEST(stats.T * stats.B == T * B);
  std::vector<float> adv(c.logp.size()), ret(c.logp.size());
  compute_gae(GaeInputs{T, B, c.rewards.data(), c.values.data(), c.terminated.data(), c.truncated.data(),
                        c.final_values.data(), c.next_values.data()},
              exp.algo.gamma, exp.algo.gae_lambda, adv.data(), ret.data());
  // The first chunk's values are read back through the initial statistics
  // (mean 0, var 1): unchanged, so GAE above needs no denormalisation.
  if (normalize_returns) ReturnNormalizer().normalize(ret.data(), ret.size(), T);
  check_close(copy_to_host(d.advantages), adv, 1e-3, "advantages");  // sums of ~T values within 1e-4 each
  check_close(copy_to_host(d.returns), ret, 1e-3, "returns");
  return c.truncated;
}

}  // namespace

BOOST_AUTO_TEST_CASE(gpu_env_chunk_matches_cpu_env_chunk) {
  require_gpu();
  check_gpu_env_chunk("type: cartpole", 256, 16);
}

BOOST_AUTO_TEST_CASE(gpu_env_chunk_with_return_normalization_matches_cpu_env_chunk) {
  require_gpu();
  check_gpu_env_chunk("type: cartpole", 256, 16, /*normalize_returns=*/true);
}

// TMaze of length 1 truncates at 8 steps: no env can in steps 0-6 and many do
// at step 7, so the chunk graph's truncation peek is both skipped (its IF
// node false) and run (masked to the truncated envs), and the bootstrap
// values still equal the CPU worker's.
BOOST_AUTO_TEST_CASE(gpu_env_chunk_with_truncations_matches_cpu_env_chunk) {
  require_gpu();
  const int B = 256, T = 32;
  const std::vector<uint8_t> trunc = check_gpu_env_chunk("type: tmaze, length: 1", B, T);
  const auto truncated_at = [&](int t) {
    return std::any_of(trunc.begin() + t * B, trunc.begin() + (t + 1) * B, [](uint8_t f) { return f != 0; });
  };
  BOOST_TEST(!truncated_at(0));
  BOOST_TEST(truncated_at(7));
}

// A short training run with GPU envs, stopped after 3 updates and resumed, is
// bit for bit the run that never stopped (env state, actor state and Rng,
// episode_start flags, the device reward scaler, the return normaliser and
// the shuffle Rng all go through the checkpoint); a checkpoint of a one-lane
// CPU-env run continues with GPU envs (the same env-state bytes and
// reward-scaler and return-normaliser layouts).
BOOST_AUTO_TEST_CASE(gpu_env_training_resumes_bit_exactly) {
  require_gpu();
  const std::vector<std::string> budget = {"env.backend=cuda",        "env.num_envs=256",
                                           "algo.total_env_steps=49152", "runtime.checkpoint_every=0",
                                           "runtime.device=cuda",     "algo.normalize_returns=true"};
  const auto whole = out_dir("gpu_env_whole"), split = out_dir("gpu_env_split"), from_cpu = out_dir("cpu_env_to_gpu");
  std::string log;
  const TrainSummary s = train("cartpole_mamba1", whole, budget, false, &log);
  BOOST_TEST_MESSAGE(log);
  BOOST_TEST(log.find("256 envs on the GPU, ") != std::string::npos);
  BOOST_TEST(s.env_steps == 49152);
  BOOST_TEST(std::isfinite(s.mean_return));

  auto first = budget;
  first.push_back("runtime.stop_after_updates=3");
  const TrainSummary s1 = train("cartpole_mamba1", split, first);
  BOOST_TEST(s1.env_steps == 3 * 256 * 32);
  const TrainSummary s2 = train("cartpole_mamba1", split, budget, /*resume=*/true, &log);
  BOOST_TEST(log.find("(bit-exact: sync mode)") != std::string::npos);
  BOOST_TEST(s2.env_steps == s.env_steps);
  BOOST_TEST(learner_bytes(whole / "checkpoint.safetensors") == learner_bytes(split / "checkpoint.safetensors"));
  BOOST_TEST(metrics_without_timing(whole / "metrics.csv") == metrics_without_timing(split / "metrics.csv"));

  // One lane: a two-lane (overlap_envs) checkpoint holds two env states and restarts the envs.
  train("cartpole_mamba1", from_cpu,
        {"env.num_envs=256", "algo.total_env_steps=49152", "runtime.checkpoint_every=0", "runtime.device=cuda",
         "runtime.overlap_envs=off", "runtime.stop_after_updates=3", "algo.normalize_returns=true"});
  const TrainSummary s3 = train("cartpole_mamba1", from_cpu, budget, /*resume=*/true, &log);
  BOOST_TEST(log.find("256 envs on the GPU, ") != std::string::npos);
  BOOST_TEST(log.find("(bit-exact: sync mode)") != std::string::npos);
  BOOST_TEST(s3.env_steps == s.env_steps);
  BOOST_TEST(std::isfinite(s3.mean_return));
  for (const auto& dir : {whole, split, from_cpu}) fs::remove_all(dir);
}

// algo.bptt_len > chunk_len with GPU envs: the device window's context
// (obs, starts, the start state of its oldest chunk) is the CPU worker's
// after the same chunks, and a run stopped and resumed is the run that never
// stopped (the context goes through the checkpoint); a CPU-env checkpoint
// with context continues with GPU envs.
BOOST_AUTO_TEST_CASE(gpu_env_learner_context_matches_cpu_and_resumes_bit_exactly) {
  require_gpu();
  const int B = 64, T = 8, K = 2;
  const Experiment exp = parse_experiment("env: {type: tmaze, length: 2, num_envs: 64}\npolicy: {type: mamba1, d_model: 16}\n"
                                          "algo: {chunk_len: 8, bptt_len: 24}\nruntime: {device: cuda}\n",
                                          "<test_gpu_runner>", {std::string("runtime.plugin=") + MAMBARL_TEST_PLUGIN});
  TwinRollouts twins = make_twin_rollouts(exp, B, T);
  Chunk c, stats;
  c.allocate(T, B, twins.O, twins.W, twins.S, K * T);
  for (int k = 0; k < 4; ++k) {
    twins.worker->collect(c);
    twins.rollout->collect(stats);
  }
  const DeviceChunk& d = twins.rollout->chunk();
  const int O = twins.O;
  const size_t S = twins.S;
  BOOST_TEST(d.context_T == K * T);
  const std::vector<float> window = copy_to_host(d.obs);
  const std::vector<uint8_t> starts = copy_to_host(d.starts);
  const size_t ctx = static_cast<size_t>(K * T) * B;
  check_close(std::vector<float>(window.begin(), window.begin() + static_cast<long>(ctx * O)), c.context_obs, 1e-5,
              "context obs");
  check_close(std::vector<float>(window.begin() + static_cast<long>(ctx * O), window.end()), c.obs, 1e-5, "obs");
  BOOST_TEST(std::vector<uint8_t>(starts.begin(), starts.begin() + static_cast<long>(ctx)) == c.context_starts);
  const std::vector<float> states = copy_to_host(d.initial_state);
  check_close(std::vector<float>(states.begin(), states.begin() + static_cast<long>(B * S)), c.initial_state, 1e-4,
              "context start state");

  const std::vector<std::string> budget = {"env.backend=cuda", "env.num_envs=256", "algo.total_env_steps=49152",
                                           "runtime.checkpoint_every=0", "runtime.device=cuda", "algo.bptt_len=96"};
  const auto whole = out_dir("gpu_ctx_whole"), split = out_dir("gpu_ctx_split"), from_cpu = out_dir("gpu_ctx_cpu");
  std::string log;
  train("cartpole_mamba1", whole, budget);
  auto first = budget;
  first.push_back("runtime.stop_after_updates=3");
  train("cartpole_mamba1", split, first);
  train("cartpole_mamba1", split, budget, /*resume=*/true, &log);
  BOOST_TEST(log.find("(bit-exact: sync mode)") != std::string::npos);
  BOOST_TEST(learner_bytes(whole / "checkpoint.safetensors") == learner_bytes(split / "checkpoint.safetensors"));
  BOOST_TEST(metrics_without_timing(whole / "metrics.csv") == metrics_without_timing(split / "metrics.csv"));
  train("cartpole_mamba1", from_cpu,
        {"env.num_envs=256", "algo.total_env_steps=49152", "runtime.checkpoint_every=0", "runtime.device=cuda",
         "runtime.overlap_envs=off", "runtime.stop_after_updates=3", "algo.bptt_len=96"});
  const TrainSummary s3 = train("cartpole_mamba1", from_cpu, budget, /*resume=*/true, &log);
  BOOST_TEST(log.find("(bit-exact: sync mode)") != std::string::npos);
  BOOST_TEST(s3.env_steps == 49152);
  for (const auto& dir : {whole, split, from_cpu}) fs::remove_all(dir);
}

// runtime.sync: false with GPU envs: each chunk is collected while the
// learner trains on the last one. The first update is the sync run's (the
// same chunk and weights); every later one trains on a chunk exactly one
// update old (metrics' policy_lag); the run reproduces bit for bit from its
// seed (one host thread orders every launch); a run stopped after 3 updates
// has counted 3 chunks (the one in flight is dropped), and resumes with its
// envs restarted, as async resumes do, to the same budget.
BOOST_AUTO_TEST_CASE(gpu_env_async_training_lags_one_update_and_reproduces) {
  require_gpu();
  const std::vector<std::string> sync = {"env.backend=cuda", "env.num_envs=256", "algo.total_env_steps=49152",
                                         "runtime.checkpoint_every=2", "runtime.device=cuda"};
  std::vector<std::string> async = sync;
  async.push_back("runtime.sync=false");
  const auto sync_dir = out_dir("gpu_async_sync"), one = out_dir("gpu_async_one"), two = out_dir("gpu_async_two"),
             split = out_dir("gpu_async_split");
  train("cartpole_mamba1", sync_dir, sync);
  std::string log;
  const TrainSummary s = train("cartpole_mamba1", one, async, false, &log);
  BOOST_TEST_MESSAGE(log);
  BOOST_TEST(log.find("256 envs on the GPU, ") != std::string::npos);
  BOOST_TEST(log.find("async (each chunk collected while the learner trains on the last)") != std::string::npos);
  BOOST_TEST(s.env_steps == 49152);  // 6 updates of 256 x 32
  BOOST_TEST(std::isfinite(s.mean_return));

  const std::vector<double> lag = metrics_column(one / "metrics.csv", "policy_lag");
  BOOST_REQUIRE_EQUAL(lag.size(), 6u);
  BOOST_TEST(lag[0] == 0.0);
  for (size_t u = 1; u < lag.size(); ++u) BOOST_TEST(lag[u] == 1.0, "update " << u + 1);
  BOOST_TEST(metrics_column(one / "metrics.csv", "dropped_chunks") == std::vector<double>(6, 0.0),
             boost::test_tools::per_element());
  const auto first_row = [](const fs::path& dir) {
    std::istringstream in(metrics_without_timing(dir / "metrics.csv"));
    std::string header, row;
    std::getline(in, header);
    std::getline(in, row);
    return row;
  };
  BOOST_TEST(first_row(one) == first_row(sync_dir));
  BOOST_TEST(metrics_without_timing(one / "metrics.csv") != metrics_without_timing(sync_dir / "metrics.csv"));

  train("cartpole_mamba1", two, async);
  BOOST_TEST(metrics_without_timing(one / "metrics.csv") == metrics_without_timing(two / "metrics.csv"));
  BOOST_TEST(learner_bytes(one / "checkpoint.safetensors") == learner_bytes(two / "checkpoint.safetensors"));

  auto first = async;
  first.push_back("runtime.stop_after_updates=3");
  BOOST_TEST(train("cartpole_mamba1", split, first).env_steps == 3 * 256 * 32);
  const TrainSummary resumed = train("cartpole_mamba1", split, async, /*resume=*/true, &log);
  BOOST_TEST(log.find("(envs restarted: async mode)") != std::string::npos, log);
  BOOST_TEST(resumed.env_steps == 49152);
  BOOST_TEST(std::isfinite(resumed.mean_return));
  for (const auto& dir : {sync_dir, one, two, split}) fs::remove_all(dir);
}

BOOST_AUTO_TEST_SUITE_END()
