// A SentencePiece-style vocabulary with the layout of LLaMA's: <unk>, <s>, </s>, the 256 byte
// pieces <0x00>..<0xFF>, then text pieces. The text pieces are built so that merging works:
// every multi-character piece is one of its prefixes plus one character, both pieces too.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace cpullm {

struct SyntheticVocab {
  std::vector<std::string> pieces;  // (vocab)
  std::vector<float> scores;        // (vocab) earlier (shorter, commoner) pieces score higher
  std::vector<int32_t> types;       // (vocab) tokenizer.ggml.token_type values
};

// vocab_size must be at least 354: specials, bytes, U+2581 and printable ASCII.
SyntheticVocab make_synthetic_vocab(int64_t vocab_size);

}  // namespace cpullm
