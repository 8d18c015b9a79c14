// POPGym Autoencode (popgym/envs/autoencode.py): a backwards Simon. In the
// watch phase the cards of num_decks shuffled decks are shown one per step;
// then the agent must recite their suits in reverse order (last shown first).
// The observation is popgym's Tuple(Discrete(2) mode, Discrete(4) suit),
// one-hot as Gymnasium's flatten gives it: [play, watch, s, d, c, h] (popgym's
// Mode: PLAY = 0, WATCH = 1).
//
// Timeline (N = num_cards): reset shows the first card in watch mode; each of
// the next N - 1 steps deals one more, and the step that deals the last card
// already reports mode play (with that card's real suit). The N following
// steps score the action against the suits in reverse order, +-1/N each, and
// show play mode with a dummy suit (popgym shows suit 0, spades). Watch-phase
// actions are ignored (reward 0). So 2N - 1 steps, terminated (no time limit),
// best return 1.0, a uniform guess -0.5. Difficulty: easy 1 deck, medium 2,
// hard 3 (103 / 207 / 311 steps).
#pragma once

#include <ostream>

#include "envs/batched_env.hpp"
#include "envs/card_deck.hpp"

namespace mambarl {

struct Autoencode {
  using Deck = CardDeckOf<3>;                  // hard deals 3 decks
  static constexpr int kPlay = 0, kWatch = 1;  // mode values (one-hot slots 0 and 1)
  Deck deck;
  int recited = 0;  // play steps taken: the next answer is the suit of card N - 1 - recited

  explicit Autoencode(int num_decks) : deck(num_decks) {}

  EnvSpec spec() const {
    return one_hot_env_spec("autoencode", 6, 4, 0);
  }

  // Play mode starts with the step that deals the last card.
  MAMBARL_HD bool playing() const { return deck.remaining() == 0; }

  MAMBARL_HD void reset(Rng& rng, float* obs) {
    deck.shuffle(rng);
    recited = 0;
    write_obs(kWatch, Deck::suit(deck.deal()), obs);
  }

  MAMBARL_HD EnvStepResult step(int action, float* obs) {
    if (!playing()) {
      const int suit = Deck::suit(deck.deal());
      write_obs(playing() ? kPlay : kWatch, suit, obs);
      return {0.0f, false};
    }
    const float scale = 1.0f / static_cast<float>(deck.num_cards);
    const int answer = Deck::suit(deck.dealt_card(deck.num_cards - 1 - recited));
    recited += 1;
    write_obs(kPlay, 0, obs);
    return {action == answer ? scale : -scale, recited == deck.num_cards};
  }

  void render(std::ostream& os) const {
    if (!playing()) {
      os << "watch: card " << deck.dealt << "/" << deck.num_cards << " "
         << Deck::name(deck.dealt_card(deck.dealt - 1)) << "\n";
      return;
    }
    // recited < N here: the step that recites the last card also resets the episode.
    os << "play: recited " << recited << "/" << deck.num_cards << ", answer suit "
       << Deck::name(CardFeature::suit, Deck::suit(deck.dealt_card(deck.num_cards - 1 - recited))) << "\n";
  }

 private:
  MAMBARL_HD static void write_obs(int mode, int suit, float* obs) {
    for (int i = 0; i < 6; ++i) obs[i] = 0.0f;
    obs[mode] = 1.0f;
    obs[2 + suit] = 1.0f;
  }
};
static_assert(sizeof(Autoencode) == sizeof(Autoencode::Deck) + sizeof(int),
              "Autoencode must have no padding bytes");

}  // namespace mambarl
