// Byte-level BPE: GPT-2's byte alphabet, merges by rank, each pre-tokenizer's split, special
// tokens, BOS and the end-of-generation set on Llama 3's and Qwen2's vocabularies, and small
// hand-made gpt2 vocabularies, among them one per rule the loader checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>

#include "engine/format/gguf.hpp"
#include "engine/format/gguf_writer.hpp"
#include "engine/tokenizer/tokenizer.hpp"
#include "engine/util/error.hpp"
#include "tests/unit/test_support.hpp"

namespace cpullm {
namespace {

TEST(ByteAlphabet, IsGpt2sMapAndRoundTripsEveryByte) {
  EXPECT_EQ(to_byte_alphabet(" \n"), "\xc4\xa0\xc4\x8a");  // U+0120 'Ġ', U+010A 'Ċ'
  EXPECT_EQ(to_byte_alphabet(std::string(1, '\0')), "\xc4\x80");  // U+0100, the first of the 68
  EXPECT_EQ(to_byte_alphabet("\xad"), "\xc5\x83");  // U+0143, the last: soft hyphen is the last unprintable byte
  EXPECT_EQ(to_byte_alphabet("a~\xa1\xff"), "a~\xc2\xa1\xc3\xbf");  // printable bytes stand for themselves
  std::string all;
  for (int byte = 0; byte < 256; ++byte) all += static_cast<char>(byte);
  EXPECT_EQ(from_byte_alphabet(to_byte_alphabet(all)), all);
  // Characters outside the alphabet, and bytes that are not UTF-8, stand for themselves.
  EXPECT_EQ(from_byte_alphabet("\xc4\xa0\xe6\x97\xa5\xff"), " \xe6\x97\xa5\xff");
}

std::vector<std::string> words(std::string_view pre, std::string_view text) {
  std::vector<std::string> out;
  for (std::string_view word : PreTokenizer::named(pre, "vocab.gguf").split(text)) out.emplace_back(word);
  return out;
}

using Words = std::vector<std::string>;

TEST(PreTokenizer, SplitsNumbersAsEachModelDoes) {
  const std::string text = "Hello world's 12345";
  EXPECT_EQ(words("llama-bpe", text), (Words{"Hello", " world", "'s", " ", "123", "45"}));
  EXPECT_EQ(words("qwen2", text), (Words{"Hello", " world", "'s", " ", "1", "2", "3", "4", "5"}));
  EXPECT_EQ(words("gpt-2", text), (Words{"Hello", " world", "'s", " 12345"}));
  // llama.cpp's default: punctuation first, then GPT-2's split, digit runs, groups of three digits.
  EXPECT_EQ(words("default", text), (Words{"Hello", " world", "'", "s", " ", "123", "45"}));
  EXPECT_EQ(words("", text), words("default", text));
}

TEST(PreTokenizer, KeepsWhiteSpaceBeforeAWordWithTheWord) {
  // The last space of a run goes with the word after it; a newline run ends a word of its own.
  EXPECT_EQ(words("llama-bpe", "a   b\n\n  c"), (Words{"a", "  ", " b", "\n\n", " ", " c"}));
  EXPECT_EQ(words("llama-bpe", "x!!\n\ny"), (Words{"x", "!!\n\n", "y"}));
  // Contractions only in ASCII case: 'ſ (U+017F, which folds to s) is no contraction.
  EXPECT_EQ(words("llama-bpe", "it'S it'\xc5\xbf"), (Words{"it", "'S", " it", "'\xc5\xbf"}));
}

TEST(PreTokenizer, RefusesAnUnknownNameNamingIt) {
  try {
    PreTokenizer::named("mystery-7b", "vocab.gguf");
    FAIL() << "an unknown pre-tokenizer was accepted";
  } catch (const Error& e) {
    EXPECT_TRUE(std::string(e.what()).starts_with("vocab.gguf: tokenizer.ggml.pre is 'mystery-7b'")) << e.what();
  }
}

// A gpt2 vocabulary of the 256 byte characters (ids 0..255 in byte order) then `extra` pieces,
// with `merges` where given; `more` adds keys.
std::string write_vocabulary(const test::TempDir& dir, const std::vector<std::string>& extra,
                             const std::optional<std::vector<std::string>>& merges, const std::string& pre = "gpt-2",
                             const std::function<void(GgufWriter&)>& more = nullptr) {
  const std::string path = dir.file("vocab.gguf");
  std::vector<std::string> tokens;
  for (int byte = 0; byte < 256; ++byte) tokens.push_back(to_byte_alphabet(std::string(1, static_cast<char>(byte))));
  tokens.insert(tokens.end(), extra.begin(), extra.end());
  GgufWriter writer(path);
  writer.add_string("tokenizer.ggml.model", "gpt2");
  writer.add_string("tokenizer.ggml.pre", pre);
  writer.add_strings("tokenizer.ggml.tokens", tokens);
  if (merges) writer.add_strings("tokenizer.ggml.merges", *merges);
  if (more) more(writer);
  writer.finish();
  return path;
}

// The Error that loading `path` ends in, or "" where it loads.
std::string load_error(const std::string& path) {
  try {
    Tokenizer::from_gguf(GgufFile(path));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(BpeVocabulary, MergesTheLowestRankFirst) {
  test::TempDir dir;
  // ids: 256 "ab", 257 "bc". "b c" ranks first, so "abc" is a + bc, never ab + c.
  const GgufFile file(write_vocabulary(dir, {"ab", "bc"}, std::vector<std::string>{"b c", "a b"}));
  const Tokenizer tokenizer = Tokenizer::from_gguf(file);
  EXPECT_EQ(tokenizer.encode("abc", false), (std::vector<int32_t>{'a', 257}));
  EXPECT_EQ(tokenizer.encode("abd", false), (std::vector<int32_t>{256, 'd'}));
  EXPECT_EQ(tokenizer.encode(" \xc3\xbf", false), (std::vector<int32_t>{' ', 0xc3, 0xbf}));  // any byte has a token
}

TEST(BpeVocabulary, IgnoreMergesTakesAWholeWordThatIsAToken) {
  test::TempDir dir;
  // "abc" is a token no merge reaches: Llama 3's pre-tokenizer takes the word whole, GPT-2's merges.
  const std::vector<std::string> extra = {"ab", "abc"}, merges = {"a b"};
  const GgufFile gpt2(write_vocabulary(dir, extra, merges, "gpt-2"));
  EXPECT_EQ(Tokenizer::from_gguf(gpt2).encode("abc", false), (std::vector<int32_t>{256, 'c'}));
  test::TempDir other;
  const GgufFile llama3(write_vocabulary(other, extra, merges, "llama-bpe",
                                         [](GgufWriter& w) { w.add_bool("tokenizer.ggml.add_bos_token", false); }));
  EXPECT_EQ(Tokenizer::from_gguf(llama3).encode("abc", false), (std::vector<int32_t>{257}));
}

TEST(BpeVocabulary, RefusesWhatItCannotTokenizeWithANamedError) {
  struct Case {
    std::vector<std::string> extra;
    std::optional<std::vector<std::string>> merges;
    std::string pre;
    std::function<void(GgufWriter&)> more;
    std::string expected;
  };
  const auto bos = [](GgufWriter& w) { w.add_bool("tokenizer.ggml.add_bos_token", true); };
  const std::vector<Case> cases = {
      {{}, std::nullopt, "gpt-2", nullptr, "missing required metadata key 'tokenizer.ggml.merges'"},
      {{"ab"}, std::vector<std::string>{"a b", "a zz"}, "gpt-2", nullptr,
       "tokenizer.ggml.merges[1] 'a zz': 'zz' is not a token of the vocabulary"},
      {{}, std::vector<std::string>{"a b"}, "gpt-2", nullptr,
       "tokenizer.ggml.merges[0] 'a b': 'ab' is not a token of the vocabulary"},
      {{"ab"}, std::vector<std::string>{"ab"}, "gpt-2", nullptr, "tokenizer.ggml.merges[0] 'ab' is not two pieces"},
      {{"ab"}, std::vector<std::string>{"a "}, "gpt-2", nullptr, "tokenizer.ggml.merges[0] 'a ' is not two pieces"},
      {{}, std::vector<std::string>{}, "mystery-7b", nullptr, "tokenizer.ggml.pre is 'mystery-7b'"},
      {{}, std::vector<std::string>{}, "qwen2", bos, "tokenizer.ggml.add_bos_token is true, but the file has no"},
      {{}, std::vector<std::string>{}, "gpt-2",
       [](GgufWriter& w) { w.add_u32("tokenizer.ggml.eot_token_id", 4096); },
       "tokenizer.ggml.eot_token_id is 4096, outside the 256 pieces"},
  };
  for (const Case& c : cases) {
    test::TempDir dir;
    const std::string path = write_vocabulary(dir, c.extra, c.merges, c.pre, c.more);
    const std::string error = load_error(path);
    EXPECT_TRUE(error.starts_with(path + ": ")) << error;
    EXPECT_NE(error.find(c.expected), std::string::npos) << error;
  }
}

TEST(BpeVocabulary, RefusesAVocabularyWithoutAByteToken) {
  test::TempDir dir;
  const std::string path = dir.file("vocab.gguf");
  std::vector<std::string> tokens;
  for (int byte = 0; byte < 256; ++byte)
    if (byte != 'a') tokens.push_back(to_byte_alphabet(std::string(1, static_cast<char>(byte))));
  GgufWriter writer(path);
  writer.add_string("tokenizer.ggml.model", "gpt2");
  writer.add_strings("tokenizer.ggml.tokens", tokens);
  writer.add_strings("tokenizer.ggml.merges", {});
  writer.finish();
  EXPECT_EQ(load_error(path), path + ": the gpt2 vocabulary has no token for byte 0x61 (its character in GPT-2's "
                               "byte alphabet is 'a')");
}

// A vocabulary from ../shared/models, loaded for each test; the test skips where it is absent.
template <const char* kName>
class SharedVocabulary : public ::testing::Test {
 protected:
  void SetUp() override {
    auto path = test::shared_model(kName);
    if (!path) GTEST_SKIP() << "../shared/models/" << kName << " not found";
    file_ = std::make_unique<GgufFile>(*path);
    tokenizer_ = std::make_unique<Tokenizer>(Tokenizer::from_gguf(*file_));
  }
  std::unique_ptr<GgufFile> file_;
  std::unique_ptr<Tokenizer> tokenizer_;
};

constexpr char kLlama3File[] = "ggml-vocab-llama-bpe.gguf";
constexpr char kQwen2File[] = "ggml-vocab-qwen2.gguf";
using Llama3Vocabulary = SharedVocabulary<kLlama3File>;
using Qwen2Vocabulary = SharedVocabulary<kQwen2File>;

constexpr int32_t kBeginOfText = 128000, kEndOfText = 128001, kStartHeader = 128006, kEotId = 128009;

TEST_F(Llama3Vocabulary, AddsBosByDefault) {
  EXPECT_TRUE(tokenizer_->adds_bos());
  EXPECT_EQ(tokenizer_->encode("", true), std::vector<int32_t>{kBeginOfText});
  const std::vector<int32_t> hello = tokenizer_->encode("Hello", false);
  std::vector<int32_t> with_bos = {kBeginOfText};
  with_bos.insert(with_bos.end(), hello.begin(), hello.end());
  EXPECT_EQ(tokenizer_->encode("Hello", true), with_bos);
}

TEST_F(Llama3Vocabulary, ParsesControlTokensOnlyWhenAsked) {
  const std::string text = "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>";
  const std::vector<int32_t> parsed = tokenizer_->encode(text, false, true);
  ASSERT_EQ(parsed.size(), 6u);
  EXPECT_EQ(parsed.front(), kStartHeader);
  EXPECT_EQ(parsed[1], tokenizer_->encode("user", false).at(0));
  EXPECT_EQ(parsed.back(), kEotId);
  const std::vector<int32_t> plain = tokenizer_->encode(text, false);
  EXPECT_GT(plain.size(), parsed.size());
  EXPECT_TRUE(std::all_of(plain.begin(), plain.end(), [](int32_t id) { return id < kBeginOfText; }));
  // Control tokens stand for no text: generate never prints them.
  EXPECT_EQ(tokenizer_->token_bytes(kEotId), "");
}

TEST_F(Llama3Vocabulary, EndsGenerationAtEndOfTextAndEndOfTurn) {
  EXPECT_TRUE(tokenizer_->ends_generation(kEndOfText));  // tokenizer.ggml.eos_token_id
  EXPECT_TRUE(tokenizer_->ends_generation(kEotId));      // <|eot_id|>, by its text
  EXPECT_FALSE(tokenizer_->ends_generation(kBeginOfText));
  EXPECT_FALSE(tokenizer_->ends_generation(kStartHeader));
  EXPECT_EQ(tokenizer_->end_of_generation(), (std::vector<int32_t>{kEndOfText, kEotId}));
}

TEST_F(Llama3Vocabulary, RefusesTextThatIsNotUtf8) {
  for (std::string text : {"ab\xff", "\xc3", "\xed\xa0\x80", "ok \xe0\x80\x80"}) {
    try {
      tokenizer_->encode(text, false);
      ADD_FAILURE() << "accepted invalid UTF-8";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("not valid UTF-8"), std::string::npos) << e.what();
    }
  }
}

TEST_F(Llama3Vocabulary, EncodesLongRunsOfOneKindOfCharacter) {
  // One pre-tokenizer word of 64 KiB, and runs its patterns backtrack over: each decodes back.
  for (std::string unit : {" ", "a", "1", "\n", "!", " \n", "\xc3\xa9", "a ", "\t\n "}) {
    std::string text;
    while (text.size() < (1u << 16)) text += unit;
    std::string decoded;
    for (int32_t token : tokenizer_->encode(text, false)) decoded += tokenizer_->token_bytes(token);
    EXPECT_EQ(decoded, text) << "runs of '" << unit << "'";
  }
}

constexpr int32_t kQwenEndOfText = 151643, kImStart = 151644, kImEnd = 151645, kPad151650 = 151650;

TEST_F(Qwen2Vocabulary, AddsNoBos) {
  EXPECT_FALSE(tokenizer_->adds_bos());
  EXPECT_EQ(tokenizer_->bos(), kQwenEndOfText);  // named by the file, but not added
  EXPECT_TRUE(tokenizer_->encode("", true).empty());
  EXPECT_EQ(tokenizer_->encode("Hello", true), tokenizer_->encode("Hello", false));
}

TEST_F(Qwen2Vocabulary, EndsGenerationAtEndOfTextAndImEnd) {
  EXPECT_EQ(tokenizer_->end_of_generation(), (std::vector<int32_t>{kQwenEndOfText, kImEnd}));
  EXPECT_FALSE(tokenizer_->ends_generation(kImStart));
}

TEST_F(Qwen2Vocabulary, ParsesChatMarkersWhenAskedAndUserDefinedTokensAlways) {
  const std::vector<int32_t> chat = tokenizer_->encode("<|im_start|>user\nHi<|im_end|>", false, true);
  EXPECT_EQ(chat.front(), kImStart);
  EXPECT_EQ(chat.back(), kImEnd);
  // [PAD151650] is user-defined: Hugging Face's tokenizers match such tokens in any text.
  const std::vector<int32_t> padded = tokenizer_->encode("a[PAD151650]b", false);
  EXPECT_EQ(padded, (std::vector<int32_t>{tokenizer_->encode("a", false)[0], kPad151650, tokenizer_->encode("b", false)[0]}));
  EXPECT_EQ(tokenizer_->token_bytes(kPad151650), "[PAD151650]");
}

}  // namespace
}  // namespace cpullm
