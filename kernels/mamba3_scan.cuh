// Mamba-3 SISO mixer over a training chunk on the GPU: forward and backward
// through time with per-env episode starts (policy/MATH.md "Mamba-3 SISO mixer",
// "Episode boundaries"; CPU twin: policy/mamba3.cpp). Everything between
// in_proj and out_proj; the GEMMs and the column sums that turn per-token
// gradient terms into parameter gradients are the caller's
// (policy/gpu_mamba3_mixer.cpp).
//
// M = T*B token rows, row t*B + b. Forward, in launch order:
//   prep    per row: dt, α, β, γ per head; B/C RMSNorm per group + per-head
//           bias -> k̃, q̃ (H, N)
//   angles  per (b, h, a), t ascending: φ = (φ (1-s_t) + π tanh(θ_a) dt_h)
//           mod 2π from the carried φ; rotates the pair (2a, 2a+1) of k, q
//           in place
//   scan    per (b, h, p), t ascending, row p of S_h in registers:
//           S = α S + β v_prev k_prev + γ x k,  y = S q + D x;  S_t saved
//           every seg_len steps
//   gate    per (row, head): y ⊙ silu(z), or the head's gated RMSNorm
// Backward, in reverse: gate, scan (t descending a segment at a time: the
// segment's S_t rebuilt into shared memory from the state saved before it
// with the forward's own step, so the same bits; the P rows of a head
// reduce their terms through shared memory in a fixed order), angles
// (un-rotates dk, dq; dφ through the scan), head scalars, B/C norms. A start
// at t cuts every carry (dS, dk_prev, dv_prev, dφ) into t-1 and the initial
// state gets no gradient. No atomics anywhere: same inputs, same bits.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/kernel_limits.hpp"  // kMamba3ScanMaxState, kMamba3ScanMaxHeaddim
#include "kernels/mamba3_step.cuh"
#include "kernels/scan_segments.cuh"

namespace mambarl::cuda {

// Device pointers of one chunk (the mixer owns the memory). Activation rows
// are token rows m = t*B + b; "(M, H, N)" is head-major per row.
struct Mamba3Chunk {
  int T = 0, B = 0;
  const uint8_t* starts = nullptr;  // (M) episode_start flags
  const float* state0 = nullptr;    // env b's state at state0 + b*stride: S (H,P,N), k_prev (H,N),
  size_t stride = 0;                //   v_prev (H,P), φ (H,Na); read only
  // forward
  float* zx = nullptr;       // (M, R) in_proj output [z x B C dd_dt dd_A λ θ]
  float* dt = nullptr;       // (M, H)
  float* alpha = nullptr;    // (M, H) exp(A dt)
  float* beta = nullptr;     // (M, H) α dt (1-λ)
  float* gamma = nullptr;    // (M, H) λ dt
  float* bc_rstd = nullptr;  // (M, 2G) 1/rms of B's groups, then C's
  float* k = nullptr;        // (M, H, N) normed, biased, rotated
  float* q = nullptr;        // (M, H, N)
  float* phi = nullptr;      // (M, H, Na) angle after step t, in [0, 2π)
  float* y = nullptr;        // (M, E) S q + D x
  float* y_rstd = nullptr;   // (M, H) gated-norm 1/rms per head (only with the norm)
  // S after steps seg_len-1, 2 seg_len-1, ... before the last:
  // (scan_segment_states(T, seg_len) * B, H, N, P), n-major so loads coalesce over p.
  float* seg_states = nullptr;
  int seg_len = 1;
  float* gated = nullptr;    // (M, E) out_proj input
  // backward
  float* dgated = nullptr;     // (M, E) in: dL/dgated (the caller's out_proj GEMM)
  float* dy = nullptr;         // (M, E)
  float* dzx = nullptr;        // (M, R) every column written
  float* dk = nullptr;         // (M, H, N) w.r.t. rotated k, then un-rotated in place
  float* dq = nullptr;         // (M, H, N)
  float* dalpha = nullptr;     // (M, H)
  float* dbeta = nullptr;      // (M, H)
  float* dgamma = nullptr;     // (M, H)
  float* dphi = nullptr;       // (M, H, Na) dL/dΔφ_t (through the angle scan)
  float* dd_part = nullptr;    // (B*P, H) per-(b, p) sums of dy x: D's gradient is the column sum
  float* dnorm_part = nullptr; // (M, E) per-token norm.weight terms (only with the norm)
  float* dbn_part = nullptr;   // (M*G, N) per-token B_norm.weight terms
  float* dcn_part = nullptr;   // (M*G, N) per-token C_norm.weight terms
};

// Validates the dims for the chunk kernels (host arithmetic only).
void mamba3_chunk_check(const Mamba3Dims& d);

// The longest segment the backward scan's shared memory holds for these dims
// (at least 1; host arithmetic only).
int mamba3_max_segment_len(const Mamba3Dims& d);

// Validates the dims and raises the backward scan's shared-memory limit where
// it needs more than the default. Call before any launch, never during capture.
void mamba3_chunk_configure(const Mamba3Dims& d);

// zx filled -> y, gated, and everything the backward reads.
void mamba3_chunk_forward(const Mamba3Dims& d, const Mamba3Weights& w, const Mamba3Chunk& c,
                          cudaStream_t stream);

// dgated filled (and the forward's buffers intact) -> dzx, and the per-token
// terms of the parameter gradients: dzx's dd_dt block (dt_bias), dk, dq
// (B_bias, C_bias), dd_part (D), dbn_part, dcn_part, dnorm_part.
void mamba3_chunk_backward(const Mamba3Dims& d, const Mamba3Weights& w, const Mamba3Chunk& c,
                           cudaStream_t stream);

}  // namespace mambarl::cuda
