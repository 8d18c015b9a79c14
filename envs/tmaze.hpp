// T-maze (after Bakker 2002): a corridor of `length` cells ending in a junction.
// The first observation of an episode shows a cue, left or right (fair coin);
// afterwards the agent only sees whether it is in the corridor or at the junction.
//
//   obs (4):     [cue_left, cue_right, corridor, junction], exactly one is 1;
//                the cue shows on the episode's first observation only
//   actions (3): 0 forward, 1 turn left, 2 turn right. In the corridor, forward
//                moves one cell on and a turn bumps the wall (stays); at the
//                junction, forward bumps and a turn ends the episode.
//   reward:      +1 for turning to the cued side, -1 for the other (terminated);
//                every other step costs step_penalty (default 0)
//   time limit:  4 * (length + 1) steps (truncated); the shortest episode is
//                length forwards and one turn, length + 1 steps.
//
// With memory the return is 1 - length * step_penalty; a memoryless policy sees
// the same junction observation whatever the cue, so its turn is independent of
// the cue and its expected return is at most 0 (exactly 0 with no step penalty).
#pragma once

#include <ostream>
#include <string>

#include "envs/batched_env.hpp"
#include "kernels/base/check.hpp"

namespace mambarl {

struct TMaze {
  enum Action { kForward = 0, kLeft = 1, kRight = 2 };
  enum ObsIndex { kCueLeft = 0, kCueRight = 1, kCorridor = 2, kJunction = 3 };

  int length = 10;           // forward steps from the start to the junction
  float step_penalty = 0.0f;
  int cue = 0;               // 0 left, 1 right
  int pos = 0;               // 0 .. length (the junction)

  TMaze(int length_, float step_penalty_) : length(length_), step_penalty(step_penalty_) {
    MAMBARL_CHECK(length >= 1, "tmaze: length must be >= 1, got " << length);
  }

  EnvSpec spec() const {
    return one_hot_env_spec("tmaze", 4, 3, 4 * (length + 1));
  }

  MAMBARL_HD void reset(Rng& rng, float* obs) {
    cue = static_cast<int>(rng.below(2));
    pos = 0;
    write_obs(cue == 0 ? kCueLeft : kCueRight, obs);
  }

  MAMBARL_HD EnvStepResult step(int action, float* obs) {
    if (pos == length && action != kForward) {
      const bool correct = (action == kLeft) == (cue == 0);
      write_obs(kJunction, obs);
      return {correct ? 1.0f : -1.0f, true};
    }
    if (pos < length && action == kForward) ++pos;
    write_obs(pos == length ? kJunction : kCorridor, obs);
    return {-step_penalty, false};
  }

  void render(std::ostream& os) const {
    std::string corridor(static_cast<size_t>(length + 1), '=');
    corridor[static_cast<size_t>(length)] = 'T';
    corridor[static_cast<size_t>(pos)] = 'A';
    os << "cue " << (cue == 0 ? "left " : "right") << "  [" << corridor << "]  cell " << pos << "/" << length
       << "\n";
  }

 private:
  MAMBARL_HD static void write_obs(int index, float* obs) {
    write_one_hot(obs, 4, index);
  }
};

}  // namespace mambarl
