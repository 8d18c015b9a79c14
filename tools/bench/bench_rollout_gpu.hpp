// `mambarl bench rollout --device cuda`: the GPU actor's T=1 step, one JSON
// object. Per shape: median µs of `reps` (>= 1000) graph replays timed with
// CUDA events after warm-up, the same with programmatic dependent launch
// (graph_pdl), the eager launches beside them, and for the first
// shape the floor set by reading and writing the recurrent state once at the
// device-to-device copy bandwidth measured in the same run. Every shape runs
// with f32 and with bf16 weights ("weights"), and "mamba1_layer_kernels"
// times one Mamba-1 layer of the first shape kernel by kernel.
#pragma once

#include <string>

namespace mambarl {

// only_shape >= 0 runs that one shape of the list (for profiling), -1 all.
std::string bench_rollout_gpu_json(int reps, int only_shape = -1);

}  // namespace mambarl
