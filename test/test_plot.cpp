// `mambarl plot` on hand-written metrics files: one labelled line per run
// folder (CSV and JSONL alike), and errors that name the folder without
// metrics or the unknown metric with the columns there are.
#define BOOST_TEST_MODULE plot
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "kernels/base/check.hpp"
#include "tools/metrics_log.hpp"
#include "tools/plot_runs.hpp"

namespace fs = std::filesystem;
using namespace mambarl;

namespace {

// A fresh folder under the temp dir, removed at the end of the test case.
struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& name)
      : path(fs::temp_directory_path() / ("mambarl_test_plot_" + name + "_" + std::to_string(::getpid()))) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  // A run folder `run` holding `file` with `text`; returns the folder.
  std::string run(const std::string& run, const std::string& file, const std::string& text) const {
    fs::create_directories(path / run);
    std::ofstream(path / run / file) << text;
    return (path / run).string();
  }
};

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int count(const std::string& text, const std::regex& re) {
  return static_cast<int>(std::distance(std::sregex_iterator(text.begin(), text.end(), re), std::sregex_iterator()));
}

std::string error_of(const PlotOptions& o) {
  try {
    plot_runs(o);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

// What MetricsLog writes: a header and rows, the first return not yet finite.
const char* kCsv =
    "update,env_steps,mean_return,loss\n"
    "1,100,nan,0.5\n"
    "2,200,-1.5,0.4\n"
    "3,300,2.5,0.3\n";
const char* kJsonl =
    "{\"update\":1,\"env_steps\":100,\"mean_return\":\"nan\",\"loss\":0.9}\n"
    "{\"update\":2,\"env_steps\":200,\"mean_return\":0.5,\"loss\":0.8}\n";

}  // namespace

BOOST_AUTO_TEST_CASE(two_runs_are_two_labelled_lines) {
  const TempDir t("two");
  const PlotOptions o{{t.run("tmaze_gru", "metrics.csv", kCsv), t.run("tmaze_mamba1", "metrics.jsonl", kJsonl) + "/"},
                      (t.path / "cmp.svg").string()};
  plot_runs(o);
  const std::string svg = read_file(o.out);
  BOOST_TEST(count(svg, std::regex("<polyline class=\"line\"")) == 2);
  // The legend: each folder's name once, with a line of its own colour.
  BOOST_TEST(count(svg, std::regex(">tmaze_gru</text>")) == 1);
  BOOST_TEST(count(svg, std::regex(">tmaze_mamba1</text>")) == 1);
  // Finite points only: the CSV run's two rows with a return, the JSONL run's one.
  std::smatch m;
  const std::string polylines = svg.substr(svg.find("<polyline"));
  BOOST_REQUIRE(std::regex_search(polylines, m, std::regex("points=\"([^\"]*)\"")));
  BOOST_TEST(count(m[1].str(), std::regex(",")) == 2);
  // The returns cross 0: the zero line is drawn.
  BOOST_TEST(svg.find("class=\"zero\"") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(metric_picks_the_column) {
  const TempDir t("metric");
  PlotOptions o{{t.run("a", "metrics.csv", kCsv), t.run("b", "metrics.jsonl", kJsonl)}, (t.path / "loss.svg").string()};
  o.metric = "loss";
  plot_runs(o);
  const std::string svg = read_file(o.out);
  // Every row has a finite loss: three points and two.
  std::vector<int> points;
  const std::regex line("class=\"line\"[^>]*points=\"([^\"]*)\"");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), line); it != std::sregex_iterator(); ++it)
    points.push_back(count((*it)[1].str(), std::regex(",")));
  BOOST_TEST(points == (std::vector<int>{3, 2}), boost::test_tools::per_element());
}

// The reader reads what MetricsLog writes, in both formats, after a resume
// that cut the file back to update 2 (which parses the rows the same way).
BOOST_AUTO_TEST_CASE(reads_back_what_metrics_log_writes) {
  const TempDir t("roundtrip");
  for (const std::string format : {"csv", "jsonl"}) {
    const std::string path = (t.path / ("metrics." + format)).string();
    const auto row = [](double update, double ret) {
      return MetricsRow{{"update", update}, {"env_steps", 100 * update}, {"mean_return", ret}, {"loss", 1}};
    };
    {
      MetricsLog log(path, format, -1);
      for (const double u : {1, 2, 3}) log.write(row(u, u == 1 ? NAN : u));
    }
    {
      MetricsLog log(path, format, 2);
      log.write(row(3, -7));
    }
    const std::vector<std::pair<double, double>> want{{200, 2}, {300, -7}};
    BOOST_TEST(read_metrics_curve(path) == want, format);
  }
}

BOOST_AUTO_TEST_CASE(errors_name_the_folder_and_the_metric) {
  const TempDir t("errors");
  const std::string good = t.run("good", "metrics.csv", kCsv);
  fs::create_directories(t.path / "empty_run");
  const std::string empty = (t.path / "empty_run").string();
  const std::string no_metrics = error_of({{good, empty}, (t.path / "x.svg").string()});
  BOOST_TEST(no_metrics.find(empty + ": no metrics.csv or metrics.jsonl in this folder") != std::string::npos,
             no_metrics);
  PlotOptions o{{good}, (t.path / "x.svg").string()};
  o.metric = "mean_reward";
  const std::string unknown = error_of(o);
  BOOST_TEST(unknown.find("no column 'mean_reward'; its columns are: update, env_steps, mean_return, loss") !=
                 std::string::npos,
             unknown);
  BOOST_TEST(!fs::exists(t.path / "x.svg"));
}
