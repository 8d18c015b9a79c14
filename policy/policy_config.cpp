#include "policy/policy_config.hpp"

#include <cmath>

#include "kernels/kernel_limits.hpp"

namespace mambarl {

namespace {

using P = PolicyConfig;
using M1 = Mamba1Config;
using M3 = Mamba3Config;

// The keys one policy type adds to the shared ones. The defaults are the
// members' initialisers (policy/mamba1.hpp, mamba3.hpp, mlp_mixer.hpp); the
// rows' order is the order of the keys in a run's resolved config. Checks
// across keys (divisibility, dt_min <= dt_max) are the mixer configs'
// validate(), run after the table.
struct PolicyType {
  const char* type;
  Schema<P> own;
};

// clang-format off
const std::vector<PolicyType>& policy_types() {
  static const std::vector<PolicyType> types = {
    // Mamba-1's d_state and d_conv ranges are the GPU kernels' limits on every device.
    {"mamba1", Schema<P>(nested(&P::mamba1, std::vector<Field<M1>>{
      number("d_state", &M1::d_state, 1, cuda::kMamba1MaxState, "N: state size per channel"),
      number("d_conv", &M1::d_conv, 1, cuda::kMamba1MaxConv, "width of the causal depthwise conv"),
      number("expand", &M1::expand, 1, 8, "E = expand * d_model: the mixer's inner width"),
      number("dt_rank", &M1::dt_rank, 0, 8192, "R: rank of the step-size projection (at most E); 0: ceil(d_model / 16), written back resolved"),
      number("dt_min", &M1::dt_min, 1e-6, 10.0, "smallest step size at initialisation"),
      number("dt_max", &M1::dt_max, 1e-6, 10.0, "largest step size at initialisation; >= dt_min"),
      number("a_init_scale", &M1::a_init_scale, 1e-4, 1e4, "A starts at -a_init_scale * (n + 1) for state n (1: S4D-real, as mamba_ssm)"),
    }))},
    {"mamba3", Schema<P>(nested(&P::mamba3, std::vector<Field<M3>>{
      cuda_at_most(number("d_state", &M3::d_state, 1, 256, "N: state size per head"),
                   cuda::kMamba3ScanMaxState, "kernels/kernel_limits.hpp, the training scan"),
      number("expand", &M3::expand, 1, 8, "E = expand * d_model: the mixer's inner width"),
      cuda_at_most(number("headdim", &M3::headdim, 1, 1024, "P: channels per head; H = E / P heads (P divides E, H at most 256)"),
                   cuda::kMamba3ScanMaxHeaddim, "kernels/kernel_limits.hpp, the training scan"),
      number("ngroups", &M3::ngroups, 1, 1024, "G: groups of heads sharing B and C (G divides H)"),
      value("rope_fraction", &M3::rope_fraction, "share of d_state the data-dependent rotation turns: 0.5 or 1.0"),
      value("a_floor", &M3::a_floor, "A <= -a_floor keeps every head decaying; > 0"),
      value("is_outproj_norm", &M3::is_outproj_norm, "a gated RMSNorm per head before out_proj (else y * silu(z))"),
      number("dt_min", &M3::dt_min, 1e-6, 10.0, "smallest step size at initialisation"),
      number("dt_max", &M3::dt_max, 1e-6, 10.0, "largest step size at initialisation; >= dt_min"),
    }))},
    {"gru", Schema<P>({})},
    {"mlp", Schema<P>({
      nested(&P::mlp, number("expand", &MlpConfig::expand, 1, 8, "hidden width = expand * d_model")),
    })},
  };
  return types;
}

}  // namespace

std::vector<std::string> policy_type_names() {
  std::vector<std::string> names;
  for (const PolicyType& t : policy_types()) names.emplace_back(t.type);
  return names;
}

namespace {

const Field<P>& type_field() {
  static const Field<P> f =
      choice("type", &P::type, policy_type_names(),
             "the mixer: Mamba-1, Mamba-3 (SISO), GRU, or MLP (no memory); each type adds its own keys");
  return f;
}

// The keys of every type.
const Schema<P>& shared_schema() {
  static const Schema<P> s({
    type_field(),
    number("d_model", &P::d_model, 1, 8192, "D: width of the residual stream"),
    number("n_layers", &P::n_layers, 0, 64, "mixer blocks between the input projection and the heads"),
    value("log_std_init", &P::log_std_init, "initial log standard deviation of Gaussian action heads"),
    value("start_embedding", &P::start_embedding,
          "add a learned vector to the input at each episode's first step (policy/MATH.md \"Episode-start embedding\")"),
  });
  return s;
}
// clang-format on

const Schema<P>& own_schema(const std::string& type) {
  for (const PolicyType& t : policy_types())
    if (type == t.type) return t.own;
  MAMBARL_FAIL("unknown policy type '" << type << "'");
}

}  // namespace

PolicyConfig PolicyConfig::from_yaml(const ConfigNode& n, bool on_cuda) {
  PolicyConfig c;
  type_field().read(n, c);
  // The shared keys plus the chosen type's only: a Mamba-3 key under a
  // mamba1 policy is a mistake worth reporting.
  const Schema<P>& own = own_schema(c.type);
  std::vector<std::string> known = shared_schema().keys();
  known.insert(known.end(), own.keys().begin(), own.keys().end());
  n.check_known(known);
  shared_schema().fill(n, c);
  own.fill(n, c);
  c.mamba1.d_model = c.mamba3.d_model = c.mlp.d_model = c.d_model;

  // Mixer-level validation (divisibility, ranges); reported against this node.
  try {
    if (c.type == "mamba1") c.mamba1.validate();
    if (c.type == "mamba3") c.mamba3.validate();
    if (c.type == "mlp") c.mlp.validate();
  } catch (const ConfigError&) {
    throw;
  } catch (const Error& e) {
    n.fail("", e.what());
  }
  if (on_cuda) own.check_cuda(n, c);
  return c;
}

YAML::Node PolicyConfig::to_yaml() const {
  YAML::Node n = shared_schema().write(*this);
  own_schema(type).write(*this, n);
  if (type == "mamba1") n["dt_rank"] = mamba1.resolved_dt_rank();  // 0 stands for a value; write that
  return n;
}

std::string policy_type(const ConfigNode& policy) { return policy.get<std::string>("type", PolicyConfig{}.type); }

ConfigSection policy_config_section() {
  ConfigSection s{"policy", shared_schema().docs(), {}};
  for (const PolicyType& t : policy_types()) s.types.push_back({t.type, t.own.docs()});
  return s;
}

template <typename S>
std::unique_ptr<ActorCritic<S>> make_actor_critic(const PolicyConfig& cfg, int obs_dim,
                                                  const HeadSpec& head) {
  ActorCriticSpec spec;
  spec.obs_dim = obs_dim;
  spec.head = head;
  spec.d_model = cfg.d_model;
  spec.n_layers = cfg.n_layers;
  spec.log_std_init = cfg.log_std_init;
  spec.start_embedding = cfg.start_embedding;
  // mamba_ssm rescales each residual out_proj by 1/sqrt(n_layers) at init.
  const double residual_scale = cfg.n_layers > 0 ? 1.0 / std::sqrt(static_cast<double>(cfg.n_layers)) : 1.0;
  typename ActorCritic<S>::MixerFactory factory;
  if (cfg.type == "mamba1") {
    Mamba1Config m = cfg.mamba1;
    m.out_proj_init_scale = residual_scale;
    factory = [m](ParamLayout& l, const std::string& p) { return std::make_unique<Mamba1Mixer<S>>(m, l, p); };
  } else if (cfg.type == "mamba3") {
    Mamba3Config m = cfg.mamba3;
    m.out_proj_init_scale = residual_scale;
    factory = [m](ParamLayout& l, const std::string& p) { return std::make_unique<Mamba3Mixer<S>>(m, l, p); };
  } else if (cfg.type == "gru") {
    GruConfig g;
    g.d_model = cfg.d_model;
    factory = [g](ParamLayout& l, const std::string& p) { return std::make_unique<GruMixer<S>>(g, l, p); };
  } else if (cfg.type == "mlp") {
    const MlpConfig m = cfg.mlp;
    factory = [m](ParamLayout& l, const std::string& p) { return std::make_unique<MlpMixer<S>>(m, l, p); };
  } else {
    MAMBARL_FAIL("unknown policy type '" << cfg.type << "' (known: mamba1, mamba3, gru, mlp)");
  }
  return std::make_unique<ActorCritic<S>>(spec, factory);
}

template std::unique_ptr<ActorCritic<float>> make_actor_critic<float>(const PolicyConfig&, int, const HeadSpec&);
template std::unique_ptr<ActorCritic<double>> make_actor_critic<double>(const PolicyConfig&, int, const HeadSpec&);

}  // namespace mambarl
