// Double-buffered rollouts (runtime.overlap_envs, tools/rollout.hpp) with CPU
// actors, whose act_begin does the whole step: the ordering of the pipeline
// is the same as on a GPU, so what it records and how the runner uses it are
// tested here. A worker of two lanes equals two one-lane workers column block
// by column block and resumes from its concatenated state; a training run
// with overlap on is deterministic, resumes bit-exactly, and runs in async
// mode; `on` with an odd number of envs per actor is a config error naming
// the key and the value; a checkpoint of another lane count restarts the envs.
#define BOOST_TEST_MODULE rollout
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "policy/io/safetensors.hpp"
#include "test/rollout_util.hpp"
#include "test/train_util.hpp"
#include "tools/experiment.hpp"
#include "tools/policy_session.hpp"
#include "tools/rollout.hpp"

using namespace mambarl;
using namespace mambarl::test;
namespace fs = std::filesystem;

namespace {

// A T-maze of length 2 is truncated after 12 steps, so chunks of 16 steps
// also exercise the truncation bootstrap (peek_values between act_end and the
// next act_begin).
const std::string kEnv = "{type: tmaze, length: 2}";

std::unique_ptr<PolicySession> cpu_policy(const std::string& policy_yaml) {
  const Experiment exp = parse_experiment("env: " + kEnv + "\npolicy: " + policy_yaml + "\n", "<test_rollout>",
                                          {std::string("runtime.plugin=") + MAMBARL_TEST_PLUGIN});
  auto session = load_plugins(exp);
  create_policy(*session, exp, make_envs(kEnv, 1)->spec());
  return session;
}

const char* const kPolicies[] = {"{type: mamba1, d_model: 8, n_layers: 1, d_state: 4}",
                                 "{type: mamba3, d_model: 8, n_layers: 1, d_state: 4, headdim: 4}"};

}  // namespace

BOOST_AUTO_TEST_CASE(two_lanes_fill_the_columns_of_two_one_lane_workers) {
  for (const char* policy : kPolicies)
    BOOST_TEST_CONTEXT(policy) {
      auto session = cpu_policy(policy);
      check_two_lanes_match_two_workers(*session->policy, kEnv, 6, 16, 3);
    }
}

// What the runner's checkpoint stores of a two-lane worker (obs, starts and
// the concatenated env, actor-state and Rng bytes) continues it exactly in
// a worker built with other seeds.
BOOST_AUTO_TEST_CASE(a_two_lane_worker_continues_from_its_concatenated_state) {
  auto session = cpu_policy(kPolicies[0]);
  PolicyHandle& policy = *session->policy;
  const auto worker = [&](uint64_t seed) {
    std::vector<RolloutLane> lanes;
    for (uint64_t l = 0; l < 2; ++l) lanes.push_back(make_lane(policy, kEnv, 4, seed + l, seed + 10 + l));
    return std::make_unique<RolloutWorker>(std::move(lanes));
  };
  auto a = worker(1), b = worker(100);
  std::vector<float> w;
  policy.get_weights(w);
  const mambarl_policy_info& info = policy.info();
  const int O = make_envs(kEnv, 1)->spec().obs_dim;
  Chunk ca, cb;
  for (Chunk* c : {&ca, &cb}) c->allocate(16, 8, O, static_cast<int>(info.act_width), static_cast<size_t>(info.state_size));
  a->set_weights(w, 0);
  b->set_weights(w, 0);
  a->collect(ca);  // mid-episode state, not the fresh one

  std::vector<float> state;
  std::vector<uint8_t> rng;
  a->get_actor_state(state);
  a->get_actor_rng(rng);
  b->load_env_state(a->save_env_state());
  b->set_actor_state(state);
  b->set_actor_rng(rng);
  b->obs() = a->obs();
  b->starts() = a->starts();
  a->collect(ca);
  b->collect(cb);
  BOOST_TEST(ca.obs == cb.obs);
  BOOST_TEST(ca.actions == cb.actions);
  BOOST_TEST(ca.logp == cb.logp);
  BOOST_TEST(ca.rewards == cb.rewards);
  BOOST_TEST(ca.final_values == cb.final_values);
  BOOST_TEST(ca.initial_state == cb.initial_state);
  BOOST_TEST(ca.next_values == cb.next_values);
  // A state that does not split into the two lanes is refused, naming it.
  std::vector<float> odd(state.size() + 1, 0.0f);
  BOOST_CHECK_EXCEPTION(b->set_actor_state(odd), Error, [](const Error& e) {
    return std::string(e.what()).find("actor state: ") != std::string::npos;
  });
}

// algo.bptt_len = 3 x chunk_len: each chunk carries the previous two chunks'
// obs and episode_start flags as context, and the actor state when the
// older of the two began; zeros before a run's first chunks.
BOOST_AUTO_TEST_CASE(chunks_carry_the_previous_chunks_as_learner_context) {
  auto session = cpu_policy(kPolicies[0]);
  PolicyHandle& policy = *session->policy;
  const int T = 5, B = 4, K = 2;
  std::vector<RolloutLane> lanes;
  lanes.push_back(make_lane(policy, kEnv, B, 3, 4));
  RolloutWorker w(std::move(lanes), T, K * T);
  std::vector<float> weights;
  policy.get_weights(weights);
  w.set_weights(weights, 0);
  const mambarl_policy_info& info = policy.info();
  const int O = make_envs(kEnv, 1)->spec().obs_dim;
  const size_t S = static_cast<size_t>(info.state_size), rows = static_cast<size_t>(T) * B;
  std::vector<Chunk> chunks(5);
  std::vector<std::vector<float>> start_states;
  for (Chunk& c : chunks) {
    c.allocate(T, B, O, static_cast<int>(info.act_width), S, K * T);
    std::vector<float> s;
    w.get_actor_state(s);
    start_states.push_back(s);
    w.collect(c);
  }
  for (size_t k = 0; k < chunks.size(); ++k)
    BOOST_TEST_CONTEXT("chunk " << k) {
      const Chunk& c = chunks[k];
      for (int j = 0; j < K; ++j) {  // context block j is chunk k - K + j
        const long prev = static_cast<long>(k) - K + j;
        const auto obs = c.context_obs.begin() + static_cast<long>(j * rows * O);
        const auto starts = c.context_starts.begin() + static_cast<long>(j * rows);
        if (prev < 0) {
          BOOST_TEST(std::all_of(obs, obs + static_cast<long>(rows * O), [](float v) { return v == 0.0f; }));
          BOOST_TEST(std::all_of(starts, starts + static_cast<long>(rows), [](uint8_t v) { return v == 0; }));
        } else {
          BOOST_TEST(std::equal(obs, obs + static_cast<long>(rows * O), chunks[static_cast<size_t>(prev)].obs.begin()));
          BOOST_TEST(std::equal(starts, starts + static_cast<long>(rows), chunks[static_cast<size_t>(prev)].starts.begin()));
        }
      }
      const long first = static_cast<long>(k) - K;
      BOOST_TEST(c.initial_state == (first < 0 ? std::vector<float>(B * S, 0.0f) : start_states[static_cast<size_t>(first)]));
    }
  BOOST_TEST(chunks[0].starts[0] == 1);  // the run's first step resets the zero context away
}

// Training with learner context is deterministic, resumes bit-exactly (the
// context is in the checkpoint) and is not the run without context.
BOOST_AUTO_TEST_CASE(training_with_learner_context_resumes_bit_exactly) {
  const auto a = out_dir("context_a"), split = out_dir("context_split"), none = out_dir("context_none");
  const std::vector<std::string> ctx = {"algo.total_env_steps=8192", "runtime.checkpoint_every=0",
                                        "algo.chunk_len=16", "algo.bptt_len=48"};
  train("stateless_cartpole_mamba1", a, ctx);
  auto first = ctx;
  first.push_back("runtime.stop_after_updates=7");
  train("stateless_cartpole_mamba1", split, first);
  std::string log;
  train("stateless_cartpole_mamba1", split, ctx, /*resume=*/true, &log);
  BOOST_TEST(log.find("(bit-exact: sync mode)") != std::string::npos);
  BOOST_TEST(learner_bytes(a / "checkpoint.safetensors") == learner_bytes(split / "checkpoint.safetensors"));
  BOOST_TEST(metrics_without_timing(a / "metrics.csv") == metrics_without_timing(split / "metrics.csv"));
  // The checkpoint holds the context: 32 steps x 16 envs of observations, not all zero.
  const SafetensorsFile ck = read_safetensors((a / "checkpoint.safetensors").string());
  const TensorRecord& obs = ck.at("runner.0.context_obs");
  BOOST_TEST(obs.numel() == 32u * 16u * static_cast<size_t>(make_envs("{type: stateless_cartpole}", 1)->spec().obs_dim));
  BOOST_TEST(std::any_of(obs.bytes.begin(), obs.bytes.end(), [](uint8_t b) { return b != 0; }));
  train("stateless_cartpole_mamba1", none, {"algo.total_env_steps=8192", "runtime.checkpoint_every=0",
                                            "algo.chunk_len=16"});
  BOOST_TEST(metrics_without_timing(a / "metrics.csv") != metrics_without_timing(none / "metrics.csv"));
  // Not a multiple of the chunk: refused, naming the key and both lengths.
  BOOST_CHECK_EXCEPTION(train("stateless_cartpole_mamba1", none, {"algo.chunk_len=16", "algo.bptt_len=40"}),
                        ConfigError, [](const ConfigError& e) {
                          const std::string w = e.what();
                          BOOST_TEST_MESSAGE(w);
                          return w.find("algo.bptt_len") != std::string::npos &&
                                 w.find("multiple of algo.chunk_len (16), got 40") != std::string::npos;
                        });
  for (const auto& d : {a, split, none}) fs::remove_all(d);
}

// Async actors keep their own context.
BOOST_AUTO_TEST_CASE(async_training_with_learner_context_completes) {
  const auto dir = out_dir("context_async");
  const TrainSummary s = train("stateless_cartpole_mamba1", dir,
                               {"algo.total_env_steps=8192", "runtime.sync=false", "runtime.num_actors=2",
                                "algo.minibatches=2", "algo.chunk_len=16", "algo.bptt_len=32"});
  BOOST_TEST(s.env_steps >= 8192);
  BOOST_TEST(s.episodes > 0);
  fs::remove_all(dir);
}

// Same seed, same run; stopped after 6 updates and resumed, the run that never
// stopped, bit for bit. And it is not the one-lane run: the halves draw their
// own seeds. runtime.overlap_envs: auto leaves CPU actors on one lane.
BOOST_AUTO_TEST_CASE(overlapped_training_is_deterministic_and_resumes_bit_exactly) {
  const auto a = out_dir("overlap_a"), b = out_dir("overlap_b"), split = out_dir("overlap_split"),
             off = out_dir("overlap_off");
  const std::vector<std::string> on = {"algo.total_env_steps=12288", "runtime.checkpoint_every=0",
                                       "runtime.overlap_envs=on"};
  std::string log;
  const TrainSummary sa = train("stateless_cartpole_mamba3", a, on, false, &log);
  BOOST_TEST(sa.overlap_envs);
  BOOST_TEST(log.find("overlapped envs: each actor's 16 envs in 2 halves") != std::string::npos);
  train("stateless_cartpole_mamba3", b, on);
  BOOST_TEST(learner_bytes(a / "checkpoint.safetensors") == learner_bytes(b / "checkpoint.safetensors"));
  BOOST_TEST(metrics_without_timing(a / "metrics.csv") == metrics_without_timing(b / "metrics.csv"));

  auto first = on;
  first.push_back("runtime.stop_after_updates=6");
  const TrainSummary s1 = train("stateless_cartpole_mamba3", split, first);
  BOOST_TEST(s1.env_steps < 12288);
  train("stateless_cartpole_mamba3", split, on, /*resume=*/true, &log);
  BOOST_TEST(log.find("(bit-exact: sync mode)") != std::string::npos);
  BOOST_TEST(learner_bytes(a / "checkpoint.safetensors") == learner_bytes(split / "checkpoint.safetensors"));
  BOOST_TEST(metrics_without_timing(a / "metrics.csv") == metrics_without_timing(split / "metrics.csv"));

  const TrainSummary so = train("stateless_cartpole_mamba3", off, {"algo.total_env_steps=12288",
                                                                   "runtime.checkpoint_every=0"}, false, &log);
  BOOST_TEST(!so.overlap_envs);
  BOOST_TEST(log.find("overlapped envs") == std::string::npos);
  BOOST_TEST(metrics_without_timing(a / "metrics.csv") != metrics_without_timing(off / "metrics.csv"));
  for (const auto& d : {a, b, split, off}) fs::remove_all(d);
}

// A checkpoint written with one lane count and resumed with another continues
// the learner but restarts the envs, saying why.
BOOST_AUTO_TEST_CASE(resuming_with_another_lane_count_restarts_the_envs) {
  const auto dir = out_dir("overlap_switch");
  const std::vector<std::string> budget = {"algo.total_env_steps=4096", "runtime.checkpoint_every=0"};
  auto first = budget;
  first.push_back("runtime.stop_after_updates=2");
  train("stateless_cartpole_mamba3", dir, first);
  auto on = budget;
  on.push_back("runtime.overlap_envs=on");
  std::string log;
  const TrainSummary s = train("stateless_cartpole_mamba3", dir, on, /*resume=*/true, &log);
  BOOST_TEST(log.find("(envs restarted: the checkpoint has 1 env lane(s) per actor, this run 2: "
                      "runtime.overlap_envs)") != std::string::npos,
             log);
  BOOST_TEST(s.env_steps >= 4096);
  fs::remove_all(dir);
}

// Async mode: each actor thread runs its own two lanes.
BOOST_AUTO_TEST_CASE(overlapped_async_actors_complete) {
  const auto dir = out_dir("overlap_async");
  std::string log;
  const TrainSummary s = train("stateless_cartpole_mamba3", dir,
                               {"algo.total_env_steps=8192", "runtime.sync=false", "runtime.num_actors=2",
                                "algo.minibatches=2", "runtime.overlap_envs=on"},
                               false, &log);
  BOOST_TEST(s.overlap_envs);
  BOOST_TEST(log.find("overlapped envs: each actor's 8 envs in 2 halves") != std::string::npos);
  BOOST_TEST(s.env_steps >= 8192);
  BOOST_TEST(s.episodes > 0);
  fs::remove_all(dir);
}

// `on` needs an even number of envs per actor: an odd one is a ConfigError
// naming the key and the value (and, for `auto`, simply one lane).
BOOST_AUTO_TEST_CASE(overlap_on_with_odd_envs_per_actor_is_a_config_error) {
  const auto dir = out_dir("overlap_odd");
  for (const auto& envs : std::vector<std::vector<std::string>>{
           {"env.num_envs=5", "algo.minibatches=1"},
           {"env.num_envs=6", "algo.minibatches=1", "runtime.sync=false", "runtime.num_actors=2"}}) {
    auto o = envs;
    o.push_back("runtime.overlap_envs=on");
    BOOST_CHECK_EXCEPTION(train("stateless_cartpole_mamba3", dir, o), ConfigError, [](const ConfigError& e) {
      const std::string w = e.what();
      return w.find("runtime.overlap_envs: 'on'") != std::string::npos &&
             w.find("even number of envs per actor") != std::string::npos;
    });
  }
  const TrainSummary s = train("stateless_cartpole_mamba3", dir, {"env.num_envs=5", "algo.minibatches=1",
                                                                  "algo.total_env_steps=320",
                                                                  "runtime.overlap_envs=auto"});
  BOOST_TEST(!s.overlap_envs);
  fs::remove_all(dir);
}
