#include "engine/tokenizer/bpe.hpp"

#include <climits>
#include <queue>

#include "engine/format/gguf.hpp"
#include "engine/util/error.hpp"
#include "engine/util/text.hpp"

namespace cpullm {
namespace {

// The alphabet's characters are U+0021..U+0143: one or two bytes of UTF-8.
constexpr uint32_t kAlphabetEnd = 0x144;

// The code point each byte is written as.
const std::array<uint32_t, 256>& byte_characters() {
  static const std::array<uint32_t, 256> characters = [] {
    std::array<uint32_t, 256> table{};
    uint32_t next = 0x100;  // the bytes that are not printable, in order
    for (uint32_t byte = 0; byte < 256; ++byte) {
      const bool printable = (byte >= '!' && byte <= '~') || (byte >= 0xA1 && byte <= 0xAC) || byte >= 0xAE;
      table[byte] = printable ? byte : next++;
    }
    return table;
  }();
  return characters;
}

// The byte each character of the alphabet stands for, by code point; -1 outside the alphabet.
const std::array<int16_t, kAlphabetEnd>& character_bytes() {
  static const std::array<int16_t, kAlphabetEnd> bytes = [] {
    std::array<int16_t, kAlphabetEnd> table;
    table.fill(-1);
    for (int byte = 0; byte < 256; ++byte) table[byte_characters()[byte]] = static_cast<int16_t>(byte);
    return table;
  }();
  return bytes;
}

// The code point of the valid UTF-8 sequence of `length` bytes at text[i].
uint32_t code_point(std::string_view text, std::size_t i, std::size_t length) {
  static constexpr uint8_t kLeadBits[] = {0, 0x7F, 0x1F, 0x0F, 0x07};
  uint32_t cp = static_cast<uint8_t>(text[i]) & kLeadBits[length];
  for (std::size_t k = 1; k < length; ++k) cp = cp << 6 | (static_cast<uint8_t>(text[i + k]) & 0x3F);
  return cp;
}

// One symbol of a word being merged: a token, linked to its neighbours.
struct Symbol {
  int32_t token;  // -1 once merged into its left neighbour
  int prev, next; // indices of the neighbours, -1 at the ends
};

// An adjacent pair that a merge joins, as it was when found; stale once either side changed.
struct Candidate {
  int32_t rank;
  int left;                         // index of the left symbol
  int32_t left_token, right_token;  // the pair's tokens when found
  int32_t merged;
  bool operator<(const Candidate& other) const {  // priority_queue pops the largest: the lowest rank, leftmost first
    return rank > other.rank || (rank == other.rank && left > other.left);
  }
};

uint64_t pair_key(int32_t left, int32_t right) {
  return static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32 | static_cast<uint32_t>(right);
}

}  // namespace

std::string to_byte_alphabet(std::string_view bytes) {
  std::string text;
  text.reserve(bytes.size() * 2);
  for (char c : bytes) {
    const uint32_t cp = byte_characters()[static_cast<uint8_t>(c)];
    if (cp < 0x80) {
      text += static_cast<char>(cp);
    } else {
      text += static_cast<char>(0xC0 | cp >> 6);
      text += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  return text;
}

std::string from_byte_alphabet(std::string_view piece) {
  std::string bytes;
  for (std::size_t i = 0; i < piece.size();) {
    const std::size_t length = utf8_sequence_length(piece, i);
    if (length == 0) {  // not UTF-8: the byte as it is
      bytes += piece[i++];
      continue;
    }
    const uint32_t cp = code_point(piece, i, length);
    if (cp < kAlphabetEnd && character_bytes()[cp] >= 0) bytes += static_cast<char>(character_bytes()[cp]);
    else bytes.append(piece.substr(i, length));
    i += length;
  }
  return bytes;
}

std::array<int32_t, 256> bpe_byte_tokens(const Vocabulary& vocab, const std::string& path) {
  std::array<int32_t, 256> tokens;
  for (int byte = 0; byte < 256; ++byte) {
    const std::string character = to_byte_alphabet(std::string(1, static_cast<char>(byte)));
    const auto it = vocab.piece_to_id.find(character);
    if (it == vocab.piece_to_id.end())
      fail_file(path, "the gpt2 vocabulary has no token for byte 0x{:02X} (its character in GPT-2's byte alphabet is "
                "'{}')", byte, character);
    tokens[byte] = it->second;
  }
  return tokens;
}

BpeMerges read_bpe_merges(const GgufFile& file, const Vocabulary& vocab) {
  const GgufValue& merges = file.require_array("tokenizer.ggml.merges", GgufValueType::STRING);
  if (merges.count > INT32_MAX) fail_file(file.path(), "tokenizer.ggml.merges has {} entries", merges.count);
  auto token = [&](std::string_view piece, uint64_t i, std::string_view merge) {
    const auto it = vocab.piece_to_id.find(piece);
    if (it == vocab.piece_to_id.end())
      fail_file(file.path(), "tokenizer.ggml.merges[{}] '{}': '{}' is not a token of the vocabulary", i, merge, piece);
    return it->second;
  };
  BpeMerges by_pair;
  by_pair.reserve(merges.count);
  std::string joined;
  for (uint64_t i = 0; i < merges.count; ++i) {
    const std::string_view merge = merges.items[i].string;
    // The alphabet writes a space as 'Ġ', so the one space separates the two pieces; neither is empty.
    const std::size_t space = merge.find(' ', 1);
    if (space == std::string_view::npos || space + 1 == merge.size())
      fail_file(file.path(), "tokenizer.ggml.merges[{}] '{}' is not two pieces separated by a space", i, merge);
    const std::string_view left = merge.substr(0, space), right = merge.substr(space + 1);
    const uint64_t pair = pair_key(token(left, i, merge), token(right, i, merge));
    joined.assign(left).append(right);
    // A pair listed twice keeps its first, lower, rank.
    by_pair.emplace(pair, BpeMerge{static_cast<int32_t>(i), token(joined, i, merge)});
  }
  return by_pair;
}

void bpe_merge_word(std::string_view word, const Vocabulary& vocab, const BpeMerges& merges, std::vector<int32_t>& out) {
  const int n = static_cast<int>(word.size());
  std::vector<Symbol> symbols(n);
  for (int i = 0; i < n; ++i) symbols[i] = {vocab.byte_tokens[static_cast<uint8_t>(word[i])], i - 1, i + 1 < n ? i + 1 : -1};

  std::priority_queue<Candidate> queue;
  auto consider = [&](int left) {  // the pair that starts at `left`, if a merge joins it
    if (left < 0 || symbols[left].next < 0) return;
    const int32_t a = symbols[left].token, b = symbols[symbols[left].next].token;
    const auto it = merges.find(pair_key(a, b));
    if (it != merges.end()) queue.push({it->second.rank, left, a, b, it->second.merged});
  };
  for (int i = 0; i + 1 < n; ++i) consider(i);

  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& left = symbols[c.left];
    // Tokens only grow, so a symbol that still holds its token has kept its right neighbour.
    if (left.token != c.left_token || left.next < 0 || symbols[left.next].token != c.right_token) continue;
    Symbol& right = symbols[left.next];
    left.token = c.merged;
    right.token = -1;
    left.next = right.next;
    if (left.next >= 0) symbols[left.next].prev = c.left;
    consider(left.prev);
    consider(c.left);
  }
  for (int i = 0; i >= 0; i = symbols[i].next) out.push_back(symbols[i].token);
}

}  // namespace cpullm
