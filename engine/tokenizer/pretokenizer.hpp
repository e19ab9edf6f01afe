// Byte-level BPE does not merge across the whole text: a pre-tokenizer first cuts it into words
// (a letter run with the space before it, up to three digits, a punctuation run, ...) and BPE
// merges within each word. tokenizer.ggml.pre names the pre-tokenizer; each is one or more
// regular expressions, written as the models' tokenizer.json files write them, with Unicode
// classes (\p{L} letters, \p{N} numbers, \s white space). PCRE2 runs them, in UTF mode with
// Unicode properties, so the classes mean what Unicode says.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace cpullm {

class PreTokenizer {
 public:
  // The pre-tokenizer tokenizer.ggml.pre calls `name` ("" where the key is absent), as llama.cpp
  // reads it; an Error naming `path` and the name for one cpullm does not know.
  static PreTokenizer named(std::string_view name, const std::string& path);

  // The words of `text` (valid UTF-8), in order, together exactly `text`: the first pattern's
  // matches and the runs between them, then each of those cut by the next pattern likewise.
  std::vector<std::string_view> split(std::string_view text) const;

  const std::string& name() const { return name_; }
  // A word that is a token as a whole becomes that token without merging (Llama 3's
  // tokenizer.json sets "ignore_merges"): merges alone may reach another split of it.
  bool ignore_merges() const { return ignore_merges_; }
  // Whether BOS comes first where the file has no tokenizer.ggml.add_bos_token.
  bool adds_bos() const { return adds_bos_; }

 private:
  struct Pattern;  // one compiled PCRE2 expression
  std::string name_;
  std::vector<std::shared_ptr<const Pattern>> patterns_;  // applied in order
  bool ignore_merges_ = false;
  bool adds_bos_ = false;
};

}  // namespace cpullm
