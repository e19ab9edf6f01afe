// cpullm serve's pieces without a network: the stop-string text stream (nothing of a stop string
// is ever sent, the text before it always is), the Prometheus histogram, and OpenAI request
// parsing on a synthetic model's vocabulary. tests/python/test_serve.py drives the server itself.
#include <gtest/gtest.h>

#include "engine/synthetic/synthetic_model.hpp"
#include "engine/format/gguf.hpp"
#include "serve/completion_text.hpp"
#include "serve/metrics.hpp"
#include "serve/openai_api.hpp"
#include "tests/unit/test_support.hpp"

namespace cpullm {
namespace {

// Feeds `pieces` one by one; returns what was sent, and whether a stop string ended it.
std::pair<std::string, bool> stream(const std::vector<std::string>& stop, const std::vector<std::string>& pieces) {
  CompletionText text(stop);
  std::string sent;
  for (const std::string& piece : pieces) sent += text.add(piece);
  sent += text.finish();
  EXPECT_EQ(sent, text.sent());
  return {sent, text.stopped()};
}

TEST(CompletionText, CutsAtTheFirstStopStringWhereverPiecesSplitIt) {
  EXPECT_EQ(stream({"END"}, {"abc", "deE", "N", "Dxyz"}), std::make_pair(std::string("abcde"), true));
  EXPECT_EQ(stream({"END", "de"}, {"abc", "deE", "N", "D"}), std::make_pair(std::string("abc"), true));
  EXPECT_EQ(stream({"\n\n"}, {"one\n", "\ntwo"}), std::make_pair(std::string("one"), true));
  // A held-back tail that turns out not to be a stop string is sent, in order.
  EXPECT_EQ(stream({"END"}, {"abcE", "Nx", "y"}), std::make_pair(std::string("abcENxy"), false));
  EXPECT_EQ(stream({"END"}, {"abcEN"}), std::make_pair(std::string("abcEN"), false));  // the end flushes it
  EXPECT_EQ(stream({}, {"a", "b"}), std::make_pair(std::string("ab"), false));
  EXPECT_EQ(stream({""}, {"a", "b"}), std::make_pair(std::string("ab"), false));  // an empty stop string stops nothing
}

TEST(CompletionText, NeverSendsAPrefixOfAStopStringBeforeItIsDecided) {
  CompletionText text({"STOP"});
  EXPECT_EQ(text.add("xS"), "x");
  EXPECT_EQ(text.add("T"), "");
  EXPECT_EQ(text.add("O"), "");
  EXPECT_EQ(text.add("P!"), "");
  EXPECT_TRUE(text.stopped());
  EXPECT_EQ(text.add("more"), "");
}

TEST(ServeMetrics, HistogramsAreCumulativeWithInf) {
  Histogram h({1, 10});
  for (double v : {0.5, 1.0, 5.0, 50.0}) h.observe(v);
  EXPECT_EQ(h.counts, (std::vector<uint64_t>{2, 1, 1}));
  ServeMetrics m;
  m.first_token(0.02);
  m.answered(200);
  m.answered(429);
  const std::string text = m.prometheus({1, 2, 4, 10, 100});
  EXPECT_NE(text.find("cpullm_time_to_first_token_seconds_bucket{le=\"0.025\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("cpullm_time_to_first_token_seconds_bucket{le=\"+Inf\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("cpullm_requests_total{status=\"429\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("cpullm_kv_cache_usage_ratio 0.1\n"), std::string::npos);
}

class OpenAiRequests : public ::testing::Test {
 protected:
  void SetUp() override {
    SyntheticModelOptions options;
    options.shape = {"custom", 1, 16, 32, 2, 2, 400, 64};
    options.progress = false;
    write_synthetic_model(dir_.file("m.gguf"), options);
    tokenizer_.emplace(Tokenizer::from_gguf(GgufFile(dir_.file("m.gguf"))));
    settings_.tokenizer = &*tokenizer_;
    settings_.context = 64;
    settings_.next_seed = [] { return uint64_t{7}; };
  }
  ApiRequest parse(const std::string& body, bool chat = false) { return parse_api_request(body, chat, settings_); }
  int status_of(const std::string& body) {
    try {
      parse(body);
    } catch (const ApiError& e) {
      return e.status;
    }
    return 200;
  }
  test::TempDir dir_;
  std::optional<Tokenizer> tokenizer_;
  ApiSettings settings_;
};

TEST_F(OpenAiRequests, FillsTheJobFromTheBodyAndTheServersDefaults) {
  settings_.sampling.temperature = 0.5f;
  const ApiRequest r = parse(R"({"prompt": [1, 2, 3], "max_tokens": 5, "top_k": 3, "stop": "x", "stream": true})");
  EXPECT_EQ(r.job.prompt, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(r.job.max_tokens, 5);
  EXPECT_EQ(r.job.sampling.top_k, 3);
  EXPECT_FLOAT_EQ(r.job.sampling.temperature, 0.5f);
  EXPECT_EQ(r.job.sampling.seed, 7u);  // drawn: the request gave none
  EXPECT_EQ(r.job.stop, std::vector<std::string>{"x"});
  EXPECT_TRUE(r.stream);
  EXPECT_EQ(parse(R"({"prompt": [1], "seed": -1})").job.sampling.seed, UINT64_MAX);
  EXPECT_EQ(parse(R"({"prompt": [1]})").job.max_tokens, 16);  // OpenAI's default for completions
}

TEST_F(OpenAiRequests, RefusesWhatDoesNotFitTheContext) {
  EXPECT_EQ(status_of(R"({"prompt": [1, 2], "max_tokens": 62})"), 200);
  EXPECT_EQ(status_of(R"({"prompt": [1, 2], "max_tokens": 63})"), 400);
  EXPECT_EQ(status_of(R"({"prompt": [1, 2], "max_tokens": 9223372036854775807})"), 400);
  try {
    parse(R"({"prompt": [1, 2], "max_tokens": 63})");
  } catch (const ApiError& e) {
    EXPECT_EQ(e.code, "context_length_exceeded");
    EXPECT_EQ(e.param, "prompt");
  }
  EXPECT_EQ(status_of(R"({"prompt": [399]})"), 200);
  EXPECT_EQ(status_of(R"({"prompt": [400]})"), 400);  // past the vocabulary
  EXPECT_EQ(status_of(R"({"prompt": [-1]})"), 400);
}

// Text too long to be `context` tokens is refused without being tokenized; the bound is sound:
// no text within it that fits the context is refused by it.
TEST_F(OpenAiRequests, RefusesTextThatCannotFitBeforeTokenizingIt) {
  settings_.max_prompt_bytes = max_prompt_bytes(*tokenizer_, settings_.context);
  const std::string huge(settings_.max_prompt_bytes + 1, 'a');
  try {
    parse(R"({"prompt": ")" + huge + R"("})");
    FAIL() << "accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.code, "context_length_exceeded");
    EXPECT_NE(std::string(e.what()).find(std::to_string(huge.size()) + " bytes"), std::string::npos) << e.what();
  }
  // The bound's premise: no token stands for more text than its piece's bytes.
  const std::size_t longest = settings_.max_prompt_bytes / static_cast<std::size_t>(settings_.context);
  for (const std::string text : {"Once upon a time, there was a little dog.", "h\xc3\xa9llo w\xc3\xb6rld \xe6\x97\xa5\xe6\x9c\xac",
                                 "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "\x01\x02 \t\n  \xf0\x9f\x99\x82!!"})
    EXPECT_GE(tokenizer_->encode(text, false).size() * longest, text.size()) << text;
}

TEST_F(OpenAiRequests, ChatWithoutATemplateSaysWhy) {
  settings_.chat_missing = "the file has no tokenizer.chat_template";
  try {
    parse(R"({"messages": [{"role": "user", "content": "hi"}]})", true);
    FAIL() << "accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400);
    EXPECT_STREQ(e.what(), "the file has no tokenizer.chat_template");
  }
  settings_.chat = chat_template_named("chatml");
  const ApiRequest r = parse(R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]})", true);
  EXPECT_EQ(r.job.max_tokens, 64 - static_cast<int64_t>(r.job.prompt.size()));  // a chat answer may fill the context
}

}  // namespace
}  // namespace cpullm
