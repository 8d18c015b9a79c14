#include "tools/evaluate.hpp"

#include <numeric>
#include <ostream>

#include "policy/safetensors.hpp"
#include "tools/policy_session.hpp"

namespace mambarl {

std::string experiment_of_checkpoint(const std::string& path) {
  const SafetensorsFile f = read_safetensors(path);
  const auto it = f.metadata.find("experiment");
  MAMBARL_CHECK(it != f.metadata.end(), path << ": no 'experiment' metadata: not a checkpoint written by `mambarl train`");
  return it->second;
}

EvalResult run_evaluation(const EvalOptions& opts, std::ostream& out) {
  MAMBARL_CHECK(opts.episodes >= 1, "eval: --episodes must be >= 1, got " << opts.episodes);
  std::vector<std::string> overrides = opts.overrides;
  overrides.push_back("env.num_envs=1");  // one env, so --render shows whole episodes in order
  const Experiment exp = parse_experiment(experiment_of_checkpoint(opts.checkpoint),
                                          opts.checkpoint + " (stored experiment)", overrides);
  auto session = load_plugins(exp);
  auto env = make_vec_env(exp.section("env"));
  create_policy(*session, exp, env->spec());
  if (!session->device_note.empty()) out << session->device_note << "\n";
  session->policy->load(opts.checkpoint);
  std::vector<float> weights;
  session->policy->get_weights(weights);
  auto actor = session->policy->create_actor(1, opts.seed);
  actor->set_weights(weights, 0);

  const int O = env->spec().obs_dim, W = static_cast<int>(session->info.act_width);
  std::vector<float> obs(static_cast<size_t>(O)), act(static_cast<size_t>(W)), logp(1), value(1);
  std::vector<uint8_t> start{1};
  env->reset(opts.seed);
  EvalResult r;
  int t = 0;
  while (static_cast<int>(r.returns.size()) < opts.episodes) {
    std::copy(env->obs(), env->obs() + O, obs.begin());
    if (opts.render) {
      out << "--- episode " << r.returns.size() + 1 << " step " << t << "\n";
      env->render(0, out);
    }
    actor->act(obs.data(), start.data(), act.data(), logp.data(), value.data());
    env->step(act.data());
    ++t;
    start[0] = env->terminated()[0] || env->truncated()[0];
    if (start[0]) {
      r.returns.push_back(env->episode_return()[0]);
      out << "episode " << r.returns.size() << ": return " << env->episode_return()[0] << " length "
          << env->episode_length()[0] << (env->terminated()[0] ? " (terminated)" : " (truncated)") << "\n";
      t = 0;
    }
  }
  r.mean_return = std::accumulate(r.returns.begin(), r.returns.end(), 0.0) / r.returns.size();
  out << "eval mean_return=" << r.mean_return << " episodes=" << r.returns.size() << std::endl;
  return r;
}

}  // namespace mambarl
