// Dynamic loss scaling for the learner's float16 GEMMs (kernels/precision.hpp),
// all in device memory so that the captured update replays it (no host
// round trip, no re-capture), as torch.cuda.amp.GradScaler:
//   scale_by           x (n) *= S, or /= S: seeds the loss gradient with S
//                      (every backward value is then S times the true one,
//                      lifting small gradients above f16's subnormals) and
//                      unscales the flat gradient before the norm and clip.
//                      S is a power of two, so both are exact where nothing
//                      overflows;
//   loss_scale_update  after the optimizer's decision: a non-finite gradient
//                      is an overflow (the step was skipped), S halves and
//                      the good-step run restarts; growth_interval (default
//                      kGrowthInterval) good steps in a row double S. A
//                      non-finite loss says nothing about S (the loss is
//                      computed unscaled): S stays.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace mambarl::cuda {

constexpr float kLossScaleInit = 65536.f;  // 2^16, as GradScaler
constexpr int kGrowthInterval = 2000;      // consecutive good steps before S doubles
// S never drops below 1: below it the scaler would shrink gradients, which
// fixes no overflow (a gradient non-finite at S = 1 is non-finite, not scaled).
constexpr float kLossScaleMin = 1.f;

// The scaler's device state.
struct LossScale {
  float scale = kLossScaleInit;  // S for the next update
  float used = 0;                // S the last update ran with (the overflow message names it)
  int good_steps = 0;            // consecutive applied updates since S last changed
  int growth_interval = kGrowthInterval;
};

//   x (n); s (1) read in device memory: x *= *s, or x /= *s with inverse
void scale_by(size_t n, const float* s, bool inverse, float* x, cudaStream_t stream);

//   state (1) updated; loss_not_finite, grad_not_finite (1) read (kernels/adamw.cuh)
void loss_scale_update(LossScale* state, const int* loss_not_finite, const int* grad_not_finite,
                       cudaStream_t stream);

}  // namespace mambarl::cuda
