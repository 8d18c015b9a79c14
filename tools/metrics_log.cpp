#include "tools/metrics_log.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "kernels/base/check.hpp"
#include "policy/io/posix_file.hpp"
#include "tools/svg_plot.hpp"

namespace fs = std::filesystem;

namespace mambarl {

namespace {

std::string fmt(double v) {
  if (!std::isfinite(v)) return std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf");
  std::ostringstream os;
  os.precision(10);
  os << v;
  return os.str();
}

std::vector<std::string> split_csv(const std::string& line) {
  std::vector<std::string> cells;
  std::stringstream ss(line);
  for (std::string c; std::getline(ss, c, ',');) cells.push_back(c);
  return cells;
}

// One complete line of a metrics file as (column, value) pairs: a CSV row's
// cells under the header's names, a JSONL object's members in order. The
// writer below makes JSONL flat, its names hold no ',' or '"', and each value
// is a number or one of the strings "nan", "inf", "-inf" (which strtod
// reads), so splitting at ',' and '":' reads it back. Empty if the line is
// not an object.
MetricsRow parse_line(const std::string& line, const std::string& format, const std::vector<std::string>& header) {
  MetricsRow row;
  if (format == "csv") {
    const std::vector<std::string> cells = split_csv(line);
    for (size_t i = 0; i < cells.size() && i < header.size(); ++i)
      row.emplace_back(header[i], std::strtod(cells[i].c_str(), nullptr));
    return row;
  }
  if (line.size() < 2 || line.front() != '{' || line.back() != '}') return {};
  for (const std::string& member : split_csv(line.substr(1, line.size() - 2))) {
    const auto colon = member.find("\":");
    if (member.empty() || member.front() != '"' || colon == std::string::npos) return {};
    std::string value = member.substr(colon + 2);
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') value = value.substr(1, value.size() - 2);
    row.emplace_back(member.substr(1, colon - 1), std::strtod(value.c_str(), nullptr));
  }
  return row;
}

// Reads a row's (update, env_steps, mean_return); false if it lacks one of them.
bool parse_row(const std::string& line, const std::string& format, const std::vector<std::string>& header,
               double& update, double& steps, double& ret) {
  bool a = false, b = false, c = false;
  for (const auto& [k, v] : parse_line(line, format, header)) {
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
        header = split_csv(line);
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

std::string metrics_file_in(const std::string& run_dir) {
  for (const char* name : {"metrics.csv", "metrics.jsonl"}) {
    const fs::path p = fs::path(run_dir) / name;
    if (fs::is_regular_file(p)) return p.string();
  }
  throw UserError(run_dir + ": no metrics.csv or metrics.jsonl in this folder (is it a run's runtime.out_dir?)");
}

std::vector<std::pair<double, double>> read_metrics_curve(const std::string& path, const std::string& column) {
  std::ifstream in(path, std::ios::binary);
  MAMBARL_USER_CHECK(in, path << ": cannot open the metrics file: " << std::strerror(errno));
  const std::string format = fs::path(path).extension() == ".jsonl" ? "jsonl" : "csv";
  std::vector<std::string> header, columns;  // columns: every name in the file, in order
  std::vector<std::pair<double, double>> curve;
  std::string line;
  while (std::getline(in, line)) {
    if (in.eof()) break;  // a last line without '\n' is being written (or was cut): as on resume
    if (format == "csv" && header.empty()) {
      columns = header = split_csv(line);
      continue;
    }
    double x = NAN, y = NAN;
    for (const auto& [k, v] : parse_line(line, format, header)) {
      if (std::find(columns.begin(), columns.end(), k) == columns.end()) columns.push_back(k);
      if (k == "env_steps") x = v;
      if (k == column) y = v;
    }
    if (std::isfinite(x) && std::isfinite(y)) curve.emplace_back(x, y);
  }
  for (const std::string& needed : {std::string("env_steps"), column})
    if (std::find(columns.begin(), columns.end(), needed) == columns.end()) {
      std::string names;
      for (const std::string& c : columns) names += (names.empty() ? "" : ", ") + c;
      throw UserError(path + ": no column '" + needed +
                      "'; its columns are: " + (names.empty() ? "(none: the file is empty)" : names));
    }
  return curve;
}

void write_learning_curve_svg(const std::string& path, const std::string& title,
                              const std::vector<std::pair<double, double>>& points) {
  write_line_plot_svg(path, title, "env steps", "mean return", {{"", points}});
}

}  // namespace mambarl
