// The plugin boundary: the loader's checks (each with its own message naming
// the file), the real plugin's factories, strict config errors naming file
// and key, tensor-view validation naming the argument, determinism of the
// actor, checkpoints that round-trip bit-exactly and refuse truncated files,
// and the dotted overrides shared with the runner.
#define BOOST_TEST_MODULE plugin
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "kernels/base/config_node.hpp"
#include "kernels/base/rng.hpp"
#include "plugin/plugin_host.hpp"
#include "plugin/tensor_view.hpp"
#include "test/hide_gpus.hpp"

namespace fs = std::filesystem;
using namespace mambarl;

namespace {

const std::string kPlugin = std::string(MAMBARL_TEST_PLUGIN_DIR) + "/libmambarl_policies.so";
std::string fake(const std::string& name) { return std::string(MAMBARL_TEST_FAKE_PLUGIN_DIR) + "/lib" + name + ".so"; }

// A scratch directory per test process, removed at exit.
struct Scratch {
  fs::path dir = fs::temp_directory_path() / ("mambarl_test_plugin_" + std::to_string(getpid()));
  Scratch() { fs::create_directories(dir); }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  std::string file(const std::string& name) const { return (dir / name).string(); }
};
Scratch& scratch() {
  static Scratch s;
  return s;
}

// Runs f, which must throw mambarl::Error, and returns its message.
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    BOOST_TEST_MESSAGE("error: " << e.what());
    return e.what();
  }
  BOOST_FAIL("expected a mambarl::Error");
  return "";
}

// `msg` is evaluated once (it is often an error_of() call).
#define CHECK_HAS(msg, part)                                                                  \
  do {                                                                                        \
    const std::string check_has_msg_ = (msg), check_has_part_ = (part);                       \
    BOOST_CHECK_MESSAGE(check_has_msg_.find(check_has_part_) != std::string::npos,             \
                        "'" << check_has_msg_ << "' lacks '" << check_has_part_ << "'");      \
  } while (0)

const PluginRegistry& real_registry() {
  static PluginRegistry r = [] {
    PluginRegistry reg;
    reg.load(kPlugin);
    return reg;
  }();
  return r;
}

constexpr int kObs = 4, kActions = 3;

// A tiny model of each type (sizes keep every mixer's divisibility rules).
std::string config_for(const std::string& type, const std::string& extra = "") {
  std::string s = "env: {type: whatever}\npolicy:\n  type: " + type + "\n  d_model: 16\n  n_layers: 2\n";
  if (type == "mamba1" || type == "mamba3") s += "  d_state: 8\n";
  if (type == "mamba3") s += "  headdim: 8\n";
  return s + extra;
}

// Holds what create args point to.
struct Args {
  std::string text, file = "test_experiment.yaml", device = "cpu", dtype = "float32";
  std::vector<std::string> overrides;
  std::vector<const char*> ptrs;
  mambarl_policy_create_args a{};
  const mambarl_policy_create_args& get(uint64_t seed = 7, bool discrete = true, int action_dim = kActions) {
    ptrs.clear();
    for (const auto& o : overrides) ptrs.push_back(o.c_str());
    a = mambarl_policy_create_args{};
    a.config_text = text.c_str();
    a.config_file = file.c_str();
    a.overrides = ptrs.data();
    a.num_overrides = static_cast<int32_t>(ptrs.size());
    a.env = mambarl_env_info{kObs, discrete ? 1 : 0, action_dim};
    a.learner = mambarl_learner_config{0.2, 0.5, 0.01, 1, 0.9, 0.999, 1e-8, 0.0, 0.5, 1.0};
    a.seed = seed;
    a.device = device.c_str();
    a.dtype = dtype.c_str();
    return a;
  }
};

std::unique_ptr<PolicyHandle> make_policy(const std::string& type, uint64_t seed = 7) {
  Args args;
  args.text = config_for(type);
  return PolicyHandle::create(real_registry().factory(type), args.get(seed));
}

// One [T, B] chunk of plausible data, with resets at t=0 and inside.
struct ChunkData {
  int T, B, W;
  std::vector<float> obs, actions, logp, adv, ret, init;  // (T,B,O) (T,B,W) (T,B)x3 (B,S)
  std::vector<uint8_t> starts;                            // (T,B)
  ChunkData(int T_, int B_, int W_, int64_t S, uint64_t seed) : T(T_), B(B_), W(W_) {
    Rng rng(seed);
    const size_t n = static_cast<size_t>(T) * B;
    for (size_t i = 0; i < n * kObs; ++i) obs.push_back(static_cast<float>(rng.normal()));
    for (size_t i = 0; i < n * W; ++i) actions.push_back(static_cast<float>(rng.below(kActions)));
    for (size_t i = 0; i < n; ++i) {
      logp.push_back(static_cast<float>(-std::log(kActions) + 0.1 * rng.normal()));
      adv.push_back(static_cast<float>(rng.normal()));
      ret.push_back(static_cast<float>(rng.normal()));
      starts.push_back(i < static_cast<size_t>(B) || i == n / 2 ? 1 : 0);
    }
    init.assign(static_cast<size_t>(B) * S, 0.0f);
  }
  mambarl_chunk view(int64_t S) {
    mambarl_chunk c{};
    c.obs = view_f32(obs.data(), {T, B, kObs});
    c.actions = view_f32(actions.data(), {T, B, W});
    c.old_logp = view_f32(logp.data(), {T, B});
    c.advantages = view_f32(adv.data(), {T, B});
    c.returns = view_f32(ret.data(), {T, B});
    c.episode_start = view_u8(starts.data(), {T, B});
    c.initial_state = view_f32(init.data(), {B, S});
    return c;
  }
};

// Actor outputs of `steps` steps on fixed observations, episode starts
// included; split: each step as act_begin + act_end instead of act.
std::vector<float> rollout(ActorHandle& actor, int steps, bool split = false) {
  const int B = actor.num_envs();
  Rng obs_rng(99);
  std::vector<float> obs(static_cast<size_t>(B) * kObs), act(static_cast<size_t>(B)), logp(act), val(act), out;
  std::vector<uint8_t> starts(static_cast<size_t>(B), 1);
  for (int t = 0; t < steps; ++t) {
    for (auto& o : obs) o = static_cast<float>(obs_rng.normal());
    if (split) {
      actor.act_begin(obs.data(), starts.data());
      actor.act_end(act.data(), logp.data(), val.data());
    } else {
      actor.act(obs.data(), starts.data(), act.data(), logp.data(), val.data());
    }
    out.insert(out.end(), act.begin(), act.end());
    out.insert(out.end(), logp.begin(), logp.end());
    out.insert(out.end(), val.begin(), val.end());
    for (int b = 0; b < B; ++b) starts[static_cast<size_t>(b)] = (t + b) % 5 == 4;
  }
  return out;
}

// Bit-for-bit equal, except that +0 and -0 match: the flat weight buffer has
// alignment padding (policy/param_layout.hpp) that checkpoints do not store,
// and AdamW's no-op update of a padding zero may flip its sign (valgrind's FMA
// emulation does); padding is never read by the model.
bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0 && !(a[i] == 0.0f && b[i] == 0.0f)) return false;
  return true;
}

const char* const kTypes[] = {"mamba1", "mamba3", "gru", "mlp"};

}  // namespace

// ---- loader -----------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(missing_file_names_the_file) {
  PluginRegistry r;
  const std::string path = scratch().file("no_such_plugin.so");
  const std::string msg = error_of([&] { r.load(path); });
  CHECK_HAS(msg, path);
  CHECK_HAS(msg, "cannot load");
  CHECK_HAS(msg, "No such file");
}

BOOST_AUTO_TEST_CASE(text_file_is_not_a_library) {
  const std::string path = scratch().file("not_a_library.so");
  std::ofstream(path) << "this is a text file, not an ELF shared object\n";
  PluginRegistry r;
  const std::string msg = error_of([&] { r.load(path); });
  CHECK_HAS(msg, path);
  CHECK_HAS(msg, "cannot load");
}

BOOST_AUTO_TEST_CASE(library_without_entry_symbol) {
  PluginRegistry r;
  const std::string path = fake("fake_plugin_no_entry");
  const std::string msg = error_of([&] { r.load(path); });
  CHECK_HAS(msg, path);
  CHECK_HAS(msg, "not a mambarl plugin: no symbol mambarl_plugin_register");
}

BOOST_AUTO_TEST_CASE(plugin_built_for_another_abi) {
  PluginRegistry r;
  const std::string path = fake("fake_plugin_bad_abi");
  const std::string msg = error_of([&] { r.load(path); });
  CHECK_HAS(msg, path);
  CHECK_HAS(msg, "built for another ABI version");
  BOOST_TEST(r.policy_names().empty());
}

BOOST_AUTO_TEST_CASE(factory_with_wrong_abi_version) {
  PluginRegistry r;
  const std::string path = fake("fake_plugin_factory_abi");
  const std::string msg = error_of([&] { r.load(path); });
  CHECK_HAS(msg, path);
  CHECK_HAS(msg, "abi_version " + std::to_string(MAMBARL_PLUGIN_ABI_VERSION + 1));
  BOOST_TEST(r.policy_names().empty());
}

// Plugins built before the bump to ABI 9 (their learner config has no
// vf_trunk_coef, so the host would pass a struct they read short) are refused
// by name, whether the entry point or a factory says so.
BOOST_AUTO_TEST_CASE(plugins_of_the_previous_abi_are_refused) {
  BOOST_TEST(MAMBARL_PLUGIN_ABI_VERSION == 9u);
  PluginRegistry r;
  const std::string built = fake("fake_plugin_abi8");
  std::string msg = error_of([&] { r.load(built); });
  CHECK_HAS(msg, built);
  CHECK_HAS(msg, "built for another ABI version (it refused host ABI version 9)");
  const std::string factory = fake("fake_plugin_factory_abi8");
  msg = error_of([&] { r.load(factory); });
  CHECK_HAS(msg, factory);
  CHECK_HAS(msg, "registered a factory with abi_version 8 (expected 9)");
  BOOST_TEST(r.policy_names().empty());
}

// A vtable without the ABI-4 actor functions is refused, naming each one.
BOOST_AUTO_TEST_CASE(vtable_without_abi4_functions_is_refused) {
  static mambarl_policy_vtable vt = *real_registry().factory("gru").vtable;
  vt.actor_act_end = nullptr;
  vt.actor_enqueue_act = nullptr;
  vt.actor_enqueue_get_state = nullptr;
  static mambarl_policy_factory f = real_registry().factory("gru");
  f.name = "abi4_incomplete";
  f.vtable = &vt;
  PluginRegistry r;
  const auto entry = [](uint32_t, const mambarl_registry* reg) {
    return reg->register_policy(reg->host, &f);
  };
  const std::string msg = error_of([&] { r.register_plugin("incomplete.so", entry); });
  CHECK_HAS(msg,
            "plugin incomplete.so: factory 'abi4_incomplete' has null vtable functions: "
            "actor_act_end, actor_enqueue_act, actor_enqueue_get_state");
  BOOST_TEST(r.policy_names().empty());
}

BOOST_AUTO_TEST_CASE(duplicate_policy_names_both_files) {
  PluginRegistry r;
  r.load(kPlugin);
  const std::string path = fake("fake_plugin_duplicate");
  const std::string msg = error_of([&] { r.load(path); });
  CHECK_HAS(msg, path);
  CHECK_HAS(msg, kPlugin);
  CHECK_HAS(msg, "'mamba1'");
  BOOST_TEST(r.source_of("mamba1") == kPlugin);  // the first registration stands
}

BOOST_AUTO_TEST_CASE(real_plugin_registers_its_policies) {
  const auto names = real_registry().policy_names();
  BOOST_TEST(names == (std::vector<std::string>{"gru", "mamba1", "mamba3", "mlp"}), boost::test_tools::per_element());
  for (const auto& n : names) {
    BOOST_TEST(real_registry().factory(n).name == n);
    BOOST_TEST(real_registry().source_of(n) == kPlugin);
  }
}

BOOST_AUTO_TEST_CASE(default_path_finds_the_bundled_plugin) {
  // The test binary sits in <build>/test, the plugin in <build>/lib: the
  // layout of <prefix>/bin/mambarl and <prefix>/lib.
  BOOST_TEST(fs::equivalent(default_plugin_path(), kPlugin));
}

BOOST_AUTO_TEST_CASE(unknown_policy_lists_the_registered_ones) {
  const std::string msg = error_of([] { real_registry().factory("transformer"); });
  CHECK_HAS(msg, "unknown policy 'transformer'");
  CHECK_HAS(msg, "gru, mamba1, mamba3, mlp");
}

// ---- create: config and device --------------------------------------------------------

// Errors name the file and key, or the override that set the key.
BOOST_AUTO_TEST_CASE(bad_options_name_file_and_key) {
  struct Case {
    std::string text;
    std::vector<std::string> overrides;
    std::string key, why;
  };
  const std::vector<Case> cases = {
      {config_for("mamba1", ""), {"policy.d_model=-1"}, "policy.d_model", "out of range"},
      {"policy:\n  type: mamba1\n  d_model: -1\n", {}, "policy.d_model", "out of range"},
      {config_for("mamba1", "  colour: blue\n"), {}, "policy.colour", "unknown key"},
      {config_for("mamba1", "  d_conv: two\n"), {}, "policy.d_conv", "cannot read 'two'"},
      {config_for("gru"), {}, "policy.type", "'mamba1' factory"},
      {"env: {}\n", {}, "policy.type", "(the default)"},  // no policy section: default mamba1
      {config_for("mamba1"), {"policy.type=lstm"}, "policy.type", "not one of"},
      {config_for("mamba1"), {"policy.colour=blue"}, "policy.colour", "unknown key"},
  };
  for (const auto& c : cases) {
    Args args;
    args.text = c.text;
    args.overrides = c.overrides;
    const std::string factory = c.key == "policy.type" && c.why == "(the default)" ? "gru" : "mamba1";
    BOOST_TEST_CONTEXT(c.text << " with " << c.overrides.size() << " overrides") {
      const std::string msg =
          error_of([&] { PolicyHandle::create(real_registry().factory(factory), args.get()); });
      CHECK_HAS(msg, c.key);
      CHECK_HAS(msg, c.why);
      // A value from the command line has no line in the file: the override is named instead.
      if (c.overrides.empty()) {
        CHECK_HAS(msg, args.file);
      } else {
        BOOST_TEST(msg.rfind("command line: override '" + c.overrides[0] + "': " + c.key + ": ", 0) == 0u,
                   msg);
        BOOST_TEST(msg.find(args.file) == std::string::npos, msg);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(malformed_yaml_names_file_and_line) {
  Args args;
  args.text = "policy:\n  type: [mamba1\n";
  const std::string msg = error_of([&] { PolicyHandle::create(real_registry().factory("mamba1"), args.get()); });
  CHECK_HAS(msg, args.file + ":");
  CHECK_HAS(msg, "malformed YAML");
}

BOOST_AUTO_TEST_CASE(overrides_reach_the_plugin) {
  Args args;
  args.text = config_for("mamba1");
  args.overrides = {"policy.d_model=24", "policy.n_layers=1"};
  auto p = PolicyHandle::create(real_registry().factory("mamba1"), args.get());
  const YAML::Node resolved = YAML::Load(p->resolved_config());
  BOOST_TEST(resolved["d_model"].as<int>() == 24);
  BOOST_TEST(resolved["n_layers"].as<int>() == 1);
  BOOST_TEST(resolved["d_conv"].as<int>() == 4);  // defaults filled in
  BOOST_TEST(std::string(p->info().type) == "mamba1");
}

// This suite hides every GPU (test/hide_gpus.hpp): probe("cuda") refuses
// every policy type (each has a CUDA engine) with MAMBARL_ERROR (this machine
// cannot, a host may fall back); an unknown device is MAMBARL_UNSUPPORTED (a
// config error on any machine). create() refuses on its own too, for a host
// that skips probe().
BOOST_AUTO_TEST_CASE(cuda_device_is_refused_clearly) {
  // What a machine without a usable GPU is told: the build's own reason.
  const std::string no_gpu = MAMBARL_TEST_PLUGIN_HAS_CUDA ? "no usable CUDA device (cudaGetDeviceCount: "
                                                          : "this build of mambarl_policies has no CUDA engine";
  char why[512];
  for (const char* type : {"mamba1", "mamba3", "gru", "mlp"}) {
    BOOST_TEST_CONTEXT(type) {
      const auto& f = real_registry().factory(type);
      BOOST_TEST(f.probe("cuda", why, sizeof why) == MAMBARL_ERROR);
      CHECK_HAS(why, no_gpu);
      BOOST_TEST(f.probe("cpu", why, sizeof why) == MAMBARL_OK);
      BOOST_TEST(std::string(why).empty());
      Args args;
      args.text = config_for(type);
      args.device = "cuda";
      mambarl_policy* p = nullptr;
      char err[512];
      BOOST_TEST(f.create(&args.get(), &p, err, sizeof err) == MAMBARL_ERROR);
      BOOST_TEST(p == nullptr);
      CHECK_HAS(err, "runtime.device: cuda: " + no_gpu);
      const std::string msg = error_of([&] { PolicyHandle::create(f, args.get()); });
      CHECK_HAS(msg, "policy '" + std::string(type) + "' cannot run on device 'cuda'");
      CHECK_HAS(msg, no_gpu);
    }
  }
  BOOST_TEST(real_registry().factory("mamba1").probe("tpu", why, sizeof why) == MAMBARL_UNSUPPORTED);
  CHECK_HAS(why, "unknown device 'tpu' (known: cpu, cuda)");
}

// runtime.dtype reaches the plugin: float32 anywhere, bfloat16 only for the
// GPU actor; anything else is named.
BOOST_AUTO_TEST_CASE(dtype_is_checked_by_create) {
  const auto& f = real_registry().factory("mamba1");
  Args args;
  args.text = config_for("mamba1");
  args.dtype = "bfloat16";
  CHECK_HAS(error_of([&] { PolicyHandle::create(f, args.get()); }),
            "runtime.dtype: bfloat16 weights need runtime.device: cuda (the CPU engines compute in float32)");
  args.dtype = "float16";
  CHECK_HAS(error_of([&] { PolicyHandle::create(f, args.get()); }),
            "runtime.dtype: unknown dtype 'float16' (known: float32, bfloat16)");
  mambarl_policy_create_args null_dtype = args.get();
  null_dtype.dtype = nullptr;
  CHECK_HAS(error_of([&] { PolicyHandle::create(f, null_dtype); }), "runtime.dtype: unknown dtype ''");
  args.dtype = "float32";
  BOOST_TEST(PolicyHandle::create(f, args.get())->info().num_params > 0);
  // runtime.learner_dtype comes from the config text: a 16-bit learner needs the GPU.
  for (const char* dt : {"bfloat16", "float16"}) {
    args.text = config_for("mamba1", std::string("runtime: {learner_dtype: ") + dt + "}\n");
    CHECK_HAS(error_of([&] { PolicyHandle::create(f, args.get()); }),
              std::string("runtime.learner_dtype: ") + dt + " GEMMs need runtime.device: cuda");
  }
  args.text = config_for("mamba1", "runtime: {learner_dtype: float8}\n");
  CHECK_HAS(error_of([&] { PolicyHandle::create(f, args.get()); }),
            "runtime.learner_dtype: 'float8' is not one of float32|bfloat16|float16");
}

BOOST_AUTO_TEST_CASE(error_buffer_is_truncated_not_overrun) {
  Args args;
  args.text = config_for("mamba1", "  colour: blue\n");
  char err[16];
  std::memset(err, 'x', sizeof err);
  mambarl_policy* p = nullptr;
  BOOST_TEST(real_registry().factory("mamba1").create(&args.get(), &p, err, 8) == MAMBARL_ERROR);
  BOOST_TEST(std::strlen(err) == 7u);
  BOOST_TEST(err[8] == 'x');
}

// ---- tensor validation -------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(actor_act_names_the_bad_argument) {
  const auto& f = real_registry().factory("mamba1");
  Args args;
  args.text = config_for("mamba1");
  mambarl_policy* p = nullptr;
  char err[512];
  BOOST_REQUIRE(f.create(&args.get(), &p, err, sizeof err) == MAMBARL_OK);
  const mambarl_policy_vtable& v = *f.vtable;
  mambarl_actor* a = nullptr;
  BOOST_REQUIRE(v.actor_create(p, 8, 1, 0, &a) == MAMBARL_OK);
  std::vector<float> obs(8 * 5), act(8), logp(8), val(8);
  std::vector<uint8_t> starts(8, 1);
  const auto call = [&](mambarl_tensor o, mambarl_tensor s, mambarl_tensor ac) {
    BOOST_TEST(v.actor_act(a, o, s, ac, view_f32(logp.data(), {8}), view_f32(val.data(), {8})) == MAMBARL_ERROR);
    return std::string(v.actor_last_error(a));
  };
  BOOST_TEST(call(view_f32(obs.data(), {8, 3}), view_u8(starts.data(), {8}), view_f32(act.data(), {8, 1})) ==
             "actor_act: obs has shape (8, 3), expected (8, 4)");
  BOOST_TEST(call(view_f32(obs.data(), {8 * 4}), view_u8(starts.data(), {8}), view_f32(act.data(), {8, 1})) ==
             "actor_act: obs has shape (32), expected (8, 4)");
  CHECK_HAS(call(view_f32(obs.data(), {8, 4}), view_f32(obs.data(), {8}), view_f32(act.data(), {8, 1})),
            "actor_act: episode_start has dtype f32");
  mambarl_tensor on_gpu = view_f32(obs.data(), {8, 4});
  on_gpu.device = MAMBARL_DEVICE_CUDA;
  CHECK_HAS(call(on_gpu, view_u8(starts.data(), {8}), view_f32(act.data(), {8, 1})), "actor_act: obs is on cuda");
  CHECK_HAS(call(view_f32(static_cast<float*>(nullptr), {8, 4}), view_u8(starts.data(), {8}), view_f32(act.data(), {8, 1})),
            "actor_act: obs has a null data pointer");
  BOOST_TEST(call(view_f32(obs.data(), {8, 4}), view_u8(starts.data(), {8}), view_f32(act.data(), {8, 2})) ==
             "actor_act: actions has shape (8, 2), expected (8, 1)");
  // The same actor still works after the refusals.
  BOOST_TEST(v.actor_act(a, view_f32(obs.data(), {8, 4}), view_u8(starts.data(), {8}), view_f32(act.data(), {8, 1}),
                         view_f32(logp.data(), {8}), view_f32(val.data(), {8})) == MAMBARL_OK);
  v.actor_destroy(a);
  v.destroy(p);
}

BOOST_AUTO_TEST_CASE(train_step_names_the_bad_argument) {
  auto p = make_policy("mamba1");
  const int64_t S = p->info().state_size;
  ChunkData d(4, 2, 1, S, 3);
  mambarl_chunk c = d.view(S);
  c.returns = view_f32(d.ret.data(), {2, 4});
  BOOST_TEST(error_of([&] { p->train_step(c, 1e-3); }) == "train_step: returns has shape (2, 4), expected (4, 2)");
  c = d.view(S);
  c.initial_state = view_f32(d.init.data(), {2, S - 1});
  CHECK_HAS(error_of([&] { p->train_step(c, 1e-3); }), "train_step: initial_state has shape");
  c = d.view(S);
  c.episode_start = view_f32(d.ret.data(), {4, 2});
  CHECK_HAS(error_of([&] { p->train_step(c, 1e-3); }), "train_step: episode_start has dtype f32 (0), expected u8");
  c = d.view(S);
  c.obs = view_f32(d.obs.data(), {8, 4});
  CHECK_HAS(error_of([&] { p->train_step(c, 1e-3); }), "train_step: obs has shape (8, 4), expected (T, B, 4)");
  // Host-side vectors of the wrong size reach the plugin's check as what they are.
  auto actor = p->create_actor(2, 1);
  std::vector<float> state(5);
  CHECK_HAS(error_of([&] { actor->set_state(state); }), "actor_set_state: state has shape (5), expected (2, ");
  std::vector<uint8_t> rng(3);
  CHECK_HAS(error_of([&] { actor->set_rng(rng); }), "actor_set_rng: bytes has shape (3), expected (64)");
  std::vector<float> w(3);
  CHECK_HAS(error_of([&] { p->set_weights(w); }), "set_weights: weights has shape (3), expected (");
}

// ---- ABI 4: split-phase steps, device-enqueued steps, device chunks ---------------------

BOOST_AUTO_TEST_CASE(act_begin_end_equals_act_bitwise) {
  for (const char* type : kTypes) {
    BOOST_TEST_CONTEXT("policy " << type) {
      auto p = make_policy(type, 11);
      auto whole = p->create_actor(4, 5), split = p->create_actor(4, 5);
      BOOST_TEST(same_bits(rollout(*whole, 20), rollout(*split, 20, /*split=*/true)));
      std::vector<float> s1, s2;
      whole->get_state(s1);
      split->get_state(s2);
      BOOST_TEST(same_bits(s1, s2));
    }
  }
}

BOOST_AUTO_TEST_CASE(act_begin_end_misuse_is_refused) {
  auto p = make_policy("mamba1");
  auto a = p->create_actor(2, 1);
  std::vector<float> obs(2 * kObs, 0.25f), act(2), logp(2), val(2), state, w;
  std::vector<uint8_t> starts(2, 1), rng;
  CHECK_HAS(error_of([&] { a->act_end(act.data(), logp.data(), val.data()); }),
            "actor_act_end: no step in progress (call actor_act_begin first)");
  a->act_begin(obs.data(), starts.data());
  const std::string mid = "a step is in progress (actor_act_begin was called); call actor_act_end first";
  CHECK_HAS(error_of([&] { a->act_begin(obs.data(), starts.data()); }), "actor_act_begin: " + mid);
  CHECK_HAS(error_of([&] { a->act(obs.data(), starts.data(), act.data(), logp.data(), val.data()); }),
            "actor_act: " + mid);
  CHECK_HAS(error_of([&] { a->peek_values(obs.data(), nullptr, val.data()); }), "actor_peek_values: " + mid);
  CHECK_HAS(error_of([&] { a->reset(starts.data()); }), "actor_reset: " + mid);
  CHECK_HAS(error_of([&] { a->get_state(state); }), "actor_get_state: " + mid);
  CHECK_HAS(error_of([&] { a->set_state(state); }), "actor_set_state: " + mid);
  p->get_weights(w);
  CHECK_HAS(error_of([&] { a->set_weights(w, 1); }), "actor_set_weights: " + mid);
  CHECK_HAS(error_of([&] { a->get_rng(rng); }), "actor_get_rng: " + mid);
  CHECK_HAS(error_of([&] { a->set_rng(rng); }), "actor_set_rng: " + mid);
  CHECK_HAS(error_of([&] { a->set_greedy(true); }), "actor_set_greedy: " + mid);
  CHECK_HAS(error_of([&] { a->enqueue_get_state(nullptr, state.data()); }),
            "actor_enqueue_get_state: " + mid);
  a->act_end(act.data(), logp.data(), val.data());
  // Finished: the actor answers again.
  a->act(obs.data(), starts.data(), act.data(), logp.data(), val.data());
}

// The handle always builds well-shaped views, so end's own checks are driven
// through the C vtable: a bad output view is refused and leaves the step
// begun, so the caller can retry with good ones.
BOOST_AUTO_TEST_CASE(act_end_with_bad_outputs_can_be_retried) {
  const auto& f = real_registry().factory("gru");
  Args args;
  args.text = config_for("gru");
  mambarl_policy* p = nullptr;
  char err[512];
  BOOST_REQUIRE(f.create(&args.get(), &p, err, sizeof err) == MAMBARL_OK);
  const mambarl_policy_vtable& v = *f.vtable;
  mambarl_actor* a = nullptr;
  BOOST_REQUIRE(v.actor_create(p, 3, 1, 0, &a) == MAMBARL_OK);
  std::vector<float> obs(3 * kObs, 0.5f), act(3), logp(3), val(3);
  std::vector<uint8_t> starts(3, 1);
  BOOST_TEST(v.actor_act_begin(a, view_f32(obs.data(), {3, 5}), view_u8(starts.data(), {3})) ==
             MAMBARL_ERROR);
  BOOST_TEST(std::string(v.actor_last_error(a)) == "actor_act_begin: obs has shape (3, 5), expected (3, 4)");
  // A refused begin begins nothing.
  BOOST_TEST(v.actor_act_end(a, view_f32(act.data(), {3, 1}), view_f32(logp.data(), {3}),
                             view_f32(val.data(), {3})) == MAMBARL_ERROR);
  BOOST_REQUIRE(v.actor_act_begin(a, view_f32(obs.data(), {3, kObs}), view_u8(starts.data(), {3})) ==
                MAMBARL_OK);
  BOOST_TEST(v.actor_act_end(a, view_f32(act.data(), {3, 1}), view_f32(logp.data(), {2}),
                             view_f32(val.data(), {3})) == MAMBARL_ERROR);
  BOOST_TEST(std::string(v.actor_last_error(a)) == "actor_act_end: logp has shape (2), expected (3)");
  BOOST_TEST(v.actor_act_end(a, view_f32(act.data(), {3, 1}), view_f32(logp.data(), {3}),
                             view_f32(val.data(), {3})) == MAMBARL_OK);
  v.actor_destroy(a);
  v.destroy(p);
}

BOOST_AUTO_TEST_CASE(enqueue_on_a_cpu_actor_is_unsupported) {
  const auto& f = real_registry().factory("mamba3");
  Args args;
  args.text = config_for("mamba3");
  mambarl_policy* p = nullptr;
  char err[512];
  BOOST_REQUIRE(f.create(&args.get(), &p, err, sizeof err) == MAMBARL_OK);
  const mambarl_policy_vtable& v = *f.vtable;
  mambarl_actor* a = nullptr;
  BOOST_REQUIRE(v.actor_create(p, 2, 1, 0, &a) == MAMBARL_OK);
  mambarl_policy_info info{};
  BOOST_REQUIRE(v.info(p, &info) == MAMBARL_OK);
  // Well-formed views claiming device memory: the CPU actor never reads them.
  std::vector<float> obs(2 * kObs), act(2), logp(2), val(2), state(2 * static_cast<size_t>(info.state_size));
  std::vector<uint8_t> starts(2);
  const int32_t gpu = MAMBARL_DEVICE_CUDA;
  const std::string why = "this actor runs on the cpu; device-enqueued steps need an actor on a CUDA device";
  BOOST_TEST(v.actor_enqueue_act(a, nullptr, view_f32(obs.data(), {2, kObs}, gpu),
                                 view_u8(starts.data(), {2}, gpu), view_f32(act.data(), {2, 1}, gpu),
                                 view_f32(logp.data(), {2}, gpu),
                                 view_f32(val.data(), {2}, gpu)) == MAMBARL_UNSUPPORTED);
  CHECK_HAS(v.actor_last_error(a), "actor_enqueue_act: " + why);
  BOOST_TEST(v.actor_enqueue_peek_values(a, nullptr, view_f32(obs.data(), {2, kObs}, gpu), absent_view(),
                                         view_f32(val.data(), {2}, gpu)) == MAMBARL_UNSUPPORTED);
  CHECK_HAS(v.actor_last_error(a), "actor_enqueue_peek_values: " + why);
  BOOST_TEST(v.actor_enqueue_get_state(a, nullptr, view_f32(state.data(), {2, info.state_size}, gpu)) ==
             MAMBARL_UNSUPPORTED);
  CHECK_HAS(v.actor_last_error(a), "actor_enqueue_get_state: " + why);
  // Host views are refused as such, before the engine is asked.
  BOOST_TEST(v.actor_enqueue_peek_values(a, nullptr, view_f32(obs.data(), {2, kObs}), absent_view(),
                                         view_f32(val.data(), {2}, gpu)) == MAMBARL_ERROR);
  CHECK_HAS(v.actor_last_error(a), "actor_enqueue_peek_values: obs is on cpu, expected cuda memory");
  // A peek's needed-env mask, when given, is checked like any other view.
  const std::vector<uint8_t> needed(3, 1);
  BOOST_TEST(v.actor_peek_values(a, view_f32(obs.data(), {2, kObs}), view_u8(needed.data(), {3}),
                                 view_f32(val.data(), {2})) == MAMBARL_ERROR);
  CHECK_HAS(v.actor_last_error(a), "actor_peek_values: needed has shape (3), expected (2)");
  BOOST_TEST(v.actor_peek_values(a, view_f32(obs.data(), {2, kObs}), view_u8(needed.data(), {2}),
                                 view_f32(val.data(), {2})) == MAMBARL_OK);
  v.actor_destroy(a);
  v.destroy(p);
  // Through the handle, UNSUPPORTED is an Error carrying the same reason.
  auto policy = make_policy("mamba1");
  auto actor = policy->create_actor(2, 1);
  CHECK_HAS(error_of([&] {
              actor->enqueue_act(nullptr, obs.data(), starts.data(), act.data(), logp.data(), val.data());
            }),
            "actor_enqueue_act: " + why);
  CHECK_HAS(error_of([&] { actor->enqueue_peek_values(nullptr, obs.data(), nullptr, val.data()); }),
            "actor_enqueue_peek_values: " + why);
  state.resize(2 * static_cast<size_t>(policy->info().state_size));
  CHECK_HAS(error_of([&] { actor->enqueue_get_state(nullptr, state.data()); }),
            "actor_enqueue_get_state: " + why);
}

BOOST_AUTO_TEST_CASE(device_chunk_on_a_cpu_learner_is_refused) {
  auto p = make_policy("gru");
  const int64_t S = p->info().state_size;
  ChunkData d(4, 2, 1, S, 3);
  std::vector<float> w0, w1;
  p->get_weights(w0);
  // All on the device, or one tensor of an otherwise host chunk: each is named.
  mambarl_chunk c = d.view(S);
  for (mambarl_tensor* t :
       {&c.obs, &c.actions, &c.old_logp, &c.advantages, &c.returns, &c.episode_start, &c.initial_state})
    t->device = MAMBARL_DEVICE_CUDA;
  BOOST_TEST(error_of([&] { p->train_step(c, 1e-3); }) == "train_step: obs is on cuda, expected cpu memory");
  c = d.view(S);
  c.initial_state.device = MAMBARL_DEVICE_CUDA;
  BOOST_TEST(error_of([&] { p->train_step(c, 1e-3); }) ==
             "train_step: initial_state is on cuda, expected cpu memory");
  p->get_weights(w1);
  BOOST_TEST(same_bits(w0, w1));  // refused before anything was read
}

// ---- actor and learner behaviour --------------------------------------------------------

BOOST_AUTO_TEST_CASE(actor_round_trip_is_deterministic) {
  for (const char* type : kTypes) {
    BOOST_TEST_CONTEXT("policy " << type) {
      auto p1 = make_policy(type, 11), p2 = make_policy(type, 11);
      auto a1 = p1->create_actor(4, 5), a2 = p2->create_actor(4, 5), a3 = p1->create_actor(4, 6);
      const auto r1 = rollout(*a1, 12), r2 = rollout(*a2, 12), r3 = rollout(*a3, 12);
      BOOST_TEST(same_bits(r1, r2));  // same seeds, same bits
      BOOST_TEST(!same_bits(r1, r3));  // another actor seed samples other actions
      bool ok = true;
      for (size_t i = 0; i < r1.size(); ++i) ok = ok && std::isfinite(r1[i]);
      BOOST_TEST(ok);
      for (size_t t = 0; t < 12; ++t)
        for (size_t b = 0; b < 4; ++b) {
          const float action = r1[t * 12 + b];
          BOOST_TEST((action >= 0 && action < kActions && action == std::floor(action)));
        }
    }
  }
}

BOOST_AUTO_TEST_CASE(actor_state_and_rng_resume_bit_exactly) {
  auto p = make_policy("mamba3");
  auto a = p->create_actor(3, 2);
  rollout(*a, 5);
  std::vector<float> state;
  std::vector<uint8_t> rng;
  a->get_state(state);
  a->get_rng(rng);
  BOOST_TEST(state.size() == static_cast<size_t>(3 * p->info().state_size));
  BOOST_TEST(rng.size() == 3 * sizeof(Rng));
  // Continue without episode starts on both paths (rollout() starts at t=0),
  // so the restored state matters.
  std::vector<float> obs(3 * kObs, 0.5f), act(3), logp(3), val(3), first, second;
  std::vector<uint8_t> no_starts(3, 0);
  for (int t = 0; t < 4; ++t) {
    a->act(obs.data(), no_starts.data(), act.data(), logp.data(), val.data());
    first.insert(first.end(), logp.begin(), logp.end());
    first.insert(first.end(), act.begin(), act.end());
  }
  a->set_state(state);
  a->set_rng(rng);
  for (int t = 0; t < 4; ++t) {
    a->act(obs.data(), no_starts.data(), act.data(), logp.data(), val.data());
    second.insert(second.end(), logp.begin(), logp.end());
    second.insert(second.end(), act.begin(), act.end());
  }
  BOOST_TEST(same_bits(first, second));
  // peek_values leaves the state alone; reset(mask) zeroes only the masked env.
  std::vector<float> before, after, peek(3);
  a->get_state(before);
  a->peek_values(obs.data(), nullptr, peek.data());
  a->get_state(after);
  BOOST_TEST(same_bits(before, after));
  const std::vector<uint8_t> mask = {0, 1, 0};
  a->reset(mask.data());
  a->get_state(after);
  const size_t S = static_cast<size_t>(p->info().state_size);
  for (size_t i = 0; i < 3 * S; ++i) {
    if (i / S == 1) BOOST_TEST(after[i] == 0.0f);
    else BOOST_TEST(after[i] == before[i]);
  }
}

BOOST_AUTO_TEST_CASE(train_step_updates_and_skips_non_finite) {
  auto p = make_policy("gru");
  const int64_t S = p->info().state_size;
  std::vector<float> w0, w1;
  p->get_weights(w0);
  ChunkData d(6, 2, 1, S, 4);
  const TrainMetrics m = p->train_step(d.view(S), 1e-3);
  BOOST_TEST(!m.skipped);
  BOOST_TEST((std::isfinite(m.loss) && m.grad_norm > 0));
  p->get_weights(w1);
  BOOST_TEST(!same_bits(w0, w1));
  d.obs[3] = NAN;
  const TrainMetrics bad = p->train_step(d.view(S), 1e-3);
  BOOST_TEST(bad.skipped);
  BOOST_TEST(!p->last_skip_reason().empty());
  std::vector<float> w2;
  p->get_weights(w2);
  BOOST_TEST(same_bits(w1, w2));  // a refused update leaves the weights untouched
}

// ---- checkpoints -------------------------------------------------------------------------

// load_weights (what `mambarl eval` uses for exported files, which hold the
// same named parameters and policy_config) takes the parameters alone; a
// policy of another config refuses them and keeps its own.
BOOST_AUTO_TEST_CASE(load_weights_takes_the_parameters_of_the_same_policy_config) {
  auto a = make_policy("mamba1", 1);
  const std::string path = scratch().file("weights_only.safetensors");
  a->save(path, {}, {});
  auto b = make_policy("mamba1", 2);
  std::vector<float> wa, wb;
  a->get_weights(wa);
  b->get_weights(wb);
  BOOST_TEST(!same_bits(wa, wb));
  b->load_weights(path);
  b->get_weights(wb);
  BOOST_TEST(same_bits(wa, wb));

  auto g = make_policy("gru");
  std::vector<float> before, after;
  g->get_weights(before);
  CHECK_HAS(error_of([&] { g->load_weights(path); }), path + ": checkpoint was written by a different policy config");
  g->get_weights(after);
  BOOST_TEST(same_bits(before, after));
}

BOOST_AUTO_TEST_CASE(checkpoint_round_trip_is_bit_exact) {
  auto a = make_policy("mamba1", 1);
  const int64_t S = a->info().state_size;
  ChunkData d(5, 2, 1, S, 8);
  a->train_step(d.view(S), 1e-3);  // non-zero moments and step count
  const std::string path = scratch().file("round_trip.safetensors");
  const std::vector<float> window = {1.5f, -2.0f, 3.25f};
  Rng rng_state(42, 3);
  a->save(path, {{"runner.update", "17"}, {"note", "quote \" backslash \\ newline \n tab \t ok"}},
          {ExtraTensor::f32("runner.return_window", window), ExtraTensor::u8("runner.rng", rng_state),
           ExtraTensor::u8("runner.starts", {1, 0, 1, 1, 0, 0}, {2, 3})});

  auto b = make_policy("mamba1", 2);
  std::vector<float> wa, wb;
  a->get_weights(wa);
  b->get_weights(wb);
  BOOST_TEST(!same_bits(wa, wb));  // other seed, other init: the load has something to do
  const LoadedCheckpoint ck = b->load(path);
  b->get_weights(wb);
  BOOST_TEST(same_bits(wa, wb));
  BOOST_TEST(ck.metadata.at("runner.update") == "17");
  BOOST_TEST(ck.metadata.at("note") == "quote \" backslash \\ newline \n tab \t ok");
  BOOST_TEST(ck.metadata.count("policy_config") == 1u);
  BOOST_TEST(ck.extra.size() == 3u);
  BOOST_TEST(same_bits(ck.tensor("runner.return_window").f32(), window));
  Rng restored;
  ck.tensor("runner.rng").to_pod(restored);
  BOOST_TEST(std::memcmp(&restored, &rng_state, sizeof(Rng)) == 0);
  BOOST_TEST(ck.tensor("runner.starts").shape == (std::vector<int64_t>{2, 3}), boost::test_tools::per_element());
  CHECK_HAS(error_of([&] { ck.tensor("runner.missing"); }), "runner.missing");

  // The optimizer state came along: the next update is the same on both.
  ChunkData d2(5, 2, 1, S, 9);
  const TrainMetrics ma = a->train_step(d2.view(S), 1e-3), mb = b->train_step(d2.view(S), 1e-3);
  BOOST_TEST(ma.loss == mb.loss);
  a->get_weights(wa);
  b->get_weights(wb);
  BOOST_TEST(same_bits(wa, wb));

  // Metadata arrives even without extra tensors.
  a->save(path, {{"only", "metadata"}}, {});
  BOOST_TEST(b->load(path).metadata.at("only") == "metadata");
}

BOOST_AUTO_TEST_CASE(checkpoint_save_refuses_bad_extras) {
  auto p = make_policy("mlp");
  const std::string path = scratch().file("bad_extra.safetensors");
  CHECK_HAS(error_of([&] { p->save(path, {}, {ExtraTensor::f32("weights_hack", {1.0f})}); }), "must start with 'runner.'");
  CHECK_HAS(error_of([&] { p->save(path, {{"format", "mine"}}, {}); }), "'format' is reserved");
  CHECK_HAS(error_of([&] {
              p->save(path, {}, {ExtraTensor::f32("runner.x", {1.0f}), ExtraTensor::f32("runner.x", {2.0f})});
            }),
            "given twice");
  BOOST_TEST(!fs::exists(path));
}

BOOST_AUTO_TEST_CASE(truncated_checkpoint_leaves_weights_unchanged) {
  auto a = make_policy("mamba3", 1);
  const std::string path = scratch().file("full.safetensors"), cut = scratch().file("cut.safetensors");
  a->save(path, {{"runner.update", "1"}}, {ExtraTensor::f32("runner.w", {1.0f, 2.0f})});
  const auto size = fs::file_size(path);
  fs::copy_file(path, cut, fs::copy_options::overwrite_existing);
  fs::resize_file(cut, size - size / 3);

  auto b = make_policy("mamba3", 2);
  std::vector<float> before, after;
  b->get_weights(before);
  const std::string msg = error_of([&] { b->load(cut); });
  CHECK_HAS(msg, cut);
  b->get_weights(after);
  BOOST_TEST(same_bits(before, after));
  // A checkpoint of another config is refused the same way.
  auto other = make_policy("gru");
  CHECK_HAS(error_of([&] { other->load(path); }), "different policy config");
}

// ---- dotted overrides -------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(apply_overrides_sets_typed_values) {
  YAML::Node root = YAML::Load("policy:\n  type: mamba1\n  d_model: 64\nruntime: {seed: 1}\n");
  apply_overrides(root, {"policy.d_model=128", "policy.mamba.extra=true", "runtime.out_dir=runs/x",
                         "algo.lrs=[1, 2]", "runtime.name='007'", "runtime.seed=3", "runtime.seed=4"});
  BOOST_TEST(root["policy"]["d_model"].as<int>() == 128);
  BOOST_TEST(root["policy"]["type"].as<std::string>() == "mamba1");  // siblings kept
  BOOST_TEST(root["policy"]["mamba"]["extra"].as<bool>() == true);   // maps created on the way
  BOOST_TEST(root["runtime"]["out_dir"].as<std::string>() == "runs/x");
  BOOST_TEST(root["algo"]["lrs"].IsSequence());
  BOOST_TEST(root["algo"]["lrs"][1].as<int>() == 2);
  BOOST_TEST(root["runtime"]["name"].as<std::string>() == "007");  // quoted: a string
  BOOST_TEST(root["runtime"]["seed"].as<int>() == 4);              // later overrides win
  // The result reads back through ConfigNode like a file would.
  const ConfigNode n(root, "x.yaml");
  BOOST_TEST(n.child("policy").get<int>("d_model", 0) == 128);

  YAML::Node empty;
  apply_overrides(empty, {"a.b=1"});
  BOOST_TEST(empty["a"]["b"].as<int>() == 1);
}

// ~key deletes; the log says which override decided each key, and a later
// override of a map takes over every key below it.
BOOST_AUTO_TEST_CASE(apply_overrides_deletes_keys_and_logs_what_each_decided) {
  YAML::Node root = YAML::Load("policy:\n  type: mamba1\n  d_model: 64\n  d_state: 4\n");
  OverrideLog log;
  apply_overrides(root, {"~policy.d_state", "policy.type=gru"}, "test args", &log);
  BOOST_TEST(!root["policy"]["d_state"].IsDefined());
  BOOST_TEST(root["policy"]["d_model"].as<int>() == 64);
  BOOST_TEST(root["policy"]["type"].as<std::string>() == "gru");
  const OverrideLog::Entry* type = log.find("policy.type");
  BOOST_REQUIRE(type != nullptr);
  BOOST_TEST(type->source == "test args: override 'policy.type=gru'");
  BOOST_TEST(type->text == "policy.type=gru");
  BOOST_TEST(type->replaced == "mamba1");
  BOOST_TEST(log.find("policy.d_state")->text == "~policy.d_state");
  BOOST_TEST(log.find("policy") == nullptr);           // the file's map, two keys overridden
  BOOST_TEST(log.find("policy.d_model") == nullptr);   // from the file
  BOOST_TEST(log.find("policy.typeface") == nullptr);  // a name that starts alike is another key
  apply_overrides(root, {"policy={type: mlp}"}, "test args", &log);
  BOOST_TEST(log.find("policy.type")->text == "policy={type: mlp}");
  BOOST_TEST(log.find("policy.d_state")->text == "policy={type: mlp}");
  // A ConfigNode over the tree names the override for the keys it decided.
  const ConfigNode n(root, "x.yaml", "", std::make_shared<OverrideLog>(log));
  BOOST_TEST(n.child("policy").where("type") == "test args: override 'policy={type: mlp}'");
}

BOOST_AUTO_TEST_CASE(apply_overrides_errors_name_the_override) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"policy.d_model", "no '='"},
      {"=3", "empty key"},
      {"policy..d_model=3", "empty key component"},
      {"policy.=3", "empty key component"},
      {"policy.d_model.x=3", "'policy.d_model' is not a map"},
      {"policy.d_model=", "no value"},
      {"policy.d_model=[1, 2", "cannot parse"},
      {"~policy.nothing", "policy.nothing is not in the config (nothing to delete)"},
      {"~policy.d_model.x", "policy.d_model.x is not in the config (nothing to delete)"},
      {"~policy.d_model=64", "a deletion takes no value (write ~key.path)"},
      {"~", "empty key"},
  };
  for (const auto& [ov, why] : bad) {
    YAML::Node root = YAML::Load("policy:\n  d_model: 64\n");
    const std::string msg = error_of([&] { apply_overrides(root, {ov}, "test args"); });
    CHECK_HAS(msg, "test args");
    CHECK_HAS(msg, "'" + ov + "'");
    CHECK_HAS(msg, why);
  }
  YAML::Node seq = YAML::Load("[1, 2]");
  CHECK_HAS(error_of([&] { apply_overrides(seq, {"a=1"}); }), "'the config' is not a map");
}
