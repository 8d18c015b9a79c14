// The learner's GEMM input precision (runtime.learner_dtype):
//   float32   f32 GEMM inputs (cuBLAS SGEMM, no TF32): the CPU-parity path;
//   bfloat16  bf16 inputs, f32 accumulation and outputs: f32 range, 8 bits
//             of mantissa, no loss scaling needed;
//   float16   f16 inputs, f32 accumulation and outputs: 11 bits of mantissa
//             but a max of 65504 and subnormals below 6e-5, so the learner
//             scales the loss (kernels/loss_scale.cuh) to keep small
//             gradients representable and skips a step that overflowed.
// Master weights, optimizer state, scans, norms and the loss stay f32 in
// all three; only what a GEMM reads is rounded.
#pragma once

#include <string>

#include "kernels/base/check.hpp"

namespace mambarl {

enum class Precision { float32, bfloat16, float16 };

inline const char* precision_name(Precision p) {
  switch (p) {
    case Precision::float32:
      return "float32";
    case Precision::bfloat16:
      return "bfloat16";
    case Precision::float16:
      return "float16";
  }
  return "?";
}

// The config spelling (precision_name) back to the enum; throws naming the known ones.
inline Precision precision_from_name(const std::string& name) {
  for (Precision p : {Precision::float32, Precision::bfloat16, Precision::float16})
    if (name == precision_name(p)) return p;
  MAMBARL_FAIL("unknown precision '" << name << "' (known: float32, bfloat16, float16)");
}

}  // namespace mambarl
