#include "policy/checkpoint.hpp"

namespace mambarl {

namespace {
constexpr const char* kFormat = "mambarl-checkpoint-v1";

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + ")";
}

// Copies one named tensor into dst after checking its dtype and exact shape.
void load_tensor(const SafetensorsFile& f, const std::string& name, const std::vector<int64_t>& shape,
                 float* dst, const std::string& path) {
  const TensorRecord& t = f.at(name);
  MAMBARL_CHECK(t.shape == shape, path << ": tensor '" << name << "' has shape " << shape_str(t.shape)
                                       << ", this model expects " << shape_str(shape));
  copy_to(t, dst, shape_numel(shape));
}

std::string emit(const YAML::Node& n) {
  YAML::Emitter e;
  e << n;
  return e.c_str();
}

const std::string& metadata_of(const SafetensorsFile& f, const std::string& key, const std::string& path) {
  const auto it = f.metadata.find(key);
  MAMBARL_CHECK(it != f.metadata.end(), path << ": not a mambarl checkpoint (no '" << key << "' metadata)");
  return it->second;
}

// The file's policy_config must be `policy`'s, or the weights mean something else.
// It is read back through the schema first, so a key added since the file was
// written (policy.start_embedding) takes its default instead of differing.
void check_policy_config(const SafetensorsFile& f, const PolicyConfig& policy, const std::string& path) {
  const std::string& stored = metadata_of(f, "policy_config", path);
  std::string theirs = stored;
  try {
    theirs = emit(PolicyConfig::from_yaml(ConfigNode(YAML::Load(stored), path, "policy")).to_yaml());
  } catch (const std::exception&) {
    // Not a config this build reads: compared as stored, and reported below.
  }
  const std::string mine = emit(policy.to_yaml());
  MAMBARL_CHECK(theirs == mine, path << ": checkpoint was written by a different policy config:\n"
                                     << theirs << "\nthis run's policy:\n"
                                     << mine);
}
}  // namespace

void write_checkpoint(const std::string& path, const PolicyConfig& policy, const ParamLayout& layout,
                      const float* params, const float* exp_avg, const float* exp_avg_sq, long long step,
                      const std::map<std::string, std::string>& metadata,
                      const std::vector<TensorRecord>& extra) {
  SafetensorsFile f;
  f.metadata = metadata;
  f.metadata["format"] = kFormat;
  f.metadata["policy_config"] = emit(policy.to_yaml());
  f.metadata["optimizer_step"] = std::to_string(step);
  for (const auto& p : layout.params()) f.tensors.push_back(make_tensor(p.name, p.shape, params + p.offset));
  for (const auto& p : layout.params()) {
    f.tensors.push_back(make_tensor("optimizer.exp_avg." + p.name, p.shape, exp_avg + p.offset));
    f.tensors.push_back(make_tensor("optimizer.exp_avg_sq." + p.name, p.shape, exp_avg_sq + p.offset));
  }
  for (const auto& t : extra) f.tensors.push_back(t);
  write_safetensors(path, f);
}

SafetensorsFile read_checkpoint(const std::string& path, const PolicyConfig& policy,
                                const ParamLayout& layout, LearnerState& out) {
  SafetensorsFile f = read_safetensors(path);
  const auto meta = [&](const std::string& k) -> const std::string& { return metadata_of(f, k, path); };
  MAMBARL_CHECK(meta("format") == kFormat,
                path << ": checkpoint format '" << meta("format") << "', expected '" << kFormat << "'");
  check_policy_config(f, policy, path);
  // Read everything into temporaries first, so a bad tensor leaves `out` untouched.
  LearnerState s;
  s.params.assign(layout.size(), 0.0f);
  s.exp_avg.assign(layout.size(), 0.0f);
  s.exp_avg_sq.assign(layout.size(), 0.0f);
  for (const auto& p : layout.params()) {
    load_tensor(f, p.name, p.shape, s.params.data() + p.offset, path);
    load_tensor(f, "optimizer.exp_avg." + p.name, p.shape, s.exp_avg.data() + p.offset, path);
    load_tensor(f, "optimizer.exp_avg_sq." + p.name, p.shape, s.exp_avg_sq.data() + p.offset, path);
  }
  try {
    s.step = std::stoll(meta("optimizer_step"));
  } catch (const std::exception&) {
    MAMBARL_FAIL(path << ": optimizer_step '" << meta("optimizer_step") << "' is not an integer");
  }
  out = std::move(s);
  return f;
}

std::vector<float> read_weights(const std::string& path, const PolicyConfig& policy, const ParamLayout& layout) {
  const SafetensorsFile f = read_safetensors(path);
  check_policy_config(f, policy, path);
  std::vector<float> params(layout.size(), 0.0f);
  for (const auto& p : layout.params()) load_tensor(f, p.name, p.shape, params.data() + p.offset, path);
  return params;
}

}  // namespace mambarl
