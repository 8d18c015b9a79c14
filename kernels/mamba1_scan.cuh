// Mamba-1 mixer over a training chunk on the GPU: the non-GEMM stages of the
// forward and backward through time (policy/MATH.md "Mamba-1 mixer", "Episode
// boundaries"; CPU twin: policy/mamba1.cpp). The four projections are cuBLAS
// GEMMs issued by the caller (policy/gpu_mamba1_mixer.cpp); these kernels do
// the rest:
//   conv_forward    xc = silu(causal depthwise conv over [initial window, x] + b)
//   scan_forward    Δ = softplus(dt_lin + b_dt), H_t = exp(Δ A) H_{t-1} + (Δ xc) ⊗ B,
//                   y = H C + D xc, gated = y silu(z); keeps H only at segment ends
//   scan_backward   the gate and the scan in reverse, a segment at a time: rebuilds the
//                   segment's H_t from the state before it, then dz, dxc (scan part),
//                   dL/d dt_lin, [dB dC] per token, and per-env sums for A_log, D, dt_proj.bias
//   conv_backward   silu and the conv in reverse: dx, per-env sums for conv1d.weight/bias
//   add_env_sums    grads += Σ_b (per-env sums): the fixed-order second pass
//
// Resets: a start at (t, b) zeroes H_{t-1} and the window taps from before t
// in the forward; the backward sends nothing through it (nor into state0).
//
// Memory: the per-step state, N*E floats per token, was most of the learner's
// memory when kept for every step. The forward keeps it every seg_len steps
// instead, and the backward recomputes the seg_len states of one segment at a
// time into shared memory with the forward's own step function (same bits),
// before walking that segment backwards. seg_len 1 keeps every state (the
// stored path the tests compare against).
//
// Parallel shape: the scans give one thread per (env b, channel e) that walks
// t sequentially with its N states in registers (the backward's rebuilt
// segment in shared memory, each thread its own column); a block holds channels of a
// single env so the per-token B_t, C_t loads are uniform across it. Nothing
// is reduced with atomics: [dB dC] (sums over e) go through per-warp partials
// summed in warp order, and every parameter gradient (a sum over t and b) is a
// per-thread sum over t followed by add_env_sums over b, so results are
// bitwise reproducible and a captured graph equals eager launches.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/mamba1_step.cuh"
#include "kernels/scan_segments.cuh"

namespace mambarl::cuda {

// The chunk: token row r = t*B + b.
struct Mamba1Chunk {
  int T = 0, B = 0;
  const uint8_t* starts = nullptr;  // (T*B) episode_start flags (0/1)
  // Env b's layer state before t=0 at state0 + b * state_stride, the CPU
  // layout: H (E, N) e-major, then the conv window (K-1, E), oldest first.
  const float* state0 = nullptr;
  size_t state_stride = 0;
};

// What the forward computes and the backward reads back (device buffers).
struct Mamba1Activations {
  float* xz = nullptr;      // (T*B, 2E) in_proj output [x z]
  float* pre = nullptr;     // (T*B, E) conv output before silu
  float* xc = nullptr;      // (T*B, E) silu(pre)
  float* dbc = nullptr;     // (T*B, R+2N) x_proj output [δ B C]
  float* dt_lin = nullptr;  // (T*B, E) W_dt δ, dt_proj.bias not added
  float* delta = nullptr;   // (T*B, E) Δ = softplus(dt_lin + b_dt)
  // H after tokens seg_len-1, 2 seg_len-1, ... before the last token:
  // (scan_segment_states(T, seg_len), B, N, E), n-major (coalesced over e).
  float* seg_states = nullptr;
  int seg_len = 1;
  float* y = nullptr;       // (T*B, E) H C + D xc
  float* gated = nullptr;   // (T*B, E) y silu(z): out_proj input
};

// The backward's buffers (device).
struct Mamba1Backward {
  float* dgated = nullptr;   // (T*B, E) dL/dgated (input)
  float* dxz = nullptr;      // (T*B, 2E) [dx dz]
  float* dxc = nullptr;      // (T*B, E) dL/dxc: the scan's part, then + x_proj's
  float* ddt = nullptr;      // (T*B, E) dL/d dt_lin
  float* ddbc = nullptr;     // (T*B, R+2N) [dδ dB dC]; scan_backward writes dB dC
  float* bc_part = nullptr;  // (T*B, mamba1_channel_warps(E), 2N) per-warp partials of [dB dC]
  float* sum_a = nullptr;    // (B, E, N) Σ_t dL/dA of env b
  float* sum_d = nullptr;    // (B, E) Σ_t dL/dD
  float* sum_dtb = nullptr;  // (B, E) Σ_t dL/d dt_proj.bias
  float* sum_cw = nullptr;   // (B, E, K) Σ_t dL/d conv1d.weight
  float* sum_cb = nullptr;   // (B, E) Σ_t dL/d conv1d.bias
};

// Warps per token row of E channels: the partials [dB dC] is summed over.
__host__ __device__ inline int mamba1_channel_warps(int E) { return (E + 31) / 32; }

// Throws mambarl::Error unless the kernels support these dims and chunk
// (d_state <= kMamba1MaxState, d_conv <= kMamba1MaxConv, T and B positive).
void mamba1_scan_check(const Mamba1Dims& d, int T, int B);

// The longest segment the backward's shared memory holds for these dims (at
// least 1). Host arithmetic only.
int mamba1_max_segment_len(const Mamba1Dims& d);

// Raises the backward's shared-memory limit to what mamba1_max_segment_len
// needs. Call before any launch, never during capture.
void mamba1_scan_configure(const Mamba1Dims& d);

// Reads act.xz (x part) and c.state0's window; writes act.pre, act.xc.
void mamba1_conv_forward(const Mamba1Dims& d, const Mamba1Chunk& c, const Mamba1Weights<float>& w,
                         const Mamba1Activations& act, cudaStream_t stream);

// Reads act.xz (z part), act.xc, act.dbc, act.dt_lin and c.state0's H;
// writes act.delta, act.seg_states, act.y, act.gated.
void mamba1_scan_forward(const Mamba1Dims& d, const Mamba1Chunk& c, const Mamba1Weights<float>& w,
                         const Mamba1Activations& act, cudaStream_t stream);

// Reads bwd.dgated and the activations; writes bwd.dxz (z part), bwd.dxc,
// bwd.ddt, bwd.ddbc (B and C columns), bwd.sum_a, bwd.sum_d, bwd.sum_dtb.
void mamba1_scan_backward(const Mamba1Dims& d, const Mamba1Chunk& c, const Mamba1Weights<float>& w,
                          const Mamba1Activations& act, const Mamba1Backward& bwd,
                          cudaStream_t stream);

// Reads bwd.dxc (complete: scan and x_proj parts), act.pre, act.xz and
// c.state0's window; writes bwd.dxz (x part), bwd.sum_cw, bwd.sum_cb.
void mamba1_conv_backward(const Mamba1Dims& d, const Mamba1Chunk& c, const Mamba1Weights<float>& w,
                          const Mamba1Activations& act, const Mamba1Backward& bwd,
                          cudaStream_t stream);

//   sums  (B, C) per-env partial sums
//   scale (C) or nullptr for 1
//   out   (C) += (Σ_b sums[b, c]) * scale[c], summed in a fixed order
void mamba1_add_env_sums(int B, int C, const float* sums, const float* scale, float* out,
                         cudaStream_t stream);

}  // namespace mambarl::cuda
