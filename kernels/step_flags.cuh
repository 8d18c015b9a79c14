// Which envs a T=1 mixer step touches, and how (device pointers, one u8 per
// env, shared by the Mamba-1 and Mamba-3 step kernels).
//   starts  episode starts: those envs step from a zero state (the old one is
//           not read); null: none.
//   only    when set, only envs with only[b] != 0 step; the others read and
//           write no state and get a zero gated row, so whatever is computed
//           downstream of them stays finite and is ignored by the caller. A
//           peek for bootstrap values needs the few truncated envs only.
#pragma once

#include <cstdint>

#include "kernels/base/host_device.hpp"

namespace mambarl::cuda {

struct StepFlags {
  const uint8_t* starts = nullptr;
  const uint8_t* only = nullptr;
  MAMBARL_HD bool start(int b) const { return starts != nullptr && starts[b] != 0; }
  MAMBARL_HD bool skip(int b) const { return only != nullptr && only[b] == 0; }
};

}  // namespace mambarl::cuda
