// POPGym CountRecall (popgym/envs/count_recall.py): two independently shuffled
// stacks of num_decks decks, a value stack and a query stack; each step deals
// one card from each. A card counts by one feature: colour (easy), suit
// (medium) or rank (hard), with V distinct values. The observation is
// [one-hot value card (V), one-hot query card (V)] (popgym's
// MultiDiscrete([V, V]), one-hot as Gymnasium's flatten gives it).
//
// The action answers the query shown in the previous observation: how many of
// the value cards dealt so far (including the one shown with that query) had
// the queried feature value. Actions are 0 .. M-1 with M = num_cards / V (the
// count of a value in the whole stack), as popgym's Discrete(M); so a count of
// M, possible late in an episode, cannot be answered (popgym has the same edge).
// Reward +1/(num_cards - 1) for a right count, -1/(num_cards - 1) otherwise
// (popgym's error_clamp is stored but unused there, so the reward is exactly
// this); the episode terminates when the value stack is empty: num_cards - 1
// steps, no time limit. Difficulty: easy 1 deck colours (V=2, M=26), medium
// 2 decks suits (V=4, M=26), hard 4 decks ranks (V=13, M=16).
#pragma once

#include <cstdint>
#include <ostream>

#include "envs/batched_env.hpp"
#include "envs/card_deck.hpp"

namespace mambarl {

struct CountRecall {
  CardFeature feature = CardFeature::colour;
  CardDeck values, queries;
  int V = 2;                      // distinct feature values
  int query = 0;                  // feature value of the query in the current obs
  int last_value = 0;             // feature value of the value card in the current obs
  int16_t counts[13] = {};        // (V): value cards dealt so far, per feature value
  // Saved as raw bytes (BatchedEnv::save_state): spelled out so that the struct
  // has no padding, whose bytes would be indeterminate (static_assert below).
  int16_t unused = 0;

  CountRecall(int num_decks, CardFeature f)
      : feature(f), values(num_decks), queries(num_decks), V(CardDeck::num_values(f)) {}

  int max_count() const { return values.num_cards / V; }

  EnvSpec spec() const {
    return one_hot_env_spec("count_recall", 2 * V, max_count(), 0);
  }

  MAMBARL_HD void reset(Rng& rng, float* obs) {
    values.shuffle(rng);
    queries.shuffle(rng);
    for (int16_t& c : counts) c = 0;
    deal(obs);
  }

  MAMBARL_HD EnvStepResult step(int action, float* obs) {
    const int answer = counts[query];
    deal(obs);
    const float scale = 1.0f / static_cast<float>(values.num_cards - 1);
    return {action == answer ? scale : -scale, values.remaining() == 0};
  }

  void render(std::ostream& os) const {
    os << "card " << values.dealt << "/" << values.num_cards << ": dealt "
       << CardDeck::name(feature, last_value) << ", query " << CardDeck::name(feature, query) << "  counts";
    for (int v = 0; v < V; ++v) os << " " << CardDeck::name(feature, v) << "=" << counts[v];
    os << "\n";
  }

 private:
  MAMBARL_HD void deal(float* obs) {
    last_value = CardDeck::feature(feature, values.deal());
    query = CardDeck::feature(feature, queries.deal());
    counts[last_value] += 1;
    for (int i = 0; i < 2 * V; ++i) obs[i] = 0.0f;
    obs[last_value] = 1.0f;
    obs[V + query] = 1.0f;
  }
};
static_assert(sizeof(CountRecall) ==
                  sizeof(CardFeature) + 2 * sizeof(CardDeck) + 3 * sizeof(int) + 14 * sizeof(int16_t),
              "CountRecall must have no padding bytes");

}  // namespace mambarl
