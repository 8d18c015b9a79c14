// Work inside a CUDA graph that runs only when some flag is set, decided on
// the device at every replay: a one-block kernel ORs the flags and sets the
// condition of a graph IF node (CUDA 12.4+) whose body holds the work.
//
// Why: the device rollout bootstraps V(final obs) for truncated envs only,
// and most steps truncate none (CartPole's time limit is 500 steps); the
// body then costs one tiny kernel instead of a whole masked actor pass.
//
// Call while `stream` is being captured; `body` enqueues its work on the
// stream it is given: `body_stream` (another stream, idle and not
// capturing), which then captures into the IF node's body graph. Where the
// driver has no conditional nodes (before CUDA 12.4) the body is enqueued on
// `stream` itself and runs at every replay: the same results, no skipping. CUDA allows kernels, memsets,
// memcopies, child graphs and conditionals in a body (no host nodes, no
// allocations); the rollout's peek is kernels only, launched without PDL
// (programmatic edges inside a body are untried here).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>

namespace mambarl::cuda {

void capture_if_any(cudaStream_t stream, cudaStream_t body_stream, const uint8_t* flags, int n,
                    const std::function<void(cudaStream_t)>& body);

// Whether this process's device and driver support conditional graph nodes
// (probed once on a scratch graph).
bool graph_conditionals_supported();

}  // namespace mambarl::cuda
