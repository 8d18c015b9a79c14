#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>

#include "kernels/block_reduce.cuh"
#include "kernels/cuda_check.cuh"
#include "kernels/launch.cuh"
#include "kernels/linear.cuh"

namespace mambarl::cuda {

namespace {

constexpr int kThreads = 256;

int blocks_for(size_t n) { return static_cast<int>((n + kThreads - 1) / kThreads); }

__global__ void linear_small_kernel(int M, int in, int out, const float* __restrict__ X,
                                    const float* __restrict__ W, const float* __restrict__ b,
                                    RowEmbedding embed, float* __restrict__ Y) {
  pdl_enter();
  const size_t idx = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= static_cast<size_t>(M) * out) return;
  const int m = static_cast<int>(idx / out), o = static_cast<int>(idx % out);
  const float* x = X + static_cast<size_t>(m) * in;
  const float* wr = W + static_cast<size_t>(o) * in;
  float acc = 0.f;
  for (int i = 0; i < in; ++i) acc += __ldg(wr + i) * x[i];
  acc += __ldg(b + o);
  if (embed.rows != nullptr && embed.rows[m] != 0) acc += __ldg(embed.vec + o);
  Y[idx] = acc;
}

__global__ void fold_norm_kernel(int rows, int cols, const float* __restrict__ W,
                                 const float* __restrict__ w, float* __restrict__ out) {
  const size_t idx = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= static_cast<size_t>(rows) * cols) return;
  out[idx] = W[idx] * w[idx % cols];
}

// linear_rows tiling: a block computes a (kRowsM x kColsN) tile of Y, 256
// threads each own 2 rows x 4 columns, k advances kTileK at a time through
// shared memory. Small output tiles on purpose: at M = 1024, out = 128 this
// still gives 64 blocks; a deep k tile because the chain of k tiles (each an
// L2 round trip, half hidden by the prefetch) is what costs at these sizes.
// Tiles are stored row-major ([row][k]) and read 4 k at a time as 16-byte
// vectors: 6 shared loads feed 32 FMAs (10 bank wavefronts per warp), where
// scalar k-major reads needed 24 wavefronts for the same FMAs and made the
// kernel shared-load bound (10.1 µs for 1024x128 -> 512 on the H200).
constexpr int kRowsM = 32, kColsN = 64, kTileK = 64, kGemmThreads = 256;
// Row pitch in floats: 16-byte aligned rows, and +4 floats so the 16 rows a
// warp's b loads touch start 4 banks apart (two wavefronts for 256 bytes,
// the minimum).
constexpr int kTilePitch = kTileK + 4;
constexpr int kThrRows = kRowsM / 16, kThrCols = kColsN / 16;  // 16 x 16 thread grid
constexpr int kLoadRowStep = kGemmThreads / kTileK;            // rows one load pass covers
constexpr int kXLoads = kRowsM / kLoadRowStep, kWLoads = kColsN / kLoadRowStep;
static_assert(kTileK % 32 == 0 && kGemmThreads % kTileK == 0, "a warp loads one row segment");
static_assert(kTileK % 4 == 0 && kTilePitch % 4 == 0, "16-byte reads along k");

__device__ __forceinline__ float to_f32(float v) { return v; }
__device__ __forceinline__ float to_f32(__nv_bfloat16 v) { return __bfloat162float(v); }

// Thread t loads k = k0 + t % kTileK of rows t / kTileK + kLoadRowStep i:
// each warp reads one contiguous row segment and stores it as one contiguous
// shared row segment (conflict-free).
template <class Wt>
__global__ void __launch_bounds__(kGemmThreads)
    linear_rows_kernel(int M, int in, int out, const float* __restrict__ X,
                       const Wt* __restrict__ W, float beta, float* __restrict__ Y) {
  pdl_enter();
  __shared__ __align__(16) float xs[kRowsM][kTilePitch];
  __shared__ __align__(16) float ws[kColsN][kTilePitch];
  const int tid = static_cast<int>(threadIdx.x);
  const int m0 = static_cast<int>(blockIdx.y) * kRowsM, n0 = static_cast<int>(blockIdx.x) * kColsN;
  const int lk = tid % kTileK, lr = tid / kTileK;  // load position
  const int tx = tid % 16, ty = tid / 16;          // compute position: cols tx + 16 j, rows ty + 16 i

  float xr[kXLoads], wr[kWLoads];
  const auto fetch = [&](int k0) {
    const int k = k0 + lk;
#pragma unroll
    for (int i = 0; i < kXLoads; ++i) {
      const int m = m0 + lr + kLoadRowStep * i;
      xr[i] = (m < M && k < in) ? X[static_cast<size_t>(m) * in + k] : 0.f;
    }
#pragma unroll
    for (int i = 0; i < kWLoads; ++i) {
      const int n = n0 + lr + kLoadRowStep * i;
      wr[i] = (n < out && k < in) ? to_f32(W[static_cast<size_t>(n) * in + k]) : 0.f;
    }
  };

  float acc[kThrRows][kThrCols] = {};
  fetch(0);
  for (int k0 = 0; k0 < in; k0 += kTileK) {
#pragma unroll
    for (int i = 0; i < kXLoads; ++i) xs[lr + kLoadRowStep * i][lk] = xr[i];
#pragma unroll
    for (int i = 0; i < kWLoads; ++i) ws[lr + kLoadRowStep * i][lk] = wr[i];
    __syncthreads();
    if (k0 + kTileK < in) fetch(k0 + kTileK);  // next tile's loads fly during this tile's FMAs
#pragma unroll 2
    for (int k = 0; k < kTileK; k += 4) {
      float4 a[kThrRows], b[kThrCols];
#pragma unroll
      for (int i = 0; i < kThrRows; ++i) a[i] = *reinterpret_cast<const float4*>(&xs[ty + 16 * i][k]);
#pragma unroll
      for (int j = 0; j < kThrCols; ++j) b[j] = *reinterpret_cast<const float4*>(&ws[tx + 16 * j][k]);
      // k, k+1, k+2, k+3 in order: the same fixed summation order per element.
#pragma unroll
      for (int i = 0; i < kThrRows; ++i)
#pragma unroll
        for (int j = 0; j < kThrCols; ++j) {
          acc[i][j] = fmaf(a[i].x, b[j].x, acc[i][j]);
          acc[i][j] = fmaf(a[i].y, b[j].y, acc[i][j]);
          acc[i][j] = fmaf(a[i].z, b[j].z, acc[i][j]);
          acc[i][j] = fmaf(a[i].w, b[j].w, acc[i][j]);
        }
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < kThrRows; ++i) {
    const int m = m0 + ty + 16 * i;
    if (m >= M) continue;
#pragma unroll
    for (int j = 0; j < kThrCols; ++j) {
      const int n = n0 + tx + 16 * j;
      if (n >= out) continue;
      float* y = Y + static_cast<size_t>(m) * out + n;
      *y = beta == 0.f ? acc[i][j] : acc[i][j] + beta * *y;
    }
  }
}

// linear_rows for few rows (M <= kGemvMaxRows), where a 32-row tile is
// mostly padding and the whole product runs on a handful of blocks: one warp
// per (output column n, group of MR rows), lanes striding k four at a time
// with 16-byte loads of the W row (8-byte for bf16) and of each X row, MR
// partial sums per lane added by a fixed shuffle tree (deterministic, no
// atomics). out * groups warps, so M = 1 still launches `out` warps. The
// warps of a block take consecutive n of one row group: the group's X rows are
// L1 hits after the first warp. Requires in % 4 == 0 and aligned X and W
// (gemv_ok); Y need not be aligned.
constexpr int kGemvThreads = 256, kGemvMaxRows = 64, kGemvLanes = 32;

__device__ __forceinline__ float4 load4(const float* p) {
  return __ldg(reinterpret_cast<const float4*>(p));
}
// A bf16 is the top half of the f32 with the same bits: widening is a shift.
__device__ __forceinline__ float4 load4(const __nv_bfloat16* p) {
  const uint2 u = __ldg(reinterpret_cast<const uint2*>(p));
  return make_float4(__uint_as_float(u.x << 16), __uint_as_float(u.x & 0xFFFF0000u),
                     __uint_as_float(u.y << 16), __uint_as_float(u.y & 0xFFFF0000u));
}

template <int MR, class Wt>
__global__ void __launch_bounds__(kGemvThreads)
    linear_rows_gemv_kernel(int M, int in, int out, const float* __restrict__ X,
                            const Wt* __restrict__ W, float beta, float* __restrict__ Y) {
  pdl_enter();
  const size_t warp = (static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kGemvLanes;
  const int lane = static_cast<int>(threadIdx.x) % kGemvLanes;
  const size_t groups = static_cast<size_t>((M + MR - 1) / MR);
  // Whole warps only leave here: the shuffles below need all 32 lanes.
  if (warp >= groups * static_cast<size_t>(out)) return;
  const int n = static_cast<int>(warp % static_cast<size_t>(out));
  const int m0 = static_cast<int>(warp / static_cast<size_t>(out)) * MR;
  const Wt* wr = W + static_cast<size_t>(n) * in;
  float acc[MR] = {};
  for (int k = 4 * lane; k < in; k += 4 * kGemvLanes) {
    const float4 wv = load4(wr + k);
#pragma unroll
    for (int r = 0; r < MR; ++r) {
      if (m0 + r >= M) continue;
      const float4 xv = load4(X + static_cast<size_t>(m0 + r) * in + k);
      acc[r] = fmaf(wv.x, xv.x, acc[r]);
      acc[r] = fmaf(wv.y, xv.y, acc[r]);
      acc[r] = fmaf(wv.z, xv.z, acc[r]);
      acc[r] = fmaf(wv.w, xv.w, acc[r]);
    }
  }
#pragma unroll
  for (int r = 0; r < MR; ++r) acc[r] = warp_sum(acc[r]);
  // Lane r writes row m0 + r: compile-time indices into acc only.
#pragma unroll
  for (int r = 0; r < MR; ++r) {
    if (lane != r || m0 + r >= M) continue;
    float* y = Y + static_cast<size_t>(m0 + r) * out + n;
    *y = beta == 0.f ? acc[r] : acc[r] + beta * *y;
  }
}

// The row-group size the GEMV path uses for M rows (its MR).
int gemv_rows(int M) { return M == 1 ? 1 : M == 2 ? 2 : M <= 4 ? 4 : 8; }

// The GEMV path for small M when its vector loads are legal: 4 consecutive k
// of a row at 16 bytes (X, f32 W) or 8 bytes (bf16 W).
template <class Wt>
bool gemv_ok(int M, int in, const float* X, const Wt* W) {
  const auto aligned = [](const void* p, size_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; };
  return M <= kGemvMaxRows && in % 4 == 0 && aligned(X, 16) && aligned(W, 4 * sizeof(Wt));
}

__device__ __forceinline__ __nv_bfloat16 round_to(float v, __nv_bfloat16*) { return __float2bfloat16_rn(v); }
__device__ __forceinline__ __half round_to(float v, __half*) { return __float2half_rn(v); }

// out (rows, cols) dense = in (rows, cols) with row stride ld, rounded to Lt
// (a 1-D cast is rows = 1). Rounding to nearest even: an f16 beyond 65504
// becomes inf, which the learner's non-finite check then catches.
template <class Lt>
__global__ void cast_kernel(size_t rows, size_t cols, const float* __restrict__ in, size_t ld,
                            Lt* __restrict__ out) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * cols) return;
  const size_t r = i / cols, c = i % cols;
  out[i] = round_to(in[r * ld + c], out);
}

// A 16-bit scratch region starts on a 128-byte boundary (cuBLAS's tensor-core
// kernels want 16-byte aligned operands; 128 keeps whole cache lines).
constexpr size_t kCastAlign = 64;

size_t cast_padded(size_t n) { return (n + kCastAlign - 1) / kCastAlign * kCastAlign; }

// in (rows, cols) with row stride ld -> out dense, in `type`'s 16-bit format.
void cast_rows(Precision type, size_t rows, size_t cols, const float* in, size_t ld, uint16_t* out,
               cudaStream_t stream) {
  const size_t n = rows * cols;
  MAMBARL_CHECK(n > 0 && type != Precision::float32, "cast: nothing to cast (n " << n << ")");
  if (type == Precision::bfloat16)
    cast_kernel<<<blocks_for(n), kThreads, 0, stream>>>(rows, cols, in, ld,
                                                        reinterpret_cast<__nv_bfloat16*>(out));
  else
    cast_kernel<<<blocks_for(n), kThreads, 0, stream>>>(rows, cols, in, ld, reinterpret_cast<__half*>(out));
  MAMBARL_CUDA_LAUNCH_CHECK(stream);
}

}  // namespace

size_t gemm_cast_elems(size_t a_elems, size_t b_elems) { return cast_padded(a_elems) + cast_padded(b_elems); }

void gemm(cublasHandle_t handle, const GemmPrecision& prec, bool trans_a, bool trans_b, int M, int N, int K,
          float alpha, GemmOperand A, int lda, GemmOperand B, int ldb, float beta, float* C, int ldc) {
  MAMBARL_CHECK(M > 0 && N > 0 && K > 0,
                "gemm: sizes must be positive (M " << M << ", N " << N << ", K " << K << ")");
  MAMBARL_CHECK(lda >= (trans_a ? M : K) && ldb >= (trans_b ? K : N) && ldc >= N,
                "gemm: a leading dimension is smaller than its row (lda " << lda << ", ldb " << ldb
                                                                          << ", ldc " << ldc << ")");
  // A row-major matrix is its transpose in column-major order with the same
  // leading dimension, so row-major C = op(A) op(B) is column-major
  // C^T = op(B)^T op(A)^T: swap the operands, keep each one's own op.
  const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                          op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (prec.type == Precision::float32) {
    MAMBARL_CUBLAS_CHECK(
        cublasSgemm(handle, op_b, op_a, N, M, K, &alpha, B.f32, ldb, A.f32, lda, &beta, C, ldc));
    return;
  }
  // Operands as stored: A is (M, K) or, transposed, (K, M); B (K, N) or (N, K).
  const size_t a_rows = trans_a ? K : M, a_cols = trans_a ? M : K;
  const size_t b_rows = trans_b ? N : K, b_cols = trans_b ? K : N;
  const size_t need = gemm_cast_elems(A.low ? 0 : a_rows * a_cols, B.low ? 0 : b_rows * b_cols);
  MAMBARL_CHECK(need <= prec.scratch_elems, "gemm: the 16-bit cast scratch holds "
                                                << prec.scratch_elems << " values, this GEMM needs " << need);
  // A cast operand is dense: its leading dimension becomes its row length.
  const void* a = A.low;
  const void* b = B.low;
  int lda_h = lda, ldb_h = ldb;
  if (!a) {
    cast_rows(prec.type, a_rows, a_cols, A.f32, static_cast<size_t>(lda), prec.scratch, prec.stream);
    a = prec.scratch;
    lda_h = static_cast<int>(a_cols);
  }
  if (!b) {
    uint16_t* dst = prec.scratch + (A.low ? 0 : cast_padded(a_rows * a_cols));
    cast_rows(prec.type, b_rows, b_cols, B.f32, static_cast<size_t>(ldb), dst, prec.stream);
    b = dst;
    ldb_h = static_cast<int>(b_cols);
  }
  const cudaDataType_t t = prec.type == Precision::bfloat16 ? CUDA_R_16BF : CUDA_R_16F;
  MAMBARL_CUBLAS_CHECK(cublasGemmEx(handle, op_b, op_a, N, M, K, &alpha, b, t, ldb_h, a, t, lda_h, &beta, C,
                                    CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

void gemm_rows(cublasHandle_t handle, const GemmPrecision& prec, int M, int in, int out, GemmOperand X,
               GemmOperand W, float beta, float* Y) {
  gemm(handle, prec, false, true, M, out, in, 1.f, X, in, W, in, beta, Y, out);
}

template <class Wt>
void linear_rows(int M, int in, int out, const float* X, const Wt* W, float beta, float* Y,
                 cudaStream_t stream, bool pdl) {
  MAMBARL_CHECK(M > 0 && in > 0 && out > 0,
                "linear_rows: sizes must be positive (M " << M << ", in " << in << ", out " << out << ")");
  if (gemv_ok(M, in, X, W)) {
    const int mr = gemv_rows(M);
    const size_t warps = static_cast<size_t>(out) * ((M + mr - 1) / mr);
    const int blocks = static_cast<int>((warps * kGemvLanes + kGemvThreads - 1) / kGemvThreads);
    const auto kernel = mr == 1   ? linear_rows_gemv_kernel<1, Wt>
                        : mr == 2 ? linear_rows_gemv_kernel<2, Wt>
                        : mr == 4 ? linear_rows_gemv_kernel<4, Wt>
                                  : linear_rows_gemv_kernel<8, Wt>;
    launch_kernel(pdl, kernel, blocks, kGemvThreads, 0, stream, M, in, out, X, W, beta, Y);
    return;
  }
  MAMBARL_CHECK(M <= 65535 * kRowsM, "linear_rows: M " << M << " exceeds the grid's y limit");
  const dim3 grid((out + kColsN - 1) / kColsN, (M + kRowsM - 1) / kRowsM);
  launch_kernel(pdl, linear_rows_kernel<Wt>, grid, kGemmThreads, 0, stream, M, in, out, X, W, beta, Y);
}

template void linear_rows<float>(int, int, int, const float*, const float*, float, float*,
                                 cudaStream_t, bool);
template void linear_rows<__nv_bfloat16>(int, int, int, const float*, const __nv_bfloat16*, float,
                                         float*, cudaStream_t, bool);

void to_bf16(size_t n, const float* in, __nv_bfloat16* out, cudaStream_t stream) {
  MAMBARL_CHECK(n > 0, "to_bf16: n must be positive");
  cast_kernel<<<blocks_for(n), kThreads, 0, stream>>>(1, n, in, n, out);
  MAMBARL_CUDA_LAUNCH_CHECK(stream);
}

void to_half(Precision type, size_t n, const float* in, uint16_t* out, cudaStream_t stream) {
  MAMBARL_CHECK(type != Precision::float32, "to_half: float32 has no 16-bit shadow");
  cast_rows(type, 1, n, in, n, out, stream);
}

void linear_small(int M, int in, int out, const float* X, const float* W, const float* b, float* Y,
                  cudaStream_t stream, bool pdl, RowEmbedding embed) {
  MAMBARL_CHECK(M > 0 && in > 0 && out > 0, "linear_small: sizes must be positive");
  MAMBARL_CHECK((embed.rows == nullptr) == (embed.vec == nullptr), "linear_small: embedding rows without a vector");
  launch_kernel(pdl, linear_small_kernel, blocks_for(static_cast<size_t>(M) * out), kThreads, 0,
                stream, M, in, out, X, W, b, embed, Y);
}

void fold_norm(int rows, int cols, const float* W, const float* w, float* out, cudaStream_t stream) {
  MAMBARL_CHECK(rows > 0 && cols > 0, "fold_norm: sizes must be positive");
  fold_norm_kernel<<<blocks_for(static_cast<size_t>(rows) * cols), kThreads, 0, stream>>>(rows, cols,
                                                                                         W, w, out);
  MAMBARL_CUDA_LAUNCH_CHECK(stream);
}

}  // namespace mambarl::cuda
