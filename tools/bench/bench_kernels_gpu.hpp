// Per-kernel breakdown of the GPU actor's Mamba-1 step, for diagnosing the
// rollout bench: each kernel family of one layer (in_proj, pre, state,
// out_proj) with f32 and bf16 weights, timed alone on random data as a CUDA
// graph of back-to-back launches (µs per launch, median over replays), plus
// the bytes each must move and the bandwidth that implies.
#pragma once

#include <string>

namespace mambarl {

// One JSON array: [{"kernel":..., "weights":..., "us":..., "bytes":..., "TBps":...}, ...]
// for a Mamba-1 layer with batch B, d_model D (expand 2, d_state 16, d_conv 4).
std::string bench_kernels_gpu_json(int B, int D);

}  // namespace mambarl
