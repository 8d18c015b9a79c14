#include "kernels/gru.cuh"

#include <algorithm>

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

// The learner's chunk, one block per env walking its T steps (the recurrence
// is sequential in t; envs are independent). h_{t-1} and the step's W_hh h_{t-1}
// live in shared memory: one launch in place of three per step, which at
// 1024-step sequences left the learner waiting on launches. Each thread owns
// channels j = tid, tid + blockDim, ... in the elementwise phases, and output
// rows o likewise in the matrix-vector phase. There a warp reads 32 rows of
// W_hh at the same column: from global memory that is 32 cache lines per load
// (8 ms of a 12 ms update at 1024 x 64 envs, d_model 64), so W_hh is copied
// into shared memory once, wherever it fits (w_shared), rows D | 1 floats apart
// so that the 32 rows' floats lie in 32 distinct banks.
__global__ void sequence_forward_kernel(int T, int B, int D, const uint8_t* __restrict__ starts,
                                        const float* __restrict__ state0, size_t stride,
                                        const float* __restrict__ w_hh, bool w_shared,
                                        const float* __restrict__ b_ih, const float* __restrict__ b_hh,
                                        float* __restrict__ gates, float* __restrict__ hp_rows,
                                        float* __restrict__ hn, float* __restrict__ y) {
  extern __shared__ float sm[];
  float* h = sm;      // (D) h_{t-1}, then h_t
  float* q = sm + D;  // (3D) W_hh h_{t-1}, no bias
  const int b = blockIdx.x, G = 3 * D;
  const int w_stride = w_shared ? D | 1 : D;
  const float* W = w_hh;  // row o at W + o * w_stride
  if (w_shared) {
    float* sw = sm + 4 * D;  // (3D, D | 1)
    for (int i = threadIdx.x; i < G * D; i += blockDim.x) sw[(i / D) * w_stride + i % D] = w_hh[i];
    W = sw;  // complete before its first read: the barrier after the first step's h
  }
  for (int t = 0; t < T; ++t) {
    const size_t row = static_cast<size_t>(t) * B + b;
    const bool start = starts[row] != 0;
    for (int j = threadIdx.x; j < D; j += blockDim.x) {  // h_{t-1}: zero at a start
      const float v = start ? 0.f : t == 0 ? state0[static_cast<size_t>(b) * stride + j] : h[j];
      h[j] = v;
      hp_rows[row * D + j] = v;
    }
    __syncthreads();
    for (int o = threadIdx.x; o < G; o += blockDim.x) {
      const float* w = W + static_cast<size_t>(o) * w_stride;
      float acc = 0.f;
      for (int k = 0; k < D; ++k) acc = fmaf(w[k], h[k], acc);
      q[o] = acc;
    }
    __syncthreads();  // q complete, and every read of h done before the cells overwrite it
    float* g = gates + row * G;
    for (int j = threadIdx.x; j < D; j += blockDim.x) {
      const float gh_n = q[2 * D + j] + b_hh[2 * D + j];
      const GruCell c = gru_cell(g[j] + b_ih[j], g[D + j] + b_ih[D + j], g[2 * D + j] + b_ih[2 * D + j],
                                 q[j] + b_hh[j], q[D + j] + b_hh[D + j], gh_n, h[j]);
      g[j] = c.r;
      g[D + j] = c.z;
      g[2 * D + j] = c.n;
      hn[row * D + j] = gh_n;
      y[row * D + j] = c.h;
      h[j] = c.h;  // channel j is this thread's in the next step's first phase too
    }
  }
}

// With d = dL/dh_t (dY_t plus what step t+1 sent back):
//   dgi_n = d (1-z) (1-n²)            dgh_n = dgi_n r
//   dgi_z = dgh_z = d (h_{t-1} - n) z (1-z)
//   dgi_r = dgh_r = dgi_n hn r (1-r)
//   dL/dh_{t-1} = d z + W_hhᵀ dgh     (not formed at t = 0: the initial state is data)
// dL/dh_t from step t+1 is cut for an env that starts at t+1: h_t did not feed it.
__global__ void sequence_backward_kernel(int T, int B, int D, const uint8_t* __restrict__ starts,
                                         const float* __restrict__ w_hh, const float* __restrict__ gates,
                                         const float* __restrict__ hn, const float* __restrict__ hp_rows,
                                         const float* __restrict__ dy, float* __restrict__ dgi,
                                         float* __restrict__ dgh) {
  extern __shared__ float sm[];
  float* dh = sm;      // (D) dL/dh_t carried back
  float* dg = sm + D;  // (3D) the step's dgh
  const int b = blockIdx.x, G = 3 * D;
  for (int t = T - 1; t >= 0; --t) {
    const size_t row = static_cast<size_t>(t) * B + b;
    const bool carried = t + 1 < T && starts[row + static_cast<size_t>(B)] == 0;
    const float* g = gates + row * G;
    float* gi_out = dgi + row * G;
    float* gh_out = dgh + row * G;
    for (int j = threadIdx.x; j < D; j += blockDim.x) {
      const float d = (carried ? dh[j] : 0.f) + dy[row * D + j];
      const float r = g[j], z = g[D + j], n = g[2 * D + j];
      const float dn = d * (1.f - z) * (1.f - n * n);
      const float dz = d * (hp_rows[row * D + j] - n) * z * (1.f - z);
      const float dr = dn * hn[row * D + j] * r * (1.f - r);
      gi_out[j] = gh_out[j] = dg[j] = dr;
      gi_out[D + j] = gh_out[D + j] = dg[D + j] = dz;
      gi_out[2 * D + j] = dn;
      gh_out[2 * D + j] = dg[2 * D + j] = dn * r;
      dh[j] = d * z;
    }
    if (t == 0) break;
    __syncthreads();  // dg complete
    for (int j = threadIdx.x; j < D; j += blockDim.x) {
      float acc = dh[j];
      for (int o = 0; o < G; ++o) acc = fmaf(dg[o], w_hh[static_cast<size_t>(o) * D + j], acc);
      dh[j] = acc;
    }
    __syncthreads();  // every read of dg done before the next step overwrites it
  }
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

// One block per env; enough threads for the 3D rows of the matrix-vector phase.
unsigned sequence_threads(int D) { return static_cast<unsigned>(std::min(1024, (3 * D + 31) / 32 * 32)); }

// h (or dh) and the 3D-vector, both in shared memory: 4D floats.
size_t sequence_vector_bytes(int D) { return static_cast<size_t>(4) * D * sizeof(float); }

// The forward's padded copy of W_hh: 3D (D | 1) floats.
size_t sequence_weight_bytes(int D) { return static_cast<size_t>(3) * D * (D | 1) * sizeof(float); }

}  // namespace

void gru_prev_rows(int B, int D, StepFlags flags, const float* src, size_t stride, float* hp,
                   cudaStream_t stream, bool pdl) {
  check_sizes("gru_prev_rows", B, D);
  MAMBARL_CHECK(B == 1 || stride >= static_cast<size_t>(D),
                "gru_prev_rows: stride (" << stride << ") < D (" << D << ")");
  launch_kernel(pdl, prev_rows_kernel, blocks_for(static_cast<size_t>(B) * D), kThreads, 0, stream, B, D,
                flags, src, stride, hp);
}

bool gru_sequence_configure(int D) {
  check_sizes("gru_sequence_configure", 1, D);
  const size_t limit = max_smem_per_block_optin();
  MAMBARL_CHECK(sequence_vector_bytes(D) <= limit, "gru sequence kernels: d_model "
                                                       << D << " needs " << sequence_vector_bytes(D)
                                                       << " bytes of shared memory per block, the device has "
                                                       << limit);
  // The device's whole limit: a later mixer of another d_model never lowers what an earlier one needs.
  const void* kernels[] = {reinterpret_cast<const void*>(sequence_forward_kernel),
                           reinterpret_cast<const void*>(sequence_backward_kernel)};
  for (const void* kernel : kernels)
    MAMBARL_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(limit)));
  return sequence_vector_bytes(D) + sequence_weight_bytes(D) <= limit;
}

void gru_sequence_forward(int T, int B, int D, bool w_shared, const uint8_t* starts, const float* state0,
                          size_t stride, const float* w_hh, const float* b_ih, const float* b_hh,
                          float* gates, float* hp, float* hn, float* y, cudaStream_t stream) {
  check_sizes("gru_sequence_forward", B, D);
  MAMBARL_CHECK(T > 0, "gru_sequence_forward: T must be positive, got " << T);
  MAMBARL_CHECK(B == 1 || stride >= static_cast<size_t>(D),
                "gru_sequence_forward: stride (" << stride << ") < D (" << D << ")");
  const size_t smem = sequence_vector_bytes(D) + (w_shared ? sequence_weight_bytes(D) : 0);
  sequence_forward_kernel<<<static_cast<unsigned>(B), sequence_threads(D), smem, stream>>>(
      T, B, D, starts, state0, stride, w_hh, w_shared, b_ih, b_hh, gates, hp, hn, y);
  MAMBARL_CUDA_LAUNCH_CHECK(stream);
}

void gru_sequence_backward(int T, int B, int D, const uint8_t* starts, const float* w_hh, const float* gates,
                           const float* hn, const float* hp, const float* dy, float* dgi, float* dgh,
                           cudaStream_t stream) {
  check_sizes("gru_sequence_backward", B, D);
  MAMBARL_CHECK(T > 0, "gru_sequence_backward: T must be positive, got " << T);
  sequence_backward_kernel<<<static_cast<unsigned>(B), sequence_threads(D), sequence_vector_bytes(D),
                             stream>>>(T, B, D, starts, w_hh, gates, hn, hp, dy, dgi, dgh);
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
