// POPGym RepeatPrevious (popgym/envs/repeat_previous.py): cards are dealt one
// per step from num_decks shuffled decks; the observation is the one-hot suit of
// the card just dealt (popgym's Discrete(4), one-hot as Gymnasium's flatten
// gives it). The action answers the suit of the card dealt k cards before the
// one that is about to be dealt, i.e. the card shown k-1 observations before
// the current one (k=1: the suit in the current observation).
//
// Reward: 0 while fewer than k cards are out, then +-1/(num_cards - k); over the
// num_cards - k rewarded steps a perfect memory scores 1.0, a uniform guess -0.5.
// The episode terminates (popgym: terminated, not truncated) on the step that
// deals the last card: num_cards - 1 steps, so there is no time limit.
// Difficulty: easy 1 deck k=4, medium 2 decks k=32, hard 3 decks k=64.
#pragma once

#include <ostream>

#include "envs/batched_env.hpp"
#include "envs/card_deck.hpp"
#include "kernels/base/check.hpp"

namespace mambarl {

struct RepeatPrevious {
  CardDeck deck;
  int k = 4;

  RepeatPrevious(int num_decks, int k_) : deck(num_decks), k(k_) {
    MAMBARL_CHECK(k >= 1 && k < deck.num_cards,
                  "repeat_previous: k must be in [1, " << deck.num_cards - 1 << "], got " << k);
  }

  EnvSpec spec() const {
    return one_hot_env_spec("repeat_previous", 4, 4, 0);
  }

  MAMBARL_HD void reset(Rng& rng, float* obs) {
    deck.shuffle(rng);
    write_obs(deck.deal(), obs);
  }

  MAMBARL_HD EnvStepResult step(int action, float* obs) {
    const bool terminated = deck.remaining() == 1;
    float reward = 0.0f;
    if (deck.dealt >= k) {
      const float scale = 1.0f / static_cast<float>(deck.num_cards - k);
      reward = action == CardDeck::suit(deck.dealt_card(deck.dealt - k)) ? scale : -scale;
    }
    write_obs(deck.deal(), obs);
    return {reward, terminated};
  }

  void render(std::ostream& os) const {
    const int last = deck.dealt_card(deck.dealt - 1);
    os << "card " << deck.dealt << "/" << deck.num_cards << ": "
       << CardDeck::name(CardFeature::rank, CardDeck::rank(last))
       << CardDeck::name(CardFeature::suit, CardDeck::suit(last)) << "  (k=" << k << ": answer ";
    if (deck.dealt >= k)
      os << "suit " << CardDeck::name(CardFeature::suit, CardDeck::suit(deck.dealt_card(deck.dealt - k)));
    else
      os << "not scored yet";
    os << ")\n";
  }

 private:
  MAMBARL_HD static void write_obs(int card, float* obs) {
    write_one_hot(obs, 4, CardDeck::suit(card));
  }
};

}  // namespace mambarl
