// Deterministic block-wide reductions and the RMSNorm scale, device side.
//
// Why deterministic: graph replay and eager launches must agree bit for bit,
// and a replay must not depend on scheduling, so there are no atomics: a
// fixed xor-shuffle tree inside each warp (a+b == b+a exactly, so every lane
// ends with the same bits), then every thread sums the warp partials in warp
// order. Callers launch blocks whose size is a multiple of 32.
#pragma once

#include <cuda_runtime.h>

namespace mambarl::cuda {

constexpr float kNormEpsF = 1e-5f;  // policy/MATH.md "Notation": all norms use eps = 1e-5

// float, or double where a sum over many terms must keep its digits (the
// learner's loss metrics and gradient norm accumulate in double, as the CPU).
template <typename V>
__device__ __forceinline__ V warp_sum(V v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Warp-wide sums of V values per lane (V a power of two <= 32) in log2(V)
// exchange-halves steps + 5 - log2(V) plain steps: 31 shuffles for V = 32
// where V warp_sums take 5 V. Afterwards lane l holds in the return value
// the sum of value index l / (32 / V); the 32 / V lanes sharing an index
// hold the same bits (a + b == b + a), and the summation order is fixed.
template <int V>
__device__ __forceinline__ float warp_reduce_scatter(float (&v)[V]) {
  static_assert(V >= 1 && V <= 32 && (V & (V - 1)) == 0, "V must be a power of two <= 32");
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int o = 16, c = V; o > 0; o >>= 1, c = c > 1 ? c / 2 : 1) {
    if (c > 1) {
      // Lanes with bit o set keep the upper half of their values, the others
      // the lower half; each adds its partner's copy of the half it keeps.
      const int h = c / 2;
      const bool up = (lane & o) != 0;
#pragma unroll
      for (int i = 0; i < h; ++i) {
        const float send = up ? v[i] : v[i + h];
        const float keep = up ? v[i + h] : v[i];
        v[i] = keep + __shfl_xor_sync(0xffffffffu, send, o);
      }
    } else {
      v[0] += __shfl_xor_sync(0xffffffffu, v[0], o);
    }
  }
  return v[0];
}

// Sum of v over the block; every thread gets the same value. scratch: 32
// values of shared memory, free again when this returns.
template <typename V>
__device__ __forceinline__ V block_sum(V v, V* scratch) {
  v = warp_sum(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int nwarps = static_cast<int>(blockDim.x + 31) >> 5;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  V s = V(0);
  for (int w = 0; w < nwarps; ++w) s += scratch[w];
  __syncthreads();
  return s;
}

// 1 / sqrt(mean(x²) + eps) of one row x (n), as the CPU's rmsnorm_forward.
__device__ __forceinline__ float block_rms_inv(const float* x, int n, float* scratch) {
  float s = 0.f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const float v = x[i];
    s += v * v;
  }
  s = block_sum(s, scratch);
  return 1.f / sqrtf(s / static_cast<float>(n) + kNormEpsF);
}

__device__ __forceinline__ float sigmoidf_ref(float v) { return 1.f / (1.f + expf(-v)); }

}  // namespace mambarl::cuda
