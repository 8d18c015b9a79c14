// `mambarl bench train --device cuda`: the GPU learner's whole PPO update,
// one JSON object. For each mixer type with a GPU engine (taken from the
// factory, gpu_mixer_types() in policy/gpu_mixer.hpp) and each of the learner issue's
// shapes, in each learner GEMM precision (float32, bfloat16, float16:
// kernels/precision.hpp): median ms per update over `reps` graph replays timed with CUDA
// events after warm-up with the chunk already in device memory (as GPU-
// resident rollouts deliver it), the eager launches beside it, the graph
// again with the chunk coming from host memory (its H2D copy timed too:
// ms_per_update_graph_host_chunk), and the device memory
// the learner holds (free memory before construction minus after its
// updates: everything is allocated before capture and never freed while it
// runs, so this is its peak).
#pragma once

#include <string>
#include <vector>

namespace mambarl {

// One learner chunk: T steps of B envs, d_model D, L layers.
struct GpuTrainShape {
  int T, B, D, L;
};

// shapes: empty for the learner issue's three shapes. policy, dtype: one
// policy type and one precision only (a profiler's run wants one update's
// kernels); empty for all of them. An unknown one is a mambarl::UserError
// listing the known ones.
std::string bench_train_gpu_json(int reps, const std::vector<GpuTrainShape>& shapes = {},
                                 const std::string& policy = "", const std::string& dtype = "");

}  // namespace mambarl
