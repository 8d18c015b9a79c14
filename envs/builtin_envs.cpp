// The bundled env types: each reads and validates its own keys of the `env:`
// map (written defaults here, unknown keys rejected) into a prototype env
// struct; the CPU factories wrap it in the generic BatchedEnv.
#include "envs/builtin_envs.hpp"

#include <algorithm>
#include <type_traits>

#include "envs/batched_env.hpp"
#include "envs/card_deck.hpp"

namespace mambarl {
namespace {

// check_env_keys plus the keys every bundled type shares (read by builtin_env).
void check_builtin_keys(const ConfigNode& cfg, std::vector<std::string> own_keys) {
  own_keys.push_back("prev_action");
  check_env_keys(cfg, own_keys);
}

// POPGym's three levels: 0 easy, 1 medium, 2 hard.
int read_difficulty(const ConfigNode& cfg) {
  const std::string d = cfg.get_choice("difficulty", "easy", {"easy", "medium", "hard"});
  return d == "easy" ? 0 : d == "medium" ? 1 : 2;
}

EnvPrototype cartpole(const ConfigNode& cfg) {
  check_builtin_keys(cfg, {});
  return CartPole::full();
}

EnvPrototype stateless_cartpole(const ConfigNode& cfg) {
  check_builtin_keys(cfg, {"difficulty"});
  static const int kMaxLen[] = {200, 400, 600};  // PositionOnlyCartPole{Easy,Medium,Hard}
  return CartPole::stateless(kMaxLen[read_difficulty(cfg)]);
}

EnvPrototype noisy_stateless_cartpole(const ConfigNode& cfg) {
  check_builtin_keys(cfg, {"difficulty"});
  // NoisyPositionOnlyCartPole{Easy,Medium,Hard}: popgym's default length 200 at every level.
  static const float kSigma[] = {0.1f, 0.2f, 0.3f};
  return CartPole::noisy_stateless(200, kSigma[read_difficulty(cfg)]);
}

EnvPrototype repeat_previous(const ConfigNode& cfg) {
  check_builtin_keys(cfg, {"difficulty"});
  static const int kDecks[] = {1, 2, 3}, kK[] = {4, 32, 64};  // RepeatPrevious{Easy,Medium,Hard}
  const int d = read_difficulty(cfg);
  return RepeatPrevious(kDecks[d], kK[d]);
}

EnvPrototype count_recall(const ConfigNode& cfg) {
  check_builtin_keys(cfg, {"difficulty"});
  static const int kDecks[] = {1, 2, 4};  // CountRecall{Easy,Medium,Hard}
  static const CardFeature kFeature[] = {CardFeature::colour, CardFeature::suit, CardFeature::rank};
  const int d = read_difficulty(cfg);
  return CountRecall(kDecks[d], kFeature[d]);
}

EnvPrototype repeat_first(const ConfigNode& cfg) {
  check_builtin_keys(cfg, {"difficulty"});
  static const int kDecks[] = {1, 8, 16};  // RepeatFirst{Easy,Medium,Hard}
  return RepeatFirst(kDecks[read_difficulty(cfg)]);
}

EnvPrototype autoencode(const ConfigNode& cfg) {
  check_builtin_keys(cfg, {"difficulty"});
  static const int kDecks[] = {1, 2, 3};  // Autoencode{Easy,Medium,Hard}
  return Autoencode(kDecks[read_difficulty(cfg)]);
}

EnvPrototype higher_lower(const ConfigNode& cfg) {
  check_builtin_keys(cfg, {"difficulty"});
  static const int kDecks[] = {1, 2, 3};  // HigherLower{Easy,Medium,Hard}
  return HigherLower(kDecks[read_difficulty(cfg)]);
}

EnvPrototype concentration(const ConfigNode& cfg) {
  check_builtin_keys(cfg, {"difficulty"});
  static const int kDecks[] = {1, 2, 1};  // Concentration{Easy,Medium,Hard}
  static const CardFeature kFeature[] = {CardFeature::colour, CardFeature::colour, CardFeature::rank};
  const int d = read_difficulty(cfg);
  return Concentration(kDecks[d], kFeature[d]);
}

EnvPrototype minesweeper(const ConfigNode& cfg) {
  check_builtin_keys(cfg, {"difficulty"});
  static const int kSide[] = {4, 6, 8}, kMines[] = {2, 6, 10};  // MineSweeper{Easy,Medium,Hard}
  const int d = read_difficulty(cfg);
  return Minesweeper(kSide[d], kMines[d]);
}

EnvPrototype battleship(const ConfigNode& cfg) {
  check_builtin_keys(cfg, {"difficulty"});
  static const int kSide[] = {8, 10, 12};  // Battleship{Easy,Medium,Hard}
  return Battleship(kSide[read_difficulty(cfg)]);
}

EnvPrototype multiarmed_bandit(const ConfigNode& cfg) {
  check_builtin_keys(cfg, {"difficulty"});
  static const int kArms[] = {10, 20, 30}, kLength[] = {200, 400, 600};  // MultiarmedBandit{Easy,Medium,Hard}
  const int d = read_difficulty(cfg);
  return MultiarmedBandit(kArms[d], kLength[d]);
}

EnvPrototype tmaze(const ConfigNode& cfg) {
  check_builtin_keys(cfg, {"length", "step_penalty"});
  const int length = cfg.get_in<int>("length", 10, 1, 100000);
  const float step_penalty = cfg.get_in<float>("step_penalty", 0.0f, 0.0f, 1.0f);
  return TMaze(length, step_penalty);
}

struct BuiltinType {
  const char* type;
  EnvPrototype (*prototype)(const ConfigNode& cfg);
};
// Sorted by type.
constexpr BuiltinType kBuiltinTypes[] = {{"autoencode", autoencode},
                                         {"battleship", battleship},
                                         {"cartpole", cartpole},
                                         {"concentration", concentration},
                                         {"count_recall", count_recall},
                                         {"higher_lower", higher_lower},
                                         {"minesweeper", minesweeper},
                                         {"multiarmed_bandit", multiarmed_bandit},
                                         {"noisy_stateless_cartpole", noisy_stateless_cartpole},
                                         {"repeat_first", repeat_first},
                                         {"repeat_previous", repeat_previous},
                                         {"stateless_cartpole", stateless_cartpole},
                                         {"tmaze", tmaze}};

}  // namespace

const std::vector<std::string>& builtin_env_types() {
  static const std::vector<std::string> types = [] {
    std::vector<std::string> t;
    for (const BuiltinType& b : kBuiltinTypes) t.emplace_back(b.type);
    return t;
  }();
  return types;
}

BuiltinEnv builtin_env(const std::string& type, const ConfigNode& env_cfg) {
  const auto it = std::find_if(std::begin(kBuiltinTypes), std::end(kBuiltinTypes),
                               [&](const BuiltinType& b) { return type == b.type; });
  MAMBARL_CHECK(it != std::end(kBuiltinTypes), "builtin_env: '" << type << "' is not a bundled env type");
  BuiltinEnv env{it->prototype(env_cfg)};
  const bool by_default = std::visit([](const auto& p) { return p.spec().prev_action_by_default; }, env.prototype);
  env.prev_action = env_cfg.get<bool>("prev_action", by_default);
  return env;
}

std::vector<std::pair<std::string, EnvFactory>> builtin_env_factories() {
  std::vector<std::pair<std::string, EnvFactory>> factories;
  for (const BuiltinType& b : kBuiltinTypes) {
    const std::string type = b.type;
    factories.emplace_back(type, [type](const ConfigNode& cfg, int num_envs) {
      const BuiltinEnv env = builtin_env(type, cfg);
      return std::visit(
          [&](const auto& prototype) -> std::unique_ptr<VecEnv> {
            using Env = std::decay_t<decltype(prototype)>;
            return std::make_unique<BatchedEnv<Env>>(prototype, num_envs, env.prev_action);
          },
          env.prototype);
    });
  }
  return factories;
}

}  // namespace mambarl
