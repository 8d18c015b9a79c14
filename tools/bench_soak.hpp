// `mambarl bench soak`: the real actor-learner loop (async mode) for minutes,
// sampling resident memory (and device memory where there is a GPU) to show
// that nothing grows after warm-up and that the chunk queue keeps its bound.
#pragma once

#include <iosfwd>

namespace mambarl {
// argv: what follows `bench soak`. Prints one JSON object; returns the exit
// status (0 pass, 1 fail: the verdict, so scripts can gate on it).
int run_soak(int argc, char** argv, std::ostream& out);
}
