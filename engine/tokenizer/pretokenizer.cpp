#include "engine/tokenizer/pretokenizer.hpp"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <array>
#include <new>

#include "engine/util/error.hpp"

namespace cpullm {
namespace {

// tokenizer.json's "(?i:'s|'t|'re|'ve|'m|'ll|'d)" with the cases spelled out in ASCII, as
// llama.cpp spells them: Unicode case folding would also take 'ſ' (U+017F) for an s.
constexpr std::string_view kContractions = "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])";

struct KnownPreTokenizer {
  std::vector<std::string_view> names;  // tokenizer.ggml.pre values, as llama.cpp groups them
  std::vector<std::string> patterns;    // applied in order
  bool ignore_merges;
  bool adds_bos;
};

const std::vector<KnownPreTokenizer>& known_pre_tokenizers() {
  static const std::vector<KnownPreTokenizer> known = {
      // Llama 3: letters with one leading non-letter, numbers by up to three digits.
      {{"llama-bpe", "llama3", "llama-v3"},
       {std::string(kContractions) +
        R"(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
       true, true},
      // Qwen2: Llama 3's, but every digit a word of its own.
      {{"qwen2", "deepseek-r1-qwen"},
       {std::string(kContractions) +
        R"(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
       false, false},
      // GPT-2's own (OpenAI's encoder.py).
      {{"gpt-2"}, {R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)"}, false, false},
      // llama.cpp's "default", which it also takes where a file has no tokenizer.ggml.pre (with a
      // warning that quality suffers): punctuation runs, then GPT-2's split without its last
      // alternative, then digit runs, then groups of three ASCII digits.
      {{"default", ""},
       {R"([\p{P}\$\+<=>\^~\|]+)", R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))",
        R"(\p{N}+)", R"([0-9][0-9][0-9])"},
       false, false},
  };
  return known;
}

std::string pcre2_message(int code) {
  std::array<PCRE2_UCHAR, 256> buffer{};
  pcre2_get_error_message(code, buffer.data(), buffer.size());
  return reinterpret_cast<const char*>(buffer.data());
}

}  // namespace

struct PreTokenizer::Pattern {
  pcre2_code* code = nullptr;
  explicit Pattern(std::string_view text) {
    int error = 0;
    PCRE2_SIZE offset = 0;
    code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), PCRE2_UTF | PCRE2_UCP, &error, &offset,
                         nullptr);
    if (!code) fail("pre-tokenizer pattern '{}': {} at offset {}", text, pcre2_message(error), offset);
    // split() cuts at each match and goes on after it, so a pattern must never match nothing.
    uint32_t min_length = 0;
    pcre2_pattern_info(code, PCRE2_INFO_MINLENGTH, &min_length);
    if (min_length == 0) {
      pcre2_code_free(code);
      fail("pre-tokenizer pattern '{}' can match empty text", text);
    }
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // faster where the JIT is there; matching works either way
  }
  ~Pattern() { pcre2_code_free(code); }
  Pattern(const Pattern&) = delete;
  Pattern& operator=(const Pattern&) = delete;
};

PreTokenizer PreTokenizer::named(std::string_view name, const std::string& path) {
  for (const KnownPreTokenizer& known : known_pre_tokenizers()) {
    if (std::find(known.names.begin(), known.names.end(), name) == known.names.end()) continue;
    PreTokenizer pre;
    pre.name_ = name.empty() ? "default" : std::string(name);
    for (const std::string& pattern : known.patterns) pre.patterns_.push_back(std::make_shared<const Pattern>(pattern));
    pre.ignore_merges_ = known.ignore_merges;
    pre.adds_bos_ = known.adds_bos;
    return pre;
  }
  fail_file(path, "tokenizer.ggml.pre is '{}', a pre-tokenizer cpullm does not know (it knows llama-bpe, qwen2, gpt-2 "
            "and default)", name);
}

std::vector<std::string_view> PreTokenizer::split(std::string_view text) const {
  std::vector<std::string_view> words;
  if (!text.empty()) words.push_back(text);
  // One pair of offsets is all that is read: a pattern's groups are not.
  std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> match(pcre2_match_data_create(1, nullptr),
                                                                            &pcre2_match_data_free);
  if (!match) throw std::bad_alloc();
  for (const auto& pattern : patterns_) {
    std::vector<std::string_view> finer;
    for (std::string_view piece : words) {
      std::size_t done = 0;  // piece[0, done) is cut already
      while (done < piece.size()) {
        // The text was checked as UTF-8 once, before: checking again at each offset is quadratic.
        const int rc = pcre2_match(pattern->code, reinterpret_cast<PCRE2_SPTR>(piece.data()), piece.size(), done,
                                   PCRE2_NO_UTF_CHECK, match.get(), nullptr);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) fail("the pre-tokenizer '{}' gave up on the text: {}", name_, pcre2_message(rc));
        const PCRE2_SIZE* offsets = pcre2_get_ovector_pointer(match.get());
        if (offsets[0] > done) finer.push_back(piece.substr(done, offsets[0] - done));
        finer.push_back(piece.substr(offsets[0], offsets[1] - offsets[0]));
        done = offsets[1];
      }
      if (done < piece.size()) finer.push_back(piece.substr(done));
    }
    words = std::move(finer);
  }
  return words;
}

}  // namespace cpullm
