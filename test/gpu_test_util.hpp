// What every GPU suite shares: skip cleanly without a CUDA device, unless
// MAMBARL_REQUIRE_GPU=1 (the device machine's runs and `ctest --preset gpu`
// set it), which turns a missing device into a failure.
//
// Use: BOOST_AUTO_TEST_SUITE(x, *boost::unit_test::precondition(gpu_or_required))
// and call require_gpu() first in each case.
#pragma once

#include <cuda_runtime.h>

#include <cstdlib>
#include <iostream>
#include <string>

#include <boost/test/unit_test.hpp>

namespace mambarl::test {

inline bool gpu_required() {
  const char* v = std::getenv("MAMBARL_REQUIRE_GPU");
  return v && std::string(v) == "1";
}

inline int gpu_count() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

// Skips the suite without a device; with MAMBARL_REQUIRE_GPU=1 it runs, and
// each case's require_gpu() fails instead.
inline boost::test_tools::assertion_result gpu_or_required(boost::unit_test::test_unit_id) {
  if (gpu_count() > 0 || gpu_required()) return true;
  const char* why = "no CUDA device: GPU tests skipped (MAMBARL_REQUIRE_GPU=1 makes this a failure)";
  // Boost reports skips only at verbose log levels, so say it on stderr too.
  std::cerr << boost::unit_test::framework::master_test_suite().p_name.value << ": " << why << "\n";
  boost::test_tools::assertion_result r(false);
  r.message() << why;
  return r;
}

inline void require_gpu() {
  BOOST_REQUIRE_MESSAGE(gpu_count() > 0, "MAMBARL_REQUIRE_GPU=1 but no CUDA device is usable");
}

}  // namespace mambarl::test
