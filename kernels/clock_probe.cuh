// The SM clock as the benchmark finds it: one thread spins a known number of
// cycles (clock64) and CUDA events time it. Why: the H200 idles at ~400 MHz
// and boosts to ~1980 MHz only under sustained load, so a timing taken before
// the clock ramps measures DVFS, not the kernels. Benches report this beside
// their times (the card's clock settings are left alone).
#pragma once

#include <cuda_runtime.h>

namespace mambarl::cuda {

double sm_clock_mhz(cudaStream_t stream);

}  // namespace mambarl::cuda
