// The largest sizes the GPU kernels hold, in a header without CUDA so that the
// config check (policy/policy_config.cpp) refuses a too-large setting with the
// same numbers the kernels are compiled with, when the config is read, naming
// the key; the kernels' own checks stay as the last guard. Limits that depend
// on the device (shared memory per block) are checked when the kernels are
// configured (mamba1_step_configure, mamba3_chunk_configure, ...).
#pragma once

namespace mambarl::cuda {

// Mamba-1 scan: a state row (d_state) in registers, sized at compile time;
// the step and scan keep the conv window (d_conv - 1 values) in registers.
constexpr int kMamba1MaxState = 256;
constexpr int kMamba1MaxConv = 8;

// Mamba-3 chunk (training) kernels: a row of S and dS (d_state) in
// registers, sized at compile time; headdim rows of a head per block.
constexpr int kMamba3ScanMaxState = 64;
constexpr int kMamba3ScanMaxHeaddim = 256;

}  // namespace mambarl::cuda
