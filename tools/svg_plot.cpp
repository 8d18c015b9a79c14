#include "tools/svg_plot.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "policy/posix_file.hpp"

namespace mambarl {

namespace {

std::string fmt(double v) {
  std::ostringstream os;
  os.precision(10);
  os << v;
  return os.str();
}

}  // namespace

void write_line_plot_svg(const std::string& path, const std::string& title, const std::string& x_label,
                         const std::string& y_label, const std::vector<PlotSeries>& series) {
  const double W = 640, H = 400, L = 70, R = 40, T = 40, Bm = 50;  // R leaves room for the last x label
  static const char* const kColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd"};
  double x0 = 0, x1 = 1, y0 = 0, y1 = 1;
  bool first = true;
  for (const PlotSeries& ser : series)
    for (const auto& [x, y] : ser.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      if (first) x0 = x1 = x, y0 = y1 = y, first = false;
      x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
    }
  if (x1 - x0 < 1e-12) x1 = x0 + 1;
  if (y1 - y0 < 1e-12) y0 -= 0.5, y1 += 0.5;
  const auto px = [&](double x) { return L + (x - x0) / (x1 - x0) * (W - L - R); };
  const auto py = [&](double y) { return H - Bm - (y - y0) / (y1 - y0) * (H - T - Bm); };
  std::ostringstream s;
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H
    << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
    << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    << "<text x=\"" << W / 2 << "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">" << title << "</text>\n"
    << "<line x1=\"" << L << "\" y1=\"" << H - Bm << "\" x2=\"" << W - R << "\" y2=\"" << H - Bm << "\" stroke=\"black\"/>\n"
    << "<line x1=\"" << L << "\" y1=\"" << T << "\" x2=\"" << L << "\" y2=\"" << H - Bm << "\" stroke=\"black\"/>\n";
  for (int i = 0; i <= 4; ++i) {
    const double xv = x0 + (x1 - x0) * i / 4, yv = y0 + (y1 - y0) * i / 4;
    s << "<text x=\"" << px(xv) << "\" y=\"" << H - Bm + 16 << "\" text-anchor=\"middle\">" << fmt(std::round(xv)) << "</text>\n"
      << "<text x=\"" << L - 6 << "\" y=\"" << py(yv) + 4 << "\" text-anchor=\"end\">" << fmt(std::round(yv * 100) / 100) << "</text>\n";
  }
  s << "<text x=\"" << W / 2 << "\" y=\"" << H - 12 << "\" text-anchor=\"middle\">" << x_label << "</text>\n"
    << "<text x=\"16\" y=\"" << H / 2 << "\" text-anchor=\"middle\" transform=\"rotate(-90 16 " << H / 2
    << ")\">" << y_label << "</text>\n";
  for (size_t k = 0; k < series.size(); ++k) {
    const char* colour = kColours[k % (sizeof kColours / sizeof *kColours)];
    s << "<polyline fill=\"none\" stroke=\"" << colour << "\" stroke-width=\"2\" points=\"";
    for (const auto& [x, y] : series[k].points)
      if (std::isfinite(x) && std::isfinite(y)) s << px(x) << "," << py(y) << " ";
    s << "\"/>\n";
    if (series.size() > 1)
      s << "<text x=\"" << L + 10 << "\" y=\"" << T + 14 * (k + 1) << "\" fill=\"" << colour << "\">"
        << series[k].name << "</text>\n";
  }
  s << "</svg>\n";
  write_file_atomically(path, s.str());
}

}  // namespace mambarl
