// linear_rows (kernels/linear.cuh), the actor's own GEMM (tiles, or GEMV
// warps for few rows), against a float64 reference: shapes that are and are
// not multiples of the tiles, beta 0 (Y poisoned with NaN, so every element must be written and none
// read) and beta 1 (the residual add), f32 and bf16 weights. Skipped without
// a CUDA device unless MAMBARL_REQUIRE_GPU=1.
#define BOOST_TEST_MODULE gpu_linear
#include <boost/test/unit_test.hpp>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cuda_check.cuh"
#include "kernels/device_buffer.cuh"
#include "kernels/linear.cuh"
#include "kernels/rng.hpp"
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
        MAMBARL_CUDA_CHECK(cudaMemcpy(dx.data(), x.data(), dx.bytes(), cudaMemcpyHostToDevice));
        MAMBARL_CUDA_CHECK(cudaMemcpy(dw.data(), w.data(), dw.bytes(), cudaMemcpyHostToDevice));
        MAMBARL_CUDA_CHECK(cudaMemcpy(dy.data(), y0.data(), dy.bytes(), cudaMemcpyHostToDevice));
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

}  // namespace

BOOST_AUTO_TEST_SUITE(gpu_linear, *utf::precondition(gpu_or_required))

BOOST_AUTO_TEST_CASE(linear_rows_f32_matches_float64) {
  require_gpu();
  check_linear_rows(false);
}

BOOST_AUTO_TEST_CASE(linear_rows_bf16_matches_float64_on_rounded_weights) {
  require_gpu();
  check_linear_rows(true);
}

BOOST_AUTO_TEST_SUITE_END()
