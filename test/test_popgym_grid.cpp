// Reference alignment of the POPGym envs whose actions pick a cell or an arm
// (minesweeper, battleship, multiarmed_bandit) and of noisy_stateless_cartpole
// with popgym's definitions (popgym/envs/*.py): the specs per difficulty,
// scripted policies that reach the best return, uniformly random policies
// against their expected return derived independently here, episode ends
// (terminated vs truncated) and the observation noise. The generic VecEnv
// contract of these types (determinism, bounds, bookkeeping, render, saved
// state) is test_envs', over test/bundled_env_configs.hpp.
#define BOOST_TEST_MODULE popgym_grid
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "envs/builtin_envs.hpp"
#include "envs/vec_env.hpp"

using namespace mambarl;

namespace {

const std::vector<std::string> kLevels = {"easy", "medium", "hard"};

// The env's own observation (prev_action off), which the definitions speak of;
// the wrapper has its own test in test_envs.
ConfigNode env_config(const std::string& type, const std::string& difficulty, bool prev_action = false) {
  return ConfigNode(YAML::Load("type: " + type + "\ndifficulty: " + difficulty +
                               "\nprev_action: " + (prev_action ? "true" : "false")),
                    "test.yaml", "env");
}

// The env struct a config describes, to script policies that read its hidden state.
template <typename Env>
Env prototype(const std::string& type, const std::string& difficulty) {
  return std::get<Env>(builtin_env(type, env_config(type, difficulty)).prototype);
}

struct Episode {
  double ret = 0;
  int length = 0;
  bool terminated = false, truncated = false;
};

// One episode of an env struct under `policy(env, obs) -> action`, ended as
// BatchedEnv ends it (the env's termination, or spec().max_episode_steps).
template <typename Env, typename Policy>
Episode play(Env& env, Rng& rng, Policy&& policy) {
  const EnvSpec spec = env.spec();
  std::vector<float> obs(static_cast<size_t>(spec.obs_dim));  // (obs_dim)
  env.reset(rng, obs.data());
  Episode e;
  while (!e.terminated && !e.truncated) {
    const EnvStepResult r = env.step(policy(env, obs.data()), obs.data());
    e.ret += r.reward;
    e.length += 1;
    e.terminated = r.terminated;
    e.truncated = spec.max_episode_steps > 0 && e.length >= spec.max_episode_steps;
  }
  return e;
}

// Episodes through the VecEnv of a config, every env taking the same constant action.
std::vector<Episode> constant_action_episodes(const std::string& type, const std::string& difficulty, int action,
                                              int episodes) {
  ConfigNode cfg(YAML::Load("type: " + type + "\ndifficulty: " + difficulty + "\nnum_envs: 4"), "test.yaml", "env");
  auto env = make_vec_env(cfg);
  const std::vector<float> a(4, static_cast<float>(action));  // (B)
  std::vector<Episode> out;
  env->reset(3);
  while (static_cast<int>(out.size()) < episodes) {
    env->step(a.data());
    for (int b = 0; b < 4; ++b)
      if (env->terminated()[b] || env->truncated()[b])
        out.push_back({env->episode_return()[b], env->episode_length()[b], env->terminated()[b] != 0,
                       env->truncated()[b] != 0});
  }
  return out;
}

struct Stats {
  double mean = 0, sd = 0, se = 0;  // sample mean, standard deviation, standard error of the mean
};
Stats stats(const std::vector<double>& v) {
  Stats s;
  for (double x : v) s.mean += x;
  s.mean /= static_cast<double>(v.size());
  for (double x : v) s.sd += (x - s.mean) * (x - s.mean);
  s.sd = std::sqrt(s.sd / static_cast<double>(v.size() - 1));
  s.se = s.sd / std::sqrt(static_cast<double>(v.size()));
  return s;
}

template <typename Env>
std::vector<double> returns_of_random_policy(Env env, int episodes, uint64_t seed) {
  Rng rng(seed, 0), arng(seed, 1);
  const uint32_t n = static_cast<uint32_t>(env.spec().action.n);
  std::vector<double> rets;
  for (int i = 0; i < episodes; ++i)
    rets.push_back(play(env, rng, [&](const Env&, const float*) { return static_cast<int>(arng.below(n)); }).ret);
  return rets;
}

int argmax(const float* v, int n) { return static_cast<int>(std::max_element(v, v + n) - v); }

// A return summed in double from float rewards vs its exact value: each reward is
// off by at most half a float ulp (~6e-8 relative), over at most 144 terms.
constexpr double kSumTol = 1e-5;

}  // namespace

// ---------------------------------------------------------------- specs

BOOST_AUTO_TEST_CASE(specs_follow_popgym_at_every_difficulty) {
  struct Row {
    std::string type;
    int obs_dim[3], actions[3], max_steps[3];
    bool prev_action;
  };
  const std::vector<Row> rows = {
      // Discrete(min(mines + 1, 10)); cells; L + 1 = cells - mines + 1 (popgym truncates on step L + 1).
      {"minesweeper", {3, 7, 10}, {16, 36, 64}, {15, 31, 55}, true},
      // Discrete(2); side^2 cells; side^2 steps.
      {"battleship", {2, 2, 2}, {64, 100, 144}, {64, 100, 144}, true},
      {"multiarmed_bandit", {2, 2, 2}, {10, 20, 30}, {200, 400, 600}, true},
      // Not marked by POPGym; on here because its velocity filter needs the push (envs/ENVS.md).
      {"noisy_stateless_cartpole", {2, 2, 2}, {2, 2, 2}, {200, 200, 200}, true},
  };
  for (const Row& r : rows)
    for (int d = 0; d < 3; ++d) {
      BOOST_TEST_CONTEXT(r.type << " " << kLevels[d]) {
        const auto env = make_vec_env(env_config(r.type, kLevels[d]));
        const EnvSpec& s = env->spec();
        BOOST_TEST(s.id == r.type);
        BOOST_TEST(s.obs_dim == r.obs_dim[d]);
        BOOST_TEST(s.action.n == r.actions[d]);
        BOOST_TEST(s.max_episode_steps == r.max_steps[d]);
        BOOST_TEST(s.prev_action_by_default == r.prev_action);
        // Where POPGym needs it, the env observes its previous action unless told otherwise.
        const auto by_default = make_vec_env(ConfigNode(
            YAML::Load("type: " + r.type + "\ndifficulty: " + kLevels[d]), "test.yaml", "env"));
        BOOST_TEST(by_default->spec().obs_dim == s.obs_dim + (r.prev_action ? s.action.n : 0));
      }
    }
}

BOOST_AUTO_TEST_CASE(bad_difficulty_is_a_config_error_naming_the_key) {
  for (const char* type : {"minesweeper", "battleship", "multiarmed_bandit", "noisy_stateless_cartpole"}) {
    BOOST_TEST_CONTEXT(type) {
      try {
        make_vec_env(env_config(type, "extreme"));
        BOOST_ERROR("no ConfigError");
      } catch (const ConfigError& e) {
        const std::string msg = e.what();
        BOOST_TEST(msg.find("env.difficulty: 'extreme' is not one of easy|medium|hard") != std::string::npos, msg);
      }
      try {
        make_vec_env(ConfigNode(YAML::Load(std::string("type: ") + type + "\nsize: 3"), "test.yaml", "env"));
        BOOST_ERROR("no ConfigError");
      } catch (const ConfigError& e) {
        const std::string msg = e.what();
        BOOST_TEST(msg.find("env.size: unknown key") != std::string::npos, msg);
      }
    }
  }
}

// ---------------------------------------------------------------- minesweeper

namespace {

// Mines in the 3 x 3 block centred on (y, x), the cell itself included (popgym's count).
int mines_around(const Minesweeper& m, int y, int x) {
  int c = 0;
  for (int yy = std::max(0, y - 1); yy <= std::min(m.side - 1, y + 1); ++yy)
    for (int xx = std::max(0, x - 1); xx <= std::min(m.side - 1, x + 1); ++xx)
      c += m.cell[yy * m.side + xx] == Minesweeper::kMine;
  return c;
}

// E[return] of uniform random clicks, by dynamic programming over the number r
// of safe cells viewed. With C cells, m mines, L = C - m: a click hits a mine
// w.p. m/C (reward -0.5 - 1/L, the end), a new safe cell w.p. (L - r)/C
// (reward 1/L; the end when it is the L-th), a viewed cell w.p. r/C (reward
// -0.5/(L - 2)); the episode is cut after L + 1 clicks.
double random_minesweeper_return(int C, int m) {
  const int L = C - m;
  std::vector<double> alive(static_cast<size_t>(L), 0.0);  // P(still playing, r viewed), r < L
  alive[0] = 1.0;
  double expected = 0;
  for (int t = 0; t < L + 1; ++t) {
    std::vector<double> next(static_cast<size_t>(L), 0.0);
    for (int r = 0; r < L; ++r) {
      const double p = alive[static_cast<size_t>(r)];
      expected += p * (double(m) / C * (-0.5 - 1.0 / L) + double(L - r) / C / L + double(r) / C * (-0.5 / (L - 2)));
      next[static_cast<size_t>(r)] += p * r / C;
      if (r + 1 < L) next[static_cast<size_t>(r + 1)] += p * (L - r) / C;
    }
    alive = next;
  }
  return expected;
}

}  // namespace

BOOST_AUTO_TEST_CASE(minesweeper_counts_and_rewards_follow_the_hidden_board) {
  for (const std::string& level : kLevels) {
    BOOST_TEST_CONTEXT(level) {
      const Minesweeper proto = prototype<Minesweeper>("minesweeper", level);
      const int C = proto.cells(), L = proto.safe_cells(), O = proto.obs_values();
      Rng rng(1, 0);
      for (int round = 0; round < 20; ++round) {
        Minesweeper m = proto;
        std::vector<float> obs(static_cast<size_t>(O));  // (obs_dim)
        m.reset(rng, obs.data());
        BOOST_TEST(argmax(obs.data(), O) == 0);  // popgym's first observation
        BOOST_TEST(std::count(m.cell, m.cell + C, Minesweeper::kMine) == proto.mines);
        for (int i = 0; i < C; ++i) {
          Minesweeper one = m;  // one click on the fresh board
          const EnvStepResult r = one.step(i, obs.data());
          const bool mine = m.cell[i] == Minesweeper::kMine;
          BOOST_TEST(argmax(obs.data(), O) == mines_around(m, i / m.side, i % m.side));
          BOOST_TEST(std::count(obs.begin(), obs.end(), 1.0f) == 1);
          BOOST_TEST(r.terminated == mine);
          BOOST_TEST(r.reward == static_cast<float>(mine ? -0.5 - 1.0 / L : 1.0 / L));
          if (!mine) {
            const EnvStepResult again = one.step(i, obs.data());  // a viewed cell: penalty, no end
            BOOST_TEST(again.reward == static_cast<float>(-0.5 / (L - 2)));
            BOOST_TEST(!again.terminated);
          }
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(minesweeper_oracle_clicks_each_safe_cell_once_and_scores_one) {
  for (const std::string& level : kLevels) {
    BOOST_TEST_CONTEXT(level) {
      Minesweeper m = prototype<Minesweeper>("minesweeper", level);
      Rng rng(2, 0);
      for (int round = 0; round < 20; ++round) {
        // Knows the mines: the first cell neither a mine nor viewed.
        const Episode e = play(m, rng, [](const Minesweeper& env, const float*) {
          return static_cast<int>(std::find(env.cell, env.cell + env.cells(), Minesweeper::kClear) - env.cell);
        });
        BOOST_TEST(e.length == m.safe_cells());
        BOOST_TEST((e.terminated && !e.truncated));
        BOOST_TEST(std::abs(e.ret - 1.0) <= kSumTol);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(minesweeper_sweep_never_pays_the_repeat_penalty) {
  // Clicking cells 0, 1, 2, ... never repeats: the episode is k new safe cells,
  // then a mine (return k/L - 0.5 - 1/L) unless every safe cell came first (1.0).
  for (const std::string& level : kLevels) {
    BOOST_TEST_CONTEXT(level) {
      Minesweeper m = prototype<Minesweeper>("minesweeper", level);
      const double L = m.safe_cells();
      Rng rng(3, 0);
      for (int round = 0; round < 50; ++round) {
        int next = 0;
        const Episode e = play(m, rng, [&](const Minesweeper&, const float*) { return next++; });
        BOOST_TEST(e.terminated);
        const bool won = m.viewed == m.safe_cells();
        BOOST_TEST(e.length == m.viewed + (won ? 0 : 1));
        BOOST_TEST(std::abs(e.ret - (m.viewed / L - (won ? 0.0 : 0.5 + 1.0 / L))) <= kSumTol);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(minesweeper_truncates_on_step_l_plus_one) {
  // Always clicking cell 0: a mine ends the first step; else every later click
  // repeats it, until popgym's truncation on step L + 1.
  for (const std::string& level : kLevels) {
    BOOST_TEST_CONTEXT(level) {
      const int L = prototype<Minesweeper>("minesweeper", level).safe_cells();
      int truncated = 0;
      for (const Episode& e : constant_action_episodes("minesweeper", level, 0, 40)) {
        if (e.terminated) {
          BOOST_TEST((e.length == 1 && !e.truncated));
          BOOST_TEST(std::abs(e.ret - (-0.5 - 1.0 / L)) <= kSumTol);
        } else {
          ++truncated;
          BOOST_TEST((e.truncated && e.length == L + 1));
          BOOST_TEST(std::abs(e.ret - (1.0 / L - L * 0.5 / (L - 2))) <= kSumTol);
        }
      }
      BOOST_TEST(truncated > 0);  // cell 0 is safe w.p. >= 27/32: most of the 40 episodes
    }
  }
}

BOOST_AUTO_TEST_CASE(minesweeper_random_policy_matches_its_expected_return) {
  for (const std::string& level : kLevels) {
    BOOST_TEST_CONTEXT(level) {
      const Minesweeper m = prototype<Minesweeper>("minesweeper", level);
      const double expected = random_minesweeper_return(m.cells(), m.mines);
      const Stats s = stats(returns_of_random_policy(m, 4000, 4));
      BOOST_TEST_MESSAGE("minesweeper " << level << ": random return " << s.mean << " (expected " << expected << ")");
      BOOST_TEST(std::abs(s.mean - expected) <= 5 * s.se);  // 5 standard errors: a false alarm ~1 in 2e6
    }
  }
}

// ---------------------------------------------------------------- battleship

namespace {

// E[return] of uniform random shots, by dynamic programming over the hits h so
// far. With C cells and S = 17 ship cells, a shot hits w.p. (S - h)/C (reward
// 1/S; the end at the S-th hit), else misses or repeats (reward -1/(C - S));
// the episode is cut after C shots.
double random_battleship_return(int C) {
  const int S = Battleship::kShipCells;
  std::vector<double> alive(static_cast<size_t>(S), 0.0);  // P(still playing, h hits), h < S
  alive[0] = 1.0;
  double expected = 0;
  for (int t = 0; t < C; ++t) {
    std::vector<double> next(static_cast<size_t>(S), 0.0);
    for (int h = 0; h < S; ++h) {
      const double p = alive[static_cast<size_t>(h)], hit = double(S - h) / C;
      expected += p * (hit / S - (1 - hit) / (C - S));
      next[static_cast<size_t>(h)] += p * (1 - hit);
      if (h + 1 < S) next[static_cast<size_t>(h + 1)] += p * hit;
    }
    alive = next;
  }
  return expected;
}

}  // namespace

BOOST_AUTO_TEST_CASE(battleship_places_four_ships_of_lengths_2_3_3_4) {
  for (const std::string& level : kLevels) {
    BOOST_TEST_CONTEXT(level) {
      Battleship b = prototype<Battleship>("battleship", level);
      Rng rng(5, 0);
      float obs[2];
      int vertical_pairs = 0, horizontal_pairs = 0;
      for (int round = 0; round < 200; ++round) {
        b.reset(rng, obs);
        BOOST_TEST((obs[0] == 1.0f && obs[1] == 0.0f));  // popgym's first observation: a miss
        BOOST_TEST(std::count(b.ship, b.ship + b.cells(), 1) == Battleship::kShipCells);
        BOOST_TEST(std::count(b.fired, b.fired + b.cells(), 1) == 0);
        for (int y = 0; y < b.side; ++y)
          for (int x = 0; x < b.side; ++x) {
            const bool here = b.ship[y * b.side + x];
            vertical_pairs += here && y + 1 < b.side && b.ship[(y + 1) * b.side + x];
            horizontal_pairs += here && x + 1 < b.side && b.ship[y * b.side + x + 1];
          }
      }
      // Both axes are drawn (a straight ship of length k holds k - 1 adjacent pairs along it).
      BOOST_TEST(vertical_pairs > 0);
      BOOST_TEST(horizontal_pairs > 0);
    }
  }
}

BOOST_AUTO_TEST_CASE(battleship_oracle_sinks_every_ship_in_17_shots_and_scores_one) {
  for (const std::string& level : kLevels) {
    BOOST_TEST_CONTEXT(level) {
      Battleship b = prototype<Battleship>("battleship", level);
      Rng rng(6, 0);
      for (int round = 0; round < 20; ++round) {
        int hits_seen = 0;
        const Episode e = play(b, rng, [&](const Battleship& env, const float* obs) {
          hits_seen += obs[1] == 1.0f;
          int i = 0;  // knows the ships: the first ship cell not fired at (one is left while the episode runs)
          while (!env.ship[i] || env.fired[i]) ++i;
          return i;
        });
        BOOST_TEST(hits_seen == Battleship::kShipCells - 1);  // every shot a hit (the last one ends it unseen)
        BOOST_TEST(e.length == Battleship::kShipCells);
        BOOST_TEST((e.terminated && !e.truncated));
        BOOST_TEST(std::abs(e.ret - 1.0) <= kSumTol);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(battleship_sweep_scores_one_minus_its_misses) {
  // Firing at cells 0, 1, 2, ... never repeats: it ends on the last ship cell,
  // with 17 hits and (length - 17) misses: 1 - misses/(C - 17), never below 0.
  for (const std::string& level : kLevels) {
    BOOST_TEST_CONTEXT(level) {
      Battleship b = prototype<Battleship>("battleship", level);
      const int C = b.cells();
      Rng rng(7, 0);
      for (int round = 0; round < 50; ++round) {
        int next = 0;
        const Episode e = play(b, rng, [&](const Battleship&, const float*) { return next++; });
        int last_ship_cell = C - 1;
        while (!b.ship[last_ship_cell]) --last_ship_cell;
        BOOST_TEST(e.terminated);
        BOOST_TEST(e.truncated == (last_ship_cell == C - 1));  // the C-th shot both sinks and hits the limit
        BOOST_TEST(e.length == last_ship_cell + 1);
        const double misses = e.length - Battleship::kShipCells;
        BOOST_TEST(std::abs(e.ret - (1.0 - misses / (C - Battleship::kShipCells))) <= kSumTol);
        BOOST_TEST(e.ret >= -kSumTol);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(battleship_repeated_shots_miss_and_truncate_after_every_cell) {
  // Always firing at cell 0: at most its first shot hits, every repeat reads and
  // scores a miss, and the episode is truncated after C shots. popgym documents
  // all misses as -C/(C - 17).
  for (const std::string& level : kLevels) {
    BOOST_TEST_CONTEXT(level) {
      const int C = prototype<Battleship>("battleship", level).cells(), S = Battleship::kShipCells;
      for (const Episode& e : constant_action_episodes("battleship", level, 0, 40)) {
        BOOST_TEST((e.truncated && !e.terminated && e.length == C));
        const double all_miss = -double(C) / (C - S), first_hit = 1.0 / S - double(C - 1) / (C - S);
        BOOST_TEST(std::min(std::abs(e.ret - all_miss), std::abs(e.ret - first_hit)) <= kSumTol);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(battleship_random_policy_matches_its_expected_return) {
  for (const std::string& level : kLevels) {
    BOOST_TEST_CONTEXT(level) {
      const Battleship b = prototype<Battleship>("battleship", level);
      const double expected = random_battleship_return(b.cells());
      const Stats s = stats(returns_of_random_policy(b, 4000, 8));
      BOOST_TEST_MESSAGE("battleship " << level << ": random return " << s.mean << " (expected " << expected << ")");
      BOOST_TEST(std::abs(s.mean - expected) <= 5 * s.se);  // 5 standard errors
    }
  }
}

// ---------------------------------------------------------------- multiarmed_bandit

BOOST_AUTO_TEST_CASE(bandit_oracle_pulls_the_best_arm_and_random_scores_zero) {
  for (const std::string& level : kLevels) {
    BOOST_TEST_CONTEXT(level) {
      MultiarmedBandit m = prototype<MultiarmedBandit>("multiarmed_bandit", level);
      const int K = m.arms;
      Rng rng(9, 0);
      std::vector<double> oracle;
      for (int i = 0; i < 2000; ++i) {
        // Given the true probabilities: always the best arm.
        const Episode e = play(m, rng, [](const MultiarmedBandit& env, const float*) {
          return static_cast<int>(std::max_element(env.payout, env.payout + env.arms) - env.payout);
        });
        BOOST_TEST((e.truncated && !e.terminated && e.length == m.length));
        oracle.push_back(e.ret);
      }
      // The return is 2 (payouts / length) - 1, and a payout has probability
      // max p, whose mean over K uniform probabilities is K/(K + 1).
      const double expected = (K - 1.0) / (K + 1.0);
      const Stats so = stats(oracle);
      BOOST_TEST_MESSAGE("multiarmed_bandit " << level << ": oracle " << so.mean << " (expected " << expected << ")");
      BOOST_TEST(std::abs(so.mean - expected) <= 5 * so.se);  // 5 standard errors
      // Random arms: each pull pays w.p. E[p] = 1/2, so E[return] = 0.
      const Stats sr = stats(returns_of_random_policy(m, 2000, 10));
      BOOST_TEST(std::abs(sr.mean) <= 5 * sr.se);
    }
  }
}

BOOST_AUTO_TEST_CASE(bandit_arms_pay_with_their_probability) {
  // Pulling arm 0 for whole episodes: its payouts are Binomial(length, p0) per
  // episode, so their total over many episodes is within a few standard
  // deviations of sum(length * p0), and the obs reads each payout as the reward does.
  MultiarmedBandit m = prototype<MultiarmedBandit>("multiarmed_bandit", "easy");
  Rng rng(11, 0);
  double paid = 0, expected = 0, variance = 0;
  for (int i = 0; i < 200; ++i) {
    std::vector<float> obs(2);
    m.reset(rng, obs.data());
    BOOST_TEST((obs[0] == 1.0f && obs[1] == 0.0f));  // popgym's first observation: no payout
    const double p = m.payout[0];
    BOOST_TEST((p >= 0.0 && p < 1.0));
    for (int t = 0; t < m.length; ++t) {
      const EnvStepResult r = m.step(0, obs.data());
      BOOST_TEST(r.reward == (obs[1] == 1.0f ? 1.0f : -1.0f) / 200.0f);
      BOOST_TEST(!r.terminated);
      paid += obs[1];
    }
    BOOST_TEST(m.pulls[0] == m.length);
    expected += m.length * p;
    variance += m.length * p * (1 - p);
  }
  BOOST_TEST(std::abs(paid - expected) <= 5 * std::sqrt(variance));
}

// ---------------------------------------------------------------- noisy_stateless_cartpole

BOOST_AUTO_TEST_CASE(noisy_cartpole_blurs_the_observations_only) {
  const double kSigma[] = {0.1, 0.2, 0.3};
  for (int d = 0; d < 3; ++d) {
    BOOST_TEST_CONTEXT(kLevels[d]) {
      const CartPole noisy_proto = prototype<CartPole>("noisy_stateless_cartpole", kLevels[d]);
      BOOST_TEST(noisy_proto.noise_sigma == static_cast<float>(kSigma[d]));
      BOOST_TEST(noisy_proto.max_steps == 200);
      // The twin without noise, started from the same stream: the physics take the
      // same draws first, so the two see the same cart under the same actions.
      Rng arng(12, 1);
      std::vector<double> x_noise;
      int theta_clipped = 0;
      const float theta_bound = static_cast<float>(2 * CartPolePhysics::kThetaThreshold);
      for (uint64_t seed = 0; x_noise.size() < 20000; ++seed) {
        CartPole noisy = noisy_proto, clean = CartPole::stateless(200);
        Rng r1(seed, 0), r2(seed, 0);
        const size_t O = static_cast<size_t>(noisy.spec().obs_dim);
        std::vector<float> on(O), oc(O);  // (obs_dim) each
        noisy.reset(r1, on.data());
        clean.reset(r2, oc.data());
        for (int t = 0;; ++t) {
          BOOST_TEST(noisy.physics.x == clean.physics.x);
          BOOST_TEST(noisy.physics.theta_dot == clean.physics.theta_dot);
          // |x| <= 2.4 is 8 sigma inside the bound 4.8, so x is never clipped.
          x_noise.push_back(static_cast<double>(on[0]) - oc[0]);
          theta_clipped += std::abs(on[1]) == theta_bound;
          BOOST_TEST(std::abs(on[1]) <= theta_bound);
          if (t == 200) break;
          const int a = static_cast<int>(arng.below(2));
          const EnvStepResult rn = noisy.step(a, on.data()), rc = clean.step(a, oc.data());
          BOOST_TEST(rn.reward == rc.reward);
          BOOST_TEST(rn.reward == 1.0f / 200.0f);
          BOOST_TEST(rn.terminated == rc.terminated);
          if (rn.terminated) break;
        }
      }
      // The first observation is blurred too (popgym adds noise at reset).
      BOOST_TEST(x_noise[0] != 0.0);
      // Noise N(0, sigma^2) per component: over n samples the mean has standard
      // error sigma/sqrt(n) and the sample sd about sigma/sqrt(2n); 5 of each.
      const Stats s = stats(x_noise);
      const double n = static_cast<double>(x_noise.size());
      BOOST_TEST_MESSAGE("noisy_stateless_cartpole " << kLevels[d] << ": x noise mean " << s.mean << " sd " << s.sd
                                                     << " over " << n << "; theta clipped " << theta_clipped);
      BOOST_TEST(std::abs(s.mean) <= 5 * kSigma[d] / std::sqrt(n));
      BOOST_TEST(std::abs(s.sd - kSigma[d]) <= 5 * kSigma[d] / std::sqrt(2 * n));
      // theta (|theta| <= 0.21 against the bound 0.42) is clipped once in a while.
      BOOST_TEST(theta_clipped > 0);
    }
  }
}
