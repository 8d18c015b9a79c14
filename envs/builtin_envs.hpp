// The env types bundled with mambarl, as (type, factory) pairs. The registry
// inserts them when it is first used: an explicit call, not static
// initialisers, which a static library would drop at link time.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "envs/vec_env.hpp"

namespace mambarl {

std::vector<std::pair<std::string, EnvFactory>> builtin_env_factories();

}  // namespace mambarl
