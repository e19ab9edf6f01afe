// SentencePiece-style BPE over a GGUF vocabulary (tokenizer.ggml.model = "llama"): spaces become
// U+2581, the text is split into UTF-8 characters, then the adjacent pair whose concatenation is
// a piece with the highest score is merged until no pair is a piece; characters that are no
// piece fall back to byte pieces <0xXX>. This is llama.cpp's SPM algorithm.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/tokenizer/vocabulary.hpp"

namespace cpullm {

// Appends the tokens of `text` (not empty); with `space_prefix`, as if a space came first.
void spm_encode(std::string_view text, bool space_prefix, const Vocabulary& vocab, std::vector<int32_t>& out);

// The text of a SentencePiece piece: U+2581 back to a space.
std::string spm_piece_text(std::string_view piece);

}  // namespace cpullm
