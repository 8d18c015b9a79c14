#include "kernels/gather_columns.cuh"

#include <algorithm>

#include "kernels/cuda_check.cuh"

namespace mambarl::cuda {

namespace {

constexpr int kThreads = 256;
constexpr size_t kMaxBlocks = 65535;

// One thread per destination element (grid-stride), so consecutive threads
// write consecutive addresses and read runs of W from one source column.
template <typename V>
__global__ void gather_columns_kernel(size_t n, int B, int Bm, int W, const int* __restrict__ cols,
                                      const V* __restrict__ src, V* __restrict__ dst) {
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t w = i % static_cast<size_t>(W), tj = i / static_cast<size_t>(W);
    const size_t j = tj % static_cast<size_t>(Bm), t = tj / static_cast<size_t>(Bm);
    dst[i] = src[(t * static_cast<size_t>(B) + static_cast<size_t>(cols[j])) * static_cast<size_t>(W) + w];
  }
}

}  // namespace

template <typename V>
void gather_columns(int T, int B, int Bm, int W, const int* cols, const V* src, V* dst, cudaStream_t stream) {
  MAMBARL_CHECK(T > 0 && B > 0 && Bm > 0 && Bm <= B && W >= 0,
                "gather_columns: bad shape T=" << T << " B=" << B << " Bm=" << Bm << " W=" << W);
  const size_t n = static_cast<size_t>(T) * Bm * W;
  if (n == 0) return;
  MAMBARL_CHECK(cols && src && dst, "gather_columns: a null buffer");
  const size_t blocks = std::min((n + kThreads - 1) / kThreads, kMaxBlocks);
  gather_columns_kernel<V><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(n, B, Bm, W, cols, src, dst);
  MAMBARL_CUDA_LAUNCH_CHECK(stream);
}

template void gather_columns<float>(int, int, int, int, const int*, const float*, float*, cudaStream_t);
template void gather_columns<uint8_t>(int, int, int, int, const int*, const uint8_t*, uint8_t*, cudaStream_t);

}  // namespace mambarl::cuda
