// `mambarl plot`: several runs' curves overlaid in one SVG, to compare them
// (two policies on one env, two learning rates) without a plotting library.
// Each run folder's metrics file is read back (tools/metrics_log.hpp) and
// drawn as one series labelled with the folder's name.
#pragma once

#include <string>
#include <vector>

namespace mambarl {

struct PlotOptions {
  std::vector<std::string> run_dirs;    // runtime.out_dir of each run, in legend order (at least one)
  std::string out;                      // the SVG to write
  std::string metric = "mean_return";  // a column of the metrics files, against env_steps
};

// Writes `out` (atomically). A folder without a metrics file is an error
// naming the folder; a metric the files do not log is an error naming it and
// listing the columns they have.
void plot_runs(const PlotOptions& opts);

}  // namespace mambarl
