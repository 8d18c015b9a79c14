#include "tools/sweep.hpp"

#include <glob.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "kernels/base/config_node.hpp"
#include "policy/policy_config.hpp"

namespace fs = std::filesystem;

namespace mambarl {

namespace {

// The items of the list at `key` (required, non-empty), each a scalar.
std::vector<YAML::Node> scalar_list(const ConfigNode& n, const std::string& key) {
  if (!n.has(key)) n.fail(key, "required key is missing");
  const YAML::Node list = n.yaml()[key];
  if (!list.IsSequence() || list.size() == 0) n.fail(key, "expected a non-empty list");
  std::vector<YAML::Node> items;
  for (const YAML::Node& item : list) {
    if (!item.IsScalar())
      throw ConfigError(located(n.file(), item.Mark()) + ": " + n.key_path(key) + "[" +
                        std::to_string(items.size()) + "]: expected a scalar value");
    items.push_back(item);
  }
  return items;
}

[[noreturn]] void fail_item(const std::string& file, const YAML::Node& item, const std::string& key,
                            const std::string& msg) {
  throw ConfigError(located(file, item.Mark()) + ": " + key + ": " + msg);
}

// A scalar as override text: a value quoted in the sweep file ('3', "on")
// stays a string in the run's config.
std::string override_text(const YAML::Node& scalar) {
  if (scalar.Tag() != "!") return scalar.Scalar();
  std::string quoted = "'";
  for (const char c : scalar.Scalar()) quoted += c == '\'' ? std::string("''") : std::string(1, c);
  return quoted + "'";
}

// runtime.seed and runtime.out_dir of every run are the sweep's to set.
void check_not_reserved(const std::string& key, const std::string& where) {
  if (key == "runtime.seed")
    throw ConfigError(where + ": runtime.seed is set per run by the sweep (list the seeds under seeds:)");
  if (key == "runtime.out_dir")
    throw ConfigError(where +
                      ": runtime.out_dir is set per run by the sweep (<out_dir>/<run name>; "
                      "set out_dir: or --out)");
}

// The key an override sets ("a.b=3") or deletes ("~a.b").
std::string override_key(const std::string& ov) {
  return !ov.empty() && ov[0] == '~' ? ov.substr(1) : ov.substr(0, ov.find('='));
}

// The files a `configs:` entry names: a glob pattern's matches (sorted), or the path itself.
std::vector<std::string> config_files(const std::string& file, const YAML::Node& item) {
  const std::string entry = item.Scalar();
  if (entry.find_first_of("*?[") == std::string::npos) {
    if (!fs::is_regular_file(entry)) fail_item(file, item, "configs", "no such config file: " + entry);
    return {entry};
  }
  glob_t g{};
  const int rc = ::glob(entry.c_str(), 0, nullptr, &g);
  std::vector<std::string> matches;
  for (size_t i = 0; rc == 0 && i < g.gl_pathc; ++i)
    if (fs::is_regular_file(g.gl_pathv[i])) matches.push_back(g.gl_pathv[i]);
  ::globfree(&g);
  if (matches.empty()) fail_item(file, item, "configs", "the pattern '" + entry + "' matches no config file");
  return matches;
}

// Each config's path relative to the folder all of them share, without .yaml
// and with '/' as '_': the plain file name when they sit in one folder.
std::vector<std::string> config_labels(const std::vector<std::string>& configs) {
  std::vector<fs::path> paths;
  for (const std::string& c : configs) paths.push_back(fs::absolute(c).lexically_normal());
  const auto inside = [](const fs::path& dir, const fs::path& folder) {
    const fs::path rel = dir.lexically_relative(folder);
    return !rel.empty() && *rel.begin() != "..";
  };
  fs::path common = paths.front().parent_path();
  for (const fs::path& p : paths)
    while (!inside(p.parent_path(), common)) common = common.parent_path();
  std::vector<std::string> labels;
  for (const fs::path& p : paths) {
    fs::path rel = p.lexically_relative(common);
    rel.replace_extension();
    std::string label = rel.generic_string();
    for (char& c : label)
      if (c == '/') c = '_';
    labels.push_back(label);
  }
  return labels;
}

// Every setting under `node` as dotted key -> value text (lists and maps
// below the leaves in YAML flow style).
void flatten(const YAML::Node& node, const std::string& prefix, std::map<std::string, std::string>& out) {
  for (const auto& kv : node) {
    const std::string key = prefix + kv.first.Scalar();
    if (kv.second.IsMap()) {
      flatten(kv.second, key + ".", out);
    } else if (kv.second.IsScalar()) {
      out[key] = kv.second.Scalar();
    } else {
      YAML::Emitter em;
      em << YAML::Flow << kv.second;
      out[key] = em.c_str();
    }
  }
}

// The grid's points: every combination of one value per key, the first key varying slowest.
std::vector<std::vector<std::string>> grid_points(const SweepSpec& spec) {
  std::vector<std::vector<std::string>> points{{}};
  for (const auto& [key, values] : spec.grid) {
    std::vector<std::vector<std::string>> next;
    for (const auto& p : points)
      for (const std::string& v : values) {
        next.push_back(p);
        next.back().push_back(v);
      }
    points = std::move(next);
  }
  return points;
}

}  // namespace

SweepSpec load_sweep(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(path + ": cannot open sweep file");
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_sweep(ss.str(), path);
}

SweepSpec parse_sweep(const std::string& text, const std::string& file) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::ParserException& ex) {
    throw ConfigError(located(file, ex.mark) + ": malformed YAML: " + ex.msg);
  }
  check_yaml_bounds(root, file);
  if (!root.IsMap()) throw ConfigError(file + ": a sweep file must be a YAML map (configs:, seeds:, ...)");
  const ConfigNode n(root, file);
  n.check_known({"configs", "seeds", "grid", "overrides", "jobs", "random_floor", "out_dir"});
  SweepSpec s;
  s.file = file;
  std::set<std::string> seen_configs;
  for (const YAML::Node& item : scalar_list(n, "configs"))
    for (const std::string& c : config_files(file, item))
      if (seen_configs.insert(fs::path(c).lexically_normal().string()).second) s.configs.push_back(c);
  for (const YAML::Node& item : scalar_list(n, "seeds")) {
    uint64_t seed = 0;
    try {
      seed = item.as<uint64_t>();
    } catch (const YAML::Exception&) {
      fail_item(file, item, "seeds", "cannot read '" + item.Scalar() + "' as a seed (an integer >= 0)");
    }
    for (const uint64_t earlier : s.seeds)
      if (earlier == seed) fail_item(file, item, "seeds", "seed " + item.Scalar() + " is listed twice");
    s.seeds.push_back(seed);
  }
  if (n.has("grid")) {
    const YAML::Node grid = root["grid"];
    if (!grid.IsMap() || grid.size() == 0) n.fail("grid", "expected a map of key.path: [values...]");
    const ConfigNode g(grid, file, "grid");
    for (const auto& kv : grid) {
      const std::string key = kv.first.Scalar();
      if (key.empty() || key.find('=') != std::string::npos)
        fail_item(file, kv.first, "grid", "'" + key + "' is not a dotted config key (like env.difficulty)");
      check_not_reserved(key, located(file, kv.first.Mark()) + ": grid." + key);
      std::vector<std::string> values;
      for (const YAML::Node& item : scalar_list(g, key)) {
        values.push_back(override_text(item));
        for (size_t i = 0; i + 1 < values.size(); ++i)
          if (values[i] == values.back())
            fail_item(file, item, "grid." + key, "value '" + values.back() + "' is listed twice");
      }
      s.grid.emplace_back(key, std::move(values));
    }
  }
  if (n.has("overrides"))
    for (const YAML::Node& item : scalar_list(n, "overrides")) {
      const std::string ov = item.Scalar();
      if (!is_override(ov))
        fail_item(file, item, "overrides", "'" + ov + "' is not key.path=value or ~key.path");
      check_not_reserved(override_key(ov), located(file, item.Mark()) + ": overrides: '" + ov + "'");
      s.overrides.push_back(ov);
    }
  if (n.has("jobs")) s.jobs = n.get_in("jobs", 1, 1, 4096);
  s.random_floor = n.get("random_floor", s.random_floor);
  s.out_dir = n.get<std::string>("out_dir", s.out_dir);
  if (s.out_dir.empty()) n.fail("out_dir", "must not be empty");
  return s;
}

std::vector<SweepRun> expand_sweep(const SweepSpec& spec, const std::vector<std::string>& cli_overrides,
                                   const std::string& out_dir) {
  for (const std::string& ov : cli_overrides)
    check_not_reserved(override_key(ov), "command line: override '" + ov + "'");
  const std::vector<std::string> labels = config_labels(spec.configs);
  const std::vector<std::vector<std::string>> points = grid_points(spec);
  std::vector<SweepRun> runs;
  std::map<std::string, std::string> seen;  // run name -> the first run's config, for the clash message
  for (size_t c = 0; c < spec.configs.size(); ++c) {
    const std::string& config = spec.configs[c];
    YAML::Node doc;
    try {
      doc = YAML::LoadFile(config);
    } catch (const YAML::ParserException& ex) {
      throw ConfigError(located(config, ex.mark) + ": malformed YAML: " + ex.msg);
    } catch (const YAML::Exception& ex) {
      throw ConfigError(config + ": cannot read experiment config: " + ex.msg);
    }
    check_yaml_bounds(doc, config);
    for (const std::vector<std::string>& point : points) {
      SweepRun run;
      run.config = config;
      run.config_label = labels[c];
      run.grid_values = point;
      run.overrides = spec.overrides;
      std::vector<std::string> grid_ovs;
      for (size_t k = 0; k < point.size(); ++k) grid_ovs.push_back(spec.grid[k].first + "=" + point[k]);
      run.overrides.insert(run.overrides.end(), grid_ovs.begin(), grid_ovs.end());
      run.overrides.insert(run.overrides.end(), cli_overrides.begin(), cli_overrides.end());
      YAML::Node root = YAML::Clone(doc);
      auto log = std::make_shared<OverrideLog>();
      apply_overrides(root, spec.overrides, spec.file + ": overrides", log.get());
      apply_overrides(root, grid_ovs, spec.file + ": grid", log.get());
      apply_overrides(root, cli_overrides, "command line", log.get());
      const ConfigNode top(root, config, "", std::move(log));
      const ConfigNode env = top.child("env");
      run.env_type = env.require<std::string>("type");
      run.difficulty = env.get<std::string>("difficulty", "");
      run.policy = top.child("policy").get<std::string>("type", PolicyConfig{}.type);
      if (env.defined()) flatten(env.yaml(), "", run.env_settings);
      run.env_settings.erase("num_envs");
      run.env_settings.erase("backend");
      std::string stem = run.config_label;
      for (size_t k = 0; k < point.size(); ++k) {
        const std::string& key = spec.grid[k].first;
        stem += "_" + name_part(key.substr(key.rfind('.') + 1)) + "-" + name_part(point[k]);
      }
      for (const uint64_t seed : spec.seeds) {
        SweepRun r = run;
        r.seed = seed;
        r.name = stem + "_s" + std::to_string(seed);
        r.run_dir = (fs::path(out_dir) / r.name).string();
        const auto [it, fresh] = seen.emplace(r.name, config);
        if (!fresh)
          throw ConfigError(spec.file + ": two runs would share the name " + r.name + " (configs " +
                            it->second + " and " + config + "): rename a config or change a grid value");
        runs.push_back(std::move(r));
      }
    }
  }
  return runs;
}

std::vector<SweepRun> select_runs(const std::vector<SweepRun>& runs, const SweepSpec& spec,
                                  const std::vector<std::string>& only) {
  std::vector<std::string> keys{"config", "policy", "seed"};
  for (const auto& g : spec.grid) keys.push_back(g.first);
  const auto value_of = [&](const SweepRun& r, const std::string& key) {
    if (key == "config") return r.config_label;
    if (key == "policy") return r.policy;
    if (key == "seed") return std::to_string(r.seed);
    const auto g =
        std::find_if(spec.grid.begin(), spec.grid.end(), [&](const auto& kv) { return kv.first == key; });
    return r.grid_values[static_cast<size_t>(g - spec.grid.begin())];
  };
  const auto joined = [](const std::vector<std::string>& items) {
    std::string out;
    for (const std::string& item : items) out += (out.empty() ? "" : ", ") + item;
    return out;
  };
  std::vector<SweepRun> kept = runs;
  for (const std::string& filter : only) {
    const std::string where = "--only " + filter;
    const size_t eq = filter.find('=');
    if (eq == std::string::npos || eq == 0)
      throw ConfigError(where + ": expected KEY=VALUE[,VALUE...], KEY one of: " + joined(keys));
    const std::string key = filter.substr(0, eq);
    if (std::find(keys.begin(), keys.end(), key) == keys.end())
      throw ConfigError(where + ": " + spec.file + " has no key " + key + "; filters take: " + joined(keys));
    std::vector<std::string> present;  // the key's values over the whole sweep, in run order
    for (const SweepRun& r : runs) {
      const std::string v = value_of(r, key);
      if (std::find(present.begin(), present.end(), v) == present.end()) present.push_back(v);
    }
    std::set<std::string> wanted;
    std::stringstream values(filter.substr(eq + 1));
    for (std::string v; std::getline(values, v, ',');) {
      if (std::find(present.begin(), present.end(), v) == present.end())
        throw ConfigError(where + ": no run of " + spec.file + " has " + key + " '" + v +
                          "' (it has: " + joined(present) + ")");
      wanted.insert(v);
    }
    if (wanted.empty() || filter.back() == ',')
      throw ConfigError(where + ": an empty value; expected KEY=VALUE[,VALUE...]");
    kept.erase(std::remove_if(kept.begin(), kept.end(),
                              [&](const SweepRun& r) { return !wanted.count(value_of(r, key)); }),
               kept.end());
  }
  if (kept.empty()) {
    std::string filters;
    for (const std::string& f : only) filters += " --only " + f;
    throw ConfigError(filters.substr(1) + ": no run of " + spec.file + " passes every filter");
  }
  return kept;
}

std::string name_part(const std::string& s) {
  std::string out;
  for (const char c : s)
    out += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-') ? c : '_';
  return out;
}

std::vector<std::string> train_argv(const SweepRun& run, const std::string& exe, RunStart start) {
  std::vector<std::string> argv{exe, "train", run.config, "runtime.seed=" + std::to_string(run.seed),
                                "runtime.out_dir=" + run.run_dir};
  argv.insert(argv.end(), run.overrides.begin(), run.overrides.end());
  argv.push_back(start == RunStart::continued ? "--resume" : "--force");
  return argv;
}

std::string shell_command(const std::vector<std::string>& argv) {
  std::string line;
  for (const std::string& a : argv) {
    const bool plain = !a.empty() && a.find_first_not_of(
                                         "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                         "0123456789_-+=./,:@%") == std::string::npos;
    std::string word = plain ? a : "'";
    if (!plain) {
      for (const char c : a) word += c == '\'' ? std::string("'\\''") : std::string(1, c);
      word += "'";
    }
    line += (line.empty() ? "" : " ") + word;
  }
  return line;
}

}  // namespace mambarl
