// The optimizer end of the learner's update on the device (CPU twin:
// policy/adamw.cpp clip_grad_norm and AdamW<float>::step):
//   1. the global L2 norm of the flat gradient, in double: per-block partial
//      sums over a fixed grid, then one block sums them in order (no atomics,
//      so graph == eager bit for bit);
//   2. one thread decides: the update is skipped when the loss or the norm is
//      not finite; otherwise the step count advances and the step's scalars
//      (clip scale, bias-corrected step size, 1/sqrt(bc2), lr·wd) are derived
//      from the step count and learning rate IN DEVICE MEMORY, so a captured
//      graph replays every update without re-capture;
//   3. the fused clip + AdamW over every element (decoupled weight decay by
//      the layout's per-element flags, before the Adam step as PyTorch). A
//      skipped update returns at once: weights and moments stay untouched.
// The gradient buffer itself is never scaled (it keeps the pre-clip values;
// the clip is applied on the fly).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace mambarl::cuda {

constexpr int kGradNormBlocks = 264;  // partial sums: 2 per H100/H200 SM, a fixed order

struct AdamWCoefs {
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
  double max_grad_norm = 0.5;  // <= 0 disables clipping
};

// Device scalars of one update.
struct AdamWScalars {
  const double* lr = nullptr;            // (1) read: this update's learning rate
  long long* step = nullptr;             // (1) read + incremented when applied
  const int* loss_not_finite = nullptr;  // (1) read (ppo_loss writes it)
  double* grad_norm = nullptr;           // (1) written: the norm before clipping
  int* grad_not_finite = nullptr;        // (1) written
  float* step_scalars = nullptr;         // (4) scratch: clip scale, step size, 1/sqrt(bc2), lr·wd
  double* partials = nullptr;            // (kGradNormBlocks) scratch
};

//   params, grads, exp_avg, exp_avg_sq, decay (n) with decay 1 where weight decay applies
void adamw_update(size_t n, const AdamWCoefs& coefs, const AdamWScalars& s, float* params, const float* grads,
                  float* exp_avg, float* exp_avg_sq, const float* decay, cudaStream_t stream);

}  // namespace mambarl::cuda
