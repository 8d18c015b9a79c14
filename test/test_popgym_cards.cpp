// Reference checks of the POPGym card envs repeat_first, autoencode,
// higher_lower and concentration against popgym's definitions (envs/ENVS.md,
// "The env types"): per difficulty the spec (obs_dim, actions,
// time limit), episode lengths and terminated vs truncated, a policy scripted
// from the observations alone (as a memory policy sees them) reaching the best
// return popgym's scoring allows, and a uniform policy's expected floor.
// Concentration's turn rules are also stepped one by one on the env struct.
// The generic VecEnv contract of these types runs in test_envs.
#define BOOST_TEST_MODULE popgym_cards
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <string>
#include <variant>
#include <vector>

#include "envs/builtin_envs.hpp"
#include "envs/concentration.hpp"
#include "test/env_episodes.hpp"

using namespace mambarl;
using namespace mambarl::test;

namespace {

struct Level {
  std::string difficulty;
  int decks;
};

std::unique_ptr<VecEnv> make_level(const std::string& type, const Level& L, int num_envs) {
  // The env's own observation (prev_action off), which the definitions speak of.
  return make_env("type: " + type + "\nnum_envs: " + std::to_string(num_envs) +
                  "\ndifficulty: " + L.difficulty + "\nprev_action: false");
}

// A uniform guess among 4 suits on each of R scored steps of +-1/R: each step
// is +1/R w.p. 1/4 and -1/R w.p. 3/4, so E[return] = -0.5 and, the steps being
// independent given the deck, Var[return] = R * (1/R^2) * (1 - 0.25) = 0.75 / R.
// Five standard errors of the mean over `episodes` episodes: a false failure
// has probability below 1e-6.
void expect_uniform_suit_guess_floor(const std::vector<Episode>& eps, int R) {
  const double tolerance = 5.0 * std::sqrt(0.75 / R / static_cast<double>(eps.size()));
  BOOST_TEST(std::abs(mean_return(eps) + 0.5) <= tolerance,
             "mean " << mean_return(eps) << " tolerance " << tolerance);
}

std::vector<Episode> uniform_policy(VecEnv& env, uint64_t seed, int episodes) {
  Rng arng(seed, 0);
  const auto n = static_cast<uint32_t>(env.spec().action.n);
  return run_episodes(
      env, seed, episodes, [&](const float*, int) { return static_cast<int>(arng.below(n)); }, [](int) {});
}

void expect_spec(const VecEnv& env, int obs_dim, int actions, int max_episode_steps, bool prev_action) {
  const EnvSpec& s = env.spec();
  BOOST_TEST(s.obs_dim == obs_dim);
  BOOST_TEST(s.action.n == actions);
  BOOST_TEST(s.max_episode_steps == max_episode_steps);
  BOOST_TEST(s.prev_action_by_default == prev_action);
}

}  // namespace

// ---------------------------------------------------------------- RepeatFirst

BOOST_AUTO_TEST_CASE(repeat_first_memory_scores_one_and_random_minus_half) {
  for (const Level& L : {Level{"easy", 1}, Level{"medium", 8}, Level{"hard", 16}}) {
    BOOST_TEST_CONTEXT(L.difficulty) {
      const int B = 4, N = 52 * L.decks;
      auto env = make_level("repeat_first", L, B);
      expect_spec(*env, 4, 4, 0, false);
      // Memory: the suit of the episode's first observation.
      std::vector<int> target(B, -1);
      const auto memory = run_episodes(
          *env, 1, 8,
          [&](const float* o, int b) {
            if (target[b] < 0) target[b] = argmax(o, 4);
            return target[b];
          },
          [&](int b) { target[b] = -1; });
      for (const auto& e : memory) {
        BOOST_TEST(e.length == N - 1);  // every card but the first is dealt by a step
        BOOST_TEST((e.terminated && !e.truncated));
        BOOST_TEST(std::abs(e.ret - 1.0) <= 1e-5);  // N - 1 float terms of 1/(N - 1)
      }
      // A memoryless echo of the current suit: another card has the first card's suit
      // with probability (13 decks - 1)/(N - 1) < 1/4, so it scores about -0.5.
      const auto echo = run_episodes(
          *env, 2, 40, [](const float* o, int) { return argmax(o, 4); }, [](int) {});
      BOOST_TEST(mean_return(echo) < -0.3);
      // The episode deals every card: 13 of each suit per deck.
      BOOST_TEST((feature_histogram(*env, 0, 4) == std::vector<int>(4, 13 * L.decks)));
      expect_uniform_suit_guess_floor(uniform_policy(*env, 3, 400), N - 1);
    }
  }
}

// ---------------------------------------------------------------- Autoencode

BOOST_AUTO_TEST_CASE(autoencode_reciting_backwards_scores_one_and_random_minus_half) {
  for (const Level& L : {Level{"easy", 1}, Level{"medium", 2}, Level{"hard", 3}}) {
    BOOST_TEST_CONTEXT(L.difficulty) {
      const int B = 4, N = 52 * L.decks;
      auto env = make_level("autoencode", L, B);
      expect_spec(*env, 6, 4, 0, false);
      // Memory: the suits shown, in order. Observations are [play, watch, suit (4)];
      // the first play observation still shows a real card (the last one dealt),
      // the later ones a dummy spade. In play, recite backwards (or, to show that
      // the order matters, forwards).
      struct Reciter {
        std::vector<int> shown;
        int watched = 0, played = 0;
        int act(const float* o, bool backwards) {
          BOOST_TEST(o[0] + o[1] == 1.0f);
          const int suit = argmax(o + 2, 4);
          if (o[1] == 1.0f) {
            watched += 1;
            shown.push_back(suit);
            return 0;  // ignored while watching
          }
          if (played == 0) {
            shown.push_back(suit);
          } else {
            BOOST_TEST(suit == 0);
          }
          const int n = static_cast<int>(shown.size());
          const int answer = backwards ? shown[n - 1 - played] : shown[played];
          played += 1;
          return answer;
        }
      };
      const auto recite = [&](uint64_t seed, int episodes, bool backwards) {
        std::vector<Reciter> players(B);
        return run_episodes(
            *env, seed, episodes, [&](const float* o, int b) { return players[b].act(o, backwards); },
            [&](int b) {
              if (players[b].played > 0) {
                BOOST_TEST(players[b].watched == N - 1);
                BOOST_TEST(players[b].played == N);
              }
              players[b] = Reciter{};
            });
      };
      for (const auto& e : recite(4, 8, true)) {
        BOOST_TEST(e.length == 2 * N - 1);
        BOOST_TEST((e.terminated && !e.truncated));
        BOOST_TEST(std::abs(e.ret - 1.0) <= 1e-5);  // N float terms of 1/N
      }
      // Forwards, card i is compared with card N-1-i, a different card of the same
      // suit with probability (13 decks - 1)/(N - 1) < 1/4: about as bad as guessing.
      BOOST_TEST(mean_return(recite(5, 40, false)) < -0.3);
      expect_uniform_suit_guess_floor(uniform_policy(*env, 6, 400), N);
    }
  }
}

// ---------------------------------------------------------------- HigherLower

BOOST_AUTO_TEST_CASE(higher_lower_card_counting_beats_every_memoryless_policy) {
  constexpr int kHigher = 0, kLower = 1;
  constexpr double kMemorylessBest = 84.0 / 169.0;  // envs/higher_lower.hpp
  for (const Level& L : {Level{"easy", 1}, Level{"medium", 2}, Level{"hard", 3}}) {
    BOOST_TEST_CONTEXT(L.difficulty) {
      const int B = 8, N = 52 * L.decks, kEpisodes = 1000;
      auto env = make_level("higher_lower", L, B);
      expect_spec(*env, 13, 2, 0, false);
      // Card counting: bet on the side holding more of the cards still in the deck.
      // It also sums its own expected reward, (more - fewer) / cards left / N per
      // bet, which a fair deal and popgym's scoring (ties 0) make the expected
      // return; and, on the same cards, that of the memoryless best bet below.
      struct Counter {
        std::vector<int> left;
        double expected = 0, memoryless_expected = 0;
        bool started = false;
      };
      std::vector<Counter> counters(B);
      std::vector<Counter> closed;  // per finished episode, in order
      const auto counting = run_episodes(
          *env, 7, kEpisodes,
          [&](const float* o, int b) {
            Counter& c = counters[b];
            const int r = argmax(o, 13);
            c.left[r] -= 1;
            int higher = 0, lower = 0, total = 0;
            for (int k = 0; k < 13; ++k) {
              higher += k > r ? c.left[k] : 0;
              lower += k < r ? c.left[k] : 0;
              total += c.left[k];
            }
            const double edge = static_cast<double>(higher - lower) / total / N;  // of betting higher
            c.expected += std::abs(edge);
            c.memoryless_expected += r < 6 ? edge : -edge;
            return higher >= lower ? kHigher : kLower;
          },
          [&](int b) {
            if (counters[b].started) closed.push_back(counters[b]);
            counters[b] = Counter{std::vector<int>(13, 4 * L.decks), 0.0, 0.0, true};
          });
      // Differences as Episodes, to take their mean and standard error.
      std::vector<Episode> surprise, advantage;  // return - its expectation; counting's edge over memoryless
      for (size_t i = 0; i < counting.size(); ++i) {
        BOOST_TEST(counting[i].length == N - 1);
        BOOST_TEST((counting[i].terminated && !counting[i].truncated));
        surprise.push_back({counting[i].ret - closed[i].expected, 0, false, false});
        advantage.push_back({closed[i].expected - closed[i].memoryless_expected, 0, false, false});
      }
      BOOST_TEST(std::abs(mean_return(surprise)) <= 5 * sd_of_mean(surprise));  // 5 standard errors
      // Counting's expected return beats the memoryless best's on the same deals
      // (never below it bet by bet, so the paired difference has a small error).
      BOOST_TEST(mean_return(advantage) > 5 * sd_of_mean(advantage));
      // Memoryless best: higher below a 7 (rank index 6), lower above; its return
      // is 84/169 in expectation at every difficulty (envs/higher_lower.hpp).
      const auto memoryless = run_episodes(
          *env, 8, kEpisodes, [](const float* o, int) { return argmax(o, 13) < 6 ? kHigher : kLower; },
          [](int) {});
      BOOST_TEST(std::abs(mean_return(memoryless) - kMemorylessBest) <= 5 * sd_of_mean(memoryless));
      // Always "higher": every (current, next) pair is as likely as its mirror
      // image (rank r <-> 12 - r), so its expected return is 0; so is a uniform guess's.
      const auto higher = run_episodes(
          *env, 9, kEpisodes, [](const float*, int) { return kHigher; }, [](int) {});
      BOOST_TEST(std::abs(mean_return(higher)) <= 5 * sd_of_mean(higher));
      const auto uniform = uniform_policy(*env, 10, kEpisodes);
      BOOST_TEST(std::abs(mean_return(uniform)) <= 5 * sd_of_mean(uniform));
      BOOST_TEST_MESSAGE("higher_lower "
                         << L.difficulty << ": counting " << mean_return(counting) << " (edge "
                         << mean_return(advantage) << " +- " << sd_of_mean(advantage) << "), memoryless "
                         << mean_return(memoryless) << ", always higher " << mean_return(higher));
      // Even a clairvoyant bets N - 1 times at 1/N each: the return stays below 1.
      for (const auto& e : counting) BOOST_TEST(e.ret <= (N - 1.0) / N + 1e-6);
    }
  }
}

// ---------------------------------------------------------------- Concentration

namespace {

struct ConcentrationLevel {
  std::string difficulty;
  int decks, V, L;  // V: values of the matched feature; L: popgym's episode length
};
const std::vector<ConcentrationLevel> kConcentrationLevels = {
    {"easy", 1, 2, 104}, {"medium", 2, 2, 208}, {"hard", 1, 13, 104}};

Concentration concentration_struct(const std::string& difficulty) {
  return std::get<Concentration>(builtin_env(
      "concentration", ConfigNode(YAML::Load("difficulty: " + difficulty), "test.yaml", "env")).prototype);
}

// A player with perfect memory that sees only the observations and its own
// actions: it remembers every face shown, matches a known pair when it has one,
// else flips an unseen card (and then its partner if that is known). It tallies
// matches and misses from what the observation after each flip shows.
struct MemoryPlayer {
  int N = 0, V = 0;
  std::vector<int> known;     // (N): value seen at each position, -1 if never seen
  std::vector<bool> matched;  // (N)
  int first = -1, last = -1;  // this turn's first flip; the last action
  int matches = 0, misses = 0;

  MemoryPlayer(int n, int v) : N(n), V(v), known(n, -1), matched(n, false) {}

  // The observation that followed the last action (or the episode's first).
  void observe(const float* obs) {
    for (int i = 0; i < N; ++i) {
      const int face = argmax(obs + i * (V + 1), V + 1);
      if (face < V) known[i] = face;
    }
    if (last < 0) return;
    if (first < 0) {
      first = last;
    } else {
      if (known[first] == known[last] && first != last) {
        matched[first] = matched[last] = true;
        matches += 1;
      } else {
        misses += 1;
      }
      first = -1;
    }
  }

  int act() {
    last = first < 0 ? known_pair() : partner_of(first);
    if (last < 0) last = unseen();
    return last;
  }

 private:
  int known_pair() const {
    for (int i = 0; i < N; ++i)
      if (!matched[i] && known[i] >= 0 && partner_of(i) >= 0) return i;
    return -1;
  }
  int partner_of(int i) const {
    for (int j = 0; j < N; ++j)
      if (j != i && !matched[j] && known[j] >= 0 && known[j] == known[i]) return j;
    return -1;
  }
  int unseen() const {
    for (int i = 0; i < N; ++i)
      if (known[i] < 0) return i;
    return -1;  // cannot happen: a card without a known partner has an unseen one
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(concentration_memory_player_scores_what_its_turns_earn) {
  for (const auto& L : kConcentrationLevels) {
    BOOST_TEST_CONTEXT(L.difficulty) {
      const int B = 4, N = 52 * L.decks;
      auto env = make_level("concentration", Level{L.difficulty, L.decks}, B);
      expect_spec(*env, N * (L.V + 1), N, L.L, true);
      // By default concentration observes its previous action (POPGym needs it).
      BOOST_TEST(make_env("type: concentration\ndifficulty: " + L.difficulty)->spec().obs_dim == N * (L.V + 2));
      const int O = env->spec().obs_dim;
      std::vector<MemoryPlayer> players(B, MemoryPlayer(N, L.V));
      std::vector<MemoryPlayer> closed;  // per finished episode, in order
      std::vector<bool> started(B, false);
      const auto eps = run_episodes(
          *env, 11, 200,
          [&](const float* o, int b) {
            players[b].observe(o);
            return players[b].act();
          },
          [&](int b) {
            if (started[b]) {
              players[b].observe(env->final_obs() + b * O);  // the outcome of the episode's last flip
              closed.push_back(players[b]);
            }
            started[b] = true;
            players[b] = MemoryPlayer(N, L.V);
          });
      BOOST_TEST(closed.size() == eps.size());
      int terminated = 0;
      double misses = 0;
      for (size_t i = 0; i < eps.size(); ++i) {
        const MemoryPlayer& p = closed[i];
        // Every flip is of a face-down card, so the return is matches and misses alone
        // (1e-5: at most L float terms).
        BOOST_TEST(std::abs(eps[i].ret - (2.0 * p.matches / N - 2.0 * p.misses / L.L)) <= 1e-5);
        if (eps[i].terminated) {
          BOOST_TEST(p.matches == N / 2);
          BOOST_TEST(eps[i].length == 2 * (p.matches + p.misses));
        } else {
          BOOST_TEST(eps[i].truncated);
          BOOST_TEST(p.matches < N / 2);
        }
        if (eps[i].truncated) BOOST_TEST(eps[i].length == L.L);
        terminated += eps[i].terminated;
        misses += p.misses;
      }
      BOOST_TEST_MESSAGE("concentration " << L.difficulty << ": memory player mean return "
                                          << mean_return(eps) << ", mean misses " << misses / eps.size()
                                          << ", finished " << terminated << "/" << eps.size());
      // With two colours a perfect memory never needs many misses: every episode finishes.
      if (L.V == 2) BOOST_TEST(terminated == static_cast<int>(eps.size()));
    }
  }
}

BOOST_AUTO_TEST_CASE(concentration_clairvoyant_scores_one) {
  // Reading the layout from the struct (no policy can see it), flipping pair after
  // pair matches everything in N steps, within the time limit L: the best return, 1.0.
  for (const auto& L : kConcentrationLevels) {
    BOOST_TEST_CONTEXT(L.difficulty) {
      Concentration env = concentration_struct(L.difficulty);
      const int N = env.deck.num_cards;
      std::vector<float> obs(static_cast<size_t>(env.spec().obs_dim));
      Rng rng(12, 0);
      env.reset(rng, obs.data());
      std::vector<std::vector<int>> by_value(static_cast<size_t>(L.V));
      for (int i = 0; i < N; ++i) by_value[env.value_at(i)].push_back(i);
      double ret = 0;
      int steps = 0;
      bool terminated = false;
      for (const auto& positions : by_value)
        for (size_t k = 0; k < positions.size(); ++k) {
          const EnvStepResult r = env.step(positions[k], obs.data());
          BOOST_TEST(!terminated);
          ret += r.reward;
          steps += 1;
          terminated = r.terminated;
          BOOST_TEST(r.reward == (k % 2 == 0 ? 0.0f : 2.0f / N));
        }
      BOOST_TEST(terminated);
      BOOST_TEST(steps == N);
      BOOST_TEST(steps <= L.L);
      BOOST_TEST(std::abs(ret - 1.0) <= 1e-5);                                   // N/2 float terms of 2/N
      for (int i = 0; i < N; ++i) BOOST_TEST(obs[i * (L.V + 1) + L.V] == 0.0f);  // every card face up
    }
  }
}

BOOST_AUTO_TEST_CASE(concentration_turn_rules_follow_popgym) {
  Concentration env = concentration_struct("easy");
  const int V = 2, L = 104, N = 52;
  std::vector<float> obs(static_cast<size_t>(env.spec().obs_dim));
  Rng rng(13, 0);
  env.reset(rng, obs.data());
  const auto face_up = [&](int i) { return obs[i * (V + 1) + V] == 0.0f; };
  const auto shows = [&](int i) { return face_up(i) ? env.value_at(i) : -1; };
  for (int i = 0; i < N; ++i) BOOST_TEST(!face_up(i));
  // p and q: the same colour; r: the other.
  const int p = 0;
  int q = 1, r = 1;
  while (env.value_at(q) != env.value_at(p)) ++q;
  while (env.value_at(r) == env.value_at(p)) ++r;
  const float miss = 1.0f / L;
  const auto flip = [&](int i) { return env.step(i, obs.data()).reward; };

  // The same card twice: a miss; the card shows during the turn and is face down after it.
  BOOST_TEST(flip(p) == 0.0f);
  BOOST_TEST(shows(p) == env.value_at(p));
  BOOST_TEST(flip(p) == -2.0f * miss);
  BOOST_TEST(shows(p) == env.value_at(p));
  // A mismatch: both cards show on the step that flips the second, then turn face down.
  BOOST_TEST(flip(p) == 0.0f);
  BOOST_TEST(!face_up(r));
  BOOST_TEST(flip(r) == -2.0f * miss);
  BOOST_TEST((shows(p) == env.value_at(p) && shows(r) == env.value_at(r)));
  BOOST_TEST(flip(q) == 0.0f);
  BOOST_TEST((!face_up(p) && !face_up(r) && face_up(q)));
  // A match: +1/(N/2), and both stay face up.
  BOOST_TEST(flip(p) == 2.0f / N);
  BOOST_TEST(flip(r) == 0.0f);
  BOOST_TEST((face_up(p) && face_up(q) && face_up(r)));
  // Flipping a matched card costs the cards flipped this turn and ends the turn.
  BOOST_TEST(flip(p) == -2.0f * miss);  // r was this turn's first flip
  BOOST_TEST(flip(q) == -1.0f * miss);  // as a first flip
  BOOST_TEST(env.first == -1);
  BOOST_TEST((face_up(p) && face_up(q) && !face_up(r)));
  BOOST_TEST(env.matched == 2);
}

// ---------------------------------------------------------------- config

BOOST_AUTO_TEST_CASE(bad_difficulty_and_unknown_keys_are_config_errors) {
  for (const char* type : {"repeat_first", "autoencode", "higher_lower", "concentration"}) {
    BOOST_TEST_CONTEXT(type) {
      for (const auto& [yaml, must_say] : std::vector<std::pair<std::string, std::string>>{
               {"\ndifficulty: extreme", "env.difficulty: 'extreme' is not one of easy|medium|hard"},
               {"\ndecks: 2", "env.decks: unknown key"}}) {
        try {
          make_env(std::string("type: ") + type + yaml);
          BOOST_ERROR("no ConfigError for" << yaml);
        } catch (const ConfigError& e) {
          const std::string msg = e.what();
          BOOST_TEST(msg.find(must_say) != std::string::npos, msg);
        }
      }
    }
  }
}
