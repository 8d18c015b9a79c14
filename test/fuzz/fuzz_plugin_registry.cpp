// libFuzzer target: the plugin registry's input validation (plugin/plugin_host.cpp)
// and the tensor-view check at the ABI (plugin/tensor_view.hpp). A fake plugin
// entry point, driven by the input, registers policy and env factories whose
// ABI versions, names and null fields come from the fuzz bytes (null factories
// and duplicates included), into a registry that may already hold another
// plugin's names. Refusal must be a mambarl::Error, and all-or-none: a refused
// plugin leaves the registry exactly as it was. No dlopen is involved:
// register_plugin() is what load() calls once it has the entry symbol.
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "kernels/base/check.hpp"
#include "plugin/plugin_host.hpp"
#include "plugin/tensor_view.hpp"
#include "test/fuzz/fuzz_input.hpp"

namespace {

using mambarl::fuzz::FuzzInput;

// A function of any pointer type that does nothing; registration never calls
// what it validates, it only checks for null.
template <typename R, typename... A> R stub(A...) { return R(); }
template <typename F> void maybe(F& field, bool present) { field = present ? static_cast<F>(stub) : nullptr; }

// What the entry point reads its choices from, and where the strings and
// tables it registers live (as long as the registry: they stand for the
// loaded file's static data).
struct Plugin {
  FuzzInput* in = nullptr;
  std::deque<std::string> strings;
  std::deque<mambarl_policy_vtable> vtables;
  std::deque<mambarl_policy_factory> policies;
  std::deque<mambarl_env_factory> envs;
};
Plugin* g_plugin = nullptr;

uint32_t abi_version(FuzzInput& in) {
  switch (in.take<uint8_t>() % 4) {
    case 0: return MAMBARL_PLUGIN_ABI_VERSION + 1;
    case 1: return in.take<uint32_t>();
    default: return MAMBARL_PLUGIN_ABI_VERSION;  // mostly valid, to get past the first check
  }
}

// A name that is null, empty, one of a few that collide, or arbitrary bytes.
const char* name(Plugin& p) {
  FuzzInput& in = *p.in;
  switch (in.take<uint8_t>() % 5) {
    case 0: return nullptr;
    case 1: return "mamba1";
    case 2: return "coin_guess";
    default: return p.strings.emplace_back(in.str(24)).c_str();
  }
}

const mambarl_policy_factory* policy_factory(Plugin& p) {
  FuzzInput& in = *p.in;
  if (in.take<uint8_t>() % 8 == 0) return nullptr;
  const uint32_t present = ~in.take<uint32_t>() | in.take<uint32_t>();  // mostly set
  mambarl_policy_vtable& v = p.vtables.emplace_back();
  v.abi_version = abi_version(in);
  maybe(v.destroy, present & (1u << 0));
  maybe(v.last_error, present & (1u << 1));
  maybe(v.info, present & (1u << 2));
  maybe(v.resolved_config, present & (1u << 3));
  maybe(v.train_step, present & (1u << 4));
  maybe(v.get_weights, present & (1u << 5));
  maybe(v.set_weights, present & (1u << 6));
  maybe(v.save, present & (1u << 7));
  maybe(v.load, present & (1u << 8));
  maybe(v.actor_create, present & (1u << 9));
  maybe(v.actor_destroy, present & (1u << 10));
  maybe(v.actor_last_error, present & (1u << 11));
  maybe(v.actor_reset, present & (1u << 12));
  maybe(v.actor_act, present & (1u << 13));
  maybe(v.actor_peek_values, present & (1u << 14));
  maybe(v.actor_get_state, present & (1u << 15));
  maybe(v.actor_set_state, present & (1u << 16));
  maybe(v.actor_set_weights, present & (1u << 17));
  maybe(v.actor_get_rng, present & (1u << 18));
  maybe(v.actor_set_rng, present & (1u << 19));
  maybe(v.actor_rng_size, present & (1u << 20));
  maybe(v.actor_act_begin, present & (1u << 25));
  maybe(v.actor_act_end, present & (1u << 26));
  maybe(v.actor_enqueue_act, present & (1u << 27));
  maybe(v.actor_enqueue_peek_values, present & (1u << 28));
  maybe(v.actor_enqueue_get_state, present & (1u << 29));
  maybe(v.load_weights, present & (1u << 30));
  maybe(v.actor_set_greedy, present & (1u << 31));
  mambarl_policy_factory& f = p.policies.emplace_back();
  f.abi_version = abi_version(in);
  f.name = name(p);
  f.description = (present & (1u << 21)) ? "fuzzed" : nullptr;
  f.vtable = (present & (1u << 22)) ? &v : nullptr;
  maybe(f.create, present & (1u << 23));
  maybe(f.probe, present & (1u << 24));
  return &f;
}

const mambarl_env_factory* env_factory(Plugin& p) {
  FuzzInput& in = *p.in;
  if (in.take<uint8_t>() % 8 == 0) return nullptr;
  const uint32_t present = ~in.take<uint32_t>() | in.take<uint32_t>();
  mambarl_env_factory& f = p.envs.emplace_back();
  f.abi_version = abi_version(in);
  f.name = name(p);
  f.description = (present & 1u) ? "fuzzed" : nullptr;
  maybe(f.create, present & (1u << 1));
  maybe(f.destroy, present & (1u << 2));
  maybe(f.last_error, present & (1u << 3));
  maybe(f.reset, present & (1u << 4));
  maybe(f.step, present & (1u << 5));
  maybe(f.render, present & (1u << 6));
  maybe(f.state_size, present & (1u << 7));
  maybe(f.save_state, present & (1u << 8));
  maybe(f.load_state, present & (1u << 9));
  return &f;
}

// The fake plugin's mambarl_plugin_register: a few registrations, then a status.
mambarl_status entry(uint32_t host_abi, const mambarl_registry* reg) {
  Plugin& p = *g_plugin;
  if (host_abi != MAMBARL_PLUGIN_ABI_VERSION || reg == nullptr) __builtin_trap();  // the host's side
  const int n = p.in->take<uint8_t>() % 6;
  for (int i = 0; i < n; ++i) {
    if (p.in->flag()) reg->register_policy(reg->host, policy_factory(p));
    else reg->register_env(reg->host, env_factory(p));
  }
  return p.in->take<uint8_t>() % 8 == 0 ? MAMBARL_ERROR : MAMBARL_OK;
}

size_t registered(const mambarl::PluginRegistry& r) { return r.policy_names().size() + r.envs().size(); }

void fuzz_tensor_view(FuzzInput& in) {
  mambarl_tensor t{};
  static float cell = 0;
  t.data = in.flag() ? &cell : nullptr;
  t.dtype = in.take<int32_t>();
  t.device = in.take<int32_t>();
  t.ndim = in.take<int32_t>();
  for (int64_t& d : t.shape) d = in.take<int64_t>();
  // What the callee expects: up to 4 dims of its own (trusted sizes, but any value).
  const int64_t a = in.take<int64_t>(), b = in.take<int64_t>();
  (void)mambarl::shape_string(t);
  try {
    switch (in.take<uint8_t>() % 3) {
      case 0: mambarl::check_view("fuzz: t", t, MAMBARL_DTYPE_F32, MAMBARL_DEVICE_CPU, {a}); break;
      case 1: mambarl::check_view("fuzz: t", t, MAMBARL_DTYPE_U8, MAMBARL_DEVICE_CPU, {a, b}); break;
      default: mambarl::check_view("fuzz: t", t, MAMBARL_DTYPE_F32, MAMBARL_DEVICE_CUDA, {a, b, 4, 2}); break;
    }
  } catch (const mambarl::Error&) {
    // refused with a message naming the argument
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzInput in(data, size);
  Plugin plugin;
  plugin.in = &in;
  g_plugin = &plugin;
  mambarl::PluginRegistry registry;
  const int plugins = 1 + in.take<uint8_t>() % 3;
  for (int i = 0; i < plugins; ++i) {
    const size_t before = registered(registry);
    const std::vector<std::string> names_before = registry.policy_names();
    try {
      registry.register_plugin("fuzz" + std::to_string(i) + ".so", entry);
      if (registered(registry) == before) __builtin_trap();  // accepted, yet registered nothing
    } catch (const mambarl::Error&) {
      if (registered(registry) != before || registry.policy_names() != names_before) __builtin_trap();
    }
  }
  for (const std::string& n : registry.policy_names()) {
    if (registry.factory(n).name != n) __builtin_trap();
    (void)registry.source_of(n);
  }
  try {
    (void)registry.factory(in.str(16));
  } catch (const mambarl::Error&) {
    // unknown name: the message lists the registered ones
  }
  fuzz_tensor_view(in);
  g_plugin = nullptr;
  return 0;
}
