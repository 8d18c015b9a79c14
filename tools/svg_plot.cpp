#include "tools/svg_plot.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "kernels/base/check.hpp"
#include "policy/io/posix_file.hpp"

namespace mambarl {

namespace {

std::string fmt(double v) {
  std::ostringstream os;
  os.precision(10);
  os << v;
  return os.str();
}

// Text as SVG character data or an attribute value.
std::string xml_escape(const std::string& s) {
  std::string out;
  for (const char c : s) {
    const char* entity = c == '&'   ? "&amp;"
                         : c == '<' ? "&lt;"
                         : c == '>' ? "&gt;"
                         : c == '"' ? "&quot;"
                                    : nullptr;
    if (entity)
      out += entity;
    else
      out += c;
  }
  return out;
}

// 1, 2 or 5 x 10^k, whichever makes (hi - lo) / step closest to `target`.
double nice_step(double lo, double hi, int target) {
  const double raw = (hi - lo) / std::max(target, 1);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double m = raw / mag;  // in [1, 10)
  return mag * (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10);
}

// The multiples of `step` in [lo, hi]; each one k * step rather than a running
// sum, so that rounding errors do not accumulate from one tick to the next,
// and k / (1 / step) for a step below 1 (165 / 50 is 3.3, 165 * 0.02 is not).
std::vector<double> multiples_in(double lo, double hi, double step) {
  const double per_unit = std::round(1 / step);
  const bool by_division = step < 1 && std::fabs(per_unit * step - 1) < 1e-9;
  const auto tick = [&](long long k) { return by_division ? k / per_unit : k * step; };
  std::vector<double> ticks;
  const double slack = step * 1e-9;  // lo and hi are themselves multiples once widened
  for (long long k = static_cast<long long>(std::ceil((lo - slack) / step)); tick(k) <= hi + slack; ++k)
    ticks.push_back(tick(k));
  return ticks;
}

// A tick's text: as many decimals as the step needs (0.25 -> 2), and large
// numbers in k / M / G (env steps: "1.5M" rather than "1500000").
std::string tick_label(double v, double step, double largest) {
  static const std::pair<double, const char*> kUnits[] = {{1e9, "G"}, {1e6, "M"}, {1e3, "k"}};
  double unit = 1;
  const char* suffix = "";
  if (largest >= 1e4)
    for (const auto& [u, s] : kUnits)
      if (largest >= u) {
        unit = u, suffix = s;
        break;
      }
  const int decimals = std::max(0, static_cast<int>(-std::floor(std::log10(step / unit) + 1e-9)));
  if (std::fabs(v) < step * 1e-6) v = 0;  // no "-0"
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f%s", decimals, v / unit, v == 0 ? "" : suffix);
  return buf;
}

// One axis: the data range widened to multiples of a round step.
struct Axis {
  double lo, hi, step;
  std::vector<double> ticks;
  double largest() const { return std::max(std::fabs(lo), std::fabs(hi)); }
};

Axis fit_axis(double lo, double hi) {
  if (hi - lo < 1e-12 * std::max(1.0, std::fabs(lo))) lo -= 0.5, hi += 0.5;
  const double step = nice_step(lo, hi, 5);
  Axis a{std::floor(lo / step) * step, std::ceil(hi / step) * step, step, {}};
  a.ticks = multiples_in(a.lo, a.hi, step);
  return a;
}

}  // namespace

std::vector<double> nice_ticks(double lo, double hi, int target) {
  MAMBARL_CHECK(lo < hi, "nice_ticks: empty range [" << lo << ", " << hi << "]");
  return multiples_in(lo, hi, nice_step(lo, hi, target));
}

void write_line_plot_svg(const std::string& path, const std::string& title, const std::string& x_label,
                         const std::string& y_label, const std::vector<PlotSeries>& series) {
  static const char* const kColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e",
                                         "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
  const bool legend = series.size() > 1;
  // R leaves room for the last x label, or for the legend beside the plot.
  const double W = legend ? 820 : 640, H = 400, L = 70, R = legend ? 220 : 40, T = 40, Bm = 50;
  double x0 = 0, x1 = 1, y0 = 0, y1 = 1;
  bool first = true;
  const auto extend = [&](double x, double y) {
    if (!std::isfinite(x) || !std::isfinite(y)) return;
    if (first) x0 = x1 = x, y0 = y1 = y, first = false;
    x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
  };
  for (const PlotSeries& ser : series) {
    MAMBARL_CHECK(ser.band.empty() || ser.band.size() == ser.points.size(),
                  "plot series '" << ser.name << "': " << ser.band.size() << " band entries for "
                                  << ser.points.size() << " points");
    for (size_t i = 0; i < ser.points.size(); ++i) {
      extend(ser.points[i].first, ser.points[i].second);
      if (!ser.band.empty()) {
        extend(ser.points[i].first, ser.band[i].first);
        extend(ser.points[i].first, ser.band[i].second);
      }
    }
  }
  const Axis ax = fit_axis(x0, x1), ay = fit_axis(y0, y1);
  const auto px = [&](double x) { return L + (x - ax.lo) / (ax.hi - ax.lo) * (W - L - R); };
  const auto py = [&](double y) { return H - Bm - (y - ay.lo) / (ay.hi - ay.lo) * (H - T - Bm); };
  std::ostringstream s;
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H
    << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
    << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    << "<text x=\"" << (W - R + L) / 2 << "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">"
    << xml_escape(title) << "</text>\n"
    << "<line x1=\"" << L << "\" y1=\"" << H - Bm << "\" x2=\"" << W - R << "\" y2=\"" << H - Bm
    << "\" stroke=\"black\"/>\n"
    << "<line x1=\"" << L << "\" y1=\"" << T << "\" x2=\"" << L << "\" y2=\"" << H - Bm
    << "\" stroke=\"black\"/>\n";
  for (const double xv : ax.ticks)
    s << "<line x1=\"" << px(xv) << "\" y1=\"" << H - Bm << "\" x2=\"" << px(xv) << "\" y2=\"" << H - Bm + 4
      << "\" stroke=\"black\"/>\n"
      << "<text class=\"xtick\" x=\"" << px(xv) << "\" y=\"" << H - Bm + 17 << "\" text-anchor=\"middle\">"
      << tick_label(xv, ax.step, ax.largest()) << "</text>\n";
  for (const double yv : ay.ticks)
    s << "<line x1=\"" << L - 4 << "\" y1=\"" << py(yv) << "\" x2=\"" << L << "\" y2=\"" << py(yv)
      << "\" stroke=\"black\"/>\n"
      << "<text class=\"ytick\" x=\"" << L - 7 << "\" y=\"" << py(yv) + 4 << "\" text-anchor=\"end\">"
      << tick_label(yv, ay.step, ay.largest()) << "</text>\n";
  if (ay.lo < 0 && ay.hi > 0)
    s << "<line x1=\"" << L << "\" y1=\"" << py(0) << "\" x2=\"" << W - R << "\" y2=\"" << py(0)
      << "\" class=\"zero\" stroke=\"#bbbbbb\"/>\n";  // solid: dashed lines are series (the random floor)
  s << "<text x=\"" << (W - R + L) / 2 << "\" y=\"" << H - 12 << "\" text-anchor=\"middle\">"
    << xml_escape(x_label) << "</text>\n"
    << "<text x=\"16\" y=\"" << H / 2 << "\" text-anchor=\"middle\" transform=\"rotate(-90 16 " << H / 2
    << ")\">" << xml_escape(y_label) << "</text>\n";
  const auto colour_of = [&](size_t k) {
    return series[k].colour.empty() ? std::string(kColours[k % (sizeof kColours / sizeof *kColours)])
                                    : series[k].colour;
  };
  // Bands first, so that no band covers another series' line.
  for (size_t k = 0; k < series.size(); ++k) {
    const PlotSeries& ser = series[k];
    if (ser.band.empty()) continue;
    s << "<polygon class=\"band\" fill=\"" << colour_of(k)
      << "\" fill-opacity=\"0.18\" stroke=\"none\" points=\"";
    for (size_t i = 0; i < ser.points.size(); ++i)
      if (std::isfinite(ser.points[i].first) && std::isfinite(ser.band[i].second))
        s << fmt(px(ser.points[i].first)) << "," << fmt(py(ser.band[i].second)) << " ";
    for (size_t i = ser.points.size(); i-- > 0;)
      if (std::isfinite(ser.points[i].first) && std::isfinite(ser.band[i].first))
        s << fmt(px(ser.points[i].first)) << "," << fmt(py(ser.band[i].first)) << " ";
    s << "\"/>\n";
  }
  for (size_t k = 0; k < series.size(); ++k) {
    const std::string dash = series[k].dashed ? "\" stroke-dasharray=\"6 4" : "";
    s << "<polyline class=\"line\" fill=\"none\" stroke=\"" << colour_of(k) << dash
      << "\" stroke-width=\"2\" points=\"";
    for (const auto& [x, y] : series[k].points)
      if (std::isfinite(x) && std::isfinite(y)) s << fmt(px(x)) << "," << fmt(py(y)) << " ";
    s << "\"/>\n";
    if (legend) {
      const double ly = T + 8 + 18 * static_cast<double>(k), lx = W - R + 16;
      s << "<line x1=\"" << lx << "\" y1=\"" << ly << "\" x2=\"" << lx + 22 << "\" y2=\"" << ly
        << "\" stroke=\"" << colour_of(k) << dash << "\" stroke-width=\"2\"/>\n"
        << "<text x=\"" << lx + 28 << "\" y=\"" << ly + 4 << "\">" << xml_escape(series[k].name)
        << "</text>\n";
    }
  }
  s << "</svg>\n";
  write_file_atomically(path, s.str());
}

}  // namespace mambarl
