// Factories of the bundled env types: each reads and validates its own keys of
// the `env:` map (written defaults here, unknown keys rejected) and wraps a
// prototype env struct in the generic BatchedEnv.
#include "envs/builtin_envs.hpp"

#include "envs/batched_env.hpp"
#include "envs/card_deck.hpp"
#include "envs/cartpole.hpp"
#include "envs/count_recall.hpp"
#include "envs/repeat_previous.hpp"
#include "envs/tmaze.hpp"

namespace mambarl {
namespace {

// POPGym's three levels: 0 easy, 1 medium, 2 hard.
int read_difficulty(const ConfigNode& cfg) {
  const std::string d = cfg.get_choice("difficulty", "easy", {"easy", "medium", "hard"});
  return d == "easy" ? 0 : d == "medium" ? 1 : 2;
}

template <typename Env>
std::unique_ptr<VecEnv> batched(const Env& prototype, int num_envs) {
  return std::make_unique<BatchedEnv<Env>>(prototype, num_envs);
}

std::unique_ptr<VecEnv> make_cartpole(const ConfigNode& cfg, int num_envs) {
  check_env_keys(cfg, {});
  return batched(CartPole::full(), num_envs);
}

std::unique_ptr<VecEnv> make_stateless_cartpole(const ConfigNode& cfg, int num_envs) {
  check_env_keys(cfg, {"difficulty"});
  static const int kMaxLen[] = {200, 400, 600};  // PositionOnlyCartPole{Easy,Medium,Hard}
  return batched(CartPole::stateless(kMaxLen[read_difficulty(cfg)]), num_envs);
}

std::unique_ptr<VecEnv> make_repeat_previous(const ConfigNode& cfg, int num_envs) {
  check_env_keys(cfg, {"difficulty"});
  static const int kDecks[] = {1, 2, 3}, kK[] = {4, 32, 64};  // RepeatPrevious{Easy,Medium,Hard}
  const int d = read_difficulty(cfg);
  return batched(RepeatPrevious(kDecks[d], kK[d]), num_envs);
}

std::unique_ptr<VecEnv> make_count_recall(const ConfigNode& cfg, int num_envs) {
  check_env_keys(cfg, {"difficulty"});
  static const int kDecks[] = {1, 2, 4};  // CountRecall{Easy,Medium,Hard}
  static const CardFeature kFeature[] = {CardFeature::colour, CardFeature::suit, CardFeature::rank};
  const int d = read_difficulty(cfg);
  return batched(CountRecall(kDecks[d], kFeature[d]), num_envs);
}

std::unique_ptr<VecEnv> make_tmaze(const ConfigNode& cfg, int num_envs) {
  check_env_keys(cfg, {"length", "step_penalty"});
  const int length = cfg.get_in<int>("length", 10, 1, 100000);
  const float step_penalty = cfg.get_in<float>("step_penalty", 0.0f, 0.0f, 1.0f);
  return batched(TMaze(length, step_penalty), num_envs);
}

}  // namespace

std::vector<std::pair<std::string, EnvFactory>> builtin_env_factories() {
  return {{"cartpole", make_cartpole},
          {"stateless_cartpole", make_stateless_cartpole},
          {"repeat_previous", make_repeat_previous},
          {"count_recall", make_count_recall},
          {"tmaze", make_tmaze}};
}

}  // namespace mambarl
