// GAE(λ) over a (T, B) device chunk (policy/MATH.md "PPO with GAE"), the twin of
// tools/gae.cpp's compute_gae: the same formula with the bootstrap on
// truncation, evaluated in double in the same order (one thread per env,
// t walking backwards), so the two agree to the rounding of the stored
// floats. The same GaeInputs as compute_gae, with device pointers; the launch
// is capturable.
#pragma once

#include <cuda_runtime.h>

#include "kernels/gae_inputs.hpp"

namespace mambarl::cuda {

// `in` holds device pointers; advantages and returns are device (T, B) outputs.
void gae(const GaeInputs& in, double gamma, double lambda, float* advantages, float* returns,
         cudaStream_t stream);

}  // namespace mambarl::cuda
