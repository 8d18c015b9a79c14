#include "tools/sweep_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "kernels/base/check.hpp"
#include "tools/svg_plot.hpp"

namespace fs = std::filesystem;

namespace mambarl {

namespace {

// Columns of the table, and their colours in every plot, in this order; other policy types follow by name.
const char* const kPolicyOrder[] = {"mamba1", "mamba3", "gru", "mlp", "random"};
const char* const kPolicyColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#7f7f7f"};
const char* const kOtherColours[] = {"#ff7f0e", "#8c564b", "#e377c2", "#bcbd22", "#17becf"};
constexpr int kKnownPolicies = sizeof kPolicyOrder / sizeof *kPolicyOrder;

int policy_rank(const std::string& policy) {
  for (int i = 0; i < kKnownPolicies; ++i)
    if (policy == kPolicyOrder[i]) return i;
  return kKnownPolicies;
}

std::string number(double v) {
  std::ostringstream os;
  os.precision(10);
  os << v;
  return os.str();
}

std::string csv_cell(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (const char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

// Indices of the grid keys shown as columns of their own: env.type and
// env.difficulty have the env and difficulty columns, which every run fills
// from its config.
std::vector<size_t> shown_grid_keys(const std::vector<std::string>& grid_keys) {
  std::vector<size_t> shown;
  for (size_t k = 0; k < grid_keys.size(); ++k)
    if (grid_keys[k] != "env.type" && grid_keys[k] != "env.difficulty") shown.push_back(k);
  return shown;
}

struct Column {
  std::string name;    // the policy type, or "type (config)" where two configs train one type on one env
  std::string policy;  // the policy type
  std::string colour;
};

struct Row {
  std::vector<std::string> labels;                             // (label headers)
  std::string title;                                           // the labels for a plot title
  std::string file_stem;                                       // its plot's file name without .svg
  std::map<std::string, std::vector<const RunResult*>> cells;  // column name -> its runs
};

struct Table {
  std::vector<std::string> label_headers;
  std::vector<Column> columns;
  std::vector<Row> rows;
};

// Groups the results into rows (equal env settings and grid values) and
// columns (policies), with labels that tell every row apart: where two rows
// share env type, difficulty and grid values, their env label adds the env
// settings that differ (e.g. "tmaze (length=20)").
Table build_table(const std::vector<std::string>& grid_keys, const std::vector<RunResult>& results) {
  Table t;
  const std::vector<size_t> shown = shown_grid_keys(grid_keys);
  const bool has_difficulty = std::any_of(results.begin(), results.end(),
                                          [](const RunResult& r) { return !r.run.difficulty.empty(); });
  t.label_headers.push_back("env");
  if (has_difficulty) t.label_headers.push_back("difficulty");
  for (size_t k : shown) t.label_headers.push_back(grid_keys[k]);

  using RowKey = std::pair<std::map<std::string, std::string>, std::vector<std::string>>;
  std::map<RowKey, size_t> row_of;
  std::vector<size_t> result_row;
  std::vector<const SweepRun*> row_run;  // the first run of each row
  for (const RunResult& r : results) {
    const auto [it, fresh] = row_of.emplace(RowKey{r.run.env_settings, r.run.grid_values}, row_run.size());
    if (fresh) row_run.push_back(&r.run);
    result_row.push_back(it->second);
  }

  // Two configs training one policy type on one row: each gets a column of its own.
  std::map<std::pair<size_t, std::string>, std::set<std::string>> configs_of;
  for (size_t i = 0; i < results.size(); ++i)
    configs_of[{result_row[i], results[i].run.policy}].insert(results[i].run.config_label);
  std::set<std::pair<std::string, std::string>> qualified;  // (policy, config label)
  for (const auto& [cell, configs] : configs_of)
    if (configs.size() > 1 && cell.second != "random")
      for (const std::string& c : configs) qualified.emplace(cell.second, c);
  const auto column_name = [&](const SweepRun& run) {
    return qualified.count({run.policy, run.config_label}) ? run.policy + " (" + run.config_label + ")"
                                                           : run.policy;
  };

  std::map<std::string, std::string> policy_of;  // column name -> policy type
  for (const RunResult& r : results) policy_of.emplace(column_name(r.run), r.run.policy);
  for (const auto& [name, policy] : policy_of) t.columns.push_back({name, policy, ""});
  std::stable_sort(t.columns.begin(), t.columns.end(), [](const Column& a, const Column& b) {
    return policy_rank(a.policy) < policy_rank(b.policy);
  });
  size_t other = 0;
  for (Column& c : t.columns) {
    const int rank = policy_rank(c.policy);
    c.colour = rank < kKnownPolicies && c.name == c.policy
                   ? kPolicyColours[rank]
                   : kOtherColours[other++ % (sizeof kOtherColours / sizeof *kOtherColours)];
  }

  // Labels, then the env settings that tell apart rows whose labels are equal.
  std::map<std::vector<std::string>, std::vector<size_t>> rows_with_labels;
  for (size_t i = 0; i < row_run.size(); ++i) {
    const SweepRun& run = *row_run[i];
    Row row;
    row.labels.push_back(run.env_type);
    if (has_difficulty) row.labels.push_back(run.difficulty);
    for (size_t k : shown) row.labels.push_back(run.grid_values[k]);
    rows_with_labels[row.labels].push_back(i);
    t.rows.push_back(std::move(row));
  }
  std::vector<std::vector<std::string>> distinctions(t.rows.size());  // "key=value" per row
  for (const auto& [labels, same] : rows_with_labels) {
    if (same.size() < 2) continue;
    std::set<std::string> keys;
    for (size_t i : same)
      for (const auto& kv : row_run[i]->env_settings) keys.insert(kv.first);
    for (const std::string& key : keys) {
      std::set<std::string> values;
      for (size_t i : same) {
        const auto it = row_run[i]->env_settings.find(key);
        values.insert(it == row_run[i]->env_settings.end() ? "(unset)" : it->second);
      }
      if (values.size() < 2) continue;
      for (size_t i : same) {
        const auto it = row_run[i]->env_settings.find(key);
        distinctions[i].push_back(key + "=" +
                                  (it == row_run[i]->env_settings.end() ? "(unset)" : it->second));
      }
    }
  }
  std::set<std::string> stems;
  for (size_t i = 0; i < t.rows.size(); ++i) {
    Row& row = t.rows[i];
    std::vector<std::string> parts;
    for (const std::string& l : row.labels)
      if (!l.empty()) parts.push_back(l);
    std::string extra;
    for (const std::string& d : distinctions[i]) extra += (extra.empty() ? "" : ", ") + d;
    if (!extra.empty()) row.labels[0] += " (" + extra + ")";
    for (const std::string& d : distinctions[i]) parts.push_back(d);
    for (const std::string& p : parts) {
      row.title += (row.title.empty() ? "" : " / ") + p;
      row.file_stem += (row.file_stem.empty() ? "" : "_") + name_part(p);
    }
    const std::string base = row.file_stem;
    for (int n = 2; !stems.insert(row.file_stem).second; ++n) row.file_stem = base + "_" + std::to_string(n);
  }
  for (size_t i = 0; i < results.size(); ++i)
    t.rows[result_row[i]].cells[column_name(results[i].run)].push_back(&results[i]);
  return t;
}

double interpolate(const std::vector<std::pair<double, double>>& curve, double x) {
  if (x <= curve.front().first) return curve.front().second;
  if (x >= curve.back().first) return curve.back().second;
  const auto hi = std::upper_bound(curve.begin(), curve.end(), x,
                                   [](double v, const std::pair<double, double>& p) { return v < p.first; });
  const auto lo = hi - 1;
  const double w = (x - lo->first) / (hi->first - lo->first);
  return lo->second + w * (hi->second - lo->second);
}

}  // namespace

CurveBand curve_band(const std::vector<std::vector<std::pair<double, double>>>& curves) {
  MAMBARL_CHECK(!curves.empty(), "curve_band: no curves");
  std::vector<std::vector<std::pair<double, double>>> sorted = curves;
  double from = -INFINITY, to = INFINITY;
  for (auto& c : sorted) {
    MAMBARL_CHECK(!c.empty(), "curve_band: an empty curve");
    std::stable_sort(c.begin(), c.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    from = std::max(from, c.front().first);
    to = std::min(to, c.back().first);
  }
  CurveBand band;
  for (const auto& c : sorted)
    for (const auto& p : c)
      if ((p.first >= from && p.first <= to) || from > to) band.x.push_back(p.first);
  std::sort(band.x.begin(), band.x.end());
  band.x.erase(std::unique(band.x.begin(), band.x.end()), band.x.end());
  for (const double x : band.x) {
    double sum = 0, lo = INFINITY, hi = -INFINITY;
    for (const auto& c : sorted) {
      const double y = interpolate(c, x);
      sum += y, lo = std::min(lo, y), hi = std::max(hi, y);
    }
    band.mean.push_back(sum / static_cast<double>(sorted.size()));
    band.lo.push_back(lo);
    band.hi.push_back(hi);
  }
  return band;
}

std::string three_digits(double v) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%#.3g", v);
  std::string s = buf;
  if (!s.empty() && s.back() == '.') s.pop_back();  // "%#g" keeps the point of "500."
  return s;
}

std::string runs_csv(const std::vector<std::string>& grid_keys, const std::vector<RunResult>& results) {
  const std::vector<size_t> shown = shown_grid_keys(grid_keys);
  std::string out = "config,env,difficulty";
  for (size_t k : shown) out += "," + csv_cell(grid_keys[k]);
  out += ",policy,seed,final_return,env_steps,wall_s,run_dir\n";
  for (const RunResult& r : results) {
    out += csv_cell(r.run.config) + "," + csv_cell(r.run.env_type) + "," + csv_cell(r.run.difficulty);
    for (size_t k : shown) out += "," + csv_cell(r.run.grid_values[k]);
    out += "," + csv_cell(r.run.policy) + "," + std::to_string(r.run.seed) + "," + number(r.final_return) +
           "," + std::to_string(r.env_steps) + "," + number(r.wall_s) + "," + csv_cell(r.run.run_dir) + "\n";
  }
  return out;
}

std::string results_markdown(const std::vector<std::string>& grid_keys, const std::vector<RunResult>& results,
                             const std::string& header) {
  const Table t = build_table(grid_keys, results);
  std::set<uint64_t> seeds;
  for (const RunResult& r : results) seeds.insert(r.run.seed);
  std::string seed_list;
  for (const uint64_t s : seeds) seed_list += (seed_list.empty() ? "" : ", ") + std::to_string(s);
  std::ostringstream md;
  md << header << "\n\n"
     << "Each cell: the mean over seeds " << seed_list
     << " of the final return (a run's mean return over its last runtime.return_window episodes), "
        "then [lowest, highest]; random: a uniformly random policy on the same env.\n\n|";
  for (const std::string& h : t.label_headers) md << " " << h << " |";
  for (const Column& c : t.columns) md << " " << c.name << " |";
  md << "\n|";
  for (size_t i = 0; i < t.label_headers.size() + t.columns.size(); ++i) md << "---|";
  md << "\n";
  for (const Row& row : t.rows) {
    md << "|";
    for (const std::string& l : row.labels) md << " " << l << " |";
    for (const Column& c : t.columns) {
      const auto it = row.cells.find(c.name);
      if (it == row.cells.end()) {
        md << " |";
        continue;
      }
      double sum = 0, lo = INFINITY, hi = -INFINITY;
      for (const RunResult* r : it->second)
        sum += r->final_return, lo = std::min(lo, r->final_return), hi = std::max(hi, r->final_return);
      md << " " << three_digits(sum / static_cast<double>(it->second.size())) << " [" << three_digits(lo)
         << ", " << three_digits(hi) << "] |";
    }
    md << "\n";
  }
  return md.str();
}

std::vector<std::string> write_sweep_plots(const std::string& dir, const std::vector<std::string>& grid_keys,
                                           const std::vector<RunResult>& results) {
  const Table t = build_table(grid_keys, results);
  std::vector<std::string> written;
  for (const Row& row : t.rows) {
    std::vector<PlotSeries> series;
    double x_lo = INFINITY, x_hi = -INFINITY;
    for (const Column& c : t.columns) {
      const auto it = row.cells.find(c.name);
      if (it == row.cells.end()) continue;
      std::vector<std::vector<std::pair<double, double>>> curves;
      for (const RunResult* r : it->second)
        if (!r->curve.empty()) curves.push_back(r->curve);
      if (curves.empty()) continue;
      const CurveBand b = curve_band(curves);
      PlotSeries s{c.name, {}, {}, c.colour, false};
      for (size_t i = 0; i < b.x.size(); ++i) {
        s.points.emplace_back(b.x[i], b.mean[i]);
        s.band.emplace_back(b.lo[i], b.hi[i]);
      }
      x_lo = std::min(x_lo, b.x.front()), x_hi = std::max(x_hi, b.x.back());
      series.push_back(std::move(s));
    }
    if (series.empty()) continue;  // no learning curve in this row (random floor only)
    // Policies without a curve (the random floor) as a level across the plot, their band the range over
    // seeds.
    for (const Column& c : t.columns) {
      const auto it = row.cells.find(c.name);
      if (it == row.cells.end() || std::any_of(it->second.begin(), it->second.end(),
                                               [](const RunResult* r) { return !r->curve.empty(); }))
        continue;
      double sum = 0, lo = INFINITY, hi = -INFINITY;
      for (const RunResult* r : it->second)
        sum += r->final_return, lo = std::min(lo, r->final_return), hi = std::max(hi, r->final_return);
      const double mean = sum / static_cast<double>(it->second.size());
      series.push_back({c.name, {{x_lo, mean}, {x_hi, mean}}, {{lo, hi}, {lo, hi}}, c.colour, true});
    }
    const std::string path = (fs::path(dir) / (row.file_stem + ".svg")).string();
    write_line_plot_svg(path, row.title, "env steps", "mean return (line: mean over seeds; band: min-max)",
                        series);
    written.push_back(path);
  }
  return written;
}

}  // namespace mambarl
