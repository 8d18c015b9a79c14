// POPGym RepeatFirst (popgym/envs/repeat_first.py): cards are dealt one per
// step from num_decks shuffled decks; the observation is the one-hot suit of
// the card just dealt (popgym's Discrete(4), one-hot as Gymnasium's flatten
// gives it). The first observation is the target: every action should answer
// the suit of the first card dealt (nothing marks it as first but its place).
//
// Reward +-1/(num_cards - 1) on every step, so a memory of one card scores
// 1.0 and a uniform guess -0.5. The episode terminates (popgym: terminated, not
// truncated) on the step that deals the last card: num_cards - 1 steps, no
// time limit. Difficulty: easy 1 deck, medium 8, hard 16 (51 / 415 / 831 steps).
#pragma once

#include <ostream>

#include "envs/batched_env.hpp"
#include "envs/card_deck.hpp"

namespace mambarl {

struct RepeatFirst {
  using Deck = CardDeckOf<16>;  // hard deals 16 decks
  Deck deck;
  int target = 0;  // suit of the first card dealt

  explicit RepeatFirst(int num_decks) : deck(num_decks) {}

  EnvSpec spec() const {
    return one_hot_env_spec("repeat_first", 4, 4, 0);
  }

  MAMBARL_HD void reset(Rng& rng, float* obs) {
    deck.shuffle(rng);
    const int first = deck.deal();
    target = Deck::suit(first);
    write_obs(first, obs);
  }

  MAMBARL_HD EnvStepResult step(int action, float* obs) {
    const float scale = 1.0f / static_cast<float>(deck.num_cards - 1);
    const bool terminated = deck.remaining() == 1;
    write_obs(deck.deal(), obs);
    return {action == target ? scale : -scale, terminated};
  }

  void render(std::ostream& os) const {
    os << "card " << deck.dealt << "/" << deck.num_cards << ": "
       << Deck::name(deck.dealt_card(deck.dealt - 1))
       << "  (answer the first card's suit: " << Deck::name(CardFeature::suit, target) << ")\n";
  }

 private:
  MAMBARL_HD static void write_obs(int card, float* obs) {
    write_one_hot(obs, 4, Deck::suit(card));
  }
};
static_assert(sizeof(RepeatFirst) == sizeof(RepeatFirst::Deck) + sizeof(int),
              "RepeatFirst must have no padding bytes");

}  // namespace mambarl
