// Minibatch gather on the device: the env columns `cols` of a time-major
// (T, B, W) array into a dense (T, Bm, W) one, so a learner step sees whole
// sequences of a shuffled subset of envs (tools/learner_loop.cpp does the
// same copy on the host). T = 1 gathers rows of a (B, W) array, e.g. the
// initial recurrent states (B, S) -> (Bm, S). Exact: a copy.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace mambarl::cuda {

//   cols (Bm) device, each in [0, B); src (T, B, W) -> dst (T, Bm, W)
template <typename V>
void gather_columns(int T, int B, int Bm, int W, const int* cols, const V* src, V* dst, cudaStream_t stream);

}  // namespace mambarl::cuda
