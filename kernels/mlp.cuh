// The elementwise middle of the MLP baseline mixer's training pass (CPU
// twin: policy/mlp_mixer.cpp); its two Linears are cuBLAS GEMMs in
// policy/gpu_mlp_mixer.cpp:
//   bias_silu      pre (M, E) += b1, act = silu(pre) = pre σ(pre);
//   silu_backward  d (M, E) *= silu'(pre) = σ (1 + pre (1 - σ)), in place.
#pragma once

#include <cuda_runtime.h>

namespace mambarl::cuda {

//   pre (M, E) in/out, b (E), act (M, E) written
void mlp_bias_silu(int M, int E, float* pre, const float* b, float* act, cudaStream_t stream);

//   pre (M, E), d (M, E) in/out
void mlp_silu_backward(int M, int E, const float* pre, float* d, cudaStream_t stream);

}  // namespace mambarl::cuda
