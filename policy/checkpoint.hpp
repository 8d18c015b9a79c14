// The learner checkpoint, shared by the CPU and GPU learners: parameters by
// name + AdamW moments (optimizer.exp_avg.<name>, optimizer.exp_avg_sq.<name>)
// + optimizer step + the resolved policy config, plus caller metadata and
// extra tensors (runner state). Both learners hold the same flat f32 layout,
// so a checkpoint written by one loads into the other.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "policy/io/safetensors.hpp"
#include "policy/param_layout.hpp"
#include "policy/policy_config.hpp"

namespace mambarl {

// Flat host copies in the layout's order (size layout.size()).
struct LearnerState {
  std::vector<float> params, exp_avg, exp_avg_sq;
  long long step = 0;
};

// Written atomically.
void write_checkpoint(const std::string& path, const PolicyConfig& policy, const ParamLayout& layout,
                      const float* params, const float* exp_avg, const float* exp_avg_sq, long long step,
                      const std::map<std::string, std::string>& metadata,
                      const std::vector<TensorRecord>& extra);

// Validates the format, the policy config, every name, shape and dtype
// against this layout before filling `out`; returns the file so the caller
// can read its metadata and extra tensors. On error `out` is untouched.
SafetensorsFile read_checkpoint(const std::string& path, const PolicyConfig& policy,
                                const ParamLayout& layout, LearnerState& out);

// The parameters alone, by name, from a checkpoint or a file written by
// `mambarl export`: its policy_config must equal `policy`'s and every
// parameter must be there with this layout's shape. (num_params) floats.
std::vector<float> read_weights(const std::string& path, const PolicyConfig& policy, const ParamLayout& layout);

}  // namespace mambarl
