// Which overrides (command line, sweep grid) set or deleted which keys of a
// config. A value an override put there has no line in the YAML file, so an
// error about it must name the override instead ("command line: override
// 'algo.lr=-1': algo.lr: ..."); ConfigNode asks this log before it falls back
// to the file's position. Header-only, beside config_node.hpp which uses it.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

namespace mambarl {

class OverrideLog {
 public:
  struct Entry {
    std::string path;      // the dotted key it set or deleted: "policy.type"
    std::string source;    // for messages: "command line: override 'policy.type=gru'"
    std::string text;      // the override as written: "policy.type=gru", "~policy.d_state"
    std::string replaced;  // the scalar it replaced ("mamba1"); "" when there was none
  };

  // A later override at `e.path` decides everything at or under it, so the
  // earlier entries there no longer do.
  void record(Entry e) {
    entries_.erase(std::remove_if(entries_.begin(), entries_.end(),
                                  [&](const Entry& x) { return within(x.path, e.path); }),
                   entries_.end());
    entries_.push_back(std::move(e));
  }

  // The override that decided `path`: the one at it or at the nearest map
  // above it that an override replaced; nullptr when the file decided it.
  const Entry* find(const std::string& path) const {
    const Entry* best = nullptr;
    for (const Entry& e : entries_)
      if (within(path, e.path) && (best == nullptr || e.path.size() > best->path.size())) best = &e;
    return best;
  }

 private:
  // `path` is `root` or a key below it ("algo.lr" is within "algo", "algorithm" is not).
  static bool within(const std::string& path, const std::string& root) {
    return path.compare(0, root.size(), root) == 0 &&
           (path.size() == root.size() || path[root.size()] == '.');
  }

  std::vector<Entry> entries_;
};

}  // namespace mambarl
