// A deliberately broken plugin for the loader's tests, one source built as
// several MODULEs (test/CMakeLists.txt) with compile definitions choosing the
// defect:
//   FAKE_BUILT_ABI     the ABI version it accepts (default: ours) -> refuses the host
//   FAKE_FACTORY_ABI   the abi_version its factory declares (default: ours)
//   FAKE_POLICY_NAME   the name it registers (e.g. "mamba1": a duplicate)
// Its policies never work: every function reports failure. The loader must
// reject it before anyone could call them, except in the duplicate case,
// where the factory itself is well-formed.
#include <type_traits>

#include "plugin/mambarl_plugin.h"

#ifndef FAKE_BUILT_ABI
#define FAKE_BUILT_ABI MAMBARL_PLUGIN_ABI_VERSION
#endif
#ifndef FAKE_FACTORY_ABI
#define FAKE_FACTORY_ABI MAMBARL_PLUGIN_ABI_VERSION
#endif
#ifndef FAKE_POLICY_NAME
#define FAKE_POLICY_NAME "fake"
#endif

namespace {

// Fits any vtable slot: returns "failed" in that slot's type.
template <typename R, typename... A>
R refuse(A...) {
  if constexpr (std::is_void_v<R>) return;
  else if constexpr (std::is_pointer_v<R>) return nullptr;
  else return static_cast<R>(MAMBARL_ERROR);
}

mambarl_policy_vtable make_vtable() {
  mambarl_policy_vtable v{};
  v.abi_version = MAMBARL_PLUGIN_ABI_VERSION;
  v.destroy = refuse;
  v.last_error = refuse;
  v.info = refuse;
  v.resolved_config = refuse;
  v.train_step = refuse;
  v.get_weights = refuse;
  v.set_weights = refuse;
  v.save = refuse;
  v.load = refuse;
  v.actor_create = refuse;
  v.actor_destroy = refuse;
  v.actor_last_error = refuse;
  v.actor_reset = refuse;
  v.actor_act = refuse;
  v.actor_peek_values = refuse;
  v.actor_get_state = refuse;
  v.actor_set_state = refuse;
  v.actor_set_weights = refuse;
  v.actor_get_rng = refuse;
  v.actor_set_rng = refuse;
  v.actor_rng_size = refuse;
  v.actor_act_begin = refuse;
  v.actor_act_end = refuse;
  v.actor_enqueue_act = refuse;
  v.actor_enqueue_peek_values = refuse;
  v.actor_enqueue_get_state = refuse;
  v.load_weights = refuse;
  v.actor_set_greedy = refuse;
  return v;
}

const mambarl_policy_vtable kVtable = make_vtable();
const mambarl_policy_factory kFactory = {FAKE_FACTORY_ABI, FAKE_POLICY_NAME, "test plugin", &kVtable, refuse, refuse};

}  // namespace

extern "C" MAMBARL_PLUGIN_EXPORT mambarl_status mambarl_plugin_register(uint32_t host_abi_version,
                                                                       const mambarl_registry* registry) {
  if (host_abi_version != FAKE_BUILT_ABI) return MAMBARL_ERROR;
  return registry->register_policy(registry->host, &kFactory);
}
