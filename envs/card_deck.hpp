// A shuffled stack of 52 * num_decks playing cards, as popgym/core/deck.py lays
// them out: card c has rank (c mod 52) / 4, suit c mod 4 and colour c mod 2
// (suits spades, diamonds, clubs, hearts; colours black, red), so each deck holds
// 13 of every suit, 26 of every colour and 4 of every rank. A fixed-capacity
// array keeps the env structs plain copyable values (no allocation per episode).
// Everything a step uses is MAMBARL_HD (the CUDA env backend runs this code),
// hence a plain array rather than std::array, and host-only checks.
//
// The capacity is a template parameter because an env's state is saved as raw
// bytes: each env sizes its stack for its own hardest level (RepeatFirst hard
// deals 16 decks, Concentration at most 2), and CardDeck, the 4-deck stack of
// the first card envs, keeps the byte layout their checkpoints were saved in.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/base/check.hpp"
#include "kernels/base/rng.hpp"

namespace mambarl {

enum class CardFeature { colour, suit, rank };

// What a card shows; independent of how many cards a stack holds.
struct CardFaces {
  static constexpr int kDeckSize = 52;

  MAMBARL_HD static int suit(int card) { return card % 4; }
  MAMBARL_HD static int colour(int card) { return card % 2; }
  MAMBARL_HD static int rank(int card) { return (card % kDeckSize) / 4; }
  MAMBARL_HD static int feature(CardFeature f, int card) {
    return f == CardFeature::colour ? colour(card) : f == CardFeature::suit ? suit(card) : rank(card);
  }
  MAMBARL_HD static int num_values(CardFeature f) {
    return f == CardFeature::colour ? 2 : f == CardFeature::suit ? 4 : 13;
  }
  // Short names for render(): "b"/"r", "s"/"d"/"c"/"h", "a".."k".
  static std::string name(CardFeature f, int value) {
    static const char* const kColours[] = {"b", "r"};
    static const char* const kSuits[] = {"s", "d", "c", "h"};
    static const char* const kRanks[] = {"a", "2", "3", "4", "5", "6", "7", "8", "9", "10", "j", "q", "k"};
    return f == CardFeature::colour ? kColours[value] : f == CardFeature::suit ? kSuits[value] : kRanks[value];
  }
  static std::string name(int card) {  // "10h"
    return name(CardFeature::rank, rank(card)) + name(CardFeature::suit, suit(card));
  }
};

template <int MaxDecks>
struct CardDeckOf : CardFaces {
  static constexpr int kMaxDecks = MaxDecks;
  static constexpr int kMaxCards = kDeckSize * kMaxDecks;
  static_assert(kMaxCards <= INT16_MAX, "card indices are stored as int16_t");

  int num_cards = kDeckSize;
  int dealt = 0;                          // cards dealt since the last shuffle
  int16_t order[kMaxCards] = {};          // (num_cards): deal order after a shuffle

  explicit CardDeckOf(int num_decks = 1) : num_cards(kDeckSize * num_decks) {
    MAMBARL_CHECK(num_decks >= 1 && num_decks <= kMaxDecks,
                  "CardDeck: num_decks must be in [1, " << kMaxDecks << "], got " << num_decks);
  }

  // Fisher-Yates over the identity, so a shuffle depends only on the rng state.
  MAMBARL_HD void shuffle(Rng& rng) {
    for (int i = 0; i < num_cards; ++i) order[i] = static_cast<int16_t>(i);
    for (int i = num_cards - 1; i > 0; --i) {
      const uint32_t j = rng.below(static_cast<uint32_t>(i + 1));
      const int16_t t = order[i];
      order[i] = order[j];
      order[j] = t;
    }
    dealt = 0;
  }

  MAMBARL_HD int remaining() const { return num_cards - dealt; }
  // The envs never deal from an empty deck (their episodes end first); the
  // host checks it, a device cannot throw.
  MAMBARL_HD int deal() {
#ifndef __CUDA_ARCH__
    MAMBARL_CHECK(dealt < num_cards, "CardDeck: dealing from an empty deck");
#endif
    return order[dealt++];
  }
  MAMBARL_HD int dealt_card(int i) const { return order[i]; }  // i-th card dealt, 0-based
};

// The stack of RepeatPrevious and CountRecall (CountRecall hard uses 4 decks).
using CardDeck = CardDeckOf<4>;
static_assert(sizeof(CardDeck) == 2 * sizeof(int) + CardDeck::kMaxCards * sizeof(int16_t),
              "CardDeck keeps the saved-state layout it had before the capacity became a parameter");

}  // namespace mambarl
