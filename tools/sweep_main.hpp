// `mambarl sweep <sweep.yaml> [--jobs N] [--out DIR] [--dry-run] [key=value ...]`:
// runs a sweep's training runs as child processes, a few at a time, then
// writes its report (tools/sweep.hpp, tools/sweep_report.hpp).
#pragma once

#include <iosfwd>

namespace mambarl {
// argv[0] is the program and argv[1] "sweep"; the whole command line goes into results.md.
int run_sweep(int argc, char** argv, std::ostream& out);
}  // namespace mambarl
