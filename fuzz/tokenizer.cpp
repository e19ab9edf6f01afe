// The tokenizer on arbitrary bytes against real vocabularies: stories260K's (512 pieces) and
// Llama 2's (32000) SentencePiece, Llama 3's (128256) and Qwen2's (151936) byte-level BPE. The
// first byte picks the vocabulary (bits 0-1), BOS (bit 2) and parse_special (bit 3); the rest is
// encoded as text, then the ids are decoded as generate does. The same rest, read as 24-bit ids,
// is decoded too. Checked: ids stay in the vocabulary, decoded text is valid UTF-8, valid UTF-8
// text comes back as it went in (SentencePiece's space marker U+2581 as a space; control tokens,
// parsed, stand for no text, so then it is not compared), and byte-level BPE refuses text only
// where it is not UTF-8, with a cpullm::Error.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "engine/format/gguf.hpp"
#include "engine/tokenizer/tokenizer.hpp"
#include "engine/util/error.hpp"

namespace {

struct Vocabulary {
  cpullm::GgufFile file;  // the tokenizer's pieces are views into this mapping
  cpullm::Tokenizer tokenizer;
  explicit Vocabulary(const std::string& path) : file(path), tokenizer(cpullm::Tokenizer::from_gguf(file)) {}
};

// Loaded once, never freed: a global pointer keeps them reachable for LeakSanitizer at exit.
std::vector<Vocabulary*>& vocabularies = *new std::vector<Vocabulary*>;

// Strict UTF-8 (RFC 3629): no overlong forms, no surrogates, nothing above U+10FFFF.
bool valid_utf8(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[i + k]); };
    const unsigned lead = b(0);
    std::size_t n = lead < 0x80 ? 1 : lead >= 0xc2 && lead <= 0xdf ? 2 : lead >= 0xe0 && lead <= 0xef ? 3
                                    : lead >= 0xf0 && lead <= 0xf4 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (std::size_t k = 1; k < n; ++k)
      if ((b(k) & 0xc0) != 0x80) return false;
    if ((lead == 0xe0 && b(1) < 0xa0) || (lead == 0xed && b(1) > 0x9f) || (lead == 0xf0 && b(1) < 0x90) ||
        (lead == 0xf4 && b(1) > 0x8f))
      return false;
    i += n;
  }
  return true;
}

std::string decode(const cpullm::Tokenizer& tokenizer, const std::vector<int32_t>& ids) {
  cpullm::TextDecoder decoder(tokenizer);
  std::string text;
  int32_t previous = -1;
  for (int32_t id : ids) {
    text += decoder.push(previous, id);
    previous = id;
  }
  return text + decoder.finish();
}

void check(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz_tokenizer: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* env = std::getenv("CPULLM_SHARED_MODELS");
  const std::string dir = env ? env : CPULLM_SHARED_MODELS_DIR;
  for (const char* name : {"stories260K.gguf", "ggml-vocab-llama-spm.gguf", "ggml-vocab-llama-bpe.gguf", "ggml-vocab-qwen2.gguf"})
    vocabularies.push_back(new Vocabulary(dir + "/" + name));  // throws, and so stops, where absent
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const cpullm::Tokenizer& tokenizer = vocabularies[data[0] % vocabularies.size()]->tokenizer;
  const bool add_bos = data[0] & 4, parse_special = data[0] & 8;
  const bool spm = tokenizer.model() == cpullm::TokenizerModel::spm;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);

  std::vector<int32_t> ids;
  try {
    ids = tokenizer.encode(text, add_bos, parse_special);
  } catch (const cpullm::Error&) {
    check(!spm && !valid_utf8(text), "encode refused text it should take");
    return 0;
  }
  for (int32_t id : ids) check(id >= 0 && id < tokenizer.vocab_size(), "encode gave an id outside the vocabulary");
  const std::string decoded = decode(tokenizer, ids);
  check(valid_utf8(decoded), "decoded text is not valid UTF-8");
  // SentencePiece puts a space before the text (the decoder drops it after BOS only), and its
  // space marker U+2581 in the text decodes as the space it stands for, as in llama.cpp.
  if (valid_utf8(text) && !parse_special) {
    const bool bos_added = add_bos && tokenizer.adds_bos();
    std::string expected = spm && !bos_added && !text.empty() ? " " : "";
    for (std::size_t i = 0; i < text.size(); ++i)
      if (spm && text.substr(i, 3) == "\xe2\x96\x81") expected += ' ', i += 2;
      else expected += text[i];
    check(decoded == expected, "encode then decode changed the text");
  }

  std::vector<int32_t> any_ids;
  for (std::size_t i = 1; i + 2 < size; i += 3)
    any_ids.push_back(static_cast<int32_t>((data[i] | data[i + 1] << 8 | data[i + 2] << 16) % tokenizer.vocab_size()));
  check(valid_utf8(decode(tokenizer, any_ids)), "decoded ids are not valid UTF-8");
  return 0;
}
