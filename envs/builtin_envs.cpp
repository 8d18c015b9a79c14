// The bundled env types: each reads and validates its own keys of the `env:`
// map (one table of rows per kind of type, defaults written once, unknown
// keys rejected) into a prototype env struct; the CPU factories wrap it in
// the generic BatchedEnv.
#include "envs/builtin_envs.hpp"

#include <algorithm>
#include <optional>
#include <type_traits>

#include "envs/batched_env.hpp"
#include "envs/card_deck.hpp"
#include "kernels/base/config_schema.hpp"

namespace mambarl {
namespace {

// The keys of the bundled types beyond the shared head (EnvHead): one struct
// for all of them, each type reading the rows of its own table. The
// defaults are the initialisers here.
struct Knobs {
  std::optional<bool> prev_action;  // absent: the type's spec().prev_action_by_default
  std::string difficulty = "easy";
  int length = 10;
  float step_penalty = 0.0f;
};

// clang-format off
const Schema<Knobs>& every_builtin_knob() {
  static const Schema<Knobs> s({
    optional("prev_action", &Knobs::prev_action, "the type's", "end each observation with a one-hot of the previous action (envs/ENVS.md)"),
  });
  return s;
}
const Schema<Knobs>& no_knobs() {
  static const Schema<Knobs> s({});
  return s;
}
const Schema<Knobs>& popgym_knobs() {
  static const Schema<Knobs> s({
    choice("difficulty", &Knobs::difficulty, {"easy", "medium", "hard"}, "POPGym's level: sizes and lengths per type in envs/ENVS.md"),
  });
  return s;
}
const Schema<Knobs>& tmaze_knobs() {
  static const Schema<Knobs> s({
    number("length", &Knobs::length, 1, 100000, "forward steps from the start to the junction"),
    number("step_penalty", &Knobs::step_penalty, 0.0f, 1.0f, "cost of every step but the turn at the junction"),
  });
  return s;
}
// clang-format on

// POPGym's three levels: 0 easy, 1 medium, 2 hard.
int level(const Knobs& k) { return k.difficulty == "easy" ? 0 : k.difficulty == "medium" ? 1 : 2; }

EnvPrototype cartpole(const Knobs&) { return CartPole::full(); }

EnvPrototype stateless_cartpole(const Knobs& k) {
  static const int kMaxLen[] = {200, 400, 600};  // PositionOnlyCartPole{Easy,Medium,Hard}
  return CartPole::stateless(kMaxLen[level(k)]);
}

EnvPrototype noisy_stateless_cartpole(const Knobs& k) {
  // NoisyPositionOnlyCartPole{Easy,Medium,Hard}: popgym's default length 200 at every level.
  static const float kSigma[] = {0.1f, 0.2f, 0.3f};
  return CartPole::noisy_stateless(200, kSigma[level(k)]);
}

EnvPrototype repeat_previous(const Knobs& k) {
  static const int kDecks[] = {1, 2, 3}, kK[] = {4, 32, 64};  // RepeatPrevious{Easy,Medium,Hard}
  const int d = level(k);
  return RepeatPrevious(kDecks[d], kK[d]);
}

EnvPrototype count_recall(const Knobs& k) {
  static const int kDecks[] = {1, 2, 4};  // CountRecall{Easy,Medium,Hard}
  static const CardFeature kFeature[] = {CardFeature::colour, CardFeature::suit, CardFeature::rank};
  const int d = level(k);
  return CountRecall(kDecks[d], kFeature[d]);
}

EnvPrototype repeat_first(const Knobs& k) {
  static const int kDecks[] = {1, 8, 16};  // RepeatFirst{Easy,Medium,Hard}
  return RepeatFirst(kDecks[level(k)]);
}

EnvPrototype autoencode(const Knobs& k) {
  static const int kDecks[] = {1, 2, 3};  // Autoencode{Easy,Medium,Hard}
  return Autoencode(kDecks[level(k)]);
}

EnvPrototype higher_lower(const Knobs& k) {
  static const int kDecks[] = {1, 2, 3};  // HigherLower{Easy,Medium,Hard}
  return HigherLower(kDecks[level(k)]);
}

EnvPrototype concentration(const Knobs& k) {
  static const int kDecks[] = {1, 2, 1};  // Concentration{Easy,Medium,Hard}
  static const CardFeature kFeature[] = {CardFeature::colour, CardFeature::colour, CardFeature::rank};
  const int d = level(k);
  return Concentration(kDecks[d], kFeature[d]);
}

EnvPrototype minesweeper(const Knobs& k) {
  static const int kSide[] = {4, 6, 8}, kMines[] = {2, 6, 10};  // MineSweeper{Easy,Medium,Hard}
  const int d = level(k);
  return Minesweeper(kSide[d], kMines[d]);
}

EnvPrototype battleship(const Knobs& k) {
  static const int kSide[] = {8, 10, 12};  // Battleship{Easy,Medium,Hard}
  return Battleship(kSide[level(k)]);
}

EnvPrototype multiarmed_bandit(const Knobs& k) {
  static const int kArms[] = {10, 20, 30}, kLength[] = {200, 400, 600};  // MultiarmedBandit{Easy,Medium,Hard}
  const int d = level(k);
  return MultiarmedBandit(kArms[d], kLength[d]);
}

EnvPrototype tmaze(const Knobs& k) { return TMaze(k.length, k.step_penalty); }

struct BuiltinType {
  const char* type;
  const Schema<Knobs>& (*own_keys)();
  EnvPrototype (*prototype)(const Knobs& knobs);
};
// Sorted by type.
constexpr BuiltinType kBuiltinTypes[] = {{"autoencode", popgym_knobs, autoencode},
                                         {"battleship", popgym_knobs, battleship},
                                         {"cartpole", no_knobs, cartpole},
                                         {"concentration", popgym_knobs, concentration},
                                         {"count_recall", popgym_knobs, count_recall},
                                         {"higher_lower", popgym_knobs, higher_lower},
                                         {"minesweeper", popgym_knobs, minesweeper},
                                         {"multiarmed_bandit", popgym_knobs, multiarmed_bandit},
                                         {"noisy_stateless_cartpole", popgym_knobs, noisy_stateless_cartpole},
                                         {"repeat_first", popgym_knobs, repeat_first},
                                         {"repeat_previous", popgym_knobs, repeat_previous},
                                         {"stateless_cartpole", popgym_knobs, stateless_cartpole},
                                         {"tmaze", tmaze_knobs, tmaze}};

bool prev_action_by_default(const EnvPrototype& p) {
  return std::visit([](const auto& env) { return env.spec().prev_action_by_default; }, p);
}

const BuiltinType& builtin_type(const std::string& type) {
  const auto it = std::find_if(std::begin(kBuiltinTypes), std::end(kBuiltinTypes),
                               [&](const BuiltinType& b) { return type == b.type; });
  MAMBARL_CHECK(it != std::end(kBuiltinTypes), "builtin_env: '" << type << "' is not a bundled env type");
  return *it;
}

// The keys env_cfg gives type `b`, unknown ones refused, with prev_action
// resolved: absent, it is the type's default.
Knobs read_knobs(const BuiltinType& b, const ConfigNode& env_cfg) {
  const Schema<Knobs>& own = b.own_keys();
  std::vector<std::string> keys = own.keys();
  keys.insert(keys.end(), every_builtin_knob().keys().begin(), every_builtin_knob().keys().end());
  check_env_keys(env_cfg, keys);
  Knobs knobs;
  own.fill(env_cfg, knobs);
  every_builtin_knob().fill(env_cfg, knobs);
  if (!knobs.prev_action) knobs.prev_action = prev_action_by_default(b.prototype(knobs));
  return knobs;
}

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
  const BuiltinType& b = builtin_type(type);
  const Knobs knobs = read_knobs(b, env_cfg);
  return {b.prototype(knobs), *knobs.prev_action};
}

void write_builtin_env_keys(const std::string& type, const ConfigNode& env_cfg, YAML::Node& out) {
  const BuiltinType& b = builtin_type(type);
  const Knobs knobs = read_knobs(b, env_cfg);
  b.own_keys().write(knobs, out);
  every_builtin_knob().write(knobs, out);
}

ConfigSection env_config_section() {
  ConfigSection s{"env", env_head_keys(), {}};
  // prev_action's default, from each type's spec.
  std::vector<KeyDoc> shared = every_builtin_knob().docs();
  std::string on;
  for (const BuiltinType& b : kBuiltinTypes)
    if (prev_action_by_default(b.prototype(Knobs{}))) on += (on.empty() ? "" : ", ") + std::string(b.type);
  for (KeyDoc& k : shared) {
    if (k.key == "prev_action") k.default_text = "true for " + on + "; else false";
    k.doc = "bundled types: " + k.doc;
    s.keys.push_back(k);
  }
  // The bundled types, those with the same table of keys in one group.
  std::vector<const Schema<Knobs>*> tables;  // s.types[i]'s
  for (const BuiltinType& b : kBuiltinTypes) {
    const Schema<Knobs>* own = &b.own_keys();
    const auto seen = std::find(tables.begin(), tables.end(), own);
    if (seen == tables.end()) {
      tables.push_back(own);
      s.types.push_back({b.type, own->docs()});
    } else {
      s.types[static_cast<size_t>(seen - tables.begin())].types += ", " + std::string(b.type);
    }
  }
  return s;
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
