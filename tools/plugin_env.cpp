#include "tools/plugin_env.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <ostream>

#include "envs/vec_env.hpp"

namespace mambarl {

namespace {

// VecEnv over one mambarl_env of a plugin. Every call's status is checked and
// a failure becomes an Error with the plugin env's last_error().
class PluginVecEnv final : public VecEnv {
 public:
  PluginVecEnv(const mambarl_env_factory& f, const std::string& file, const ConfigNode& cfg, int num_envs)
      : f_(f), B_(num_envs) {
    // `backend` is the runner's key (envs/vec_env.hpp), not one the plugin knows.
    YAML::Node own = YAML::Clone(cfg.yaml());
    own.remove("backend");
    YAML::Emitter yaml;
    yaml << own;
    char error[1024] = {0};
    if (f_.create(yaml.c_str(), num_envs, &env_, &desc_, error, sizeof error) != MAMBARL_OK || env_ == nullptr)
      throw ConfigError(cfg.where() + ": " + cfg.path() + ": " + error + " (env '" + f_.name + "' of " + file + ")");
    MAMBARL_CHECK(desc_.obs_dim >= 1 && desc_.action_dim >= 1 && desc_.obs && desc_.final_obs && desc_.reward &&
                      desc_.terminated && desc_.truncated && desc_.episode_return && desc_.episode_length &&
                      desc_.obs_low && desc_.obs_high,
                  "env '" << f_.name << "' of " << file << " returned an incomplete description");
    spec_.id = f_.name;
    spec_.obs_dim = desc_.obs_dim;
    spec_.obs_low.assign(desc_.obs_low, desc_.obs_low + desc_.obs_dim);
    spec_.obs_high.assign(desc_.obs_high, desc_.obs_high + desc_.obs_dim);
    spec_.action.discrete = desc_.discrete != 0;
    spec_.action.n = desc_.action_dim;
    spec_.max_episode_steps = desc_.max_episode_steps;
  }
  ~PluginVecEnv() override { f_.destroy(env_); }
  PluginVecEnv(const PluginVecEnv&) = delete;
  PluginVecEnv& operator=(const PluginVecEnv&) = delete;

  const EnvSpec& spec() const override { return spec_; }
  int num_envs() const override { return B_; }
  void reset(uint64_t seed, uint64_t first_env = 0) override {
    // The env ABI's reset seeds env b with stream b: it has no offset.
    MAMBARL_USER_CHECK(first_env == 0,
                       "env.type: " << spec_.id
                                    << " is a plugin env, which cannot be split "
                                       "across data-parallel ranks (its ABI reset has no first "
                                       "env); run it in one process");
    check(f_.reset(env_, seed), "reset");
  }
  void step(const float* actions) override { check(f_.step(env_, actions), "step"); }
  const float* obs() const override { return desc_.obs; }
  const float* final_obs() const override { return desc_.final_obs; }
  const float* reward() const override { return desc_.reward; }
  const uint8_t* terminated() const override { return desc_.terminated; }
  const uint8_t* truncated() const override { return desc_.truncated; }
  const float* episode_return() const override { return desc_.episode_return; }
  const int32_t* episode_length() const override { return desc_.episode_length; }
  void render(int env, std::ostream& os) const override {
    char text[4096] = {0};
    check(f_.render(env_, env, text, sizeof text), "render");
    os << text;
  }
  std::vector<uint8_t> save_state() const override {
    std::vector<uint8_t> out(static_cast<size_t>(std::max<int64_t>(0, f_.state_size(env_))));
    check(f_.save_state(env_, out.data(), static_cast<int64_t>(out.size())), "save_state");
    return out;
  }
  void load_state(const std::vector<uint8_t>& bytes) override {
    check(f_.load_state(env_, bytes.data(), static_cast<int64_t>(bytes.size())), "load_state");
  }

 private:
  void check(mambarl_status st, const char* what) const {
    MAMBARL_CHECK(st == MAMBARL_OK, "env '" << f_.name << "' " << what << ": " << f_.last_error(env_));
  }

  mambarl_env_factory f_;
  int B_;
  mambarl_env* env_ = nullptr;
  mambarl_env_desc desc_{};
  EnvSpec spec_;
};

}  // namespace

void register_plugin_envs(const PluginRegistry& registry) {
  // Which factory (by its create function) each plugin env name was registered
  // with in this process: the env registry is process-wide, PluginRegistry is not.
  static std::mutex m;
  static std::map<std::string, decltype(mambarl_env_factory::create)> done;
  std::lock_guard<std::mutex> lk(m);
  for (const auto& [name, entry] : registry.envs()) {
    const auto it = done.find(name);
    if (it != done.end() && it->second == entry.factory.create) continue;
    const auto known = registered_envs();
    MAMBARL_CHECK(std::find(known.begin(), known.end(), name) == known.end(),
                  "plugin " << entry.file << ": env type '" << name << "' is already registered");
    const mambarl_env_factory f = entry.factory;
    const std::string file = entry.file;
    register_env(name, [f, file](const ConfigNode& cfg, int num_envs) -> std::unique_ptr<VecEnv> {
      return std::make_unique<PluginVecEnv>(f, file, cfg, num_envs);
    });
    done[name] = entry.factory.create;
  }
}

}  // namespace mambarl
