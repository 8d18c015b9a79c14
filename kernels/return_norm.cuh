// Value-target normalisation (algo.normalize_returns) on the device, the
// twin of tools/return_normalizer.hpp for GPU envs: the chunk's values read
// back in reward units before GAE, then its value targets merged into the
// running (mean, var, count) and standardised. In double with a
// deterministic block reduction (fixed tree, no atomics) where the CPU sums
// in (t, b) order: the same statistics to rounding (~1e-13 relative), not
// bitwise.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace mambarl::cuda {

// v (n), standardised -> v * sqrt(var + 1e-8) + mean, in place. stats (3):
// mean, var, count, as ReturnNormalizer::state().
void denormalize_values(float* v, size_t n, const double* stats, cudaStream_t stream);

// Folds returns (n, reward units) into stats (Chan et al.'s merge), then
// overwrites them with (returns - mean) / sqrt(var + 1e-8) under the merged stats.
void normalize_returns(float* returns, size_t n, double* stats, cudaStream_t stream);

}  // namespace mambarl::cuda
