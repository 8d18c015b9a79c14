// For the CPU suites that ask for runtime.device: cuda: hides every GPU from
// the test process before CUDA initialises (on the first CUDA call, which
// the plugin makes in probe()), so that the request is refused the same way
// on every machine, with or without a GPU: the fallback path that a machine
// without a usable GPU takes. The GPU suites (label gpu) test the other path.
// Include it in exactly one translation unit of a test binary.
#pragma once

#include <cstdlib>

#include <boost/test/unit_test.hpp>

namespace mambarl::test {

struct HideGpus {
  // An invalid first index makes CUDA see no device at all (CUDA_VISIBLE_DEVICES
  // lists the devices before the first invalid entry).
  HideGpus() { ::setenv("CUDA_VISIBLE_DEVICES", "-1", 1); }
};
BOOST_TEST_GLOBAL_FIXTURE(HideGpus);

}  // namespace mambarl::test
