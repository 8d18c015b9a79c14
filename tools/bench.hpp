// `mambarl bench rollout|train|e2e|soak`: timings (or a soak report) printed as one JSON object.
#pragma once

#include <iosfwd>

namespace mambarl {
int run_bench(int argc, char** argv, std::ostream& out);
}
