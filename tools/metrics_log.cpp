#include "tools/metrics_log.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

#include "kernels/check.hpp"
#include "policy/posix_file.hpp"

namespace mambarl {

namespace {

std::string fmt(double v) {
  if (!std::isfinite(v)) return std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf");
  std::ostringstream os;
  os.precision(10);
  os << v;
  return os.str();
}

// Parses one complete CSV/JSONL row back into (update, env_steps, mean_return); false if not a data row.
bool parse_row(const std::string& line, const std::string& format, const std::vector<std::string>& header,
               double& update, double& steps, double& ret) {
  std::vector<std::pair<std::string, double>> kv;
  if (format == "csv") {
    std::stringstream ss(line);
    std::string cell;
    size_t i = 0;
    while (std::getline(ss, cell, ',') && i < header.size()) kv.emplace_back(header[i++], std::atof(cell.c_str()));
  } else {
    for (const char* key : {"update", "env_steps", "mean_return"}) {
      const std::string pat = std::string("\"") + key + "\":";
      const auto p = line.find(pat);
      if (p == std::string::npos) return false;
      kv.emplace_back(key, std::atof(line.c_str() + p + pat.size()));
    }
  }
  bool a = false, b = false, c = false;
  for (const auto& [k, v] : kv) {
    if (k == "update") update = v, a = true;
    if (k == "env_steps") steps = v, b = true;
    if (k == "mean_return") ret = v, c = true;
  }
  return a && b && c;
}

}  // namespace

MetricsLog::MetricsLog(const std::string& path, const std::string& format, long long keep_through_update)
    : path_(path), format_(format) {
  std::string kept;
  if (keep_through_update >= 0) {
    std::ifstream in(path, std::ios::binary);
    std::string line;
    std::vector<std::string> header;
    while (std::getline(in, line)) {
      if (in.eof()) break;  // a last line without '\n' was cut mid-write: drop it
      if (format == "csv" && header.empty()) {
        std::stringstream ss(line);
        for (std::string c; std::getline(ss, c, ',');) header.push_back(c);
        kept += line + "\n";
        header_written_ = true;
        continue;
      }
      double u = 0, s = 0, r = 0;
      if (!parse_row(line, format, header, u, s, r) || u > static_cast<double>(keep_through_update)) break;
      kept += line + "\n";
      curve_.emplace_back(s, r);
    }
  }
  write_file_atomically(path, kept);
  f_ = std::fopen(path.c_str(), "ab");
  MAMBARL_CHECK(f_, path << ": cannot open metrics file for writing: " << std::strerror(errno));
}

MetricsLog::~MetricsLog() {
  if (f_) std::fclose(f_);
}

void MetricsLog::write(const MetricsRow& row) {
  std::string line;
  if (format_ == "csv") {
    if (!header_written_) {
      for (size_t i = 0; i < row.size(); ++i) line += (i ? "," : "") + row[i].first;
      line += "\n";
      header_written_ = true;
    }
    for (size_t i = 0; i < row.size(); ++i) line += (i ? "," : "") + fmt(row[i].second);
  } else {
    line = "{";
    for (size_t i = 0; i < row.size(); ++i) {
      const std::string v = fmt(row[i].second);
      // JSON has no NaN/Inf literals: write them as strings.
      line += (i ? ",\"" : "\"") + row[i].first + "\":" + (std::isfinite(row[i].second) ? v : "\"" + v + "\"");
    }
    line += "}";
  }
  line += "\n";
  MAMBARL_CHECK(std::fwrite(line.data(), 1, line.size(), f_) == line.size() && std::fflush(f_) == 0,
                path_ << ": cannot write metrics: " << std::strerror(errno));
  double steps = 0, ret = 0;
  for (const auto& [k, v] : row) {
    if (k == "env_steps") steps = v;
    if (k == "mean_return") ret = v;
  }
  curve_.emplace_back(steps, ret);
}

void write_learning_curve_svg(const std::string& path, const std::string& title,
                              const std::vector<std::pair<double, double>>& points) {
  const double W = 640, H = 400, L = 70, R = 40, T = 40, Bm = 50;  // R leaves room for the last x label
  double x0 = 0, x1 = 1, y0 = 0, y1 = 1;
  bool first = true;
  for (const auto& [x, y] : points) {
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
  s << "<text x=\"" << W / 2 << "\" y=\"" << H - 12 << "\" text-anchor=\"middle\">env steps</text>\n"
    << "<text x=\"16\" y=\"" << H / 2 << "\" text-anchor=\"middle\" transform=\"rotate(-90 16 " << H / 2
    << ")\">mean return</text>\n<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"2\" points=\"";
  for (const auto& [x, y] : points)
    if (std::isfinite(x) && std::isfinite(y)) s << px(x) << "," << py(y) << " ";
  s << "\"/>\n</svg>\n";
  write_file_atomically(path, s.str());
}

}  // namespace mambarl
