// POPGym MineSweeper (popgym/envs/minesweeper.py): Minesweeper on a side x side
// board the agent never sees. Each step it clicks one cell and is told only how
// many mines lie in the 3 x 3 block centred on that cell (the cell itself
// included, as popgym counts); it must remember what it has clicked.
//
//   action:  ONE categorical over the cells, action = y * side + x, where (y, x)
//            is popgym's MultiDiscrete([side, side]) action (row, column)
//   obs:     one-hot mine count, popgym's Discrete(min(mines + 1, 10)) as
//            Gymnasium's flatten gives it; the first observation shows count 0
//   reward:  with L = cells - mines: a new safe cell +1/L; a mine -0.5 - 1/L and
//            the episode terminates; a cell clicked before -0.5/(L - 2)
//   end:     terminated on a mine or once all L safe cells are clicked (so the
//            best return is 1.0 in L steps); truncated on step L + 1 (popgym
//            compares its step counter with L before counting the step)
//   levels:  easy 4x4 / 2 mines, medium 6x6 / 6, hard 8x8 / 10
//
// POPGym marks it obs_requires_prev_action: a count means nothing without the
// cell it belongs to, so spec().prev_action_by_default is set.
#pragma once

#include <cstdint>
#include <ostream>

#include "envs/batched_env.hpp"
#include "kernels/base/check.hpp"

namespace mambarl {

struct Minesweeper {
  static constexpr int kMaxSide = 8;  // hard
  static constexpr int kMaxCells = kMaxSide * kMaxSide;
  static constexpr int kMaxCount = 9;  // a 3 x 3 block
  enum Cell : uint8_t { kClear = 0, kMine = 1, kViewed = 2 };

  int32_t side = 4;
  int32_t mines = 2;
  int32_t viewed = 0;               // safe cells clicked this episode
  uint8_t cell[kMaxCells] = {};     // (side, side): Cell
  uint8_t count[kMaxCells] = {};    // (side, side): mines in the 3 x 3 block around each cell
  // Saved as raw bytes (BatchedEnv::save_state): no padding (static_assert below).

  Minesweeper(int side_, int mines_) : side(side_), mines(mines_) {
    MAMBARL_CHECK(side >= 2 && side <= kMaxSide, "minesweeper: side must be in [2, " << kMaxSide << "], got " << side);
    MAMBARL_CHECK(mines >= 1 && mines <= side * side - 3,
                  "minesweeper: mines must be in [1, cells - 3] (the repeat penalty divides by L - 2), got "
                      << mines);
  }

  MAMBARL_HD int cells() const { return side * side; }
  MAMBARL_HD int safe_cells() const { return cells() - mines; }  // popgym's max_episode_length L
  MAMBARL_HD int obs_values() const { return mines < kMaxCount ? mines + 1 : kMaxCount + 1; }  // counts 0 .. min(mines, 9)

  EnvSpec spec() const {
    return one_hot_env_spec("minesweeper", obs_values(), cells(), safe_cells() + 1, /*prev_action_by_default=*/true);
  }

  MAMBARL_HD void reset(Rng& rng, float* obs) {
    const int n = cells();
    // A uniform set of `mines` distinct cells: the first `mines` of a partial
    // Fisher-Yates shuffle of the cell indices.
    uint8_t order[kMaxCells];
    for (int i = 0; i < n; ++i) {
      order[i] = static_cast<uint8_t>(i);
      cell[i] = kClear;
    }
    for (int i = 0; i < mines; ++i) {
      const int j = i + static_cast<int>(rng.below(static_cast<uint32_t>(n - i)));
      const uint8_t t = order[i];
      order[i] = order[j];
      order[j] = t;
      cell[order[i]] = kMine;
    }
    for (int y = 0; y < side; ++y)
      for (int x = 0; x < side; ++x) {
        int c = 0;
        for (int dy = -1; dy <= 1; ++dy)
          for (int dx = -1; dx <= 1; ++dx) {
            const int yy = y + dy, xx = x + dx;
            if (yy >= 0 && yy < side && xx >= 0 && xx < side) c += cell[yy * side + xx] == kMine;
          }
        count[y * side + x] = static_cast<uint8_t>(c);
      }
    viewed = 0;
    write_obs(0, obs);
  }

  MAMBARL_HD EnvStepResult step(int action, float* obs) {
    // In double and rounded once, as popgym's Python floats become our float rewards.
    const double L = safe_cells();
    double reward;
    bool terminated = false;
    if (cell[action] == kMine) {
      reward = -0.5 - 1.0 / L;
      terminated = true;
    } else if (cell[action] == kViewed) {
      reward = -0.5 / (L - 2.0);
    } else {
      cell[action] = kViewed;
      ++viewed;
      reward = 1.0 / L;
      terminated = viewed == safe_cells();
    }
    write_obs(count[action], obs);
    return {static_cast<float>(reward), terminated};
  }

  // The board as the agent has learnt it: the count of each clicked cell, '.' elsewhere.
  void render(std::ostream& os) const {
    os << "minesweeper " << side << "x" << side << ", " << mines << " mines, " << viewed << "/" << safe_cells()
       << " safe cells clicked\n";
    for (int y = 0; y < side; ++y) {
      for (int x = 0; x < side; ++x) {
        const int i = y * side + x;
        os << (x ? " " : "") << (cell[i] == kViewed ? static_cast<char>('0' + count[i]) : '.');
      }
      os << "\n";
    }
  }

 private:
  MAMBARL_HD void write_obs(int c, float* obs) const {
    for (int i = 0; i < obs_values(); ++i) obs[i] = 0.0f;
    obs[c] = 1.0f;
  }
};
static_assert(sizeof(Minesweeper) == 3 * sizeof(int32_t) + 2 * Minesweeper::kMaxCells,
              "Minesweeper must have no padding bytes");

}  // namespace mambarl
