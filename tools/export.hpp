// `mambarl export`: the weights of a checkpoint alone, for PyTorch/HF readers.
#pragma once

#include <string>

namespace mambarl {
void export_weights(const std::string& checkpoint, const std::string& out_path);
}
