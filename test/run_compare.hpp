// The parts of two training runs' outputs that must match bit for bit (a
// resumed run against one that never stopped): learner bytes of a checkpoint
// and the metrics without timing columns; and one metrics column by name.
// Needs only the safetensors reader, so suites that run `mambarl` as a child
// use it too.
#pragma once

#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "policy/io/safetensors.hpp"

namespace mambarl::test {

inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The metrics file without its timing columns (wall_s, steps_per_s, collect_s,
// learn_s; found by name in the header), which legitimately differ between
// two runs of the same computation.
inline std::string metrics_without_timing(const std::filesystem::path& p) {
  static const std::set<std::string> kTiming = {"wall_s", "steps_per_s", "collect_s", "learn_s"};
  std::istringstream in(read_file(p));
  std::string line, out;
  std::vector<bool> drop;  // per column, from the header
  while (std::getline(in, line)) {
    std::istringstream cells(line);
    std::string cell;
    for (size_t col = 0; std::getline(cells, cell, ','); ++col) {
      if (drop.size() <= col) drop.push_back(kTiming.count(cell) > 0);
      if (!drop[col]) out += cell + ",";
    }
    out += "\n";
  }
  return out;
}

// One column of a metrics.csv, found by name in the header, a value per update.
inline std::vector<double> metrics_column(const std::filesystem::path& p, const std::string& name) {
  std::istringstream in(read_file(p));
  std::string line, cell;
  std::getline(in, line);
  std::istringstream header(line);
  size_t want = 0;
  bool found = false;
  for (size_t col = 0; !found && std::getline(header, cell, ','); ++col)
    if (cell == name) want = col, found = true;
  if (!found) throw std::runtime_error(p.string() + " has no column '" + name + "'");
  std::vector<double> out;
  while (std::getline(in, line)) {
    std::istringstream cells(line);
    for (size_t col = 0; std::getline(cells, cell, ','); ++col)
      if (col == want) out.push_back(std::stod(cell));
  }
  return out;
}

// Weights and optimizer moments of a checkpoint, byte for byte.
inline std::string learner_bytes(const std::filesystem::path& ckpt) {
  const SafetensorsFile f = read_safetensors(ckpt.string());
  std::string out;
  for (const auto& t : f.tensors)
    if (t.name.rfind("runner.", 0) != 0) out += t.name + std::string(t.bytes.begin(), t.bytes.end());
  return out;
}

}  // namespace mambarl::test
