// Per-update metrics as CSV or JSONL. Each row goes out in one write() of a
// whole line followed by a flush, so a killed run leaves complete lines only;
// on resume the file is cut back to the rows up to the checkpoint, so the log
// continues without duplicates. A CSV resumed by a version that logs more
// columns gets the new header (its older rows keep their fewer cells).
#pragma once

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace mambarl {

using MetricsRow = std::vector<std::pair<std::string, double>>;  // ordered (column, value)

class MetricsLog {
 public:
  // format: "csv" | "jsonl". keep_through_update >= 0 keeps existing rows whose
  // `update` column is <= it (resume); < 0 starts a fresh file.
  MetricsLog(const std::string& path, const std::string& format, long long keep_through_update);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  void write(const MetricsRow& row);
  const std::string& path() const { return path_; }
  // Rows read back (for the learning curve): (env_steps, mean_return).
  const std::vector<std::pair<double, double>>& curve() const { return curve_; }

 private:
  void replace_header(const std::string& header);

  std::string path_, format_;
  std::FILE* f_ = nullptr;
  bool header_written_ = false;
  std::string header_;  // the CSV header line in the file, without '\n'
  std::vector<std::pair<double, double>> curve_;
};

// The metrics file in a run's folder: metrics.csv or metrics.jsonl (whichever
// runtime.metrics_format wrote). An Error naming the folder when it holds neither.
std::string metrics_file_in(const std::string& run_dir);

// (env_steps, `column`) for each row of a metrics file written by MetricsLog
// (CSV or JSONL, by the file's extension); rows where either is not finite
// (mean_return before the first episode ends) or that lack the column are
// skipped. An Error naming the path when it cannot be read, or naming the
// column and listing the file's columns when no row has it.
std::vector<std::pair<double, double>> read_metrics_curve(const std::string& path,
                                                          const std::string& column = "mean_return");

// Writes an SVG line plot of mean return against env steps (atomically).
void write_learning_curve_svg(const std::string& path, const std::string& title,
                              const std::vector<std::pair<double, double>>& points);

}  // namespace mambarl
