// Byte-level BPE, GPT-2's (tokenizer.ggml.model = "gpt2"). Pieces and merges are written in
// GPT-2's byte alphabet: each of the 256 bytes is one character, the printable ones (! to ~,
// ¡ to ¬, ® to ÿ) themselves and the other 68 U+0100 onwards in byte order, so a space is 'Ġ'
// (U+0120) and a newline 'Ċ' (U+010A). A word's bytes start as the 256 byte tokens; then the
// adjacent pair that tokenizer.ggml.merges lists first (the lowest rank) becomes the token of the
// two joined, again and again until no adjacent pair is listed. Every byte sequence therefore
// has tokens, and decoding is exact.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/tokenizer/vocabulary.hpp"

namespace cpullm {

class GgufFile;

struct BpeMerge {
  int32_t rank;    // position in tokenizer.ggml.merges: the lower merges first
  int32_t merged;  // the token the pair becomes
};

// Every merge, by the pair of tokens it joins: key (left << 32) | right.
using BpeMerges = std::unordered_map<uint64_t, BpeMerge>;

// `bytes` written in GPT-2's byte alphabet.
std::string to_byte_alphabet(std::string_view bytes);
// The bytes a piece written in the byte alphabet stands for. A character outside the alphabet
// (a piece a converter added as plain text) stands for itself.
std::string from_byte_alphabet(std::string_view piece);

// The byte tokens of a BPE vocabulary: an Error naming `path` where a byte has no token.
std::array<int32_t, 256> bpe_byte_tokens(const Vocabulary& vocab, const std::string& path);
// tokenizer.ggml.merges, checked: each entry is two tokens separated by one space, whose
// joined text is a token too; an Error naming the file and the entry otherwise.
BpeMerges read_bpe_merges(const GgufFile& file, const Vocabulary& vocab);

// Appends the tokens of `word` (raw bytes, not empty): its byte tokens merged by rank.
void bpe_merge_word(std::string_view word, const Vocabulary& vocab, const BpeMerges& merges, std::vector<int32_t>& out);

}  // namespace cpullm
