// Tokenizer: llama.cpp's fixtures (SentencePiece and byte-level BPE) encoded and decoded back;
// SentencePiece's byte fallback and BOS handling, and the streaming decoder's treatment of split
// and invalid UTF-8. What is particular to byte-level BPE is in test_bpe.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>

#include "engine/format/gguf.hpp"
#include "engine/synthetic/synthetic_model.hpp"
#include "engine/tokenizer/tokenizer.hpp"
#include "tests/unit/test_support.hpp"

namespace cpullm {
namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> split(const std::string& text, const std::string& separator) {
  std::vector<std::string> parts;
  std::size_t start = 0, at;
  while ((at = text.find(separator, start)) != std::string::npos) {
    parts.push_back(text.substr(start, at - start));
    start = at + separator.size();
  }
  parts.push_back(text.substr(start));
  return parts;
}

// llama.cpp's tokenizer fixtures: 46 texts and the ids Hugging Face's tokenizers give them, without
// BOS and without special tokens parsed. One vocabulary each: Llama 2's SentencePiece, Llama 3's
// and Qwen2's byte-level BPE.
class LlamaCppFixture : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    path_ = test::shared_model(GetParam());
    if (!path_) GTEST_SKIP() << "../shared/models/" << GetParam() << " not found";
    file_ = std::make_unique<GgufFile>(*path_);
    tokenizer_ = std::make_unique<Tokenizer>(Tokenizer::from_gguf(*file_));
    // Inputs are separated by a line __ggml_vocab_test__; outputs are one line of ids per case.
    inputs_ = split(read_text(*path_ + ".inp"), "\n__ggml_vocab_test__\n");
    if (!inputs_.empty() && inputs_.back().empty()) inputs_.pop_back();
  }
  std::optional<std::string> path_;
  std::unique_ptr<GgufFile> file_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::vector<std::string> inputs_;
};

TEST_P(LlamaCppFixture, EncodesEveryCase) {
  std::vector<std::string> outputs = split(read_text(*path_ + ".out"), "\n");
  if (!outputs.empty() && outputs.back().empty()) outputs.pop_back();
  ASSERT_EQ(inputs_.size(), 46u);
  ASSERT_EQ(outputs.size(), inputs_.size());
  for (std::size_t i = 0; i < inputs_.size(); ++i) {
    std::vector<int32_t> expected;
    std::istringstream ids(outputs[i]);
    for (int32_t id; ids >> id;) expected.push_back(id);
    EXPECT_EQ(tokenizer_->encode(inputs_[i], false), expected) << "case " << i << ": '" << inputs_[i] << "'";
  }
}

// Each case, with BOS where the vocabulary adds one, decodes to the text it came from, as
// generate decodes: token by token, each with the one before.
TEST_P(LlamaCppFixture, DecodesWhatItEncodes) {
  std::vector<std::string> texts = inputs_;
  texts.insert(texts.end(), {"Hello world", "  two spaces", "Äpfel und 🦙 llamas\n\ttabs", "日本語のテキスト"});
  for (const std::string& text : texts) {
    TextDecoder decoder(*tokenizer_);
    std::string decoded;
    int32_t previous = -1;
    for (int32_t token : tokenizer_->encode(text, true)) {
      decoded += decoder.push(previous, token);
      previous = token;
    }
    EXPECT_EQ(decoded + decoder.finish(), text);
  }
}

INSTANTIATE_TEST_SUITE_P(Vocabularies, LlamaCppFixture,
                         ::testing::Values("ggml-vocab-llama-spm.gguf", "ggml-vocab-llama-bpe.gguf", "ggml-vocab-qwen2.gguf"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param.substr(11, info.param.size() - 16);  // ggml-vocab-NAME.gguf
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

class SyntheticTokenizer : public ::testing::Test {
 protected:
  void SetUp() override {
    SyntheticModelOptions options;
    options.shape = {"custom", 1, 16, 32, 2, 2, 1000, 32};
    options.progress = false;
    write_synthetic_model(dir_.file("tiny.gguf"), options);
    file_ = std::make_unique<GgufFile>(dir_.file("tiny.gguf"));
    tokenizer_ = std::make_unique<Tokenizer>(Tokenizer::from_gguf(*file_));
  }
  test::TempDir dir_;
  std::unique_ptr<GgufFile> file_;
  std::unique_ptr<Tokenizer> tokenizer_;
};

TEST_F(SyntheticTokenizer, EmptyTextIsBosAlone) {
  EXPECT_EQ(tokenizer_->encode("", true), std::vector<int32_t>{1});
  EXPECT_TRUE(tokenizer_->encode("", false).empty());
}

// With parse_special, "<s>" and "</s>" in the text are BOS and EOS, and SentencePiece's space
// comes before text that follows one, as at the start; without it they are text.
TEST_F(SyntheticTokenizer, ParsesControlTokensOnlyWhenAsked) {
  const int32_t space_the = tokenizer_->encode("the", false).at(0);
  EXPECT_EQ(tokenizer_->encode("<s>the</s>the", false, true), (std::vector<int32_t>{1, space_the, 2, space_the}));
  const std::vector<int32_t> plain = tokenizer_->encode("<s>the</s>the", false);
  EXPECT_GT(plain.size(), 4u);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 1) + std::count(plain.begin(), plain.end(), 2), 0);
}

TEST_F(SyntheticTokenizer, MergesWordsAndFallsBackToBytes) {
  // "▁the" is a piece; "é" (0xC3 0xA9) is not, so it becomes two byte pieces <0xC3><0xA9>.
  std::vector<int32_t> tokens = tokenizer_->encode("the é", false);
  ASSERT_EQ(tokens.size(), 4u);
  EXPECT_EQ(tokenizer_->piece(tokens[0]), "\xe2\x96\x81the");
  EXPECT_EQ(tokenizer_->piece(tokens[1]), "\xe2\x96\x81");
  EXPECT_EQ(tokenizer_->piece(tokens[2]), "<0xC3>");
  EXPECT_EQ(tokenizer_->piece(tokens[3]), "<0xA9>");
}

TEST_F(SyntheticTokenizer, DecoderHoldsSplitCharactersAndReplacesInvalidBytes) {
  const int32_t c3 = tokenizer_->encode("é", false)[1], a9 = tokenizer_->encode("é", false)[2];
  TextDecoder decoder(*tokenizer_);
  EXPECT_EQ(decoder.push(5, c3), "");  // half a character: held back
  EXPECT_EQ(decoder.push(c3, a9), "é");
  // A lone continuation byte can never start a character.
  EXPECT_EQ(decoder.push(a9, a9), "\xef\xbf\xbd");
  // A lead byte followed by a space: the lead is replaced, the space kept.
  const int32_t space_the = tokenizer_->encode("the", false)[0];
  EXPECT_EQ(decoder.push(a9, c3), "");
  EXPECT_EQ(decoder.push(c3, space_the), "\xef\xbf\xbd the");
  EXPECT_EQ(decoder.push(space_the, c3), "");
  EXPECT_EQ(decoder.finish(), "\xef\xbf\xbd");  // an unfinished character at the end
}

// Found by fuzz/tokenizer.cpp: byte tokens that spell a UTF-16 surrogate (ED A0 80), an overlong
// form (E0 80 80, C0 AF) or a code point past U+10FFFF (F4 90 80 80) came out as they were,
// which is not UTF-8 (JSON writers refuse it). Each byte must become U+FFFD instead.
TEST_F(SyntheticTokenizer, DecoderReplacesSurrogatesOverlongFormsAndCodePointsPastTheLast) {
  const std::string replacement = "\xef\xbf\xbd";
  for (std::string bytes : {"\xed\xa0\x80", "\xe0\x80\x80", "\xc0\xaf", "\xf4\x90\x80\x80"}) {
    std::vector<int32_t> tokens = tokenizer_->encode(bytes, false);
    tokens.erase(tokens.begin());  // the space SentencePiece puts first
    ASSERT_EQ(tokens.size(), bytes.size()) << "one byte token per byte";
    TextDecoder decoder(*tokenizer_);
    std::string text;
    for (int32_t token : tokens) text += decoder.push(-1, token);
    text += decoder.finish();
    std::string expected;
    for (std::size_t i = 0; i < bytes.size(); ++i) expected += replacement;
    EXPECT_EQ(text, expected);
  }
  // The nearest valid neighbours still pass: U+D7FF, U+0800, U+10FFFF.
  for (std::string text : {"\xed\x9f\xbf", "\xe0\xa0\x80", "\xf4\x8f\xbf\xbf"}) {
    std::vector<int32_t> tokens = tokenizer_->encode(text, false);
    TextDecoder decoder(*tokenizer_);
    std::string decoded;
    for (std::size_t i = 1; i < tokens.size(); ++i) decoded += decoder.push(tokens[i - 1], tokens[i]);
    EXPECT_EQ(decoded + decoder.finish(), text);
  }
}

TEST_F(SyntheticTokenizer, LeadingSpaceAfterBosIsDropped) {
  std::vector<int32_t> tokens = tokenizer_->encode("the ball", true);
  TextDecoder decoder(*tokenizer_);
  std::string text;
  for (std::size_t i = 1; i < tokens.size(); ++i) text += decoder.push(tokens[i - 1], tokens[i]);
  EXPECT_EQ(text, "the ball");
  EXPECT_EQ(tokenizer_->token_bytes(tokenizer_->bos()), "");
}

}  // namespace
}  // namespace cpullm
