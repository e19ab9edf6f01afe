// Text to token ids and back, from a GGUF file's vocabulary. tokenizer.ggml.model picks the
// algorithm: "llama" is SentencePiece-style BPE over pieces with scores (spm.hpp), "gpt2" is
// byte-level BPE over merges with a pre-tokenizer (bpe.hpp, pretokenizer.hpp). Around either,
// the Tokenizer does what both share: special tokens in the text, BOS, the tokens that end
// generation, and each token's bytes for the decoder.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/tokenizer/bpe.hpp"
#include "engine/tokenizer/pretokenizer.hpp"
#include "engine/tokenizer/vocabulary.hpp"

namespace cpullm {

class GgufFile;

enum class TokenizerModel { spm, bpe };

// Bytes [begin, end) of a text.
struct TextRange {
  std::size_t begin;  // first byte
  std::size_t end;    // one past the last
};

class Tokenizer {
 public:
  static Tokenizer from_gguf(const GgufFile& file);
  // The piece index holds views into the pieces, so a Tokenizer moves but is never copied.
  Tokenizer(Tokenizer&&) = default;
  Tokenizer(const Tokenizer&) = delete;

  // Token ids of `text`. add_special: BOS first where the vocabulary asks for it
  // (tokenizer.ggml.add_bos_token, else the model's default). parse_special: the text of a control
  // token (<|eot_id|>, <s>) becomes that token; otherwise it is plain text. User-defined tokens
  // always become themselves. Byte-level BPE refuses text that is not UTF-8; SentencePiece gives
  // such bytes their byte pieces. Empty text gives BOS alone, or nothing.
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special = false) const;
  // A rendered chat prompt: no BOS is added (the template writes its own), control tokens are
  // parsed, except inside `literal`, the ranges that hold what a user wrote (each message's
  // content): a user who types "<|im_end|>" gets that text, never the token.
  std::vector<int32_t> encode_chat(std::string_view text, std::span<const TextRange> literal) const;
  // The bytes a token stands for; control and unused tokens stand for none.
  std::string token_bytes(int32_t token) const;

  TokenizerModel model() const { return model_; }
  int32_t bos() const { return bos_; }  // -1: the vocabulary has none
  int32_t eos() const { return eos_; }  // -1: the vocabulary has none
  bool adds_bos() const { return add_bos_; }
  // SentencePiece's space before the text, which the decoder drops after BOS.
  bool adds_space_prefix() const { return add_space_prefix_; }
  // The tokens generation stops at: EOS, EOT and EOM where the file names them, and the tokens
  // that end a turn in the chat formats cpullm knows, found by their text.
  const std::vector<int32_t>& end_of_generation() const { return end_of_generation_; }
  bool ends_generation(int32_t token) const;
  int32_t vocab_size() const { return static_cast<int32_t>(vocab_.pieces.size()); }
  const std::string& piece(int32_t token) const { return vocab_.pieces.at(token); }

 private:
  Tokenizer() = default;
  // A run of the text: plain text for the model's algorithm, or one special token.
  struct Fragment {
    std::string_view text;  // empty for a special token
    int32_t token;          // -1 for plain text
  };
  std::vector<Fragment> split_specials(std::string_view text, bool parse_special,
                                       std::span<const TextRange> literal) const;
  std::vector<int32_t> encode_fragments(std::string_view text, bool add_special, bool parse_special,
                                        std::span<const TextRange> literal) const;
  void encode_plain(std::string_view text, bool after_special, std::vector<int32_t>& out) const;

  Vocabulary vocab_;
  TokenizerModel model_ = TokenizerModel::spm;
  std::optional<PreTokenizer> pre_;  // BPE only
  BpeMerges merges_;                 // BPE only
  int32_t bos_ = -1;
  int32_t eos_ = -1;
  bool add_bos_ = false;
  bool add_space_prefix_ = false;
  std::vector<int32_t> end_of_generation_;  // sorted
  // Control, user-defined and unknown tokens by their first byte, longest first: the text is
  // searched for them before the model's algorithm sees it.
  std::array<std::vector<int32_t>, 256> specials_;
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
