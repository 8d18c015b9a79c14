// Tests of the bundled envs (envs/): the generic VecEnv contract for every type
// (determinism, bounds, auto-reset bookkeeping), reference alignment with
// Gymnasium's CartPole-v1 and POPGym's definitions (oracle, random and
// memoryless returns, episode lengths), and config errors.
#define BOOST_TEST_MODULE envs
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <deque>
#include <regex>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "envs/batched_env.hpp"
#include "envs/cartpole.hpp"
#include "envs/vec_env.hpp"
#include "test/bundled_env_configs.hpp"
#include "test/env_episodes.hpp"

using namespace mambarl;
using namespace mambarl::test;

namespace {

const std::vector<std::string>& kAllConfigs = bundled_env_configs();

// Everything a VecEnv reports over T steps, for bitwise comparisons.
struct Trace {
  std::vector<float> obs, final_obs, reward, ep_return;
  std::vector<uint8_t> terminated, truncated;
  std::vector<int32_t> ep_length;
};

template <typename T>
void append(std::vector<T>& v, const T* p, size_t n) {
  v.insert(v.end(), p, p + n);
}

// Uniform random actions from their own stream; `same_action_all_envs` gives
// every env the same action, so that envs differ only by their own randomness.
Trace random_rollout(VecEnv& env, uint64_t seed, int T, bool same_action_all_envs = false) {
  const int B = env.num_envs(), O = env.spec().obs_dim, n = env.spec().action.n;
  Rng arng(seed, 999);
  std::vector<float> a(static_cast<size_t>(B));  // (B)
  Trace tr;
  env.reset(seed);
  append(tr.obs, env.obs(), static_cast<size_t>(B) * O);
  for (int t = 0; t < T; ++t) {
    for (int b = 0; b < B; ++b)
      a[b] = static_cast<float>(same_action_all_envs && b > 0 ? a[0] : arng.below(static_cast<uint32_t>(n)));
    env.step(a.data());
    append(tr.obs, env.obs(), static_cast<size_t>(B) * O);
    append(tr.final_obs, env.final_obs(), static_cast<size_t>(B) * O);
    append(tr.reward, env.reward(), static_cast<size_t>(B));
    append(tr.terminated, env.terminated(), static_cast<size_t>(B));
    append(tr.truncated, env.truncated(), static_cast<size_t>(B));
    append(tr.ep_return, env.episode_return(), static_cast<size_t>(B));
    append(tr.ep_length, env.episode_length(), static_cast<size_t>(B));
  }
  return tr;
}

// The observation sequence of env b alone.
std::vector<float> env_obs(const Trace& tr, int B, int O, int b) {
  std::vector<float> out;
  for (size_t row = 0; row * B * O < tr.obs.size(); ++row)
    append(out, tr.obs.data() + (row * B + b) * O, static_cast<size_t>(O));
  return out;
}

// A linear state-feedback controller that balances CartPole for well over 600 steps
// from Gymnasium's start distribution (found by trying gains; 200/200 seeds survive).
int balance(double x, double x_dot, double theta, double theta_dot) {
  return 0.1 * x + 0.5 * x_dot + 10 * theta + 2 * theta_dot > 0 ? 1 : 0;
}

}  // namespace

// ---------------------------------------------------------------- generic contract

BOOST_AUTO_TEST_CASE(registry_lists_the_bundled_types_and_takes_new_ones) {
  const auto names = registered_envs();
  for (const char* t : {"autoencode", "battleship", "cartpole", "concentration", "count_recall", "higher_lower",
                        "minesweeper", "multiarmed_bandit", "noisy_stateless_cartpole", "repeat_first",
                        "repeat_previous", "stateless_cartpole", "tmaze"})
    BOOST_TEST((std::find(names.begin(), names.end(), t) != names.end()), t);
  BOOST_CHECK_THROW(register_env("cartpole", [](const ConfigNode&, int) { return std::unique_ptr<VecEnv>(); }),
                    Error);
  register_env("test_cartpole_alias", [](const ConfigNode& cfg, int B) {
    check_env_keys(cfg, {});
    return std::unique_ptr<VecEnv>(std::make_unique<BatchedEnv<CartPole>>(CartPole::full(), B));
  });
  const auto env = make_env("type: test_cartpole_alias\nnum_envs: 3");
  BOOST_TEST(env->num_envs() == 3);
  BOOST_TEST(env->spec().obs_dim == 4);
}

BOOST_AUTO_TEST_CASE(same_seed_same_trajectory_and_envs_differ) {
  for (const auto& cfg : kAllConfigs) {
    BOOST_TEST_CONTEXT(cfg) {
      auto e1 = make_env(cfg + "\nnum_envs: 4"), e2 = make_env(cfg + "\nnum_envs: 4");
      const Trace a = random_rollout(*e1, 7, 600), b = random_rollout(*e2, 7, 600);
      BOOST_TEST((a.obs == b.obs));
      BOOST_TEST((a.final_obs == b.final_obs));
      BOOST_TEST((a.reward == b.reward));
      BOOST_TEST((a.terminated == b.terminated));
      BOOST_TEST((a.truncated == b.truncated));
      BOOST_TEST((a.ep_return == b.ep_return));
      BOOST_TEST((a.ep_length == b.ep_length));
      // Reset again on the same object: the seed alone decides.
      const Trace again = random_rollout(*e1, 7, 600);
      BOOST_TEST((again.obs == a.obs));
      const Trace other_seed = random_rollout(*e1, 8, 600);
      BOOST_TEST((other_seed.obs != a.obs));
      // With identical actions, env 0 and env 1 still differ: each has its own stream.
      const int O = e1->spec().obs_dim;
      const Trace same_act = random_rollout(*e1, 7, 600, true);
      BOOST_TEST((env_obs(same_act, 4, O, 0) != env_obs(same_act, 4, O, 1)));
    }
  }
}

BOOST_AUTO_TEST_CASE(observations_stay_inside_declared_bounds) {
  for (const auto& cfg : kAllConfigs) {
    BOOST_TEST_CONTEXT(cfg) {
      auto env = make_env(cfg + "\nnum_envs: 8");
      const EnvSpec& s = env->spec();
      BOOST_TEST(static_cast<int>(s.obs_low.size()) == s.obs_dim);
      BOOST_TEST(static_cast<int>(s.obs_high.size()) == s.obs_dim);
      const Trace tr = random_rollout(*env, 3, 5000);
      int bad = 0;
      for (const auto* v : {&tr.obs, &tr.final_obs})
        for (size_t i = 0; i < v->size(); ++i) {
          const float x = (*v)[i];
          const size_t d = i % static_cast<size_t>(s.obs_dim);
          bad += !(std::isfinite(x) && x >= s.obs_low[d] && x <= s.obs_high[d]);
        }
      BOOST_TEST(bad == 0);
      int episodes = 0;
      for (size_t i = 0; i < tr.terminated.size(); ++i) episodes += tr.terminated[i] || tr.truncated[i];
      BOOST_TEST(episodes > 8);  // the rollout crossed many auto-resets
    }
  }
}

BOOST_AUTO_TEST_CASE(episode_bookkeeping_matches_the_rewards_seen) {
  for (const auto& cfg : kAllConfigs) {
    BOOST_TEST_CONTEXT(cfg) {
      auto env = make_env(cfg + "\nnum_envs: 5");
      const int n = env->spec().action.n;
      Rng arng(11, 0);
      const auto eps = run_episodes(
          *env, 5, 60, [&](const float*, int) { return static_cast<int>(arng.below(static_cast<uint32_t>(n))); },
          [](int) {});
      const int limit = env->spec().max_episode_steps;
      for (const auto& e : eps) {
        BOOST_TEST((e.terminated || e.truncated));
        if (e.truncated) BOOST_TEST(e.length == limit);
        if (limit > 0) BOOST_TEST(e.length <= limit);
      }
    }
  }
}

// A probe env that makes the wrapper's bookkeeping visible: obs = [steps taken in
// the episode], reward = that count, terminates after a random 1..5 steps, while
// the time limit is 4, so episodes end terminated, truncated, or both (length 4).
struct ProbeEnv {
  int t = 0, len = 0;
  EnvSpec spec() const {
    EnvSpec s;
    s.id = "probe";
    s.obs_dim = 1;
    s.obs_low = {0.0f};
    s.obs_high = {5.0f};
    s.action.n = 2;
    s.max_episode_steps = 4;
    return s;
  }
  void reset(Rng& rng, float* obs) {
    t = 0;
    len = 1 + static_cast<int>(rng.below(5));
    obs[0] = 0.0f;
  }
  EnvStepResult step(int, float* obs) {
    obs[0] = static_cast<float>(++t);
    return {static_cast<float>(t), t == len};
  }
  void render(std::ostream& os) const { os << "t=" << t << "\n"; }
};

BOOST_AUTO_TEST_CASE(auto_reset_keeps_final_obs_and_starts_fresh) {
  BatchedEnv<ProbeEnv> env(ProbeEnv{}, 6);
  env.reset(1);
  const std::vector<float> zeros(6, 0.0f);
  std::vector<int> t(6, 0);
  int n_term = 0, n_trunc = 0, n_both = 0;
  for (int step = 0; step < 400; ++step) {
    env.step(zeros.data());
    for (int b = 0; b < 6; ++b) {
      ++t[b];
      BOOST_TEST(env.final_obs()[b] == static_cast<float>(t[b]));  // the obs this step led to
      BOOST_TEST(env.reward()[b] == static_cast<float>(t[b]));
      const bool term = env.terminated()[b], trunc = env.truncated()[b];
      BOOST_TEST(trunc == (t[b] == 4));
      if (term || trunc) {
        BOOST_TEST(env.obs()[b] == 0.0f);  // the new episode's first obs
        BOOST_TEST(env.episode_length()[b] == t[b]);
        BOOST_TEST(env.episode_return()[b] == static_cast<float>(t[b] * (t[b] + 1) / 2));
        n_term += term && !trunc;
        n_trunc += trunc && !term;
        n_both += term && trunc;
        t[b] = 0;
      } else {
        BOOST_TEST(env.obs()[b] == env.final_obs()[b]);
        BOOST_TEST(env.episode_length()[b] == 0);
        BOOST_TEST(env.episode_return()[b] == 0.0f);
      }
    }
  }
  BOOST_TEST(n_term > 0);
  BOOST_TEST(n_trunc > 0);
  BOOST_TEST(n_both > 0);
}

// env.prev_action: each observation ends with a one-hot of the action that led
// to it; an episode's first observation (at reset and after an auto-reset)
// shows none; final_obs keeps the last action; the env's own part is
// unchanged (compared with the same env, same seed and actions, unwrapped).
BOOST_AUTO_TEST_CASE(prev_action_appends_a_one_hot_of_the_last_action) {
  const int B = 5;
  auto plain = make_env("type: tmaze\nlength: 2\nnum_envs: 5");
  auto wrapped = make_env("type: tmaze\nlength: 2\nprev_action: true\nnum_envs: 5");
  const int O = plain->spec().obs_dim, n = plain->spec().action.n, W = wrapped->spec().obs_dim;
  BOOST_TEST(W == O + n);
  BOOST_TEST(wrapped->spec().obs_low[static_cast<size_t>(O)] == 0.0f);
  BOOST_TEST(wrapped->spec().obs_high[static_cast<size_t>(W - 1)] == 1.0f);
  plain->reset(3);
  wrapped->reset(3);
  const auto tail_is = [&](const float* row, int action) {  // action -1: all zeros
    for (int i = 0; i < n; ++i)
      if (row[O + i] != (i == action ? 1.0f : 0.0f)) return false;
    return true;
  };
  for (int b = 0; b < B; ++b) BOOST_TEST(tail_is(wrapped->obs() + b * W, -1));
  Rng arng(11, 0);
  int restarts = 0;
  for (int t = 0; t < 60; ++t) {
    std::vector<float> a(B);
    for (float& x : a) x = static_cast<float>(arng.below(static_cast<uint32_t>(n)));
    plain->step(a.data());
    wrapped->step(a.data());
    for (int b = 0; b < B; ++b) {
      const float* o = wrapped->obs() + b * W;
      const float* fin = wrapped->final_obs() + b * W;
      BOOST_TEST(std::equal(o, o + O, plain->obs() + b * O));
      BOOST_TEST(std::equal(fin, fin + O, plain->final_obs() + b * O));
      BOOST_TEST(tail_is(fin, static_cast<int>(a[b])));
      const bool done = wrapped->terminated()[b] || wrapped->truncated()[b];
      BOOST_TEST(tail_is(o, done ? -1 : static_cast<int>(a[b])));
      restarts += done;
    }
  }
  BOOST_TEST(restarts > 0);
  // Off by default for tmaze; an explicit false is accepted, a non-bool is a ConfigError naming the key.
  BOOST_TEST(make_env("type: tmaze\nprev_action: false")->spec().obs_dim == O);
  BOOST_CHECK_EXCEPTION(make_env("type: tmaze\nprev_action: maybe"), ConfigError, [](const ConfigError& e) {
    return std::string(e.what()).find("prev_action") != std::string::npos;
  });
}

BOOST_AUTO_TEST_CASE(bad_actions_are_rejected_naming_env_and_value) {
  for (const auto& [cfg, bad] : std::vector<std::pair<std::string, float>>{
           {"type: cartpole", 2.0f}, {"type: repeat_previous", -1.0f}, {"type: tmaze", 0.5f},
           {"type: count_recall", 26.0f}, {"type: stateless_cartpole", NAN}, {"type: minesweeper", 16.0f},
           {"type: battleship\ndifficulty: hard", 144.0f}, {"type: multiarmed_bandit", 10.0f}}) {
    BOOST_TEST_CONTEXT(cfg) {
      auto env = make_env(cfg + "\nnum_envs: 3");
      env->reset(0);
      const std::vector<float> before(env->obs(), env->obs() + 3 * env->spec().obs_dim);
      std::vector<float> a{0.0f, bad, 0.0f};
      try {
        env->step(a.data());
        BOOST_ERROR("no error for action " << bad);
      } catch (const Error& e) {
        const std::string msg = e.what();
        BOOST_TEST(msg.find(env->spec().id) != std::string::npos, msg);
        std::ostringstream v;
        v << bad;
        BOOST_TEST(msg.find("action " + v.str()) != std::string::npos, msg);
      }
      // The whole batch is validated before any env moves.
      BOOST_TEST((std::vector<float>(env->obs(), env->obs() + 3 * env->spec().obs_dim) == before));
    }
  }
}

BOOST_AUTO_TEST_CASE(render_describes_each_env) {
  for (const auto& cfg : kAllConfigs) {
    auto env = make_env(cfg + "\nnum_envs: 2");
    env->reset(0);
    std::ostringstream os;
    env->render(1, os);
    BOOST_TEST(!os.str().empty(), cfg);
    BOOST_CHECK_THROW(env->render(2, os), Error);
  }
}

// ---------------------------------------------------------------- CartPole-v1

BOOST_AUTO_TEST_CASE(cartpole_dynamics_match_gymnasium_equations) {
  // Expected states: Gymnasium's Euler step evaluated by hand in Python floats
  // (the same double arithmetic) from (0.01, -0.02, 0.03, 0.04), actions 1, 0, 0.
  const double expected[3][4] = {
      {0.0096000000000000009, 0.17467919574755525, 0.030799999999999998, -0.24306871796000809},
      {0.013093583914951107, -0.020868848948191993, 0.025938625640799837, 0.059167999939416599},
      {0.012676206935987267, -0.21635292104612766, 0.027121985639588168, 0.35992057137841382}};
  CartPole env = CartPole::full();
  env.physics = {0.01, -0.02, 0.03, 0.04};
  float obs[4];
  const int actions[3] = {1, 0, 0};
  for (int s = 0; s < 3; ++s) {
    const EnvStepResult r = env.step(actions[s], obs);
    BOOST_TEST(r.reward == 1.0f);
    BOOST_TEST(!r.terminated);
    const double got[4] = {env.physics.x, env.physics.x_dot, env.physics.theta, env.physics.theta_dot};
    for (int i = 0; i < 4; ++i) {
      // 1e-12: -march=x86-64-v3 may contract a*b+c into an FMA, changing the last bits.
      BOOST_TEST(std::abs(got[i] - expected[s][i]) <= 1e-12 * std::abs(expected[s][i]), "step " << s << " i " << i);
      BOOST_TEST(obs[i] == static_cast<float>(got[i]));  // obs is the float32 rounding of the state
    }
  }
}

BOOST_AUTO_TEST_CASE(cartpole_termination_thresholds) {
  BOOST_TEST(CartPolePhysics::kThetaThreshold == 0.20943951023931953);  // 12 * 2 * pi / 360
  struct Case {
    CartPolePhysics s;
    bool terminal;
  };
  // One step moves x by 0.02 * x_dot and theta by 0.02 * theta_dot.
  const Case cases[] = {
      {{2.39, 1.0, 0, 0}, true},       // x -> 2.41
      {{2.39, 0.4, 0, 0}, false},      // x -> 2.398
      {{-2.39, -1.0, 0, 0}, true},     // x -> -2.41
      {{0, 0, 0.205, 0.3}, true},      // theta -> 0.211
      {{0, 0, 0.205, 0.2}, false},     // theta -> 0.209
      {{0, 0, -0.205, -0.3}, true},    // theta -> -0.211
  };
  for (const auto& c : cases) {
    CartPolePhysics p = c.s;
    BOOST_TEST(p.step(0) == c.terminal, "x " << c.s.x << " theta " << c.s.theta);
  }
}

BOOST_AUTO_TEST_CASE(cartpole_truncates_at_500_and_terminates_when_it_falls) {
  auto env = make_env("type: cartpole\nnum_envs: 4");
  BOOST_TEST(env->spec().max_episode_steps == 500);
  // Balanced: truncated (not terminated) after exactly 500 steps, return 500.
  for (const auto& e : run_episodes(
           *env, 1, 8, [](const float* o, int) { return balance(o[0], o[1], o[2], o[3]); }, [](int) {})) {
    BOOST_TEST(e.length == 500);
    BOOST_TEST((e.truncated && !e.terminated));
    BOOST_TEST(e.ret == 500.0);
  }
  // Always pushing right: the pole falls; the terminating step is rewarded too.
  env->reset(2);
  const std::vector<float> right(4, 1.0f);
  int len = 0;
  do {
    env->step(right.data());
    ++len;
    if (!env->terminated()[0]) {
      BOOST_TEST(std::abs(env->final_obs()[2]) <= 0.2094395f);
      BOOST_TEST(std::abs(env->final_obs()[0]) <= 2.4f);
    }
  } while (!env->terminated()[0]);
  BOOST_TEST(!env->truncated()[0]);
  BOOST_TEST(len < 30);
  BOOST_TEST(env->episode_length()[0] == len);
  BOOST_TEST(env->episode_return()[0] == static_cast<float>(len));
  // float rounding is monotone, so a state past the threshold is >= its float.
  BOOST_TEST((std::abs(env->final_obs()[2]) >= static_cast<float>(CartPolePhysics::kThetaThreshold) ||
              std::abs(env->final_obs()[0]) >= static_cast<float>(CartPolePhysics::kXThreshold)));
  for (int i = 0; i < 4; ++i) BOOST_TEST(std::abs(env->obs()[i]) <= 0.05f);  // fresh start state
}

BOOST_AUTO_TEST_CASE(cartpole_random_policy_lasts_about_22_steps) {
  // The often-quoted random-policy score of CartPole is about 22; 2000 episodes
  // give a standard error near 0.3, so [21, 23.5] is several errors wide.
  auto env = make_env("type: cartpole\nnum_envs: 16");
  Rng arng(4, 0);
  const auto eps = run_episodes(*env, 4, 2000, [&](const float*, int) { return static_cast<int>(arng.below(2)); },
                                [](int) {});
  const double m = mean_return(eps);
  BOOST_TEST(m > 21.0);
  BOOST_TEST(m < 23.5);
}

// ---------------------------------------------------------------- POPGym PositionOnlyCartPole

BOOST_AUTO_TEST_CASE(stateless_cartpole_memory_policy_scores_one) {
  for (const auto& [difficulty, max_len] :
       std::vector<std::pair<std::string, int>>{{"easy", 200}, {"medium", 400}, {"hard", 600}}) {
    BOOST_TEST_CONTEXT(difficulty) {
      auto env = make_env("type: stateless_cartpole\nnum_envs: 4\ndifficulty: " + difficulty);
      BOOST_TEST(env->spec().obs_dim == 2);
      BOOST_TEST(env->spec().max_episode_steps == max_len);
      // Memory: velocities from finite differences of the last two position observations.
      std::vector<float> prev(8, 0.0f);
      std::vector<bool> first(4, true);
      const auto eps = run_episodes(
          *env, 3, 8,
          [&](const float* o, int b) {
            const double xd = first[b] ? 0.0 : (o[0] - prev[2 * b]) / CartPolePhysics::kTau;
            const double td = first[b] ? 0.0 : (o[1] - prev[2 * b + 1]) / CartPolePhysics::kTau;
            prev[2 * b] = o[0], prev[2 * b + 1] = o[1], first[b] = false;
            return balance(o[0], xd, o[1], td);
          },
          [&](int b) { first[b] = true; });
      for (const auto& e : eps) {
        BOOST_TEST(e.length == max_len);
        BOOST_TEST((e.truncated && !e.terminated));
        BOOST_TEST(std::abs(e.ret - 1.0) <= 1e-5);  // max_len float roundings of 1/max_len: ~1e-7
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(stateless_cartpole_pays_per_step_even_when_it_falls) {
  // popgym: reward 1/max_len on every step including the terminating one (no -1:
  // that needs a step after termination), so a fall scores length / max_len.
  auto env = make_env("type: stateless_cartpole\nnum_envs: 2");
  const std::vector<float> right(2, 1.0f);
  env->reset(5);
  int len = 0;
  do {
    env->step(right.data());
    ++len;
    BOOST_TEST(env->reward()[0] == 1.0f / 200.0f);
  } while (!env->terminated()[0]);
  BOOST_TEST(!env->truncated()[0]);
  BOOST_TEST(std::abs(env->episode_return()[0] - len / 200.0f) <= 1e-6f);  // < 30 float terms
  for (int i = 0; i < 2; ++i) BOOST_TEST(std::abs(env->obs()[i]) <= 0.05f);
}

// ---------------------------------------------------------------- POPGym RepeatPrevious

BOOST_AUTO_TEST_CASE(repeat_previous_oracle_scores_one_and_random_minus_half) {
  struct Level {
    std::string difficulty;
    int decks, k;
  };
  for (const auto& L : std::vector<Level>{{"easy", 1, 4}, {"medium", 2, 32}, {"hard", 3, 64}}) {
    BOOST_TEST_CONTEXT(L.difficulty) {
      const int B = 4, N = 52 * L.decks;
      auto env = make_env("type: repeat_previous\nnum_envs: 4\ndifficulty: " + L.difficulty);
      BOOST_TEST(env->spec().obs_dim == 4);
      BOOST_TEST(env->spec().action.n == 4);
      // Oracle: the suits of every observation so far; the answer is the suit shown
      // k-1 observations before the current one.
      std::vector<std::vector<int>> seen(B);
      const auto oracle = run_episodes(
          *env, 6, 8,
          [&](const float* o, int b) {
            seen[b].push_back(argmax(o, 4));
            const int n = static_cast<int>(seen[b].size());
            return n >= L.k ? seen[b][n - L.k] : 0;
          },
          [&](int b) { seen[b].clear(); });
      for (const auto& e : oracle) {
        BOOST_TEST(e.length == N - 1);  // every card but the first is dealt by a step
        BOOST_TEST((e.terminated && !e.truncated));
        BOOST_TEST(std::abs(e.ret - 1.0) <= 1e-5);  // N - k float terms of 1/(N - k)
      }
      // One-hot suits, 13 of each per deck, over the episode's N cards.
      BOOST_TEST((feature_histogram(*env, 0, 4) == std::vector<int>(4, 13 * L.decks)));
      // Random: each scored step is +s w.p. 1/4 and -s w.p. 3/4, so E[return] = -0.5.
      Rng arng(8, 0);
      const auto rnd = run_episodes(*env, 8, 400, [&](const float*, int) { return static_cast<int>(arng.below(4)); },
                                    [](int) {});
      BOOST_TEST(std::abs(mean_return(rnd) + 0.5) <= 5 * sd_of_mean(rnd));  // 5 standard errors
    }
  }
}

// ---------------------------------------------------------------- POPGym CountRecall

BOOST_AUTO_TEST_CASE(count_recall_oracle_and_random_match_popgym_scoring) {
  struct Level {
    std::string difficulty;
    int decks, V, M;
  };
  for (const auto& L : std::vector<Level>{{"easy", 1, 2, 26}, {"medium", 2, 4, 26}, {"hard", 4, 13, 16}}) {
    BOOST_TEST_CONTEXT(L.difficulty) {
      const int B = 4, N = 52 * L.decks;
      auto env = make_env("type: count_recall\nnum_envs: 4\ndifficulty: " + L.difficulty);
      BOOST_TEST(env->spec().obs_dim == 2 * L.V);
      BOOST_TEST(env->spec().action.n == L.M);
      // Oracle: counts the value cards it was shown; answers the count of the shown query.
      // A count of M cannot be answered (actions stop at M-1), so the best possible
      // return is 1 - 2 * unanswerable / (N - 1); the oracle tallies those steps.
      std::vector<std::vector<int>> counts(B, std::vector<int>(L.V, 0));
      std::vector<int> unanswerable(B, 0), closed_unanswerable;  // closed: per finished episode, in order
      std::vector<bool> started(B, false);
      const auto oracle = run_episodes(
          *env, 9, 12,
          [&](const float* o, int b) {
            counts[b][argmax(o, L.V)] += 1;
            const int c = counts[b][argmax(o + L.V, L.V)];
            unanswerable[b] += c >= L.M;
            return std::min(c, L.M - 1);
          },
          [&](int b) {
            // run_episodes calls this at the reset and right after each episode it records.
            if (started[b]) closed_unanswerable.push_back(unanswerable[b]);
            started[b] = true;
            std::fill(counts[b].begin(), counts[b].end(), 0);
            unanswerable[b] = 0;
          });
      BOOST_TEST(closed_unanswerable.size() == oracle.size());
      int total_unanswerable = 0;
      for (size_t i = 0; i < oracle.size(); ++i) {
        BOOST_TEST(oracle[i].length == N - 1);
        BOOST_TEST((oracle[i].terminated && !oracle[i].truncated));
        // 1e-5: N - 1 float terms of 1/(N - 1).
        BOOST_TEST(std::abs(oracle[i].ret - (1.0 - 2.0 * closed_unanswerable[i] / (N - 1))) <= 1e-5);
        total_unanswerable += closed_unanswerable[i];
      }
      BOOST_TEST_MESSAGE("count_recall " << L.difficulty << ": oracle mean return " << mean_return(oracle)
                                         << ", unanswerable steps " << total_unanswerable);
      // Over one episode the value cards and the query cards each hold every value M times.
      BOOST_TEST((feature_histogram(*env, 0, L.V) == std::vector<int>(L.V, L.M)));
      BOOST_TEST((feature_histogram(*env, L.V, L.V) == std::vector<int>(L.V, L.M)));
      // Random: P(right) = 1/M, so E[return] = 2/M - 1 (less where a count is M).
      Rng arng(10, 0);
      const auto rnd = run_episodes(
          *env, 10, 400, [&](const float*, int) { return static_cast<int>(arng.below(static_cast<uint32_t>(L.M))); },
          [](int) {});
      const double expected = 2.0 / L.M - 1.0;
      BOOST_TEST(std::abs(mean_return(rnd) - expected) <= 5 * sd_of_mean(rnd) + 0.01);  // 5 errors + the M edge
    }
  }
}

// ---------------------------------------------------------------- T-maze

BOOST_AUTO_TEST_CASE(tmaze_memory_scores_one_memoryless_zero) {
  for (const auto& [length, penalty] : std::vector<std::pair<int, float>>{{10, 0.0f}, {1, 0.0f}, {5, 0.01f}}) {
    BOOST_TEST_CONTEXT("length " << length << " penalty " << penalty) {
      std::ostringstream cfg;
      cfg << "type: tmaze\nnum_envs: 8\nlength: " << length << "\nstep_penalty: " << penalty;
      auto env = make_env(cfg.str());
      BOOST_TEST(env->spec().max_episode_steps == 4 * (length + 1));
      // Oracle: remembers the cue of the first observation, walks, turns to it.
      std::vector<int> cue(8, -1);
      const auto oracle = run_episodes(
          *env, 12, 64,
          [&](const float* o, int b) {
            if (o[0] == 1.0f || o[1] == 1.0f) {
              BOOST_TEST(cue[b] == -1);  // the cue shows on the first observation only
              cue[b] = o[1] == 1.0f;
            }
            return o[3] == 1.0f ? 1 + cue[b] : 0;
          },
          [&](int b) { cue[b] = -1; });
      for (const auto& e : oracle) {
        BOOST_TEST(e.length == length + 1);
        BOOST_TEST(e.terminated);
        BOOST_TEST(std::abs(e.ret - (1.0 - length * penalty)) <= 1e-5);  // float penalty, summed <= 10 times
      }
      // Memoryless: walk, always turn left; +1 or -1 on a fair coin.
      const auto left = run_episodes(
          *env, 13, 4000, [](const float* o, int) { return o[3] == 1.0f ? 1 : 0; }, [](int) {});
      BOOST_TEST(std::abs(mean_return(left) + length * penalty) <= 5 * sd_of_mean(left));
      // Never turning: truncated at the limit, with the penalty of every step.
      const auto stall = run_episodes(*env, 14, 8, [](const float*, int) { return 0; }, [](int) {});
      for (const auto& e : stall) {
        BOOST_TEST((e.truncated && !e.terminated));
        BOOST_TEST(e.length == 4 * (length + 1));
        BOOST_TEST(std::abs(e.ret + penalty * e.length) <= 1e-5);  // float penalty, summed <= 44 times
      }
    }
  }
}

// ---------------------------------------------------------------- config errors

BOOST_AUTO_TEST_CASE(config_errors_name_file_line_and_column) {
  const std::regex where("test\\.yaml:[0-9]+:[0-9]+: ");
  struct Case {
    std::string yaml, must_say;
  };
  std::string registered_list;  // every registered type, sorted, as the error lists them
  for (const std::string& t : registered_envs()) registered_list += (registered_list.empty() ? "" : ", ") + t;
  const std::vector<Case> cases = {
      {"type: cartpole\nlenght: 3", "env.lenght: unknown key"},
      {"type: tmaze\nlenght: 3", "unknown key (known: type, num_envs, backend, length, step_penalty, prev_action)"},
      {"type: repeat_previous\ndifficulty: extreme", "'extreme' is not one of easy|medium|hard"},
      {"type: cartpole\nbackend: gpu", "env.backend: 'gpu' is not one of cpu|cuda"},
      {"type: cartpole\nnum_envs: 0", "env.num_envs: value 0 is out of range"},
      {"type: cartpole\nnum_envs: many", "cannot read 'many' as an integer"},
      {"type: tmaze\nlength: 0", "env.length: value 0 is out of range"},
      {"type: cartpoel", "unknown env type 'cartpoel' (registered: " + registered_list + ")"},
      {"num_envs: 4", "env.type: required key is missing"},
  };
  for (const auto& c : cases) {
    BOOST_TEST_CONTEXT(c.yaml) {
      try {
        make_env(c.yaml);
        BOOST_ERROR("no ConfigError");
      } catch (const ConfigError& e) {
        const std::string msg = e.what();
        BOOST_TEST(std::regex_search(msg, where), msg);
        BOOST_TEST(msg.find(c.must_say) != std::string::npos, msg);
      }
    }
  }
}

// save_state()/load_state() capture everything: continuing from a restored
// copy reproduces the original continuation bit for bit (resume of a run).
BOOST_AUTO_TEST_CASE(saved_state_resumes_bit_exactly) {
  const auto continue_for = [](VecEnv& env, int T) {  // random steps WITHOUT a reset
    const int B = env.num_envs(), O = env.spec().obs_dim;
    Rng arng(8, 999);
    std::vector<float> a(static_cast<size_t>(B)), trace;
    for (int t = 0; t < T; ++t) {
      for (auto& x : a) x = static_cast<float>(arng.below(static_cast<uint32_t>(env.spec().action.n)));
      env.step(a.data());
      append(trace, env.obs(), static_cast<size_t>(B) * O);
      append(trace, env.reward(), static_cast<size_t>(B));
      append(trace, env.episode_return(), static_cast<size_t>(B));
      for (int b = 0; b < B; ++b) trace.push_back(env.terminated()[b] + 2.0f * env.truncated()[b]);
    }
    return trace;
  };
  for (const auto& cfg : kAllConfigs) {
    BOOST_TEST_CONTEXT(cfg) {
      auto a = make_env(cfg + "\nnum_envs: 5");
      auto b = make_env(cfg + "\nnum_envs: 5");
      random_rollout(*a, 7, 137);  // resets with seed 7, then leaves most envs mid-episode
      b->reset(99);                // a different history, overwritten by the load
      b->load_state(a->save_state());
      BOOST_TEST(continue_for(*a, 300) == continue_for(*b, 300));
      auto wrong = make_env(cfg + "\nnum_envs: 4");
      BOOST_CHECK_THROW(wrong->load_state(a->save_state()), Error);
    }
  }
}
