// `mambarl sweep <sweep.yaml> [--jobs N] [--out DIR] [--dry-run] [--resume]
// [--only KEY=V,...] [key=value ...]`: runs a sweep's training runs (those the
// --only filters keep) as child processes, a few at a time, then writes its
// report (tools/sweep.hpp, tools/sweep_report.hpp).
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace mambarl {

struct SweepOptions {
  std::string file;
  std::string out_dir;  // empty: the file's out_dir
  int jobs = 0;         // 0: the file's jobs, else the number of cores
  bool dry_run = false;
  bool resume = false;
  std::vector<std::string> only;  // --only KEY=V1,V2 filters (select_runs, tools/sweep.hpp)
  std::vector<std::string> overrides;
};

// `command_line` (the whole argv) goes into results.md.
int run_sweep(const SweepOptions& o, const std::vector<std::string>& command_line, std::ostream& out);

}  // namespace mambarl
