// The mixer types that have a GPU training engine (make_gpu_mixer,
// policy/gpu_mixer.hpp), in table order: what the GPU learner can train and
// what `bench train --device cuda` measures.
#pragma once

#include <string>
#include <vector>

namespace mambarl {

std::vector<std::string> gpu_mixer_types();

}  // namespace mambarl
