// A GGUF file's vocabulary (the tokenizer.ggml.* keys), the tables both tokenizers read.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace cpullm {

// tokenizer.ggml.token_type values.
enum class TokenType : int32_t { Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6 };

struct Vocabulary {
  // (vocab) each token's text as the file writes it: SentencePiece writes a space as U+2581,
  // byte-level BPE writes every byte as a character of GPT-2's byte alphabet (bpe.hpp).
  std::vector<std::string> pieces;
  std::vector<float> scores;      // (vocab) SentencePiece's merge priority, higher first; 0 where the file has none
  std::vector<TokenType> types;   // (vocab)
  std::unordered_map<std::string_view, int32_t> piece_to_id;  // views into `pieces`; a repeated piece: its last id
  // The token that stands for each byte alone: SentencePiece's <0xXX> (-1 where the vocabulary
  // has none), or the byte's character in BPE's byte alphabet (always there: checked on load).
  std::array<int32_t, 256> byte_tokens;
  int32_t unk = -1;  // SentencePiece's token for bytes without a byte token; -1: none
};

}  // namespace cpullm
