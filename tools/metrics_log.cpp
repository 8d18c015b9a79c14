#include "tools/metrics_log.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

#include "kernels/check.hpp"
#include "policy/posix_file.hpp"
#include "tools/svg_plot.hpp"

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
        header_ = line;
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

// The kept rows under a new header line, written atomically like the cut on resume.
void MetricsLog::replace_header(const std::string& header) {
  std::fclose(f_);
  f_ = nullptr;
  std::ifstream in(path_, std::ios::binary);
  std::string first, rest;
  std::getline(in, first);
  rest.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  in.close();
  write_file_atomically(path_, header + "\n" + rest);
  f_ = std::fopen(path_.c_str(), "ab");
  MAMBARL_CHECK(f_, path_ << ": cannot open metrics file for writing: " << std::strerror(errno));
}

MetricsLog::~MetricsLog() {
  if (f_) std::fclose(f_);
}

void MetricsLog::write(const MetricsRow& row) {
  std::string line;
  if (format_ == "csv") {
    std::string header;
    for (size_t i = 0; i < row.size(); ++i) header += (i ? "," : "") + row[i].first;
    if (!header_written_) {
      line += header + "\n";
      header_written_ = true;
    } else if (header != header_) {
      replace_header(header);
    }
    header_ = header;
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
  write_line_plot_svg(path, title, "env steps", "mean return", {{"", points}});
}

}  // namespace mambarl
