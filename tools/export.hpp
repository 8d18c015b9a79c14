// `mambarl export`: the weights of a checkpoint alone, for PyTorch/HF readers
// and for `mambarl eval <weights> --config <experiment.yaml>`.
#pragma once

#include <string>

#include "policy/io/safetensors.hpp"

namespace mambarl {

// Refuses an output that is the checkpoint itself (the same path, ./path,
// a link to it): the input is never touched.
void export_weights(const std::string& checkpoint, const std::string& out_path);

// Whether `f` was written by export_weights (no optimizer or runner state).
bool is_exported_weights(const SafetensorsFile& f);

}  // namespace mambarl
