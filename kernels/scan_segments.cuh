// The segments of a training scan (kernels/mamba1_scan.cuh, mamba3_scan.cuh):
// the forward keeps the recurrent state only after every seg_len-th step, and
// the backward rebuilds each segment's states from the one kept before it.
// Where the states are kept is this header's arithmetic, shared by the two
// blocks' kernels and their mixers' allocations.
#pragma once

#include "kernels/base/check.hpp"
#include "kernels/base/host_device.hpp"

namespace mambarl::cuda {

// States the forward keeps for a chunk of T steps: one after each segment
// but the last (the chunk's final state is rebuilt, never kept).
MAMBARL_HD inline int scan_segment_states(int T, int seg_len) { return (T + seg_len - 1) / seg_len - 1; }

// Which kept state the step t ends (its slot in [0, scan_segment_states)),
// or -1 where t ends no segment or is the chunk's last step.
MAMBARL_HD inline int scan_segment_slot_after(int t, int T, int seg_len) {
  const int next = t + 1;
  return next % seg_len == 0 && next < T ? next / seg_len - 1 : -1;
}

// A mixer's segment length from what its caller asked for: 0 is the longest
// the backward's shared memory holds; 1 keeps every state (the stored path
// the tests compare the rebuild against). `engine` names the mixer.
inline int scan_segment_len(int requested, int longest, const char* engine) {
  MAMBARL_CHECK(requested >= 0 && requested <= longest,
                engine << ": segment_len " << requested << " is outside [0, " << longest << "]");
  return requested == 0 ? longest : requested;
}

}  // namespace mambarl::cuda
