// linear_rows (kernels/linear.cuh), the actor's own GEMM (tiles, or GEMV
// warps for few rows), against a float64 reference: shapes that are and are
// not multiples of the tiles, beta 0 (Y poisoned with NaN, so every element must be written and none
// read) and beta 1 (the residual add), f32 and bf16 weights; and the
// learner's cuda::gemm in each GemmPrecision, every transpose pair, a column
// block of a wider A, a B read from its 16-bit shadow or cast. Skipped without
// a CUDA device unless MAMBARL_REQUIRE_GPU=1.
#define BOOST_TEST_MODULE gpu_linear
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/base/rng.hpp"
#include "kernels/cuda_check.cuh"
#include "kernels/cuda_handles.cuh"
#include "kernels/device_buffer.cuh"
#include "kernels/linear.cuh"
#include "test/gpu_test_util.hpp"
#include "test/test_util.hpp"

using namespace mambarl;
using mambarl::test::gpu_or_required;
using mambarl::test::require_gpu;
namespace utf = boost::unit_test;

namespace {

// The value a float becomes as a bf16 (round to nearest even), as a float;
// finite inputs only.
float bf16_round(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
  float r;
  std::memcpy(&r, &u, 4);
  return r;
}

struct Shape {
  int M, in, out;
};

// One tile, partial tiles on every axis, several k tiles, the actor's shapes.
// M <= 64 with in % 4 == 0 takes the GEMV path: every row-group size (1, 2,
// 4, 8), a partial last group (3, 13, 33 rows) and a k stride of 128 that
// does not divide in (36, 132); {37, 70, 130} and M > 64 take the tiles.
const Shape kShapes[] = {{1, 4, 3},     {2, 132, 7},     {3, 36, 20},     {13, 36, 20},
                         {37, 70, 130}, {33, 32, 64},    {100, 256, 128}, {64, 128, 512},
                         {1, 128, 512}, {64, 512, 256}};

void check_linear_rows(bool bf16) {
  cudaStream_t s = nullptr;
  MAMBARL_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  Rng rng(7, 0);
  for (const Shape& sh : kShapes)
    for (const float beta : {0.f, 1.f}) {
      BOOST_TEST_CONTEXT("M " << sh.M << " in " << sh.in << " out " << sh.out << " beta " << beta
                              << (bf16 ? " bf16" : " f32")) {
        const size_t nx = static_cast<size_t>(sh.M) * sh.in, nw = static_cast<size_t>(sh.out) * sh.in,
                     ny = static_cast<size_t>(sh.M) * sh.out;
        std::vector<float> x(nx), w(nw), y0(ny);
        for (auto& v : x) v = static_cast<float>(rng.normal());
        for (auto& v : w) v = static_cast<float>(rng.normal());
        for (auto& v : y0) v = beta == 0.f ? std::numeric_limits<float>::quiet_NaN()
                                           : static_cast<float>(rng.normal());
        // The weights the kernel multiplies by: bf16 rounding happens on the device.
        std::vector<float> w_eff(w);
        if (bf16)
          for (auto& v : w_eff) v = bf16_round(v);
        Vec<double> ref(static_cast<Eigen::Index>(ny));
        for (int m = 0; m < sh.M; ++m)
          for (int o = 0; o < sh.out; ++o) {
            double acc = beta == 0.f ? 0.0 : static_cast<double>(y0[static_cast<size_t>(m) * sh.out + o]);
            for (int k = 0; k < sh.in; ++k)
              acc += static_cast<double>(x[static_cast<size_t>(m) * sh.in + k]) *
                     w_eff[static_cast<size_t>(o) * sh.in + k];
            ref[static_cast<Eigen::Index>(m) * sh.out + o] = acc;
          }
        DeviceBuffer<float> dx(nx), dw(nw), dy(ny);
        DeviceBuffer<__nv_bfloat16> dwh(nw);
        copy_to_device(dx.data(), x.data(), dx.size());
        copy_to_device(dw.data(), w.data(), dw.size());
        copy_to_device(dy.data(), y0.data(), dy.size());
        if (bf16) {
          cuda::to_bf16(nw, dw.data(), dwh.data(), s);
          cuda::linear_rows(sh.M, sh.in, sh.out, dx.data(), dwh.data(), beta, dy.data(), s);
        } else {
          cuda::linear_rows(sh.M, sh.in, sh.out, dx.data(), dw.data(), beta, dy.data(), s);
        }
        MAMBARL_CUDA_CHECK(cudaStreamSynchronize(s));
        std::vector<float> y(ny);
        MAMBARL_CUDA_CHECK(cudaMemcpy(y.data(), dy.data(), dy.bytes(), cudaMemcpyDeviceToHost));
        Vec<double> got(static_cast<Eigen::Index>(ny));
        for (size_t i = 0; i < ny; ++i) got[static_cast<Eigen::Index>(i)] = y[i];
        // f32 FMA accumulation of at most 512 products of N(0,1) values
        // against an exact float64 sum of the same (rounded) operands:
        // ~sqrt(in) * 2^-24 relative, far under 1e-5; NaN (an unwritten or
        // wrongly read element) fails.
        MAMBARL_CHECK_CLOSE_REL("Y", got, ref, 1e-5, 1e-4, 1e-4);
      }
    }
  MAMBARL_CUDA_CHECK(cudaStreamDestroy(s));
}

// The value a float becomes in `p`'s GEMM input format, as a float.
float round_as(Precision p, float x) {
  if (p == Precision::bfloat16) return bf16_round(x);
  if (p == Precision::float16) return __half2float(__float2half_rn(x));
  return x;
}

void check_gemm(Precision prec) {
  CudaStream stream;
  cudaStream_t s = stream.get();
  CublasHandle handle;
  MAMBARL_CUBLAS_CHECK(cublasSetStream(handle.get(), s));
  MAMBARL_CUBLAS_CHECK(cublasSetMathMode(handle.get(), CUBLAS_DEFAULT_MATH));
  Rng rng(9, 0);
  struct Dims {
    int M, N, K;
  };
  for (const Dims d : {Dims{37, 20, 70}, Dims{64, 128, 33}, Dims{1, 7, 128}})
    for (int t = 0; t < 4; ++t)
      for (const bool shadow : {false, true})
        for (const float beta : {0.f, 1.f}) {
          const bool ta = t & 1, tb = t & 2;
          BOOST_TEST_CONTEXT(precision_name(prec)
                             << " M " << d.M << " N " << d.N << " K " << d.K << " ta " << ta << " tb " << tb
                             << " shadow " << shadow << " beta " << beta) {
            // A as stored: (M, K) or (K, M), a column block of rows 3 wider (lda > its row);
            // B (K, N) or (N, K), dense.
            const int a_rows = ta ? d.K : d.M, a_cols = ta ? d.M : d.K, lda = a_cols + 3;
            const int b_rows = tb ? d.N : d.K, ldb = tb ? d.K : d.N;
            std::vector<float> a(static_cast<size_t>(a_rows) * lda), b(static_cast<size_t>(b_rows) * ldb),
                c0(static_cast<size_t>(d.M) * d.N);
            for (auto& v : a) v = static_cast<float>(rng.normal());
            for (auto& v : b) v = static_cast<float>(rng.normal());
            for (auto& v : c0)
              v = beta == 0.f ? std::numeric_limits<float>::quiet_NaN() : static_cast<float>(rng.normal());
            Vec<double> ref(static_cast<Eigen::Index>(c0.size()));
            for (int m = 0; m < d.M; ++m)
              for (int n = 0; n < d.N; ++n) {
                double acc = beta == 0.f ? 0.0 : static_cast<double>(c0[static_cast<size_t>(m) * d.N + n]);
                for (int k = 0; k < d.K; ++k) {
                  const float av =
                      ta ? a[static_cast<size_t>(k) * lda + m] : a[static_cast<size_t>(m) * lda + k];
                  const float bv =
                      tb ? b[static_cast<size_t>(n) * ldb + k] : b[static_cast<size_t>(k) * ldb + n];
                  acc += static_cast<double>(round_as(prec, av)) * round_as(prec, bv);
                }
                ref[static_cast<Eigen::Index>(m) * d.N + n] = acc;
              }
            DeviceBuffer<float> da = to_device(a), db = to_device(b), dc = to_device(c0);
            // With a shadow, B's f32 values are NaN: the GEMM must read the shadow only.
            DeviceBuffer<float> nan_b =
                to_device(std::vector<float>(b.size(), std::numeric_limits<float>::quiet_NaN()));
            DeviceBuffer<uint16_t> b_low(b.size());
            const bool low = prec != Precision::float32;
            if (low) cuda::to_half(prec, b.size(), db.data(), b_low.data(), s);
            const bool use_shadow = low && shadow;
            const cuda::GemmOperand B =
                use_shadow ? cuda::GemmOperand(nan_b.data(), b_low.data()) : cuda::GemmOperand(db.data());
            const size_t words =
                low ? cuda::gemm_cast_elems(static_cast<size_t>(a_rows) * a_cols, use_shadow ? 0 : b.size())
                    : 0;
            DeviceBuffer<uint16_t> scratch(std::max<size_t>(words, 1));
            const cuda::GemmPrecision gp{prec, scratch.data(), words, s};
            cuda::gemm(handle.get(), gp, ta, tb, d.M, d.N, d.K, 1.f, da.data(), lda, B, ldb, beta, dc.data(),
                       d.N);
            MAMBARL_CUDA_CHECK(cudaStreamSynchronize(s));
            const std::vector<float> c = copy_to_host(dc);
            Vec<double> got(static_cast<Eigen::Index>(c.size()));
            for (size_t i = 0; i < c.size(); ++i) got[static_cast<Eigen::Index>(i)] = c[i];
            // Exact products of the rounded operands (16-bit x 16-bit fits f32's
            // mantissa) summed in f32 against float64. SGEMM rounds each add:
            // ~sqrt(K) 2^-24 relative, as linear_rows above. Tensor-core f32
            // accumulation may truncate when it aligns the products, a bias of
            // up to ~K 2^-24 relative (1e-5 at K = 128): 10x looser bounds for
            // 16-bit inputs, still far below a transposed or misread operand's
            // O(1) error. NaN (an unwritten element, a read of B's f32 values
            // beside its shadow) fails.
            const double rel = low ? 1e-4 : 1e-5, elem = low ? 1e-3 : 1e-4;
            MAMBARL_CHECK_CLOSE_REL("C", got, ref, rel, elem, elem);
            if (low) {
              // One word short of the casts is refused, before anything runs.
              const cuda::GemmPrecision small{prec, scratch.data(), words - 1, s};
              BOOST_CHECK_THROW(cuda::gemm(handle.get(), small, ta, tb, d.M, d.N, d.K, 1.f, da.data(), lda, B,
                                           ldb, beta, dc.data(), d.N),
                                Error);
            }
          }
        }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(gpu_linear, *utf::precondition(gpu_or_required))

BOOST_AUTO_TEST_CASE(gemm_matches_float64_on_rounded_inputs_in_every_precision) {
  require_gpu();
  for (Precision p : {Precision::float32, Precision::bfloat16, Precision::float16}) check_gemm(p);
}

BOOST_AUTO_TEST_CASE(linear_rows_f32_matches_float64) {
  require_gpu();
  check_linear_rows(false);
}

BOOST_AUTO_TEST_CASE(linear_rows_bf16_matches_float64_on_rounded_weights) {
  require_gpu();
  check_linear_rows(true);
}

BOOST_AUTO_TEST_SUITE_END()
