#include "kernels/gru.cuh"

#include "kernels/base/check.hpp"
#include "kernels/block_reduce.cuh"
#include "kernels/cuda_check.cuh"
#include "kernels/launch.cuh"

namespace mambarl::cuda {

namespace {

constexpr int kThreads = 256;      // elementwise kernels: one thread per (env, channel)
constexpr int kStepThreads = 128;  // gru_step: one block per env

unsigned blocks_for(size_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

struct GruCell {
  float r, z, n, h;
};

// The cell of one channel, from the biased pre-activations (the only copy of
// the gate math: the chunk and the step both call it).
__device__ __forceinline__ GruCell gru_cell(float gi_r, float gi_z, float gi_n, float gh_r, float gh_z,
                                            float gh_n, float hp) {
  GruCell c;
  c.r = sigmoidf_ref(gi_r + gh_r);
  c.z = sigmoidf_ref(gi_z + gh_z);
  c.n = tanhf(gi_n + c.r * gh_n);
  c.h = (1.f - c.z) * c.n + c.z * hp;
  return c;
}

__global__ void prev_rows_kernel(int B, int D, StepFlags flags, const float* __restrict__ src, size_t stride,
                                 float* __restrict__ hp) {
  pdl_enter();
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<size_t>(B) * D) return;
  const int b = static_cast<int>(i / D), j = static_cast<int>(i % D);
  hp[i] = (flags.start(b) || flags.skip(b)) ? 0.f : src[static_cast<size_t>(b) * stride + j];
}

__global__ void gates_forward_kernel(int B, int D, float* __restrict__ gates, const float* __restrict__ gh,
                                     const float* __restrict__ b_ih, const float* __restrict__ b_hh,
                                     const float* __restrict__ hp, float* __restrict__ hn,
                                     float* __restrict__ y) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<size_t>(B) * D) return;
  const size_t b = i / D;
  const int j = static_cast<int>(i % D);
  float* g = gates + b * 3 * D;
  const float* q = gh + b * 3 * D;
  const float gh_n = q[2 * D + j] + b_hh[2 * D + j];
  const GruCell c = gru_cell(g[j] + b_ih[j], g[D + j] + b_ih[D + j], g[2 * D + j] + b_ih[2 * D + j],
                             q[j] + b_hh[j], q[D + j] + b_hh[D + j], gh_n, hp[i]);
  g[j] = c.r;
  g[D + j] = c.z;
  g[2 * D + j] = c.n;
  hn[i] = gh_n;
  y[i] = c.h;
}

// With d = dL/dh_t (dY_t plus what step t+1 sent back):
//   dgi_n = d (1-z) (1-n²)            dgh_n = dgi_n r
//   dgi_z = dgh_z = d (h_{t-1} - n) z (1-z)
//   dgi_r = dgh_r = dgi_n hn r (1-r)
//   dL/dh_{t-1} = d z + dgh W_hh      (the caller's GEMM adds the second term)
__global__ void gates_backward_kernel(int B, int D, const float* __restrict__ gates,
                                      const float* __restrict__ hn, const float* __restrict__ hp,
                                      const float* __restrict__ dy, const uint8_t* __restrict__ cut,
                                      bool last, float* __restrict__ dh, float* __restrict__ dgi,
                                      float* __restrict__ dgh) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<size_t>(B) * D) return;
  const size_t b = i / D;
  const int j = static_cast<int>(i % D);
  const float carried = (last || (cut != nullptr && cut[b] != 0)) ? 0.f : dh[i];
  const float d = carried + dy[i];
  const float* g = gates + b * 3 * D;
  const float r = g[j], z = g[D + j], n = g[2 * D + j];
  const float dn = d * (1.f - z) * (1.f - n * n);
  const float dz = d * (hp[i] - n) * z * (1.f - z);
  const float dr = dn * hn[i] * r * (1.f - r);
  float* gi = dgi + b * 3 * D;
  float* gh = dgh + b * 3 * D;
  gi[j] = gh[j] = dr;
  gi[D + j] = gh[D + j] = dz;
  gi[2 * D + j] = dn;
  gh[2 * D + j] = dn * r;
  dh[i] = d * z;
}

__global__ void __launch_bounds__(kStepThreads)
    step_kernel(int D, StepFlags flags, const float* __restrict__ gi, const float* __restrict__ gh,
                const float* __restrict__ b_ih, const float* __restrict__ b_hh, const float* __restrict__ hp,
                float* __restrict__ h, float* __restrict__ state_out, size_t stride) {
  pdl_enter();
  const int b = blockIdx.x;
  if (flags.skip(b)) return;  // the whole block is one env
  __shared__ float red[32];
  float* hb = h + static_cast<size_t>(b) * D;
  // Every thread has read h before block_rms_inv returns (it syncs), so the writes below are safe.
  const float rn = block_rms_inv(hb, D, red);
  const float* x = gi + static_cast<size_t>(b) * 3 * D;
  const float* q = gh + static_cast<size_t>(b) * 3 * D;
  for (int j = threadIdx.x; j < D; j += blockDim.x) {
    const GruCell c = gru_cell(rn * x[j] + b_ih[j], rn * x[D + j] + b_ih[D + j],
                               rn * x[2 * D + j] + b_ih[2 * D + j], q[j] + b_hh[j], q[D + j] + b_hh[D + j],
                               q[2 * D + j] + b_hh[2 * D + j], hp[static_cast<size_t>(b) * D + j]);
    hb[j] += c.h;
    if (state_out) state_out[static_cast<size_t>(b) * stride + j] = c.h;
  }
}

void check_sizes(const char* what, int B, int D) {
  MAMBARL_CHECK(B > 0 && D > 0, what << ": sizes must be positive (B " << B << ", D " << D << ")");
}

}  // namespace

void gru_prev_rows(int B, int D, StepFlags flags, const float* src, size_t stride, float* hp,
                   cudaStream_t stream, bool pdl) {
  check_sizes("gru_prev_rows", B, D);
  MAMBARL_CHECK(B == 1 || stride >= static_cast<size_t>(D),
                "gru_prev_rows: stride (" << stride << ") < D (" << D << ")");
  launch_kernel(pdl, prev_rows_kernel, blocks_for(static_cast<size_t>(B) * D), kThreads, 0, stream, B, D,
                flags, src, stride, hp);
}

void gru_gates_forward(int B, int D, float* gates, const float* gh, const float* b_ih, const float* b_hh,
                       const float* hp, float* hn, float* y, cudaStream_t stream) {
  check_sizes("gru_gates_forward", B, D);
  gates_forward_kernel<<<blocks_for(static_cast<size_t>(B) * D), kThreads, 0, stream>>>(B, D, gates, gh, b_ih,
                                                                                        b_hh, hp, hn, y);
  MAMBARL_CUDA_LAUNCH_CHECK(stream);
}

void gru_gates_backward(int B, int D, const float* gates, const float* hn, const float* hp, const float* dy,
                        const uint8_t* cut, bool last, float* dh, float* dgi, float* dgh,
                        cudaStream_t stream) {
  check_sizes("gru_gates_backward", B, D);
  gates_backward_kernel<<<blocks_for(static_cast<size_t>(B) * D), kThreads, 0, stream>>>(
      B, D, gates, hn, hp, dy, cut, last, dh, dgi, dgh);
  MAMBARL_CUDA_LAUNCH_CHECK(stream);
}

void gru_step(int B, int D, StepFlags flags, const float* gi, const float* gh, const float* b_ih,
              const float* b_hh, const float* hp, float* h, float* state_out, size_t stride,
              cudaStream_t stream, bool pdl) {
  check_sizes("gru_step", B, D);
  MAMBARL_CHECK(state_out == nullptr || B == 1 || stride >= static_cast<size_t>(D),
                "gru_step: stride (" << stride << ") < D (" << D << ")");
  launch_kernel(pdl, step_kernel, static_cast<unsigned>(B), kStepThreads, 0, stream, D, flags, gi, gh, b_ih,
                b_hh, hp, h, state_out, stride);
}

}  // namespace mambarl::cuda
