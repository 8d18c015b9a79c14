// The `env:` maps the env suites run every generic check over: every bundled
// type at every difficulty (and a non-default size or knob where a type has
// one). test_envs runs the CPU contract over them, test_gpu_envs the CPU ==
// CUDA lockstep; a new env type adds its lines here once and both cover it.
#pragma once

#include <string>
#include <vector>

namespace mambarl::test {

inline const std::vector<std::string>& bundled_env_configs() {
  static const std::vector<std::string> configs = {
      "type: cartpole",
      "type: stateless_cartpole",
      "type: stateless_cartpole\ndifficulty: medium",
      "type: stateless_cartpole\ndifficulty: hard",
      "type: repeat_previous",
      "type: repeat_previous\ndifficulty: medium",
      "type: repeat_previous\ndifficulty: hard",
      "type: count_recall",
      "type: count_recall\ndifficulty: medium",
      "type: count_recall\ndifficulty: hard",
      "type: repeat_first",
      "type: repeat_first\ndifficulty: medium",
      "type: repeat_first\ndifficulty: hard",
      "type: autoencode",
      "type: autoencode\ndifficulty: medium",
      "type: autoencode\ndifficulty: hard",
      "type: higher_lower",
      "type: higher_lower\ndifficulty: medium",
      "type: higher_lower\ndifficulty: hard",
      "type: concentration",
      "type: concentration\ndifficulty: medium",
      "type: concentration\ndifficulty: hard",
      "type: minesweeper",
      "type: minesweeper\ndifficulty: medium",
      "type: minesweeper\ndifficulty: hard",
      "type: battleship",
      "type: battleship\ndifficulty: medium",
      "type: battleship\ndifficulty: hard",
      "type: multiarmed_bandit",
      "type: multiarmed_bandit\ndifficulty: medium",
      "type: multiarmed_bandit\ndifficulty: hard",
      "type: noisy_stateless_cartpole",
      "type: noisy_stateless_cartpole\ndifficulty: medium",
      "type: noisy_stateless_cartpole\ndifficulty: hard",
      "type: tmaze",
      "type: tmaze\nlength: 2\nstep_penalty: 0.05",
      "type: tmaze\nlength: 3\nprev_action: true",
  };
  return configs;
}

}  // namespace mambarl::test
