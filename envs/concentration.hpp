// POPGym Concentration (popgym/envs/concentration.py): the cards of num_decks
// shuffled decks lie face down; each step flips one (the action is its
// position), two flips make a turn, and two cards of the same feature value
// (colour or rank) at different positions match and stay face up.
//
// Observation: every position's face (popgym's MultiDiscrete([V + 1] * N), one
// one-hot of V + 1 per position as Gymnasium's flatten gives it, slot V =
// face down). It shows the matched cards and the cards flipped this turn, as
// they are right after the flip: a mismatched pair is shown once, by the step
// that flips its second card, and is face down in the next observation. So
// the observation alone cannot tell this turn's first flip from a matched card:
// POPGym marks the env `obs_requires_prev_action`, and so does its spec here.
//
// Reward, with L = ceil(2N - N / (2N - 1)) (popgym's episode length, from the
// expected turns of a perfect player): a match +1/(N/2), so matching every
// pair without a miss scores 1.0; a mismatch, or the same card flipped twice,
// -2/L; flipping a card that is already matched -(cards flipped this turn)/L,
// which also ends the turn. The first flip of a turn scores 0. Terminated when
// every card is matched; truncated after L steps (popgym: the step with
// curr_step = L - 1). Difficulty (decks, matched feature): easy (1, colour),
// medium (2, colour), hard (1, rank): L = 104 / 208 / 104.
#pragma once

#include <cmath>
#include <cstdint>
#include <ostream>
#include <string>

#include "envs/batched_env.hpp"
#include "envs/card_deck.hpp"
#include "kernels/base/check.hpp"

namespace mambarl {

struct Concentration {
  using Deck = CardDeckOf<2>;  // medium lays out 2 decks
  CardFeature feature = CardFeature::colour;
  Deck deck;                // deck.dealt_card(i): the card lying at position i (nothing is dealt)
  int V = 2;                // distinct feature values; V is also the face-down slot
  int episode_length = 0;   // L
  int first = -1;           // position flipped first in this turn, -1 between turns
  int shown[2] = {-1, -1};  // this turn's flips, face up in the current observation (-1: none)
  int matched = 0;          // cards face up for good
  uint8_t face_up[Deck::kMaxCards] = {};  // (N): 1 where the card is matched

  Concentration(int num_decks, CardFeature f) : feature(f), deck(num_decks), V(Deck::num_values(f)) {
    // Only a feature that splits the cards into pairs can be matched (popgym
    // refuses suits: 13 of each).
    MAMBARL_CHECK(f != CardFeature::suit, "concentration: cards match by colour or rank, not suit");
    const double n = deck.num_cards;
    episode_length = static_cast<int>(std::ceil(2.0 * n - n / (2.0 * n - 1.0)));
  }

  EnvSpec spec() const {
    const int N = deck.num_cards, O = N * (V + 1);
    return one_hot_env_spec("concentration", O, N, episode_length, /*prev_action_by_default=*/true);
  }

  MAMBARL_HD int value_at(int position) const { return Deck::feature(feature, deck.dealt_card(position)); }

  MAMBARL_HD void reset(Rng& rng, float* obs) {
    deck.shuffle(rng);
    first = shown[0] = shown[1] = -1;
    matched = 0;
    for (int i = 0; i < deck.num_cards; ++i) face_up[i] = 0;
    write_obs(obs);
  }

  MAMBARL_HD EnvStepResult step(int action, float* obs) {
    const int other = first;  // this turn's first flip, or -1 when `action` is it
    const int flips = other < 0 ? 1 : 2;
    shown[0] = other;
    shown[1] = action;
    write_obs(obs);
    const float miss = 1.0f / static_cast<float>(episode_length);
    if (face_up[action]) {
      first = -1;
      return {-static_cast<float>(flips) * miss, false};
    }
    if (other < 0) {
      first = action;
      return {0.0f, false};
    }
    first = -1;
    if (action == other || value_at(action) != value_at(other)) return {-2.0f * miss, false};
    face_up[action] = face_up[other] = 1;
    matched += 2;
    return {1.0f / static_cast<float>(deck.num_cards / 2), matched == deck.num_cards};
  }

  // What the observation shows, 13 positions a row: matched cards by their
  // value, the cards just flipped in brackets, face-down cards as '?'.
  void render(std::ostream& os) const {
    os << "matched " << matched << "/" << deck.num_cards << " by "
       << (feature == CardFeature::rank ? "rank" : "colour")
       << (first >= 0 ? "; next flip: the turn's second" : "; next flip: a new turn") << "\n";
    for (int i = 0; i < deck.num_cards; ++i) {
      const std::string face = Deck::name(feature, value_at(i));
      os << (i % 13 == 0 ? "" : " ")
         << (i == shown[0] || i == shown[1] ? "[" + face + "]"
             : face_up[i]                   ? face
                                            : "?")
         << (i % 13 == 12 ? "\n" : "");
    }
  }

 private:
  // Matched cards and this turn's flips face up; the rest face down.
  MAMBARL_HD void write_obs(float* obs) const {
    for (int i = 0; i < deck.num_cards; ++i) {
      float* slot = obs + i * (V + 1);
      for (int v = 0; v <= V; ++v) slot[v] = 0.0f;
      slot[face_up[i] || i == shown[0] || i == shown[1] ? value_at(i) : V] = 1.0f;
    }
  }
};
static_assert(sizeof(Concentration) == sizeof(CardFeature) + sizeof(Concentration::Deck) + 6 * sizeof(int) +
                                           Concentration::Deck::kMaxCards,
              "Concentration must have no padding bytes");

}  // namespace mambarl
