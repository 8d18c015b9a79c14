#include "policy/policy_config.hpp"

#include <cmath>

namespace mambarl {

PolicyConfig PolicyConfig::from_yaml(const ConfigNode& n) {
  PolicyConfig c;
  c.type = n.get_choice("type", c.type, {"mamba1", "mamba3", "gru", "mlp"});
  // Keys common to all types, plus the ones of the chosen type only: a
  // Mamba-3 key under a mamba1 policy is a mistake worth reporting.
  std::vector<std::string> known = {"type", "d_model", "n_layers", "log_std_init"};
  const auto add = [&](std::initializer_list<const char*> ks) { known.insert(known.end(), ks.begin(), ks.end()); };
  if (c.type == "mamba1") add({"d_state", "d_conv", "expand", "dt_rank", "dt_min", "dt_max"});
  if (c.type == "mamba3")
    add({"d_state", "expand", "headdim", "ngroups", "rope_fraction", "a_floor", "is_outproj_norm", "dt_min", "dt_max"});
  if (c.type == "mlp") add({"expand"});
  n.check_known(known);

  c.d_model = n.get_in("d_model", c.d_model, 1, 8192);
  c.n_layers = n.get_in("n_layers", c.n_layers, 0, 64);
  c.log_std_init = n.get("log_std_init", c.log_std_init);

  auto& m1 = c.mamba1;
  m1.d_model = c.d_model;
  m1.d_state = n.get_in("d_state", m1.d_state, 1, 256);
  m1.d_conv = n.get_in("d_conv", m1.d_conv, 1, 8);
  m1.expand = n.get_in("expand", m1.expand, 1, 8);
  m1.dt_rank = n.get_in("dt_rank", m1.dt_rank, 0, 8192);
  m1.dt_min = n.get_in("dt_min", m1.dt_min, 1e-6, 10.0);
  m1.dt_max = n.get_in("dt_max", m1.dt_max, 1e-6, 10.0);

  auto& m3 = c.mamba3;
  m3.d_model = c.d_model;
  m3.d_state = n.get_in("d_state", m3.d_state, 1, 256);
  m3.expand = n.get_in("expand", m3.expand, 1, 8);
  m3.headdim = n.get_in("headdim", m3.headdim, 1, 1024);
  m3.ngroups = n.get_in("ngroups", m3.ngroups, 1, 1024);
  m3.rope_fraction = n.get("rope_fraction", m3.rope_fraction);
  m3.a_floor = n.get("a_floor", m3.a_floor);
  m3.is_outproj_norm = n.get("is_outproj_norm", m3.is_outproj_norm);
  m3.dt_min = n.get_in("dt_min", m3.dt_min, 1e-6, 10.0);
  m3.dt_max = n.get_in("dt_max", m3.dt_max, 1e-6, 10.0);

  c.mlp.d_model = c.d_model;
  c.mlp.expand = n.get_in("expand", c.mlp.expand, 1, 8);

  // Mixer-level validation (divisibility, ranges); reported against this node.
  try {
    if (c.type == "mamba1") m1.validate();
    if (c.type == "mamba3") m3.validate();
    if (c.type == "mlp") c.mlp.validate();
  } catch (const ConfigError&) {
    throw;
  } catch (const Error& e) {
    n.fail("", e.what());
  }
  return c;
}

YAML::Node PolicyConfig::to_yaml() const {
  YAML::Node n;
  n["type"] = type;
  n["d_model"] = d_model;
  n["n_layers"] = n_layers;
  n["log_std_init"] = log_std_init;
  if (type == "mamba1") {
    n["d_state"] = mamba1.d_state;
    n["d_conv"] = mamba1.d_conv;
    n["expand"] = mamba1.expand;
    n["dt_rank"] = mamba1.resolved_dt_rank();
    n["dt_min"] = mamba1.dt_min;
    n["dt_max"] = mamba1.dt_max;
  } else if (type == "mamba3") {
    n["d_state"] = mamba3.d_state;
    n["expand"] = mamba3.expand;
    n["headdim"] = mamba3.headdim;
    n["ngroups"] = mamba3.ngroups;
    n["rope_fraction"] = mamba3.rope_fraction;
    n["a_floor"] = mamba3.a_floor;
    n["is_outproj_norm"] = mamba3.is_outproj_norm;
    n["dt_min"] = mamba3.dt_min;
    n["dt_max"] = mamba3.dt_max;
  } else if (type == "mlp") {
    n["expand"] = mlp.expand;
  }
  return n;
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
