// A shuffled stack of 52 * num_decks playing cards, as popgym/core/deck.py lays
// them out: card c has rank (c mod 52) / 4, suit c mod 4 and colour c mod 2
// (suits spades, diamonds, clubs, hearts; colours black, red), so each deck holds
// 13 of every suit, 26 of every colour and 4 of every rank. A fixed-capacity
// array keeps the env structs plain copyable values (no allocation per episode).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <utility>

#include "kernels/check.hpp"
#include "kernels/rng.hpp"

namespace mambarl {

enum class CardFeature { colour, suit, rank };

struct CardDeck {
  static constexpr int kDeckSize = 52;
  static constexpr int kMaxDecks = 4;  // CountRecall hard uses 4
  static constexpr int kMaxCards = kDeckSize * kMaxDecks;

  int num_cards = kDeckSize;
  int dealt = 0;                          // cards dealt since the last shuffle
  std::array<int16_t, kMaxCards> order{};  // (num_cards): deal order after a shuffle

  explicit CardDeck(int num_decks = 1) : num_cards(kDeckSize * num_decks) {
    MAMBARL_CHECK(num_decks >= 1 && num_decks <= kMaxDecks,
                  "CardDeck: num_decks must be in [1, " << kMaxDecks << "], got " << num_decks);
  }

  // Fisher-Yates over the identity, so a shuffle depends only on the rng state.
  void shuffle(Rng& rng) {
    for (int i = 0; i < num_cards; ++i) order[static_cast<size_t>(i)] = static_cast<int16_t>(i);
    for (int i = num_cards - 1; i > 0; --i)
      std::swap(order[static_cast<size_t>(i)], order[rng.below(static_cast<uint32_t>(i + 1))]);
    dealt = 0;
  }

  int remaining() const { return num_cards - dealt; }
  int deal() {
    MAMBARL_CHECK(dealt < num_cards, "CardDeck: dealing from an empty deck");
    return order[static_cast<size_t>(dealt++)];
  }
  int dealt_card(int i) const { return order[static_cast<size_t>(i)]; }  // i-th card dealt, 0-based

  static int suit(int card) { return card % 4; }
  static int colour(int card) { return card % 2; }
  static int rank(int card) { return (card % kDeckSize) / 4; }
  static int feature(CardFeature f, int card) {
    return f == CardFeature::colour ? colour(card) : f == CardFeature::suit ? suit(card) : rank(card);
  }
  static int num_values(CardFeature f) { return f == CardFeature::colour ? 2 : f == CardFeature::suit ? 4 : 13; }
  // Short names for render(): "b"/"r", "s"/"d"/"c"/"h", "a".."k".
  static std::string name(CardFeature f, int value) {
    static const char* const kColours[] = {"b", "r"};
    static const char* const kSuits[] = {"s", "d", "c", "h"};
    static const char* const kRanks[] = {"a", "2", "3", "4", "5", "6", "7", "8", "9", "10", "j", "q", "k"};
    return f == CardFeature::colour ? kColours[value] : f == CardFeature::suit ? kSuits[value] : kRanks[value];
  }
};

}  // namespace mambarl
