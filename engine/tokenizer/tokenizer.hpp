// SentencePiece-style tokenizer from a GGUF vocabulary (tokenizer.ggml.model = "llama"):
// text is split into UTF-8 characters, then the adjacent pair whose concatenation is a piece
// with the highest score is merged until no pair is a piece; characters that are no piece
// fall back to byte pieces <0xXX>. This is llama.cpp's SPM algorithm.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace cpullm {

class GgufFile;

// tokenizer.ggml.token_type values.
enum class TokenType : int32_t { Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6 };

class Tokenizer {
 public:
  static Tokenizer from_gguf(const GgufFile& file);

  // Token ids of `text`, with BOS first when add_bos. Empty text gives BOS alone (or nothing).
  std::vector<int32_t> encode(std::string_view text, bool add_bos) const;
  // The bytes a token stands for: U+2581 becomes a space, <0xXX> the byte, control tokens "".
  std::string token_bytes(int32_t token) const;

  int32_t bos() const { return bos_; }
  int32_t eos() const { return eos_; }
  int32_t vocab_size() const { return static_cast<int32_t>(pieces_.size()); }
  const std::string& piece(int32_t token) const { return pieces_.at(token); }

 private:
  std::vector<std::string> pieces_;  // (vocab) piece text, with U+2581 for spaces
  std::vector<float> scores_;        // (vocab) merge priority: higher merges first
  std::vector<TokenType> types_;     // (vocab)
  std::unordered_map<std::string_view, int32_t> piece_to_id_;
  int32_t byte_tokens_[256];         // id of <0xXX> for each byte, -1 if absent
  int32_t bos_ = 1, eos_ = 2, unk_ = 0;
  bool add_space_prefix_ = true;
};

// Turns a stream of token ids into valid UTF-8 text. Byte tokens can split a character across
// tokens, so bytes are held until they complete one; bytes that can never form a character
// come out as U+FFFD. The space SentencePiece puts before the first word after BOS is dropped.
class TextDecoder {
 public:
  explicit TextDecoder(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}
  std::string push(int32_t previous, int32_t token);  // text now complete
  std::string finish();                               // whatever is left, made valid

 private:
  std::string take_valid(bool final);
  const Tokenizer& tokenizer_;
  std::string pending_;
};

}  // namespace cpullm
