#include "tools/plot_runs.hpp"

#include <filesystem>
#include <map>

#include "tools/metrics_log.hpp"
#include "tools/svg_plot.hpp"

namespace fs = std::filesystem;

namespace mambarl {

namespace {

// The folder's own name ("runs/tmaze_gru/" -> "tmaze_gru", "." -> the working
// directory's name).
std::string folder_name(const std::string& dir) {
  return fs::weakly_canonical(fs::absolute(dir)).filename().string();
}

}  // namespace

void plot_runs(const PlotOptions& opts) {
  std::map<std::string, int> uses;  // folder name -> how many runs have it
  for (const std::string& dir : opts.run_dirs) ++uses[folder_name(dir)];
  std::vector<PlotSeries> series;
  for (const std::string& dir : opts.run_dirs) {
    // Two folders of one name (runs/a/seed0, runs/b/seed0): the paths as given tell them apart.
    const std::string name = folder_name(dir);
    series.emplace_back(uses[name] > 1 ? dir : name, read_metrics_curve(metrics_file_in(dir), opts.metric));
  }
  // One run has no legend: its name is the title.
  const std::string title = series.size() == 1 ? series[0].name : opts.metric + " by run";
  write_line_plot_svg(opts.out, title, "env steps", opts.metric, series);
}

}  // namespace mambarl
