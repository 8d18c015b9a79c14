// Generalised advantage estimation over a [T, B] chunk (policy/MATH.md "PPO with GAE"), with
// the bootstrap on truncation: a time-limit end is not a terminal state, so
// its TD target uses V(final obs), while a terminal state contributes 0.
#pragma once

#include "kernels/gae_inputs.hpp"

namespace mambarl {

// Writes advantages and returns (R = Â + V), each (T, B).
void compute_gae(const GaeInputs& in, double gamma, double lambda, float* advantages, float* returns);

}  // namespace mambarl
