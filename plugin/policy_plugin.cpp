// The Mamba plugin (libmambarl_policies.so): registers four factories,
// mamba1, mamba3, gru and mlp, behind the C ABI of plugin/mambarl_plugin.h.
// One vtable serves all four; the factory's name is the policy type its
// config must declare. The engines sit behind the roles of
// plugin/engine_roles.hpp: the learner and the actors on the CPU or, with
// device "cuda", both on the GPU (every type has both engines). Every entry point
// validates its views (dtype, device, shape) and turns any exception into
// MAMBARL_ERROR plus a last_error() text: nothing unwinds into the host. An
// actor may run on another thread than its policy: it holds its own copy of
// the weights and shares only the model's immutable structure.
#include <cmath>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "kernels/base/config_node.hpp"
#include "plugin/engine_roles.hpp"
#include "plugin/host_collective.hpp"
#include "plugin/mambarl_plugin.h"
#include "plugin/tensor_view.hpp"
#include "policy/checkpoint.hpp"
#include "policy/io/safetensors.hpp"
#include "policy/io/strict_json.hpp"
#include "policy/policy_config.hpp"

struct mambarl_policy {
  std::string type;      // the factory's name, == policy.type
  std::string resolved;  // YAML of the policy section, defaults filled
  mambarl_env_info env{};
  mambarl::PolicyConfig cfg;
  mambarl::EngineChoice engine;  // where the learner and the actors run
  // The host's collective as the learner sees it (null: it trains alone);
  // declared before the learner, which holds a pointer to it.
  std::unique_ptr<mambarl::Allreduce> across;
  std::unique_ptr<mambarl::LearnerRole> learner;
  std::string last_error;
};

struct mambarl_actor {
  std::unique_ptr<mambarl::ActorRole> actor;
  int64_t B = 0, obs_dim = 0, act_width = 0, state_size = 0, num_params = 0;
  // Between a successful actor_act_begin and its actor_act_end: the role may
  // still be reading the caller's inputs or computing, so every other call
  // is refused until end.
  bool step_begun = false;
  std::string last_error;
};

namespace mambarl {
namespace {

constexpr int32_t kF32 = MAMBARL_DTYPE_F32, kU8 = MAMBARL_DTYPE_U8, kCpu = MAMBARL_DEVICE_CPU,
                  kCuda = MAMBARL_DEVICE_CUDA;

// Runs body(h) with h's last_error cleared first (a body may set it and still
// succeed: train_step's skip reason); an UnsupportedError becomes
// MAMBARL_UNSUPPORTED, any other exception MAMBARL_ERROR.
template <typename Handle, typename Body>
mambarl_status guarded(Handle* h, Body&& body) {
  if (h == nullptr) return MAMBARL_ERROR;
  try {
    h->last_error.clear();
    body(*h);
    return MAMBARL_OK;
  } catch (const UnsupportedError& e) {
    h->last_error = e.what();
    return MAMBARL_UNSUPPORTED;
  } catch (const std::exception& e) {
    h->last_error = e.what();
  } catch (...) {
    h->last_error = "unknown exception";
  }
  return MAMBARL_ERROR;
}

// NUL-terminated, truncated to the caller's buffer.
void write_text(char* buf, size_t len, const std::string& s) {
  if (buf == nullptr || len == 0) return;
  const size_t n = std::min(len - 1, s.size());
  std::memcpy(buf, s.data(), n);
  buf[n] = '\0';
}

// ---- policy types and devices -------------------------------------------------------

// Every type runs on both devices: GpuActor and GpuLearner (make_gpu_mixer)
// have an engine for each mixer.
struct PolicyType {
  const char* name;
  const char* description;
};
constexpr PolicyType kTypes[] = {
    {"mamba1", "Mamba-1 selective state-space mixer (CPU Eigen; GPU actor and learner with device cuda)"},
    {"mamba3", "Mamba-3 SISO mixer (CPU Eigen; GPU actor and learner with device cuda)"},
    {"gru", "GRU baseline mixer (CPU Eigen; GPU actor and learner with device cuda)"},
    {"mlp", "MLP baseline mixer, no memory (CPU Eigen; GPU actor and learner with device cuda)"},
};
constexpr size_t kNumTypes = sizeof(kTypes) / sizeof(kTypes[0]);

// Whether a policy can run on `device` here: MAMBARL_OK, or MAMBARL_UNSUPPORTED
// (never: a config error) / MAMBARL_ERROR (not on this machine or build) with why.
mambarl_status device_support(const std::string& device, std::string& why) {
  if (device == "cpu") return MAMBARL_OK;
  if (device != "cuda") {
    why = "unknown device '" + device + "' (known: cpu, cuda)";
    return MAMBARL_UNSUPPORTED;
  }
  why = cuda_unavailable_reason();
  return why.empty() ? MAMBARL_OK : MAMBARL_ERROR;
}

// runtime.device and runtime.dtype as the host resolved them; refuses what
// cannot run here (also for a host that skipped probe()).
EngineChoice engine_choice(const char* device, const char* dtype) {
  const std::string dev = device ? device : "", dt = dtype ? dtype : "";
  std::string why;
  if (device_support(dev, why) != MAMBARL_OK) throw Error("runtime.device: " + dev + ": " + why);
  EngineChoice e;
  e.device = dev == "cuda" ? Device::cuda : Device::cpu;
  if (dt != "float32" && dt != "bfloat16")
    throw Error("runtime.dtype: unknown dtype '" + dt + "' (known: float32, bfloat16)");
  e.bf16_weights = dt == "bfloat16";
  if (e.bf16_weights && e.device != Device::cuda)
    throw Error("runtime.dtype: bfloat16 weights need runtime.device: cuda (the CPU engines compute in float32)");
  return e;
}

// runtime.learner_dtype from the experiment's YAML (the ABI carries only the
// actor's dtype; the host has validated the key): by default the actor's
// dtype, float16 only when asked for.
Precision learner_precision(const ConfigNode& root, const char* dtype) {
  const ConfigNode rt = root.child("runtime");
  return precision_from_name(rt.get_choice("learner_dtype", dtype, {"float32", "bfloat16", "float16"}));
}

std::string emit_yaml(const YAML::Node& n) {
  YAML::Emitter e;
  e << n;
  return e.c_str();
}

// The experiment's YAML with the command-line overrides applied, exactly as
// the runner builds it (kernels/base/config_node.hpp: apply_overrides), as a
// ConfigNode whose errors name the override that set a key.
ConfigNode experiment_root(const mambarl_policy_create_args& a, const std::string& file) {
  if (a.config_text == nullptr) throw Error(file + ": create: no config text");
  YAML::Node root;
  try {
    root = YAML::Load(a.config_text);
  } catch (const YAML::ParserException& ex) {
    throw ConfigError(file + ":" + std::to_string(ex.mark.line + 1) + ":" + std::to_string(ex.mark.column + 1) +
                      ": malformed YAML: " + ex.msg);
  }
  check_yaml_bounds(root, file);  // the host checked its copy; this one is the plugin's own
  if (!root.IsDefined() || root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
  if (!root.IsMap()) throw ConfigError(file + ": the experiment config must be a YAML map");
  if (a.num_overrides < 0 || (a.num_overrides > 0 && a.overrides == nullptr))
    throw Error("create: " + std::to_string(a.num_overrides) + " overrides but no array of them");
  std::vector<std::string> overrides;
  for (int32_t i = 0; i < a.num_overrides; ++i) {
    if (a.overrides[i] == nullptr) throw Error("create: override " + std::to_string(i) + " is a null string");
    overrides.emplace_back(a.overrides[i]);
  }
  auto log = std::make_shared<OverrideLog>();
  apply_overrides(root, overrides, "command line", log.get());
  return ConfigNode(root, file, "", std::move(log));
}

void check_env(const mambarl_env_info& e) {
  MAMBARL_CHECK(e.obs_dim >= 1, "create: env.obs_dim must be >= 1, got " << e.obs_dim);
  MAMBARL_CHECK(e.action_dim >= 1, "create: env.action_dim must be >= 1, got " << e.action_dim);
  MAMBARL_CHECK(e.discrete == 0 || e.discrete == 1, "create: env.discrete must be 0 or 1, got " << e.discrete);
}

void check_learner(const mambarl_learner_config& l) {
  const auto in = [](const char* name, double v, double lo, double hi, bool hi_open) {
    const bool ok = std::isfinite(v) && v >= lo && (hi_open ? v < hi : v <= hi);
    MAMBARL_CHECK(ok, "create: learner." << name << " = " << v << " is outside " << "[" << lo << ", " << hi
                                         << (hi_open ? ")" : "]"));
  };
  const double big = 1e30;
  in("clip_eps", l.clip_eps, 1e-12, big, false);
  in("vf_coef", l.vf_coef, 0, big, false);
  in("vf_trunk_coef", l.vf_trunk_coef, 0, 1, false);
  in("ent_coef", l.ent_coef, -big, big, false);
  in("adam_beta1", l.adam_beta1, 0, 1, true);
  in("adam_beta2", l.adam_beta2, 0, 1, true);
  in("adam_eps", l.adam_eps, 1e-30, big, false);
  in("weight_decay", l.weight_decay, 0, big, false);
  in("max_grad_norm", l.max_grad_norm, -big, big, false);  // <= 0 disables clipping
}

mambarl_status create_policy(const PolicyType& type, const mambarl_policy_create_args* args,
                             mambarl_policy** out, char* error, size_t error_len) {
  try {
    if (out == nullptr) throw Error("create: null output pointer");
    *out = nullptr;
    if (args == nullptr) throw Error("create: null args");
    EngineChoice engine = engine_choice(args->device, args->dtype);
    const std::string file = args->config_file ? args->config_file : "(experiment config)";
    const ConfigNode root = experiment_root(*args, file);
    engine.learner = learner_precision(root, args->dtype);
    const ConfigNode section = root.child("policy");
    const PolicyConfig cfg = PolicyConfig::from_yaml(section, engine.device == Device::cuda);
    if (cfg.type != type.name)
      section.fail("type", "is '" + cfg.type + (section.has("type") ? "'" : "' (the default)") +
                               ", but this is the '" + type.name + "' factory");
    check_env(args->env);
    check_learner(args->learner);

    HeadSpec head;
    head.discrete = args->env.discrete != 0;
    head.action_dim = args->env.action_dim;
    PpoLossConfig loss;
    loss.clip_eps = args->learner.clip_eps;
    loss.vf_coef = args->learner.vf_coef;
    loss.vf_trunk_coef = args->learner.vf_trunk_coef;
    loss.ent_coef = args->learner.ent_coef;
    loss.normalize_advantages = args->learner.normalize_advantages != 0;
    AdamWConfig adam;  // adam.lr is unused: train_step() takes the scheduled lr
    adam.beta1 = args->learner.adam_beta1;
    adam.beta2 = args->learner.adam_beta2;
    adam.eps = args->learner.adam_eps;
    adam.weight_decay = args->learner.weight_decay;
    adam.max_grad_norm = args->learner.max_grad_norm;

    auto p = std::make_unique<mambarl_policy>();
    p->type = type.name;
    p->env = args->env;
    p->cfg = cfg;
    p->engine = engine;
    // A collective of one rank still sums (as the identity): the GPU tests
    // run the NCCL path on one device that way. The runner passes none to a
    // process training alone.
    if (args->collective) p->across = std::make_unique<HostCollective>(*args->collective);
    p->learner = make_learner(cfg, args->env.obs_dim, head, loss, adam, args->seed, engine, p->across.get());
    p->resolved = emit_yaml(cfg.to_yaml());
    *out = p.release();
    return MAMBARL_OK;
  } catch (const std::exception& e) {
    write_text(error, error_len, e.what());
  } catch (...) {
    write_text(error, error_len, "create: unknown exception");
  }
  return MAMBARL_ERROR;
}

mambarl_status probe(const char* device, char* why, size_t why_len) {
  try {
    std::string reason;
    const mambarl_status st = device_support(device ? device : "", reason);
    write_text(why, why_len, reason);
    return st;
  } catch (const std::exception& e) {
    write_text(why, why_len, e.what());
  } catch (...) {
    write_text(why, why_len, "probe: unknown exception");
  }
  return MAMBARL_ERROR;
}

// ---- learner ----------------------------------------------------------------------

int64_t num_params(const mambarl_policy& p) { return static_cast<int64_t>(p.learner->num_params()); }
int64_t state_size(const mambarl_policy& p) { return static_cast<int64_t>(p.learner->shared_model()->state_size()); }
int64_t act_width(const mambarl_policy& p) { return p.learner->shared_model()->spec().head.act_width(); }

void destroy(mambarl_policy* p) { delete p; }

const char* last_error(const mambarl_policy* p) { return p ? p->last_error.c_str() : "null policy handle"; }

mambarl_status info(mambarl_policy* p, mambarl_policy_info* out) {
  return guarded(p, [&](mambarl_policy& s) {
    if (out == nullptr) throw Error("info: null output pointer");
    out->num_params = num_params(s);
    out->state_size = state_size(s);
    out->act_width = static_cast<int32_t>(act_width(s));
    out->type = s.type.c_str();
  });
}

const char* resolved_config(mambarl_policy* p) { return p ? p->resolved.c_str() : nullptr; }

mambarl_status train_step(mambarl_policy* p, const mambarl_chunk* c, double lr, mambarl_train_metrics* out) {
  return guarded(p, [&](mambarl_policy& s) {
    if (c == nullptr || out == nullptr) throw Error("train_step: null chunk or output pointer");
    const int64_t O = s.env.obs_dim, W = act_width(s), S = state_size(s);
    // T and B come from obs; every other tensor must agree with them.
    if (c->obs.ndim != 3)
      throw Error("train_step: obs has shape " + shape_string(c->obs) + ", expected (T, B, " + std::to_string(O) + ")");
    const int64_t T = c->obs.shape[0], B = c->obs.shape[1];
    // A data-parallel replica may own none of a minibatch's sequences (B = 0).
    const int64_t min_B = s.across ? 0 : 1;
    MAMBARL_CHECK(T >= 1 && B >= min_B && T * B <= (int64_t{1} << 31) - 1,
                  "train_step: obs has shape " << shape_string(c->obs) << ": T must be >= 1, B >= " << min_B
                                               << " and T*B < 2^31");
    // A GPU learner takes a chunk in host or in device memory, the device
    // being obs's; every other tensor must be on the same one (no mixed
    // chunks). A CPU learner takes host memory only.
    const int32_t dev = s.engine.device == Device::cuda && c->obs.device == kCuda ? kCuda : kCpu;
    check_view("train_step: obs", c->obs, kF32, dev, {T, B, O});
    // The loss steps L: the last L of the T (the ones before are context).
    const int64_t L = c->actions.ndim == 3 ? c->actions.shape[0] : T;
    if (L < 1 || L > T)
      throw Error("train_step: actions has " + std::to_string(L) + " steps; the loss covers 1 to T = " +
                  std::to_string(T) + " steps (the last ones of obs)");
    check_view("train_step: actions", c->actions, kF32, dev, {L, B, W});
    check_view("train_step: old_logp", c->old_logp, kF32, dev, {L, B});
    check_view("train_step: advantages", c->advantages, kF32, dev, {L, B});
    check_view("train_step: returns", c->returns, kF32, dev, {L, B});
    check_view("train_step: episode_start", c->episode_start, kU8, dev, {T, B});
    check_view("train_step: initial_state", c->initial_state, kF32, dev, {B, S});
    MAMBARL_CHECK(std::isfinite(lr) && lr >= 0, "train_step: lr must be finite and >= 0, got " << lr);

    ChunkView v;
    v.T = static_cast<int>(T);
    v.B = static_cast<int>(B);
    v.on_device = dev == kCuda;
    v.obs = static_cast<const float*>(c->obs.data);
    v.actions = static_cast<const float*>(c->actions.data);
    v.old_logp = static_cast<const float*>(c->old_logp.data);
    v.advantages = static_cast<const float*>(c->advantages.data);
    v.returns = static_cast<const float*>(c->returns.data);
    v.episode_start = static_cast<const uint8_t*>(c->episode_start.data);
    v.initial_state = static_cast<const float*>(c->initial_state.data);
    v.context_T = static_cast<int>(T - L);
    const TrainResult r = s.learner->train_step(v, lr);
    *out = mambarl_train_metrics{r.loss.loss,      r.loss.pg_loss,   r.loss.v_loss, r.loss.entropy,
                                 r.loss.approx_kl, r.loss.clip_frac, r.grad_norm,   r.skipped ? 1 : 0};
    if (r.skipped) s.last_error = "train_step skipped: " + r.reason;
  });
}

mambarl_status get_weights(mambarl_policy* p, mambarl_tensor w) {
  return guarded(p, [&](mambarl_policy& s) {
    check_view("get_weights: weights", w, kF32, kCpu, {num_params(s)});
    s.learner->get_weights(static_cast<float*>(w.data));
  });
}

mambarl_status set_weights(mambarl_policy* p, mambarl_tensor w) {
  return guarded(p, [&](mambarl_policy& s) {
    check_view("set_weights: weights", w, kF32, kCpu, {num_params(s)});
    s.learner->set_weights(static_cast<const float*>(w.data));
  });
}

// Keys the learner's save writes itself; a caller's value would be overwritten.
const std::set<std::string>& reserved_metadata() {
  static const std::set<std::string> keys = {"format", "policy_config", "optimizer_step"};
  return keys;
}
constexpr const char* kExtraPrefix = "runner.";
bool is_extra(const std::string& name) { return name.rfind(kExtraPrefix, 0) == 0; }

std::map<std::string, std::string> parse_metadata(const char* json) {
  if (json == nullptr) return {};
  std::map<std::string, std::string> meta = parse_string_map(json, "save: metadata_json");
  for (const auto& [key, value] : meta)
    MAMBARL_CHECK(!reserved_metadata().count(key), "save: metadata key '" << key << "' is reserved for the checkpoint itself");
  return meta;
}

TensorRecord extra_record(const char* name, const mambarl_tensor& t) {
  MAMBARL_CHECK(name != nullptr, "save: an extra tensor has a null name");
  const std::string what = std::string("save: extra tensor '") + name + "'";
  MAMBARL_CHECK(is_extra(name), what << ": names of extra tensors must start with '" << kExtraPrefix << "'");
  MAMBARL_CHECK(t.dtype == kF32 || t.dtype == kU8, what << " has dtype " << t.dtype << ", expected f32 or u8");
  MAMBARL_CHECK(t.device == kCpu, what << " is on " << view_device_name(t.device) << ", expected cpu memory");
  MAMBARL_CHECK(t.ndim >= 0 && t.ndim <= 4, what << " has ndim " << t.ndim << ", expected 0..4");
  for (int i = 0; i < t.ndim; ++i) MAMBARL_CHECK(t.shape[i] >= 0, what << " has shape " << shape_string(t));
  const size_t n = static_cast<size_t>(numel(t));
  MAMBARL_CHECK(t.data != nullptr || n == 0, what << " has a null data pointer");
  return make_tensor_bytes(name, t.dtype == kF32 ? DType::F32 : DType::U8,
                           std::vector<int64_t>(t.shape, t.shape + t.ndim), t.data, n * view_dtype_size(t.dtype));
}

mambarl_status save(mambarl_policy* p, const char* path, const char* metadata_json, const char* const* names,
                    const mambarl_tensor* extra, int32_t n_extra) {
  return guarded(p, [&](mambarl_policy& s) {
    MAMBARL_CHECK(path != nullptr, "save: null path");
    MAMBARL_CHECK(n_extra >= 0 && (n_extra == 0 || (names != nullptr && extra != nullptr)),
                  "save: " << n_extra << " extra tensors but no arrays of names and views");
    const auto meta = parse_metadata(metadata_json);
    std::vector<TensorRecord> records;
    std::set<std::string> seen;
    for (int32_t i = 0; i < n_extra; ++i) {
      records.push_back(extra_record(names[i], extra[i]));
      MAMBARL_CHECK(seen.insert(records.back().name).second, "save: extra tensor '" << records.back().name << "' is given twice");
    }
    s.learner->save(path, meta, records);
  });
}

using ExtraCallback = void (*)(void*, const char*, const mambarl_tensor*, const char*);

mambarl_status load(mambarl_policy* p, const char* path, ExtraCallback on_extra, void* ctx) {
  return guarded(p, [&](mambarl_policy& s) {
    MAMBARL_CHECK(path != nullptr, "load: null path");
    // The extra tensors are checked before the learner's load commits anything,
    // so a checkpoint we cannot hand back whole leaves the policy unchanged.
    // That costs a second read of the file, once per resume.
    const SafetensorsFile pre = read_safetensors(path);
    for (const auto& t : pre.tensors)
      MAMBARL_CHECK(!is_extra(t.name) || t.dtype == DType::F32 || t.dtype == DType::U8,
                    path << ": extra tensor '" << t.name << "' is " << dtype_name(t.dtype) << "; the ABI carries f32 and u8 only");
    const SafetensorsFile f = s.learner->load(path);
    if (on_extra == nullptr) return;
    const std::string meta_json = dump_json(nlohmann::json(f.metadata), std::string(path) + ": checkpoint metadata");
    for (const auto& t : f.tensors) {
      if (!is_extra(t.name)) continue;
      mambarl_tensor view = make_view(const_cast<uint8_t*>(t.bytes.data()), t.dtype == DType::F32 ? kF32 : kU8,
                                      t.shape.data(), t.shape.size());
      on_extra(ctx, t.name.c_str(), &view, meta_json.c_str());
    }
    on_extra(ctx, nullptr, nullptr, meta_json.c_str());
  });
}

mambarl_status load_weights(mambarl_policy* p, const char* path) {
  return guarded(p, [&](mambarl_policy& s) {
    MAMBARL_CHECK(path != nullptr, "load_weights: null path");
    const std::vector<float> w = read_weights(path, s.cfg, s.learner->shared_model()->layout());
    s.learner->set_weights(w.data());
  });
}

// ---- actor ------------------------------------------------------------------------

mambarl_status actor_create(mambarl_policy* p, int32_t num_envs, uint64_t seed, int64_t first_env,
                            mambarl_actor** out) {
  return guarded(p, [&](mambarl_policy& s) {
    MAMBARL_CHECK(out != nullptr, "actor_create: null output pointer");
    *out = nullptr;
    MAMBARL_CHECK(num_envs >= 1, "actor_create: num_envs must be >= 1, got " << num_envs);
    MAMBARL_CHECK(first_env >= 0, "actor_create: first_env must be >= 0, got " << first_env);
    auto a = std::make_unique<mambarl_actor>();
    // Starts with the learner's current weights (version 0).
    a->actor = make_actor(*s.learner, s.cfg, s.engine, num_envs, seed, first_env);
    a->B = num_envs;
    a->obs_dim = s.env.obs_dim;
    a->act_width = act_width(s);
    a->state_size = state_size(s);
    a->num_params = num_params(s);
    *out = a.release();
  });
}

void actor_destroy(mambarl_actor* a) { delete a; }

const char* actor_last_error(const mambarl_actor* a) { return a ? a->last_error.c_str() : "null actor handle"; }

int64_t rng_bytes(const mambarl_actor& a) { return a.B * static_cast<int64_t>(sizeof(Rng)); }

// Refuses `fn` while a step is begun (see mambarl_actor::step_begun).
void check_idle(const mambarl_actor& a, const char* fn) {
  if (a.step_begun)
    throw Error(std::string(fn) +
                ": a step is in progress (actor_act_begin was called); call actor_act_end first");
}

mambarl_status actor_reset(mambarl_actor* a, mambarl_tensor mask) {
  return guarded(a, [&](mambarl_actor& s) {
    check_idle(s, "actor_reset");
    check_view("actor_reset: mask", mask, kU8, kCpu, {s.B});
    s.actor->reset(static_cast<const uint8_t*>(mask.data));
  });
}

mambarl_status actor_act(mambarl_actor* a, mambarl_tensor obs, mambarl_tensor starts, mambarl_tensor actions,
                         mambarl_tensor logp, mambarl_tensor values) {
  return guarded(a, [&](mambarl_actor& s) {
    check_idle(s, "actor_act");
    check_view("actor_act: obs", obs, kF32, kCpu, {s.B, s.obs_dim});
    check_view("actor_act: episode_start", starts, kU8, kCpu, {s.B});
    check_view("actor_act: actions", actions, kF32, kCpu, {s.B, s.act_width});
    check_view("actor_act: logp", logp, kF32, kCpu, {s.B});
    check_view("actor_act: values", values, kF32, kCpu, {s.B});
    s.actor->act(static_cast<const float*>(obs.data), static_cast<const uint8_t*>(starts.data),
                 static_cast<float*>(actions.data), static_cast<float*>(logp.data), static_cast<float*>(values.data));
  });
}

mambarl_status actor_peek_values(mambarl_actor* a, mambarl_tensor obs, mambarl_tensor needed,
                                 mambarl_tensor values) {
  return guarded(a, [&](mambarl_actor& s) {
    check_idle(s, "actor_peek_values");
    check_view("actor_peek_values: obs", obs, kF32, kCpu, {s.B, s.obs_dim});
    if (view_given(needed)) check_view("actor_peek_values: needed", needed, kU8, kCpu, {s.B});
    check_view("actor_peek_values: values", values, kF32, kCpu, {s.B});
    s.actor->peek_values(static_cast<const float*>(obs.data), static_cast<const uint8_t*>(needed.data),
                         static_cast<float*>(values.data));
  });
}

mambarl_status actor_get_state(mambarl_actor* a, mambarl_tensor state) {
  return guarded(a, [&](mambarl_actor& s) {
    check_idle(s, "actor_get_state");
    check_view("actor_get_state: state", state, kF32, kCpu, {s.B, s.state_size});
    s.actor->get_state(static_cast<float*>(state.data));
  });
}

mambarl_status actor_set_state(mambarl_actor* a, mambarl_tensor state) {
  return guarded(a, [&](mambarl_actor& s) {
    check_idle(s, "actor_set_state");
    check_view("actor_set_state: state", state, kF32, kCpu, {s.B, s.state_size});
    s.actor->set_state(static_cast<const float*>(state.data));
  });
}

mambarl_status actor_set_weights(mambarl_actor* a, mambarl_tensor w, int64_t version) {
  return guarded(a, [&](mambarl_actor& s) {
    check_idle(s, "actor_set_weights");
    check_view("actor_set_weights: weights", w, kF32, kCpu, {s.num_params});
    s.actor->set_weights(static_cast<const float*>(w.data), static_cast<size_t>(s.num_params), version);
  });
}

// The RNGs are plain 32-byte states (kernels/base/rng.hpp), so their bytes are the
// whole of the sampling state; a resumed actor continues the same streams.
mambarl_status actor_get_rng(mambarl_actor* a, mambarl_tensor bytes) {
  return guarded(a, [&](mambarl_actor& s) {
    check_idle(s, "actor_get_rng");
    check_view("actor_get_rng: bytes", bytes, kU8, kCpu, {rng_bytes(s)});
    s.actor->get_rngs(static_cast<Rng*>(bytes.data));
  });
}

mambarl_status actor_set_rng(mambarl_actor* a, mambarl_tensor bytes) {
  return guarded(a, [&](mambarl_actor& s) {
    check_idle(s, "actor_set_rng");
    check_view("actor_set_rng: bytes", bytes, kU8, kCpu, {rng_bytes(s)});
    s.actor->set_rngs(static_cast<const Rng*>(bytes.data));
  });
}

int64_t actor_rng_size(const mambarl_actor* a) { return a ? rng_bytes(*a) : 0; }

mambarl_status actor_set_greedy(mambarl_actor* a, int32_t greedy) {
  return guarded(a, [&](mambarl_actor& s) {
    check_idle(s, "actor_set_greedy");
    s.actor->set_greedy(greedy != 0);
  });
}

mambarl_status actor_act_begin(mambarl_actor* a, mambarl_tensor obs, mambarl_tensor starts) {
  return guarded(a, [&](mambarl_actor& s) {
    check_idle(s, "actor_act_begin");
    check_view("actor_act_begin: obs", obs, kF32, kCpu, {s.B, s.obs_dim});
    check_view("actor_act_begin: episode_start", starts, kU8, kCpu, {s.B});
    s.actor->act_begin(static_cast<const float*>(obs.data), static_cast<const uint8_t*>(starts.data));
    s.step_begun = true;
  });
}

mambarl_status actor_act_end(mambarl_actor* a, mambarl_tensor actions, mambarl_tensor logp,
                             mambarl_tensor values) {
  return guarded(a, [&](mambarl_actor& s) {
    if (!s.step_begun) throw Error("actor_act_end: no step in progress (call actor_act_begin first)");
    // Bad output views leave the step begun: the caller may retry with good ones.
    check_view("actor_act_end: actions", actions, kF32, kCpu, {s.B, s.act_width});
    check_view("actor_act_end: logp", logp, kF32, kCpu, {s.B});
    check_view("actor_act_end: values", values, kF32, kCpu, {s.B});
    // The step is over once the role has been asked to finish it, also if that
    // fails (a device error): a second end would wait for nothing.
    s.step_begun = false;
    s.actor->act_end(static_cast<float*>(actions.data), static_cast<float*>(logp.data),
                     static_cast<float*>(values.data));
  });
}

// `stream` is the caller's cudaStream_t; null is the legacy default stream,
// which works eagerly but cannot be captured.
mambarl_status actor_enqueue_act(mambarl_actor* a, void* stream, mambarl_tensor obs, mambarl_tensor starts,
                                 mambarl_tensor actions, mambarl_tensor logp, mambarl_tensor values) {
  return guarded(a, [&](mambarl_actor& s) {
    check_idle(s, "actor_enqueue_act");
    check_view("actor_enqueue_act: obs", obs, kF32, kCuda, {s.B, s.obs_dim});
    check_view("actor_enqueue_act: episode_start", starts, kU8, kCuda, {s.B});
    check_view("actor_enqueue_act: actions", actions, kF32, kCuda, {s.B, s.act_width});
    check_view("actor_enqueue_act: logp", logp, kF32, kCuda, {s.B});
    check_view("actor_enqueue_act: values", values, kF32, kCuda, {s.B});
    s.actor->enqueue_act(stream, static_cast<const float*>(obs.data),
                         static_cast<const uint8_t*>(starts.data), static_cast<float*>(actions.data),
                         static_cast<float*>(logp.data), static_cast<float*>(values.data));
  });
}

mambarl_status actor_enqueue_peek_values(mambarl_actor* a, void* stream, mambarl_tensor obs,
                                         mambarl_tensor needed, mambarl_tensor values) {
  return guarded(a, [&](mambarl_actor& s) {
    check_idle(s, "actor_enqueue_peek_values");
    check_view("actor_enqueue_peek_values: obs", obs, kF32, kCuda, {s.B, s.obs_dim});
    if (view_given(needed)) check_view("actor_enqueue_peek_values: needed", needed, kU8, kCuda, {s.B});
    check_view("actor_enqueue_peek_values: values", values, kF32, kCuda, {s.B});
    s.actor->enqueue_peek_values(stream, static_cast<const float*>(obs.data),
                                 static_cast<const uint8_t*>(needed.data), static_cast<float*>(values.data));
  });
}

mambarl_status actor_enqueue_get_state(mambarl_actor* a, void* stream, mambarl_tensor state) {
  return guarded(a, [&](mambarl_actor& s) {
    check_idle(s, "actor_enqueue_get_state");
    check_view("actor_enqueue_get_state: state", state, kF32, kCuda, {s.B, s.state_size});
    s.actor->enqueue_get_state(stream, static_cast<float*>(state.data));
  });
}

// ---- registration -------------------------------------------------------------------

const mambarl_policy_vtable& vtable() {
  static const mambarl_policy_vtable v = [] {
    mambarl_policy_vtable t{};
    t.abi_version = MAMBARL_PLUGIN_ABI_VERSION;
    t.destroy = destroy;
    t.last_error = last_error;
    t.info = info;
    t.resolved_config = resolved_config;
    t.train_step = train_step;
    t.get_weights = get_weights;
    t.set_weights = set_weights;
    t.save = save;
    t.load = load;
    t.actor_create = actor_create;
    t.actor_destroy = actor_destroy;
    t.actor_last_error = actor_last_error;
    t.actor_reset = actor_reset;
    t.actor_act = actor_act;
    t.actor_peek_values = actor_peek_values;
    t.actor_get_state = actor_get_state;
    t.actor_set_state = actor_set_state;
    t.actor_set_weights = actor_set_weights;
    t.actor_get_rng = actor_get_rng;
    t.actor_set_rng = actor_set_rng;
    t.actor_rng_size = actor_rng_size;
    t.actor_act_begin = actor_act_begin;
    t.actor_act_end = actor_act_end;
    t.actor_enqueue_act = actor_enqueue_act;
    t.actor_enqueue_peek_values = actor_enqueue_peek_values;
    t.actor_enqueue_get_state = actor_enqueue_get_state;
    t.load_weights = load_weights;
    t.actor_set_greedy = actor_set_greedy;
    return t;
  }();
  return v;
}

// create() is told nothing about its factory, so each type gets its own; probe()
// answers the same for every type (each has engines on both devices).
template <size_t I>
mambarl_status create_type(const mambarl_policy_create_args* args, mambarl_policy** out, char* error,
                           size_t error_len) {
  return create_policy(kTypes[I], args, out, error, error_len);
}

template <size_t... I>
std::vector<mambarl_policy_factory> make_factories(std::index_sequence<I...>) {
  return {mambarl_policy_factory{MAMBARL_PLUGIN_ABI_VERSION, kTypes[I].name, kTypes[I].description, &vtable(),
                                 create_type<I>, &probe}...};
}

const std::vector<mambarl_policy_factory>& factories() {
  static const std::vector<mambarl_policy_factory> f = make_factories(std::make_index_sequence<kNumTypes>{});
  return f;
}

}  // namespace
}  // namespace mambarl

extern "C" MAMBARL_PLUGIN_EXPORT mambarl_status mambarl_plugin_register(uint32_t host_abi_version,
                                                                       const mambarl_registry* registry) {
  if (host_abi_version != MAMBARL_PLUGIN_ABI_VERSION) return MAMBARL_ERROR;
  if (registry == nullptr || registry->abi_version != MAMBARL_PLUGIN_ABI_VERSION ||
      registry->register_policy == nullptr)
    return MAMBARL_ERROR;
  try {
    for (const auto& f : mambarl::factories())
      if (registry->register_policy(registry->host, &f) != MAMBARL_OK) return MAMBARL_ERROR;
  } catch (...) {  // allocating the factory table; nothing may unwind into the host
    return MAMBARL_ERROR;
  }
  return MAMBARL_OK;
}
