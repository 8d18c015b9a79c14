#include "tools/random_floor.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/base/check.hpp"
#include "kernels/base/rng.hpp"

namespace mambarl {

namespace {

// An env that ends no episode in this many steps (all envs together) is not
// one a random policy can be measured on.
constexpr long long kMaxEnvSteps = 100'000'000;

// Mean and standard error of the first k returns of every env.
RandomFloor summarise(const std::vector<std::vector<double>>& returns, size_t k) {
  RandomFloor f;
  double sum = 0, sum_sq = 0;
  for (const auto& r : returns)
    for (size_t i = 0; i < k; ++i) sum += r[i], sum_sq += r[i] * r[i];
  f.episodes = static_cast<long long>(k * returns.size());
  const double n = static_cast<double>(f.episodes);
  f.mean_return = sum / n;
  const double var = n > 1 ? std::max(0.0, (sum_sq - sum * sum / n) / (n - 1)) : 0.0;
  f.std_error = std::sqrt(var / n);
  return f;
}

}  // namespace

RandomFloor measure_random_floor(VecEnv& env, uint64_t seed, long long min_episodes, double max_std_error,
                                 long long max_episodes) {
  const EnvSpec& spec = env.spec();
  const int B = env.num_envs(), width = action_width(spec.action);
  if (!spec.action.discrete)
    for (int i = 0; i < spec.action.n; ++i)
      MAMBARL_CHECK(std::isfinite(spec.action.low[i]) && std::isfinite(spec.action.high[i]),
                    "random floor: env " << spec.id << " has an unbounded action dimension " << i
                                         << " (no uniform distribution over it)");
  std::vector<Rng> rngs;
  for (int b = 0; b < B; ++b) rngs.emplace_back(seed, static_cast<uint64_t>(b));
  std::vector<float> actions(static_cast<size_t>(B) * width);  // (B, action_width)
  std::vector<std::vector<double>> returns(B);                 // (B, episodes so far)
  size_t k = static_cast<size_t>((std::max(min_episodes, 1LL) + B - 1) / B);
  long long steps = 0;
  env.reset(seed);
  for (;;) {
    const auto fewest = std::min_element(returns.begin(), returns.end(),
                                         [](const auto& a, const auto& b) { return a.size() < b.size(); });
    if (fewest->size() >= k) {
      RandomFloor f = summarise(returns, k);
      if (f.std_error <= max_std_error || static_cast<long long>(2 * k) * B > max_episodes) {
        f.env_steps = steps;
        return f;
      }
      k *= 2;
    }
    MAMBARL_CHECK(steps < kMaxEnvSteps, "random floor: env " << spec.id << " ended fewer than " << k
                                                             << " episodes per env in " << steps
                                                             << " random steps");
    for (int b = 0; b < B; ++b)
      for (int i = 0; i < width; ++i)
        actions[static_cast<size_t>(b) * width + i] =
            spec.action.discrete
                ? static_cast<float>(rngs[b].below(static_cast<uint32_t>(spec.action.n)))
                : static_cast<float>(rngs[b].uniform(spec.action.low[i], spec.action.high[i]));
    env.step(actions.data());
    steps += B;
    for (int b = 0; b < B; ++b)
      if (env.terminated()[b] || env.truncated()[b]) returns[b].push_back(env.episode_return()[b]);
  }
}

}  // namespace mambarl
