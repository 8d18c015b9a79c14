// POPGym MultiarmedBandit (popgym/envs/multiarmed_bandit.py): `arms` arms, each
// paying out with its own probability, drawn uniform in [0, 1) (float32, as
// popgym) at every reset. Each step pulls one arm; the agent sees only whether
// it paid, so it must remember which arm paid how often to exploit the best.
//
//   action:  the arm, 0 .. arms - 1
//   obs:     one-hot [no payout, payout], popgym's Discrete(2) as Gymnasium's
//            flatten gives it; the first observation reads "no payout"
//   reward:  +1/length on a payout, -1/length otherwise; never terminates,
//            truncated after `length` steps. Knowing the probabilities, the best
//            play pulls the best arm, E = 2 E[max p] - 1 = (arms - 1)/(arms + 1);
//            a uniform guess scores 0 in expectation
//   levels:  (arms, length) easy (10, 200), medium (20, 400), hard (30, 600)
//
// The payout draws happen in step(), which the env contract gives no Rng: the
// env keeps its own stream, seeded at each reset from the one reset() is given,
// so the episode stays a function of (seed, env index) and of the state saved.
// POPGym marks it obs_requires_prev_action: a payout means nothing without the
// arm pulled, so spec().prev_action_by_default is set.
#pragma once

#include <cstdint>
#include <iomanip>
#include <ostream>

#include "envs/batched_env.hpp"
#include "kernels/base/check.hpp"
#include "kernels/base/rng.hpp"

namespace mambarl {

struct MultiarmedBandit {
  static constexpr int kMaxArms = 30;  // hard

  int32_t arms = 10;
  int32_t length = 200;             // steps per episode (the time limit)
  float payout[kMaxArms] = {};      // (arms): probability of a payout
  int16_t pulls[kMaxArms] = {};     // (arms): pulls this episode, for render
  int16_t paid[kMaxArms] = {};      // (arms): payouts this episode, for render
  Rng rng;                          // the payout draws of this episode
  // Saved as raw bytes (BatchedEnv::save_state): no padding (static_assert below).

  MultiarmedBandit(int arms_, int length_) : arms(arms_), length(length_) {
    MAMBARL_CHECK(arms >= 2 && arms <= kMaxArms,
                  "multiarmed_bandit: arms must be in [2, " << kMaxArms << "], got " << arms);
    MAMBARL_CHECK(length >= 1 && length <= INT16_MAX,
                  "multiarmed_bandit: length must be in [1, " << INT16_MAX << "], got " << length);
  }

  EnvSpec spec() const {
    return one_hot_env_spec("multiarmed_bandit", 2, arms, length, /*prev_action_by_default=*/true);
  }

  MAMBARL_HD void reset(Rng& episode_rng, float* obs) {
    for (int a = 0; a < arms; ++a) {
      payout[a] = static_cast<float>(episode_rng.uniform());
      pulls[a] = paid[a] = 0;
    }
    rng = Rng(episode_rng.next_u64());
    write_obs(false, obs);
  }

  MAMBARL_HD EnvStepResult step(int action, float* obs) {
    const bool pays = rng.uniform() < payout[action];
    pulls[action] += 1;
    paid[action] += pays;
    write_obs(pays, obs);
    const float scale = 1.0f / static_cast<float>(length);
    return {pays ? scale : -scale, false};
  }

  // The arms as the agent has seen them: payouts / pulls, and the true probability.
  void render(std::ostream& os) const {
    os << "multiarmed_bandit, " << arms << " arms: paid/pulled (true p)\n";
    for (int a = 0; a < arms; ++a)
      os << "  arm " << std::setw(2) << a << ": " << paid[a] << "/" << pulls[a] << " (" << std::fixed
         << std::setprecision(2) << payout[a] << std::defaultfloat << ")\n";
  }

 private:
  MAMBARL_HD static void write_obs(bool pays, float* obs) {
    obs[0] = pays ? 0.0f : 1.0f;
    obs[1] = pays ? 1.0f : 0.0f;
  }
};
static_assert(sizeof(MultiarmedBandit) == 2 * sizeof(int32_t) + MultiarmedBandit::kMaxArms * (sizeof(float) +
                                                                                               2 * sizeof(int16_t)) +
                                              sizeof(Rng),
              "MultiarmedBandit must have no padding bytes");

}  // namespace mambarl
