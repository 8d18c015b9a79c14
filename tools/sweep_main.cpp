#include "tools/sweep_main.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "kernels/base/check.hpp"
#include "policy/io/posix_file.hpp"
#include "tools/experiment.hpp"
#include "tools/metrics_log.hpp"
#include "tools/policy_session.hpp"
#include "tools/random_floor.hpp"
#include "tools/stop_signals.hpp"
#include "tools/sweep.hpp"
#include "tools/sweep_report.hpp"
#include "tools/trainer.hpp"

extern char** environ;

namespace fs = std::filesystem;

namespace mambarl {

namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The last n lines of `text` (all of it when it has fewer).
std::string last_lines(const std::string& text, int n) {
  size_t begin = text.size();
  if (begin > 0 && text[begin - 1] == '\n') --begin;  // the final newline ends the last line
  for (int k = 0; k < n; ++k) {
    const size_t nl = begin == 0 ? std::string::npos : text.rfind('\n', begin - 1);
    if (nl == std::string::npos) return text;
    begin = nl;
  }
  return text.substr(begin + 1);
}

// Fills the result's numbers from the run's last "final mean_return=<x> env_steps=<n> wall_s=<s>" line,
// unless a run stopped by a signal printed its interrupted line (kInterruptedLine) after it.
bool read_train_line(const std::string& log, RunResult& r) {
  const std::string key = "final mean_return=";
  size_t at = log.rfind("\n" + key);
  if (at != std::string::npos)
    ++at;
  else if (log.rfind(key, 0) == 0)
    at = 0;
  else
    return false;
  if (log.find(std::string("\n") + kInterruptedLine, at) != std::string::npos) return false;
  std::istringstream line(log.substr(at, log.find('\n', at) - at));
  bool ret = false, steps = false, wall = false;
  for (std::string word; line >> word;) {
    const size_t eq = word.find('=');
    if (eq == std::string::npos) continue;
    const std::string k = word.substr(0, eq), v = word.substr(eq + 1);
    if (k == "final") continue;
    if (k == "mean_return") r.final_return = std::strtod(v.c_str(), nullptr), ret = true;
    if (k == "env_steps") r.env_steps = std::strtoll(v.c_str(), nullptr, 10), steps = true;
    if (k == "wall_s") r.wall_s = std::strtod(v.c_str(), nullptr), wall = true;
  }
  return ret && steps && wall;
}

// <run_dir>/train.log: the run's stdout and stderr.
std::string train_log_of(const SweepRun& run) { return (fs::path(run.run_dir) / "train.log").string(); }

// Starts one run: stdin from /dev/null, stdout and stderr into <run_dir>/train.log
// (appended to when it continues a stopped run, so the log keeps how it
// stopped). The child execs /proc/self/exe, which in the child is still this
// binary: a rebuild of mambarl during a sweep cannot mix versions (or find the
// file missing mid-link). `exe`, its path, is the argv[0] the messages show.
// Each run has a process group of its own: a terminal's Ctrl-C reaches the
// sweep alone, which passes it on once (a run signalled twice would exit at
// once, without the checkpoint it writes when it stops).
pid_t start_run(const SweepRun& run, const std::string& exe, RunStart start) {
  fs::create_directories(run.run_dir);
  const std::string log = train_log_of(run);
  const std::vector<std::string> argv = train_argv(run, exe, start);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(
      &fa, 1, log.c_str(), O_WRONLY | O_CREAT | (start == RunStart::continued ? O_APPEND : O_TRUNC), 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, "/proc/self/exe", &fa, &attr, args.data(), environ);
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&fa);
  MAMBARL_CHECK(rc == 0,
                "cannot start run " << run.name << " (" << shell_command(argv) << "): " << std::strerror(rc));
  return pid;
}

// A run that an earlier sweep's signal stopped: its log ends with the line
// saying so, and the checkpoint it wrote then is there to continue from.
bool stopped_by_signal(const SweepRun& run, const std::string& log) {
  return last_lines(log, 1).rfind(kInterruptedLine, 0) == 0 && fs::exists(checkpoint_file_in(run.run_dir));
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exit status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  return "wait status " + std::to_string(status);
}

// The result of a run that finished: its train line and learning curve.
bool read_finished_run(const SweepRun& run, const std::string& log, RunResult& r) {
  r.run = run;
  if (!read_train_line(log, r)) return false;
  r.curve = read_metrics_curve(metrics_file_in(run.run_dir));
  return true;
}

// What run_all did: every run's result (those it finished), how many failed,
// and the signal that stopped the sweep (0 if none).
struct SweepOutcome {
  std::vector<RunResult> done;
  size_t finished = 0, failed = 0, stopped = 0, not_started = 0;
  int signal = 0;
};

// Runs every run, at most `jobs` at once, in order; with `resume`, a run whose
// train.log already ends a finished run (an earlier, stopped sweep's) is read
// instead, and one a signal stopped continues from its checkpoint. After the
// first failure no new run starts; those in flight finish (each failure
// reported on stderr with its command and the end of its log). SIGINT or
// SIGTERM (StopOnSignals, held by the caller) is passed on to the runs in
// flight, which stop as `mambarl train` does (checkpoint, then the line
// saying how to go on); no new run starts.
SweepOutcome run_all(const std::vector<SweepRun>& runs, const std::string& exe, int jobs, bool resume,
                     std::ostream& out) {
  struct Running {
    pid_t pid;
    size_t index;    // into runs
    RunStart start;  // how it was started: its command line, for a failure's message
  };
  std::vector<Running> running;
  SweepOutcome o;
  o.done.resize(runs.size());
  size_t next = 0;
  const auto report = [&](const RunResult& r, const char* how) {
    out << "[" << ++o.finished << "/" << runs.size() << "] " << r.run.name << how
        << ": final_return=" << r.final_return << " env_steps=" << r.env_steps << " wall_s=" << r.wall_s
        << std::endl;
  };
  const auto may_start = [&] { return o.failed == 0 && o.signal == 0 && next < runs.size(); };
  try {
    while (may_start() || !running.empty()) {
      while (may_start() && static_cast<int>(running.size()) < jobs) {
        const SweepRun& run = runs[next];
        RunStart start = RunStart::fresh;
        if (resume) {
          const std::string log = read_text(train_log_of(run));
          if (read_finished_run(run, log, o.done[next])) {
            report(o.done[next++], " (kept from the earlier sweep)");
            continue;
          }
          if (stopped_by_signal(run, log)) {
            start = RunStart::continued;
            out << run.name << ": continuing from its checkpoint" << std::endl;
          }
        }
        running.push_back({start_run(run, exe, start), next, start});
        ++next;
      }
      if (running.empty()) continue;
      // Polled, so that a signal to the sweep is seen within a tick (waitpid
      // itself would be restarted after the handler, SA_RESTART).
      if (o.signal == 0 && stop_signal() != 0) {
        o.signal = stop_signal();
        out << "mambarl sweep: " << signal_name(o.signal) << ": stopping the " << running.size()
            << " run(s) in flight (each writes its checkpoint); no new run starts" << std::endl;
        for (const Running& r : running) ::kill(r.pid, o.signal);
      }
      int status = 0;
      const pid_t pid = ::waitpid(-1, &status, WNOHANG);
      if (pid == 0 || (pid < 0 && errno == EINTR)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        continue;
      }
      MAMBARL_CHECK(pid > 0, "waiting for the sweep's runs: " << std::strerror(errno));
      const auto it =
          std::find_if(running.begin(), running.end(), [&](const Running& p) { return p.pid == pid; });
      if (it == running.end()) continue;  // not one of ours
      const SweepRun& run = runs[it->index];
      const RunStart start = it->start;
      RunResult& r = o.done[it->index];
      running.erase(it);
      const std::string log_path = train_log_of(run);
      const std::string log = read_text(log_path);
      const bool exited_ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      if (exited_ok && read_finished_run(run, log, r)) {
        report(r, "");
        continue;
      }
      // Ended by the signal passed on: stopped, not failed (one stopped before
      // it could write a checkpoint starts again on --resume).
      if (o.signal != 0 && ((WIFEXITED(status) && WEXITSTATUS(status) == 128 + o.signal) ||
                            (WIFSIGNALED(status) && WTERMSIG(status) == o.signal))) {
        ++o.stopped;
        continue;
      }
      ++o.failed;
      std::cerr << "mambarl sweep: run " << run.name << " failed ("
                << (exited_ok ? "no 'final mean_return=' line" : describe_status(status))
                << "): " << shell_command(train_argv(run, exe, start)) << "\n"
                << "its log " << log_path << " ends:\n"
                << last_lines(log, 12) << std::endl;
    }
  } catch (...) {
    for (const Running& r : running) ::waitpid(r.pid, nullptr, 0);  // leave no run behind
    throw;
  }
  o.not_started = runs.size() - next;
  return o;
}

// One random-floor row per env setting x grid point x seed, from the first run with that setting.
std::vector<RunResult> random_floor_rows(const SweepSpec& spec, const std::vector<SweepRun>& runs,
                                         std::ostream& out) {
  // Few envs play many random episodes quickly, whatever num_envs the config trains with.
  const std::string kFloorEnvs = "env.num_envs=16";
  std::vector<RunResult> rows;
  std::vector<std::pair<std::map<std::string, std::string>, std::vector<std::string>>> measured;
  for (const SweepRun& run : runs) {
    const auto key = std::make_pair(run.env_settings, run.grid_values);
    if (std::find(measured.begin(), measured.end(), key) != measured.end()) continue;
    measured.push_back(key);
    std::vector<std::string> overrides = run.overrides;
    overrides.push_back(kFloorEnvs);
    const Experiment exp = load_experiment(run.config, overrides);
    const auto plugins = load_plugins(exp);  // a plugin's env types; kept loaded while its env runs
    const auto env = make_vec_env(exp.section("env"));
    std::string where = run.env_type;
    for (size_t k = 0; k < spec.grid.size(); ++k)
      where += " " + spec.grid[k].first + "=" + run.grid_values[k];
    for (const uint64_t seed : spec.seeds) {
      const auto t0 = std::chrono::steady_clock::now();
      const RandomFloor f = measure_random_floor(*env, seed);
      RunResult r;
      r.run = run;
      r.run.name.clear();
      r.run.run_dir.clear();
      r.run.policy = "random";
      r.run.seed = seed;
      r.final_return = f.mean_return;
      r.env_steps = f.env_steps;
      r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      out << "random floor, " << where << " (env of " << run.config << "), seed " << seed
          << ": mean_return=" << f.mean_return << " +- " << f.std_error << " (" << f.episodes << " episodes)"
          << std::endl;
      rows.push_back(std::move(r));
    }
  }
  return rows;
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", &tm);
  return buf;
}

}  // namespace

int run_sweep(const SweepOptions& a, const std::vector<std::string>& command_line, std::ostream& out) {
  const SweepSpec spec = load_sweep(a.file);
  const std::string out_dir = a.out_dir.empty() ? spec.out_dir : a.out_dir;
  const int jobs = a.jobs      ? a.jobs
                   : spec.jobs ? spec.jobs
                               : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  const std::vector<SweepRun> runs = select_runs(expand_sweep(spec, a.overrides, out_dir), spec, a.only);
  const std::string exe = fs::read_symlink("/proc/self/exe").string();
  if (a.dry_run) {
    for (const SweepRun& run : runs) out << shell_command(train_argv(run, exe)) << "\n";
    return 0;
  }
  const std::string header = "Sweep of " + utc_now() + ": `" + shell_command(command_line) + "`";
  fs::create_directories(out_dir);
  // The random floor first: quick, and a bad env setting stops the sweep before any run starts.
  const std::vector<RunResult> floor =
      spec.random_floor ? random_floor_rows(spec, runs, out) : std::vector<RunResult>{};
  out << runs.size() << " runs, " << jobs << " at a time, in " << out_dir << std::endl;
  SweepOutcome outcome;
  {
    const StopOnSignals stop_on_signals;
    outcome = run_all(runs, exe, jobs, a.resume, out);
  }
  if (outcome.failed > 0) {
    std::cerr << "mambarl sweep: " << outcome.failed << " run(s) failed; " << outcome.not_started
              << " run(s) not started" << std::endl;
    return 1;
  }
  if (outcome.signal != 0) {
    std::vector<std::string> again = command_line;
    if (std::find(again.begin(), again.end(), "--resume") == again.end()) again.push_back("--resume");
    std::cerr << "mambarl sweep: " << kInterruptedLine << signal_name(outcome.signal) << ": "
              << outcome.finished << " run(s) finished, " << outcome.stopped
              << " stopped (on --resume each continues from its checkpoint, or starts again without one), "
              << outcome.not_started
              << " not started; no report written. Continue with: " << shell_command(again) << std::endl;
    return 128 + outcome.signal;
  }
  std::vector<RunResult>& results = outcome.done;
  results.insert(results.end(), floor.begin(), floor.end());

  std::vector<std::string> grid_keys;
  for (const auto& g : spec.grid) grid_keys.push_back(g.first);
  const fs::path dir(out_dir);
  write_file_atomically((dir / "runs.csv").string(), runs_csv(grid_keys, results));
  const std::string md = results_markdown(grid_keys, results, header);
  write_file_atomically((dir / "results.md").string(), md);
  const std::vector<std::string> plots = write_sweep_plots(out_dir, grid_keys, results);
  out << "\n" << md << "\nwrote " << (dir / "runs.csv").string() << ", " << (dir / "results.md").string();
  for (const std::string& p : plots) out << ", " << p;
  out << std::endl;
  return 0;
}

}  // namespace mambarl
