#include "engine/synthetic/synthetic_vocab.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <functional>
#include <numeric>
#include <set>
#include <string_view>

#include "engine/tokenizer/bpe.hpp"
#include "engine/tokenizer/tokenizer.hpp"
#include "engine/util/error.hpp"

namespace cpullm {
namespace {

constexpr std::string_view kSpace = "\xe2\x96\x81";     // U+2581, SentencePiece's space
constexpr std::string_view kGpt2Space = "\xc4\xa0";      // U+0120, GPT-2's symbol of the space byte

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

// Every word the vocabularies are built from, in order, with whether it follows a space: the
// English words and the syllables both ways, then two-syllable words, one way and the other,
// until `full` says the vocabulary is.
void for_each_word(int64_t vocab_size, const std::function<void(const std::string&, bool)>& add,
                   const std::function<bool()>& full) {
  for (const char* word : kWords) {
    add(word, true);
    add(word, false);
  }
  for (std::string_view onset : kOnsets)
    for (std::string_view vowel : kVowels)
      for (std::string_view coda : kCodas) {
        const std::string syllable = std::string(onset) + std::string(vowel) + std::string(coda);
        add(syllable, true);
        add(syllable, false);
      }
  // Every combination once: onset, vowel, onset, vowel, coda, counted in mixed radix.
  const std::size_t onsets = std::size(kOnsets), vowels = std::size(kVowels), codas = std::size(kCodas);
  const std::size_t combinations = onsets * vowels * onsets * vowels * codas;
  for (std::size_t i = 0; !full(); ++i) {
    if (i == combinations) fail("cannot build a synthetic vocabulary of {} distinct pieces", vocab_size);
    std::size_t rest = i;
    const auto next = [&rest](std::size_t radix) { const std::size_t digit = rest % radix; rest /= radix; return digit; };
    std::string word(kOnsets[next(onsets)]);
    word += kVowels[next(vowels)];
    word += kOnsets[next(onsets)];
    word += kVowels[next(vowels)];
    word += kCodas[next(codas)];
    add(word, i % 2 == 1);
  }
}

// The end of each UTF-8 character of `text` but the last.
std::vector<std::size_t> character_ends(std::string_view text) {
  std::vector<std::size_t> ends;
  for (std::size_t end = 1; end < text.size(); ++end)
    if ((static_cast<unsigned char>(text[end]) & 0xc0) != 0x80) ends.push_back(end);
  return ends;
}

SyntheticVocab sentencepiece_vocab(int64_t vocab_size) {
  SyntheticVocab v;
  v.model = "llama";
  v.unknown = 0;
  std::set<std::string> seen;
  auto add = [&](std::string piece, TokenType type) {
    if (static_cast<int64_t>(v.pieces.size()) >= vocab_size || !seen.insert(piece).second) return;
    v.scores.push_back(type == TokenType::Normal ? -static_cast<float>(v.pieces.size()) : 0.0f);
    v.types.push_back(static_cast<int32_t>(type));
    v.pieces.push_back(std::move(piece));
  };
  // Adds a piece and, first, every prefix of it, so merges can build it one character at a time.
  auto add_with_prefixes = [&](const std::string& piece) {
    for (std::size_t end : character_ends(piece)) add(piece.substr(0, end), TokenType::Normal);
    add(piece, TokenType::Normal);
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
  for_each_word(
      vocab_size, [&](const std::string& word, bool spaced) { add_with_prefixes((spaced ? std::string(kSpace) : "") + word); },
      [&] { return static_cast<int64_t>(v.pieces.size()) >= vocab_size; });
  return v;
}

// GPT-2's symbol for one byte (the tokenizer's byte-to-unicode map).
std::string byte_symbol(int byte) { return to_byte_alphabet(std::string(1, static_cast<char>(byte))); }

struct SpecialToken {
  std::string text;
  TokenType type;
};

// Llama 3's specials, ids 128000 to 128255 in the real vocabulary.
std::vector<SpecialToken> llama3_specials() {
  std::vector<SpecialToken> specials;
  int reserved = 0;
  for (const char* name : {"begin_of_text", "end_of_text", "", "", "", "", "start_header_id", "end_header_id", "",
                           "eot_id"})
    specials.push_back({*name ? fmt::format("<|{}|>", name) : fmt::format("<|reserved_special_token_{}|>", reserved++),
                        TokenType::Control});
  while (specials.size() < 256) specials.push_back({fmt::format("<|reserved_special_token_{}|>", reserved++), TokenType::Control});
  return specials;
}

// Qwen2.5's, ids 151643 to 151664: the ones its tokenizer marks special are control tokens, the
// others (tool calls, fill-in-the-middle) user-defined, as llama.cpp's converter types them.
std::vector<SpecialToken> qwen2_specials() {
  std::vector<SpecialToken> specials;
  for (const char* name : {"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
                           "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
                           "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>"})
    specials.push_back({name, TokenType::Control});
  for (const char* name : {"<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>",
                           "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>"})
    specials.push_back({name, TokenType::UserDefined});
  return specials;
}

SyntheticVocab bpe_vocab(int64_t vocab_size, SyntheticVocabKind kind) {
  const bool llama3 = kind == SyntheticVocabKind::llama3;
  const std::vector<SpecialToken> specials = llama3 ? llama3_specials() : qwen2_specials();
  const int64_t real_normal = llama3 ? 128000 : 151643;  // tokens before the specials in the real vocabulary
  const int64_t minimum = 256 + static_cast<int64_t>(specials.size()) + 1;
  if (vocab_size < minimum)
    fail("a synthetic {} vocabulary needs at least {} tokens (asked for {})", llama3 ? "llama3" : "qwen2", minimum,
         vocab_size);
  const int64_t normal = std::min(vocab_size - static_cast<int64_t>(specials.size()), real_normal);

  SyntheticVocab v;
  v.model = "gpt2";
  v.pre = llama3 ? "llama-bpe" : "qwen2";
  std::set<std::string> seen;
  auto add = [&](std::string token, TokenType type) {
    seen.insert(token);
    v.types.push_back(static_cast<int32_t>(type));
    v.pieces.push_back(std::move(token));
  };
  // The byte symbols in code point order: the printable bytes, then the others (GPT-2's order).
  std::array<int, 256> bytes;
  std::iota(bytes.begin(), bytes.end(), 0);
  // In code point order, which UTF-8's byte order keeps.
  std::sort(bytes.begin(), bytes.end(), [](int a, int b) { return byte_symbol(a) < byte_symbol(b); });
  for (int byte : bytes) add(byte_symbol(byte), TokenType::Normal);
  // A word's prefixes, each the merge of the one before and the next character.
  auto add_with_merges = [&](const std::string& word) {
    std::size_t previous = 0;
    std::vector<std::size_t> ends = character_ends(word);
    ends.push_back(word.size());
    for (std::size_t end : ends) {
      if (static_cast<int64_t>(v.pieces.size()) >= normal) return;
      const std::string prefix = word.substr(0, end);
      if (previous > 0 && !seen.contains(prefix)) {
        v.merges.push_back(word.substr(0, previous) + " " + word.substr(previous, end - previous));
        add(prefix, TokenType::Normal);
      }
      previous = end;
    }
  };
  for_each_word(
      normal, [&](const std::string& word, bool spaced) { add_with_merges((spaced ? std::string(kGpt2Space) : "") + word); },
      [&] { return static_cast<int64_t>(v.pieces.size()) >= normal; });

  const int32_t first_special = static_cast<int32_t>(v.pieces.size());
  for (const SpecialToken& special : specials) add(special.text, special.type);
  // Padding up to the embedding's rows, as llama.cpp's converter writes Qwen's.
  while (static_cast<int64_t>(v.pieces.size()) < vocab_size) add(fmt::format("[PAD{}]", v.pieces.size()), TokenType::Unused);
  if (llama3) {
    v.bos = first_special;      // <|begin_of_text|>
    v.eos = first_special + 1;  // <|end_of_text|>
  } else {
    v.bos = first_special;      // <|endoftext|>, as the Qwen2 files have it
    v.eos = first_special + 2;  // <|im_end|>, Qwen2.5 Instruct's
    v.padding = first_special;
    v.add_bos = false;
  }
  return v;
}

}  // namespace

SyntheticVocab make_synthetic_vocab(int64_t vocab_size, SyntheticVocabKind kind) {
  return kind == SyntheticVocabKind::sentencepiece ? sentencepiece_vocab(vocab_size) : bpe_vocab(vocab_size, kind);
}

}  // namespace cpullm
