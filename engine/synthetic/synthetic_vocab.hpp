// Synthetic vocabularies with the layout of real ones, so that synthetic models carry the
// tokenizer their family's files carry. Text pieces are built so that merging works: every
// multi-character piece is one of its prefixes plus one character, both pieces too.
//   sentencepiece (LLaMA 1/2, Mistral): <unk>, <s>, </s>, the 256 byte pieces <0x00>..<0xFF>,
//     then text pieces with U+2581 for a space and scores that rank shorter pieces first.
//   llama3 and qwen2 (byte-level BPE, tokenizer.ggml.model gpt2): the 256 GPT-2 byte symbols in
//     GPT-2's order, then one merged token per merge (rank = order), then the family's special
//     tokens: Llama 3's 256 from <|begin_of_text|> as llama.cpp's ggml-vocab-llama-bpe.gguf has
//     them; Qwen2.5's 22 from <|endoftext|>, then [PADn] padding up to the embedding's rows.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace cpullm {

enum class SyntheticVocabKind : uint8_t { sentencepiece, llama3, qwen2 };

struct SyntheticVocab {
  std::string model;                // tokenizer.ggml.model: "llama" (SentencePiece) or "gpt2" (byte-level BPE)
  std::string pre;                  // tokenizer.ggml.pre: "llama-bpe" or "qwen2"; empty for SentencePiece
  std::vector<std::string> pieces;  // (vocab) tokenizer.ggml.tokens
  std::vector<float> scores;        // (vocab) SentencePiece's priorities: earlier (shorter, commoner) pieces score higher; empty for BPE
  std::vector<int32_t> types;       // (vocab) tokenizer.ggml.token_type values
  std::vector<std::string> merges;  // BPE's merges by rank, "left right"; empty for SentencePiece
  int32_t bos = 1;
  int32_t eos = 2;
  std::optional<int32_t> unknown;   // tokenizer.ggml.unknown_token_id, where the family has one
  std::optional<int32_t> padding;   // tokenizer.ggml.padding_token_id, where the family has one
  bool add_bos = true;              // tokenizer.ggml.add_bos_token
};

// vocab_size must leave room for the layout: 354 pieces for sentencepiece (specials, bytes,
// U+2581 and printable ASCII), 513 for llama3, 279 for qwen2 (bytes, specials, one merge).
SyntheticVocab make_synthetic_vocab(int64_t vocab_size, SyntheticVocabKind kind = SyntheticVocabKind::sentencepiece);

}  // namespace cpullm
