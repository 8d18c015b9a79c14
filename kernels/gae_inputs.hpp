// The inputs of GAE(λ) over a (T, B) chunk, shared by the CPU estimator
// (tools/gae.hpp) and the CUDA one (kernels/gae.cuh): a plain struct of
// pointers (host or device, as the caller's function says) kept at the kernels
// level so that kernels/ includes nothing from the layers above it.
#pragma once

#include <cstdint>

namespace mambarl {

struct GaeInputs {
  int T = 0, B = 0;
  const float* rewards = nullptr;       // (T, B)
  const float* values = nullptr;        // (T, B)   V(o_t) under the acting policy
  const uint8_t* terminated = nullptr;  // (T, B)
  const uint8_t* truncated = nullptr;   // (T, B)
  const float* final_values = nullptr;  // (T, B)   V(final obs), read where truncated
  const float* next_values = nullptr;   // (B)      V(o_T): the obs after the chunk
};

}  // namespace mambarl
