// A self-contained SVG line plot (no plotting library): the learning curve of
// every run and the soak bench's memory-over-time plot.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace mambarl {

struct PlotSeries {
  std::string name;  // shown in a legend when there is more than one series
  std::vector<std::pair<double, double>> points;  // (x, y); non-finite points are skipped
};

// Writes `path` atomically: axes fitted to all series, 5 ticks each, one colour per series.
void write_line_plot_svg(const std::string& path, const std::string& title, const std::string& x_label,
                         const std::string& y_label, const std::vector<PlotSeries>& series);

}  // namespace mambarl
