// A self-contained SVG line plot (no plotting library): the learning curve of
// every run, the sweep's per-env curves (mean over seeds with a min-max band),
// and the benches' plots (soak memory, e2e throughput).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace mambarl {

struct PlotSeries {
  PlotSeries(std::string name, std::vector<std::pair<double, double>> points,
             std::vector<std::pair<double, double>> band = {}, std::string colour = "", bool dashed = false)
      : name(std::move(name)),
        points(std::move(points)),
        band(std::move(band)),
        colour(std::move(colour)),
        dashed(dashed) {}

  std::string name;                               // shown in a legend when there is more than one series
  std::vector<std::pair<double, double>> points;  // (x, y); non-finite points are skipped
  // Empty, or one (low, high) per point: drawn as a shaded band behind the line
  // (e.g. the range over seeds around their mean).
  std::vector<std::pair<double, double>> band;
  std::string colour;   // "#rrggbb"; empty: the palette's colour for the series' index
  bool dashed = false;  // e.g. a reference level rather than a measured curve
};

// Writes `path` atomically: axes fitted to all series (bands included) and
// widened to round ticks, one colour per series, a legend when there is more
// than one, and a dashed line at y = 0 when the y range crosses it.
void write_line_plot_svg(const std::string& path, const std::string& title, const std::string& x_label,
                         const std::string& y_label, const std::vector<PlotSeries>& series);

// Axis ticks at round numbers: every multiple of a step 1, 2 or 5 x 10^k that
// lies in [lo, hi], the step chosen so that there are about `target` of them.
// lo < hi.
std::vector<double> nice_ticks(double lo, double hi, int target = 5);

}  // namespace mambarl
