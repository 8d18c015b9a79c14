// POPGym HigherLower (popgym/envs/higher_lower.py): cards are dealt one per
// step from num_decks shuffled decks; the observation is the one-hot rank of
// the card just dealt (popgym's Discrete(13), ace lowest, king highest). The
// action bets on the next card: 0 = higher, 1 = lower than the current one.
//
// Reward: +1/N for a right bet, -1/N for a wrong one, 0 when the ranks tie,
// with N = num_cards (popgym scales by the whole deck although only N - 1 bets
// are made, so even a clairvoyant scores below 1). The episode terminates when
// the last card is dealt: N - 1 steps, no time limit. The actions do not change
// the deck, so the best policy bets greedily on the cards still in it (card
// counting); without memory the best is "higher below a 7, lower above",
// whose expected return is 84/169 = 0.497 at every difficulty.
// Difficulty: easy 1 deck, medium 2, hard 3 (51 / 103 / 155 steps).
#pragma once

#include <ostream>

#include "envs/batched_env.hpp"
#include "envs/card_deck.hpp"

namespace mambarl {

struct HigherLower {
  using Deck = CardDeckOf<3>;  // hard deals 3 decks
  static constexpr int kHigher = 0, kLower = 1;
  Deck deck;

  explicit HigherLower(int num_decks) : deck(num_decks) {}

  EnvSpec spec() const {
    return one_hot_env_spec("higher_lower", 13, 2, 0);
  }

  MAMBARL_HD void reset(Rng& rng, float* obs) {
    deck.shuffle(rng);
    write_obs(Deck::rank(deck.deal()), obs);
  }

  MAMBARL_HD EnvStepResult step(int action, float* obs) {
    const int current = Deck::rank(deck.dealt_card(deck.dealt - 1));
    const int next = Deck::rank(deck.deal());
    write_obs(next, obs);
    const float scale = 1.0f / static_cast<float>(deck.num_cards);
    const float reward = next == current ? 0.0f : (next > current) == (action == kHigher) ? scale : -scale;
    return {reward, deck.remaining() == 0};
  }

  // The current card and what a card counter knows: the ranks still in the deck.
  void render(std::ostream& os) const {
    int left[13] = {};
    for (int i = deck.dealt; i < deck.num_cards; ++i) left[Deck::rank(deck.dealt_card(i))] += 1;
    os << "card " << deck.dealt << "/" << deck.num_cards << ": "
       << Deck::name(deck.dealt_card(deck.dealt - 1)) << "  left:";
    for (int r = 0; r < 13; ++r) os << " " << Deck::name(CardFeature::rank, r) << "=" << left[r];
    os << "\n";
  }

 private:
  MAMBARL_HD static void write_obs(int rank, float* obs) {
    write_one_hot(obs, 13, rank);
  }
};
static_assert(sizeof(HigherLower) == sizeof(HigherLower::Deck), "HigherLower must have no padding bytes");

}  // namespace mambarl
