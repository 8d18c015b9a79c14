#include "plugin/plugin_host.hpp"

#include <dlfcn.h>

#include <exception>
#include <filesystem>
#include <utility>

#include "plugin/tensor_view.hpp"
#include "policy/io/strict_json.hpp"  // the metadata codec of save()/load(): no policy engine

namespace mambarl {

namespace fs = std::filesystem;

// ---- registry -------------------------------------------------------------------

namespace {

// Null function pointers of a vtable, by field name ("" when complete).
std::string missing_vtable_fields(const mambarl_policy_vtable& v) {
  const std::pair<const char*, bool> fields[] = {
      {"destroy", v.destroy != nullptr},
      {"last_error", v.last_error != nullptr},
      {"info", v.info != nullptr},
      {"resolved_config", v.resolved_config != nullptr},
      {"train_step", v.train_step != nullptr},
      {"get_weights", v.get_weights != nullptr},
      {"set_weights", v.set_weights != nullptr},
      {"save", v.save != nullptr},
      {"load", v.load != nullptr},
      {"actor_create", v.actor_create != nullptr},
      {"actor_destroy", v.actor_destroy != nullptr},
      {"actor_last_error", v.actor_last_error != nullptr},
      {"actor_reset", v.actor_reset != nullptr},
      {"actor_act", v.actor_act != nullptr},
      {"actor_peek_values", v.actor_peek_values != nullptr},
      {"actor_get_state", v.actor_get_state != nullptr},
      {"actor_set_state", v.actor_set_state != nullptr},
      {"actor_set_weights", v.actor_set_weights != nullptr},
      {"actor_get_rng", v.actor_get_rng != nullptr},
      {"actor_set_rng", v.actor_set_rng != nullptr},
      {"actor_rng_size", v.actor_rng_size != nullptr},
      {"actor_act_begin", v.actor_act_begin != nullptr},
      {"actor_act_end", v.actor_act_end != nullptr},
      {"actor_enqueue_act", v.actor_enqueue_act != nullptr},
      {"actor_enqueue_peek_values", v.actor_enqueue_peek_values != nullptr},
      {"actor_enqueue_get_state", v.actor_enqueue_get_state != nullptr},
      {"load_weights", v.load_weights != nullptr},
      {"actor_set_greedy", v.actor_set_greedy != nullptr},
  };
  std::string out;
  for (const auto& [name, ok] : fields)
    if (!ok) out += (out.empty() ? "" : ", ") + std::string(name);
  return out;
}

// Why `f` cannot be registered ("" when it can). The ABI version is checked
// before any other field is read: another version may lay the struct out differently.
std::string factory_problem(const mambarl_policy_factory* f) {
  const std::string ours = std::to_string(MAMBARL_PLUGIN_ABI_VERSION);
  if (f == nullptr) return "registered a null factory";
  if (f->abi_version != MAMBARL_PLUGIN_ABI_VERSION)
    return "registered a factory with abi_version " + std::to_string(f->abi_version) + " (expected " + ours + ")";
  if (f->name == nullptr || f->name[0] == '\0') return "registered a factory with no name";
  const std::string who = "factory '" + std::string(f->name) + "'";
  if (f->description == nullptr) return who + " has a null description";
  if (f->create == nullptr) return who + " has a null create()";
  if (f->probe == nullptr) return who + " has a null probe()";
  if (f->vtable == nullptr) return who + " has a null vtable";
  if (f->vtable->abi_version != MAMBARL_PLUGIN_ABI_VERSION)
    return who + " has a vtable with abi_version " + std::to_string(f->vtable->abi_version) +
           " (expected " + ours + ")";
  const std::string missing = missing_vtable_fields(*f->vtable);
  if (!missing.empty()) return who + " has null vtable functions: " + missing;
  return "";
}

// Why env factory `f` cannot be registered ("" when it can); the ABI version first.
std::string env_factory_problem(const mambarl_env_factory* f) {
  if (f == nullptr) return "registered a null env factory";
  if (f->abi_version != MAMBARL_PLUGIN_ABI_VERSION)
    return "registered an env factory with abi_version " + std::to_string(f->abi_version) + " (expected " +
           std::to_string(MAMBARL_PLUGIN_ABI_VERSION) + ")";
  if (f->name == nullptr || f->name[0] == '\0') return "registered an env factory with no name";
  const std::pair<const char*, bool> fields[] = {
      {"description", f->description != nullptr}, {"create", f->create != nullptr},
      {"destroy", f->destroy != nullptr},         {"last_error", f->last_error != nullptr},
      {"reset", f->reset != nullptr},             {"step", f->step != nullptr},
      {"render", f->render != nullptr},           {"state_size", f->state_size != nullptr},
      {"save_state", f->save_state != nullptr},   {"load_state", f->load_state != nullptr},
  };
  std::string missing;
  for (const auto& [name, ok] : fields)
    if (!ok) missing += (missing.empty() ? "" : ", ") + std::string(name);
  return missing.empty() ? "" : "env factory '" + std::string(f->name) + "' has null fields: " + missing;
}

}  // namespace

void PluginRegistry::load(const std::string& path) {
  const auto fail = [&](const std::string& why) -> void {
    throw Error("plugin " + path + ": " + why);
  };
  // A name without a slash would make dlopen search the library path; we mean the file.
  const std::string file = path.find('/') == std::string::npos ? "./" + path : path;
  void* handle = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* e = dlerror();
    fail(std::string("cannot load: ") + (e ? e : "dlopen failed"));
  }
  dlerror();  // clear, so a null from dlsym is told apart from a null-valued symbol
  void* sym = dlsym(handle, MAMBARL_PLUGIN_ENTRY);
  if (sym == nullptr) fail("not a mambarl plugin: no symbol " MAMBARL_PLUGIN_ENTRY);
  register_plugin(path, reinterpret_cast<mambarl_plugin_register_fn>(sym));
}

void PluginRegistry::register_plugin(const std::string& path, mambarl_plugin_register_fn entry) {
  const auto fail = [&](const std::string& why) -> void {
    throw Error("plugin " + path + ": " + why);
  };
  // Registration is collected first and committed only if the whole plugin is good.
  struct Pending {
    const PluginRegistry* registry;
    const std::string* path;
    std::vector<Entry> entries;
    std::vector<EnvEntry> envs;
    std::string problem;  // the first one
  } pending{this, &path, {}, {}, {}};
  mambarl_registry reg{};
  reg.abi_version = MAMBARL_PLUGIN_ABI_VERSION;
  reg.host = &pending;
  reg.register_policy = [](void* host, const mambarl_policy_factory* f) -> mambarl_status {
    auto& p = *static_cast<Pending*>(host);
    try {
      std::string why = factory_problem(f);
      if (why.empty()) {
        const std::string name = f->name;
        const auto it = p.registry->entries_.find(name);
        if (it != p.registry->entries_.end())
          why = "policy '" + name + "' is already registered by " + it->second.file;
        for (const auto& e : p.entries)
          if (e.factory.name == name) why = "registers policy '" + name + "' twice";
      }
      if (!why.empty()) {
        if (p.problem.empty()) p.problem = why;
        return MAMBARL_ERROR;
      }
      p.entries.push_back(Entry{*f, *p.path});
      return MAMBARL_OK;
    } catch (const std::exception& e) {  // never unwind into the plugin
      if (p.problem.empty()) p.problem = e.what();
      return MAMBARL_ERROR;
    }
  };
  reg.register_env = [](void* host, const mambarl_env_factory* f) -> mambarl_status {
    auto& p = *static_cast<Pending*>(host);
    try {
      std::string why = env_factory_problem(f);
      if (why.empty()) {
        const std::string name = f->name;
        const auto it = p.registry->envs_.find(name);
        if (it != p.registry->envs_.end()) why = "env '" + name + "' is already registered by " + it->second.file;
        for (const auto& e : p.envs)
          if (e.factory.name == name) why = "registers env '" + name + "' twice";
      }
      if (!why.empty()) {
        if (p.problem.empty()) p.problem = why;
        return MAMBARL_ERROR;
      }
      p.envs.push_back(EnvEntry{*f, *p.path});
      return MAMBARL_OK;
    } catch (const std::exception& e) {  // never unwind into the plugin
      if (p.problem.empty()) p.problem = e.what();
      return MAMBARL_ERROR;
    }
  };
  const mambarl_status st = entry(MAMBARL_PLUGIN_ABI_VERSION, &reg);
  if (!pending.problem.empty()) fail(pending.problem);
  if (st != MAMBARL_OK)
    fail("built for another ABI version (it refused host ABI version " +
         std::to_string(MAMBARL_PLUGIN_ABI_VERSION) + ")");
  if (pending.entries.empty() && pending.envs.empty()) fail("registered no policies and no envs");
  for (auto& e : pending.entries) {
    const std::string name = e.factory.name;
    entries_.emplace(name, std::move(e));
  }
  for (auto& e : pending.envs) {
    const std::string name = e.factory.name;
    envs_.emplace(name, std::move(e));
  }
}

std::vector<std::string> PluginRegistry::policy_names() const {
  std::vector<std::string> names;
  for (const auto& kv : entries_) names.push_back(kv.first);
  return names;
}

const PluginRegistry::Entry& PluginRegistry::entry(const std::string& name) const {
  const auto it = entries_.find(name);
  if (it == entries_.end()) {
    std::string known;
    for (const auto& kv : entries_) known += (known.empty() ? "" : ", ") + kv.first;
    throw Error("unknown policy '" + name + "' (registered: " + (known.empty() ? "none, no plugin loaded" : known) + ")");
  }
  return it->second;
}

const mambarl_policy_factory& PluginRegistry::factory(const std::string& name) const {
  return entry(name).factory;
}

std::string PluginRegistry::source_of(const std::string& name) const { return entry(name).file; }

std::string default_plugin_path() {
  const char* kName = "libmambarl_policies.so";
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return kName;
  const fs::path dir = exe.parent_path();
  const fs::path in_lib = dir.parent_path() / "lib" / kName;
  if (fs::exists(in_lib, ec)) return in_lib.string();
  return (dir / kName).string();
}

// ---- extra tensors --------------------------------------------------------------------

namespace {
int64_t product(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}
std::vector<int64_t> shape_or_length(std::vector<int64_t> shape, size_t n) {
  return shape.empty() ? std::vector<int64_t>{static_cast<int64_t>(n)} : shape;
}
}  // namespace

ExtraTensor ExtraTensor::f32(std::string name, std::vector<float> data, std::vector<int64_t> shape) {
  ExtraTensor t;
  t.name = std::move(name);
  t.dtype = MAMBARL_DTYPE_F32;
  t.shape = shape_or_length(std::move(shape), data.size());
  t.floats = std::move(data);
  MAMBARL_CHECK(product(t.shape) == static_cast<int64_t>(t.floats.size()),
                "extra tensor '" << t.name << "': shape holds " << product(t.shape) << " values, data has "
                                 << t.floats.size());
  return t;
}

ExtraTensor ExtraTensor::u8(std::string name, std::vector<uint8_t> data, std::vector<int64_t> shape) {
  ExtraTensor t;
  t.name = std::move(name);
  t.dtype = MAMBARL_DTYPE_U8;
  t.shape = shape_or_length(std::move(shape), data.size());
  t.bytes = std::move(data);
  MAMBARL_CHECK(product(t.shape) == static_cast<int64_t>(t.bytes.size()),
                "extra tensor '" << t.name << "': shape holds " << product(t.shape) << " values, data has "
                                 << t.bytes.size());
  return t;
}

int64_t ExtraTensor::numel() const { return product(shape); }

const std::vector<float>& ExtraTensor::f32() const {
  if (dtype != MAMBARL_DTYPE_F32)
    throw Error("checkpoint tensor '" + name + "' is " + view_dtype_name(dtype) + ", expected f32");
  return floats;
}

void ExtraTensor::copy_f32(std::vector<float>& out) const {
  const auto& v = f32();
  if (v.size() != out.size())
    throw Error("checkpoint tensor '" + name + "' has " + std::to_string(v.size()) + " values, this run expects " +
                std::to_string(out.size()));
  std::copy(v.begin(), v.end(), out.begin());
}

void ExtraTensor::check_u8_size(size_t n) const {
  if (dtype != MAMBARL_DTYPE_U8)
    throw Error("checkpoint tensor '" + name + "' is " + view_dtype_name(dtype) + ", expected u8");
  if (bytes.size() != n)
    throw Error("checkpoint tensor '" + name + "' has " + std::to_string(bytes.size()) + " bytes, this run expects " +
                std::to_string(n));
}

void ExtraTensor::copy_u8(std::vector<uint8_t>& out) const {
  check_u8_size(out.size());
  std::copy(bytes.begin(), bytes.end(), out.begin());
}

const ExtraTensor* LoadedCheckpoint::find(const std::string& name) const {
  for (const auto& t : extra)
    if (t.name == name) return &t;
  return nullptr;
}

const ExtraTensor& LoadedCheckpoint::tensor(const std::string& name) const {
  if (const ExtraTensor* t = find(name)) return *t;
  throw Error("checkpoint has no tensor '" + name + "'");
}

// ---- actor ------------------------------------------------------------------------------

namespace {
constexpr int32_t kDeviceCuda = MAMBARL_DEVICE_CUDA;

// A view of a whole vector as (rows, cols) when its size matches, else as the
// 1-D length it really has, so the plugin's shape check reports the mismatch.
mambarl_tensor f32_matrix(const float* p, size_t n, int64_t rows, int64_t cols) {
  if (static_cast<int64_t>(n) == rows * cols) return view_f32(p, {rows, cols});
  return view_f32(p, {static_cast<int64_t>(n)});
}
}  // namespace

ActorHandle::ActorHandle(const mambarl_policy_vtable* vt, mambarl_actor* a, int num_envs,
                         const mambarl_policy_info& info, int obs_dim, long long weights_version)
    : vt_(vt), a_(a), B_(num_envs), obs_dim_(obs_dim), info_(info), version_(weights_version) {}

ActorHandle::~ActorHandle() { vt_->actor_destroy(a_); }

void ActorHandle::check(mambarl_status s, const char* what) const {
  if (s == MAMBARL_OK) return;
  const char* e = vt_->actor_last_error(a_);
  throw Error(e && *e ? std::string(e) : std::string(what) + " failed (the plugin gave no reason)");
}

void ActorHandle::act(const float* obs, const uint8_t* starts, float* actions, float* logp, float* values) {
  check(vt_->actor_act(a_, view_f32(obs, {B_, obs_dim_}), view_u8(starts, {B_}),
                       view_f32(actions, {B_, info_.act_width}), view_f32(logp, {B_}), view_f32(values, {B_})),
        "actor_act");
}

void ActorHandle::peek_values(const float* obs, const uint8_t* needed, float* values) {
  check(vt_->actor_peek_values(a_, view_f32(obs, {B_, obs_dim_}),
                               needed ? view_u8(needed, {B_}) : absent_view(), view_f32(values, {B_})),
        "actor_peek_values");
}

void ActorHandle::reset(const uint8_t* mask) { check(vt_->actor_reset(a_, view_u8(mask, {B_})), "actor_reset"); }

void ActorHandle::get_state(std::vector<float>& state) {
  state.resize(static_cast<size_t>(B_) * static_cast<size_t>(info_.state_size));
  get_state(state.data());
}

void ActorHandle::get_state(float* state) {
  check(vt_->actor_get_state(a_, view_f32(state, {B_, info_.state_size})), "actor_get_state");
}

void ActorHandle::set_state(const std::vector<float>& state) {
  check(vt_->actor_set_state(a_, f32_matrix(state.data(), state.size(), B_, info_.state_size)), "actor_set_state");
}

void ActorHandle::set_weights(const std::vector<float>& weights, long long version) {
  check(vt_->actor_set_weights(a_, view_f32(weights.data(), {static_cast<int64_t>(weights.size())}), version),
        "actor_set_weights");
  version_ = version;
}

void ActorHandle::get_rng(std::vector<uint8_t>& bytes) {
  bytes.resize(static_cast<size_t>(vt_->actor_rng_size(a_)));
  check(vt_->actor_get_rng(a_, view_u8(bytes.data(), {static_cast<int64_t>(bytes.size())})), "actor_get_rng");
}

void ActorHandle::set_rng(const std::vector<uint8_t>& bytes) {
  check(vt_->actor_set_rng(a_, view_u8(bytes.data(), {static_cast<int64_t>(bytes.size())})), "actor_set_rng");
}

void ActorHandle::set_greedy(bool greedy) {
  check(vt_->actor_set_greedy(a_, greedy ? 1 : 0), "actor_set_greedy");
}

void ActorHandle::act_begin(const float* obs, const uint8_t* starts) {
  check(vt_->actor_act_begin(a_, view_f32(obs, {B_, obs_dim_}), view_u8(starts, {B_})), "actor_act_begin");
}

void ActorHandle::act_end(float* actions, float* logp, float* values) {
  check(vt_->actor_act_end(a_, view_f32(actions, {B_, info_.act_width}), view_f32(logp, {B_}),
                           view_f32(values, {B_})),
        "actor_act_end");
}

// MAMBARL_UNSUPPORTED (an actor not on a GPU) is an Error like any other
// failure here; its last_error says why.
void ActorHandle::enqueue_act(void* stream, const float* obs, const uint8_t* starts, float* actions,
                              float* logp, float* values) {
  check(vt_->actor_enqueue_act(a_, stream, view_f32(obs, {B_, obs_dim_}, kDeviceCuda),
                               view_u8(starts, {B_}, kDeviceCuda),
                               view_f32(actions, {B_, info_.act_width}, kDeviceCuda),
                               view_f32(logp, {B_}, kDeviceCuda), view_f32(values, {B_}, kDeviceCuda)),
        "actor_enqueue_act");
}

void ActorHandle::enqueue_peek_values(void* stream, const float* obs, const uint8_t* needed, float* values) {
  check(vt_->actor_enqueue_peek_values(a_, stream, view_f32(obs, {B_, obs_dim_}, kDeviceCuda),
                                       needed ? view_u8(needed, {B_}, kDeviceCuda) : absent_view(),
                                       view_f32(values, {B_}, kDeviceCuda)),
        "actor_enqueue_peek_values");
}

void ActorHandle::enqueue_get_state(void* stream, float* state) {
  check(vt_->actor_enqueue_get_state(a_, stream, view_f32(state, {B_, info_.state_size}, kDeviceCuda)),
        "actor_enqueue_get_state");
}

// ---- policy -----------------------------------------------------------------------------

std::unique_ptr<PolicyHandle> PolicyHandle::create(const mambarl_policy_factory& f,
                                                   const mambarl_policy_create_args& args) {
  const std::string device = args.device ? args.device : "(null)";
  char why[1024] = {0};
  if (f.probe(args.device, why, sizeof why) != MAMBARL_OK)
    throw Error("policy '" + std::string(f.name) + "' cannot run on device '" + device + "': " +
                (why[0] ? why : "the plugin gave no reason"));
  std::vector<char> error(4096, '\0');
  mambarl_policy* p = nullptr;
  const mambarl_status st = f.create(&args, &p, error.data(), error.size());
  error.back() = '\0';  // whatever the plugin wrote, the string ends in our buffer
  if (st != MAMBARL_OK || p == nullptr) {
    throw Error(error[0] ? std::string(error.data())
                         : "policy '" + std::string(f.name) + "': create() failed (the plugin gave no reason)");
  }
  std::unique_ptr<PolicyHandle> h(new PolicyHandle(f.vtable, p, args.env));
  h->check(f.vtable->info(p, &h->info_), "info");
  return h;
}

PolicyHandle::PolicyHandle(const mambarl_policy_vtable* vt, mambarl_policy* p, const mambarl_env_info& env)
    : vt_(vt), p_(p), env_(env) {}

PolicyHandle::~PolicyHandle() { vt_->destroy(p_); }

void PolicyHandle::check(mambarl_status s, const char* what) const {
  if (s == MAMBARL_OK) return;
  const char* e = vt_->last_error(p_);
  throw Error(e && *e ? std::string(e) : std::string(what) + " failed (the plugin gave no reason)");
}

std::string PolicyHandle::resolved_config() const {
  const char* y = vt_->resolved_config(p_);
  if (y == nullptr) check(MAMBARL_ERROR, "resolved_config");
  return y;
}

TrainMetrics PolicyHandle::train_step(const mambarl_chunk& chunk, double lr) {
  mambarl_train_metrics m{};
  check(vt_->train_step(p_, &chunk, lr, &m), "train_step");
  TrainMetrics r;
  r.loss = m.loss;
  r.pg_loss = m.pg_loss;
  r.v_loss = m.v_loss;
  r.entropy = m.entropy;
  r.approx_kl = m.approx_kl;
  r.clip_frac = m.clip_frac;
  r.grad_norm = m.grad_norm;
  r.skipped = m.skipped != 0;
  if (r.skipped) {
    const char* e = vt_->last_error(p_);
    skip_reason_ = e && *e ? e : "the plugin gave no reason";
  }
  return r;
}

void PolicyHandle::get_weights(std::vector<float>& weights) {
  weights.resize(static_cast<size_t>(info_.num_params));
  check(vt_->get_weights(p_, view_f32(weights.data(), {info_.num_params})), "get_weights");
}

void PolicyHandle::set_weights(const std::vector<float>& weights) {
  check(vt_->set_weights(p_, view_f32(weights.data(), {static_cast<int64_t>(weights.size())})), "set_weights");
}

void PolicyHandle::save(const std::string& path, const std::map<std::string, std::string>& metadata,
                        const std::vector<ExtraTensor>& extra) {
  const std::string meta_json = dump_json(nlohmann::json(metadata), path + ": checkpoint metadata");
  std::vector<const char*> names;         // (n_extra)
  std::vector<mambarl_tensor> views;      // (n_extra)
  for (const auto& t : extra) {
    void* data = t.dtype == MAMBARL_DTYPE_F32 ? static_cast<void*>(const_cast<float*>(t.floats.data()))
                                              : static_cast<void*>(const_cast<uint8_t*>(t.bytes.data()));
    const size_t held = t.dtype == MAMBARL_DTYPE_F32 ? t.floats.size() : t.bytes.size();
    MAMBARL_CHECK(t.numel() == static_cast<int64_t>(held),
                  "save: extra tensor '" << t.name << "' has shape of " << t.numel() << " values but holds " << held);
    names.push_back(t.name.c_str());
    views.push_back(make_view(data, t.dtype, t.shape.data(), t.shape.size()));
  }
  check(vt_->save(p_, path.c_str(), meta_json.c_str(), names.data(), views.data(),
                  static_cast<int32_t>(views.size())),
        "save");
}

LoadedCheckpoint PolicyHandle::load(const std::string& path) {
  struct Sink {
    LoadedCheckpoint ck;
    std::string meta_json;
    std::exception_ptr error;  // kept until the plugin has returned: no unwinding through C
  } sink;
  const auto on_extra = [](void* ctx, const char* name, const mambarl_tensor* t, const char* meta) {
    auto& s = *static_cast<Sink*>(ctx);
    if (s.error) return;
    try {
      if (meta) s.meta_json = meta;
      if (name == nullptr || t == nullptr) return;
      MAMBARL_CHECK(t->ndim >= 0 && t->ndim <= 4, "load: tensor '" << name << "' has ndim " << t->ndim);
      const std::vector<int64_t> shape(t->shape, t->shape + t->ndim);
      const size_t n = static_cast<size_t>(numel(*t));
      if (t->dtype == MAMBARL_DTYPE_F32) {
        const float* p = static_cast<const float*>(t->data);
        s.ck.extra.push_back(ExtraTensor::f32(name, std::vector<float>(p, p + n), shape));
      } else if (t->dtype == MAMBARL_DTYPE_U8) {
        const uint8_t* p = static_cast<const uint8_t*>(t->data);
        s.ck.extra.push_back(ExtraTensor::u8(name, std::vector<uint8_t>(p, p + n), shape));
      } else {
        MAMBARL_FAIL("load: tensor '" << name << "' has dtype " << t->dtype);
      }
    } catch (...) {
      s.error = std::current_exception();
    }
  };
  check(vt_->load(p_, path.c_str(), on_extra, &sink), "load");
  if (sink.error) std::rethrow_exception(sink.error);
  sink.ck.metadata = parse_string_map(sink.meta_json, path + ": checkpoint metadata from the plugin");
  return std::move(sink.ck);
}

void PolicyHandle::load_weights(const std::string& path) { check(vt_->load_weights(p_, path.c_str()), "load_weights"); }

std::unique_ptr<ActorHandle> PolicyHandle::create_actor(int num_envs, uint64_t seed, int64_t first_env) {
  mambarl_actor* a = nullptr;
  check(vt_->actor_create(p_, num_envs, seed, first_env, &a), "actor_create");
  if (a == nullptr) check(MAMBARL_ERROR, "actor_create");
  // Version 0: the actor starts with the policy's weights at creation.
  return std::make_unique<ActorHandle>(vt_, a, num_envs, info_, env_.obs_dim, 0);
}

}  // namespace mambarl
