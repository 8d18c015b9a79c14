// The kernels' dimension records (kernels/mamba*_step.cuh) from the mixers'
// configs: one place that maps config fields to kernel dims, for the actor
// (T=1 step) and the learner (chunk) engines alike.
#pragma once

#include "kernels/mamba1_step.cuh"
#include "kernels/mamba3_step.cuh"
#include "policy/mamba1.hpp"
#include "policy/mamba3.hpp"

namespace mambarl {

inline cuda::Mamba1Dims mamba1_dims(const Mamba1Config& c) {
  return cuda::Mamba1Dims{c.d_model, c.d_inner(), c.d_state, c.d_conv, c.resolved_dt_rank()};
}

inline cuda::Mamba3Dims mamba3_dims(const Mamba3Config& c) {
  cuda::Mamba3Dims d;
  d.D = c.d_model;
  d.E = c.d_inner();
  d.N = c.d_state;
  d.P = c.headdim;
  d.H = c.nheads();
  d.G = c.ngroups;
  d.Na = c.num_rope_angles();
  d.a_floor = static_cast<float>(c.a_floor);
  return d;
}

}  // namespace mambarl
