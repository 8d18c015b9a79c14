// POPGym Battleship (popgym/envs/battleship.py): ships of lengths 2, 3, 3 and 4
// (17 cells) hidden on a side x side board. Each step the agent fires at one cell
// and is told only whether it hit; where it fired, it must remember.
//
//   action:  ONE categorical over the cells, action = y * side + x, where (y, x)
//            is popgym's MultiDiscrete([side, side]) action (row, column)
//   obs:     one-hot [miss, hit], popgym's Discrete(2) as Gymnasium's flatten
//            gives it; the first observation reads "miss". A shot at a cell
//            fired at before reads "miss" even on a ship.
//   reward:  a hit +1/17; anything else (a miss or a repeat) -1/(cells - 17). So
//            17 straight hits score 1.0, a sweep of every cell scores >= 0.0
//            (exactly 0 when the last ship cell is the last cell swept)
//   end:     terminated on the 17th hit; truncated after `cells` steps
//   levels:  side easy 8, medium 10, hard 12
//
// Ships are placed as popgym does, one after the other in the order above: a
// uniform start cell, a uniform axis and direction, rejected and redrawn while
// the ship leaves the board or overlaps one placed before.
//
// POPGym marks it obs_requires_prev_action: a hit means nothing without the cell
// fired at, so spec().prev_action_by_default is set.
#pragma once

#include <cstdint>
#include <ostream>

#include "envs/batched_env.hpp"
#include "kernels/base/check.hpp"

namespace mambarl {

struct Battleship {
  static constexpr int kMaxSide = 12;  // hard
  static constexpr int kMaxCells = kMaxSide * kMaxSide;
  static constexpr int kNumShips = 4;
  static constexpr int kShipCells = 2 + 3 + 3 + 4;  // hits needed
  // Lengths 2, 3, 3, 4 in popgym's order; a function, as device code cannot
  // index a host constexpr array.
  MAMBARL_HD static int ship_length(int i) { return i == 0 ? 2 : i == kNumShips - 1 ? 4 : 3; }

  int32_t side = 8;
  int32_t hits = 0;               // distinct ship cells hit this episode
  uint8_t ship[kMaxCells] = {};   // (side, side): 1 where a ship lies
  uint8_t fired[kMaxCells] = {};  // (side, side): 1 where the agent has fired
  // Saved as raw bytes (BatchedEnv::save_state): no padding (static_assert below).

  explicit Battleship(int side_) : side(side_) {
    // From 8 (the easy level) the ship placement provably ends (place()).
    MAMBARL_CHECK(side >= 8 && side <= kMaxSide, "battleship: side must be in [8, " << kMaxSide << "], got " << side);
  }

  MAMBARL_HD int cells() const { return side * side; }

  EnvSpec spec() const {
    return one_hot_env_spec("battleship", 2, cells(), cells(), /*prev_action_by_default=*/true);
  }

  MAMBARL_HD void reset(Rng& rng, float* obs) {
    for (int i = 0; i < cells(); ++i) ship[i] = fired[i] = 0;
    for (int i = 0; i < kNumShips; ++i) place(rng, ship_length(i));
    hits = 0;
    write_obs(false, obs);
  }

  MAMBARL_HD EnvStepResult step(int action, float* obs) {
    const bool hit = ship[action] && !fired[action];
    fired[action] = 1;
    hits += hit;
    write_obs(hit, obs);
    // In double and rounded once, as popgym's Python floats become our float rewards.
    const double reward = hit ? 1.0 / kShipCells : -1.0 / (cells() - kShipCells);
    return {static_cast<float>(reward), hits == kShipCells};
  }

  // The board as the agent has learnt it: 'X' hit, 'o' miss, '.' not fired at.
  void render(std::ostream& os) const {
    os << "battleship " << side << "x" << side << ", " << hits << "/" << kShipCells << " ship cells hit\n";
    for (int y = 0; y < side; ++y) {
      for (int x = 0; x < side; ++x) {
        const int i = y * side + x;
        os << (x ? " " : "") << (!fired[i] ? '.' : ship[i] ? 'X' : 'o');
      }
      os << "\n";
    }
  }

 private:
  // Rejection sampling as popgym's. It ends: on a side >= 8 board every row has
  // room for a ship of 4 unless 2 of its cells are taken, and the ships placed
  // before the last hold 8 cells, too few to block all 8+ rows (a few draws on average).
  MAMBARL_HD void place(Rng& rng, int length) {
    const uint32_t n = static_cast<uint32_t>(side);
    for (;;) {
      const int y0 = static_cast<int>(rng.below(n)), x0 = static_cast<int>(rng.below(n));
      const bool along_y = rng.below(2) == 0;  // popgym's axis 0: the row index moves
      const int sign = rng.below(2) == 0 ? 1 : -1;
      const int y1 = along_y ? y0 + sign * (length - 1) : y0;
      const int x1 = along_y ? x0 : x0 + sign * (length - 1);
      if (y1 < 0 || y1 >= side || x1 < 0 || x1 >= side) continue;
      const int ylo = y0 < y1 ? y0 : y1, yhi = y0 < y1 ? y1 : y0;
      const int xlo = x0 < x1 ? x0 : x1, xhi = x0 < x1 ? x1 : x0;
      bool free = true;
      for (int y = ylo; y <= yhi; ++y)
        for (int x = xlo; x <= xhi; ++x) free = free && !ship[y * side + x];
      if (!free) continue;
      for (int y = ylo; y <= yhi; ++y)
        for (int x = xlo; x <= xhi; ++x) ship[y * side + x] = 1;
      return;
    }
  }

  MAMBARL_HD static void write_obs(bool hit, float* obs) {
    obs[0] = hit ? 0.0f : 1.0f;
    obs[1] = hit ? 1.0f : 0.0f;
  }
};
static_assert(sizeof(Battleship) == 2 * sizeof(int32_t) + 2 * Battleship::kMaxCells,
              "Battleship must have no padding bytes");

}  // namespace mambarl
