#include "engine/synthetic/synthetic_vocab.hpp"

#include <fmt/format.h>

#include <array>
#include <set>
#include <string_view>

#include "engine/tokenizer/tokenizer.hpp"
#include "engine/util/error.hpp"

namespace cpullm {
namespace {

constexpr std::string_view kSpace = "\xe2\x96\x81";  // U+2581

// Common English words, so that English prompts tokenize into word-sized pieces.
constexpr std::array kWords = {
    "the", "and", "was", "she", "he", "to", "a", "of", "in", "it", "is", "that", "her", "his", "they", "with",
    "on", "for", "you", "said", "had", "one", "day", "there", "time", "upon", "once", "little", "girl", "boy",
    "who", "loved", "play", "big", "red", "ball", "park", "mom", "dad", "happy", "sad", "friend", "friends",
    "saw", "went", "wanted", "very", "were", "not", "but", "so", "all", "what", "do", "can", "go", "see", "up",
    "out", "at", "from", "this", "have", "be", "are", "we", "my", "me", "will", "would", "could", "about", "hello",
    "world", "model", "token", "server", "memory", "fast", "slow", "cpu", "core", "cache", "thread", "data",
};

// Syllables that fill the rest of the vocabulary with plausible sub-word pieces.
constexpr std::string_view kOnsets[] = {"b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t",
                                        "v", "w", "y", "z", "st", "tr", "th", "ch", "sh", "pl", "gr", "br", "cl"};
constexpr std::string_view kVowels[] = {"a", "e", "i", "o", "u", "ea", "ou", "ai", "oo", "ie"};
constexpr std::string_view kCodas[] = {"", "n", "r", "s", "t", "d", "l", "m", "ng", "st", "ck", "nd"};

}  // namespace

SyntheticVocab make_synthetic_vocab(int64_t vocab_size) {
  SyntheticVocab v;
  std::set<std::string> seen;
  auto add = [&](std::string piece, TokenType type) {
    if (static_cast<int64_t>(v.pieces.size()) >= vocab_size || !seen.insert(piece).second) return;
    v.scores.push_back(type == TokenType::Normal ? -static_cast<float>(v.pieces.size()) : 0.0f);
    v.types.push_back(static_cast<int32_t>(type));
    v.pieces.push_back(std::move(piece));
  };
  // Adds a piece and, first, every prefix of it, so merges can build it one character at a time.
  auto add_with_prefixes = [&](const std::string& piece) {
    for (std::size_t end = 1; end <= piece.size(); ++end) {
      if (end < piece.size() && (static_cast<unsigned char>(piece[end]) & 0xc0) == 0x80) continue;  // mid-character
      add(piece.substr(0, end), TokenType::Normal);
    }
  };

  // Special pieces, byte pieces, U+2581 and the printable ASCII characters come first.
  constexpr int64_t kMinimum = 3 + 256 + 1 + ('~' - '!' + 1);
  if (vocab_size < kMinimum) fail("a synthetic vocabulary needs at least {} pieces (asked for {})", kMinimum, vocab_size);
  add("<unk>", TokenType::Unknown);
  add("<s>", TokenType::Control);
  add("</s>", TokenType::Control);
  for (int byte = 0; byte < 256; ++byte) add(fmt::format("<0x{:02X}>", byte), TokenType::Byte);
  add(std::string(kSpace), TokenType::Normal);
  for (char c = '!'; c <= '~'; ++c) add(std::string(1, c), TokenType::Normal);

  for (const char* word : kWords) {
    add_with_prefixes(std::string(kSpace) + word);
    add_with_prefixes(word);
  }
  for (std::string_view onset : kOnsets)
    for (std::string_view vowel : kVowels)
      for (std::string_view coda : kCodas) {
        std::string syllable = std::string(onset) + std::string(vowel) + std::string(coda);
        add_with_prefixes(std::string(kSpace) + syllable);
        add_with_prefixes(syllable);
      }
  // Two-syllable pieces until the vocabulary is full.
  for (std::size_t i = 0; static_cast<int64_t>(v.pieces.size()) < vocab_size; ++i) {
    std::string_view a = kOnsets[i % std::size(kOnsets)], b = kVowels[(i / 7) % std::size(kVowels)];
    std::string_view c = kOnsets[(i / 3) % std::size(kOnsets)], d = kVowels[(i / 11) % std::size(kVowels)];
    std::string_view e = kCodas[(i / 13) % std::size(kCodas)];
    std::string word = std::string(a) + std::string(b) + std::string(c) + std::string(d) + std::string(e);
    add_with_prefixes((i % 2 ? std::string(kSpace) : std::string()) + word);
    if (i > 50'000'000) fail("cannot build a synthetic vocabulary of {} distinct pieces", vocab_size);
  }
  return v;
}

}  // namespace cpullm
