// Several sequences in one model: batched prefill and decode give each sequence the logits it
// gets alone; the KV cache types stay close to FP32; batches that break a sequence's order, and
// runs that cannot fit the machine, are refused; --prefetch and --mlock change no result.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>

#include <unistd.h>

#include "engine/model/model.hpp"
#include "engine/synthetic/synthetic_model.hpp"
#include "engine/util/error.hpp"
#include "tests/unit/test_support.hpp"

namespace cpullm {
namespace {

// Both paths keep FP32 activations and sums, so a sequence's logits in a batch differ from its
// logits alone only by the order of additions (matmul vs matvec): the engine's 1e-4 bound. The
// comparisons run with an F32 cache: a rounding cache (the default F16) turns those last-bit
// differences of a key into a whole step of its own now and then (3e-4 here).
constexpr double kBatchBound = 1e-4;

class Batching : public ::testing::Test {
 protected:
  void SetUp() override { path_ = write_model("m.gguf", 64); }
  // A grouped-query model of 8 heads of dim / 8 values, with 2 KV heads.
  std::string write_model(const std::string& name, int64_t dim) {
    SyntheticModelOptions options;
    options.shape = {"custom", 4, dim, 160, 8, 2, 600, 256};
    options.dtype = GgmlType::F32;
    options.progress = false;
    write_synthetic_model(dir_.file(name), options);
    return dir_.file(name);
  }
  // The prompt of sequence s: different lengths and tokens for each.
  static std::vector<int32_t> prompt_of(int s) {
    std::vector<int32_t> tokens = {1};
    for (int i = 1; i < 5 + 3 * s; ++i) tokens.push_back((i * 37 + 11 * s) % 600);
    return tokens;
  }
  // Sequence s alone in a fresh model: prompt, then `steps` greedy-free decode steps feeding
  // `decoded[i]`; returns the logits after each step (prompt's last token first).
  std::vector<std::vector<float>> run_alone(int s, const std::vector<int32_t>& decoded, KvType kv = KvType::f32) {
    Model model(path_, ModelOptions{.context = 64, .kv_type = kv});
    std::vector<int32_t> prompt = prompt_of(s);
    std::vector<std::vector<float>> out;
    auto logits = model.forward_batch(prompt, 0);
    out.emplace_back(logits.begin(), logits.end());
    int64_t pos = static_cast<int64_t>(prompt.size());
    for (int32_t token : decoded) {
      logits = model.forward(token, pos++);
      out.emplace_back(logits.begin(), logits.end());
    }
    return out;
  }
  static double max_difference(std::span<const float> a, std::span<const float> b) {
    double worst = 0;
    for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(double{a[i]} - b[i]));
    return worst;
  }
  test::TempDir dir_;
  std::string path_;
};

TEST_F(Batching, SequencesTogetherMatchEachAlone) {
  constexpr int kSequences = 3, kSteps = 4;
  const std::vector<int32_t> decoded = {7, 300, 42, 599};
  Model model(path_, ModelOptions{.context = 64, .sequences = kSequences, .kv_type = KvType::f32});
  const int64_t vocab = model.config().vocab_size;

  // Batched prefill of three prompts of different lengths, one call.
  std::vector<BatchToken> batch;
  for (int s = 0; s < kSequences; ++s) {
    const auto prompt = prompt_of(s);
    for (std::size_t i = 0; i < prompt.size(); ++i)
      batch.push_back({prompt[i], s, static_cast<int64_t>(i), i + 1 == prompt.size()});
  }
  std::vector<std::vector<std::vector<float>>> together(kSequences);
  auto logits = model.forward(batch);
  ASSERT_EQ(logits.size(), static_cast<std::size_t>(kSequences * vocab));
  for (int s = 0; s < kSequences; ++s) together[s].emplace_back(logits.begin() + s * vocab, logits.begin() + (s + 1) * vocab);

  // Batched decode: one token per sequence per step, the sequences at different positions.
  for (int step = 0; step < kSteps; ++step) {
    batch.clear();
    for (int s = kSequences - 1; s >= 0; --s)  // any order of sequences within a batch
      batch.push_back({decoded[step], s, static_cast<int64_t>(prompt_of(s).size()) + step, true});
    logits = model.forward(batch);
    for (int row = 0; row < kSequences; ++row) {
      const int s = kSequences - 1 - row;
      together[s].emplace_back(logits.begin() + row * vocab, logits.begin() + (row + 1) * vocab);
    }
  }
  for (int s = 0; s < kSequences; ++s) {
    const auto alone = run_alone(s, decoded);
    for (int step = 0; step <= kSteps; ++step)
      EXPECT_LE(max_difference(together[s][step], alone[step]), kBatchBound) << "sequence " << s << " step " << step;
  }
}

// One batch holding a sequence twice, its prompt and then, after another sequence's decode token,
// its own next token: the single tokens' attention runs in one loop apart from the prompt's tiles,
// and each still attends to all of its sequence's earlier positions.
TEST_F(Batching, ASequenceSplitAcrossOneBatchMatchesItAlone) {
  const int32_t next_of_0 = 77, next_of_1 = 300;
  const std::vector<int32_t> prompt_0 = prompt_of(0), prompt_1 = prompt_of(1);
  const int64_t length_0 = static_cast<int64_t>(prompt_0.size()), length_1 = static_cast<int64_t>(prompt_1.size());
  Model model(path_, ModelOptions{.context = 64, .sequences = 2, .kv_type = KvType::f32});
  const int64_t vocab = model.config().vocab_size;
  std::vector<BatchToken> batch;
  for (std::size_t i = 0; i < prompt_1.size(); ++i) batch.push_back({prompt_1[i], 1, static_cast<int64_t>(i), false});
  model.forward(batch);
  batch.clear();
  for (std::size_t i = 0; i < prompt_0.size(); ++i) batch.push_back({prompt_0[i], 0, static_cast<int64_t>(i), false});
  batch.push_back({next_of_1, 1, length_1, true});
  batch.push_back({next_of_0, 0, length_0, true});
  const auto logits = model.forward(batch);
  ASSERT_EQ(logits.size(), static_cast<std::size_t>(2 * vocab));
  const auto alone_0 = run_alone(0, {next_of_0}), alone_1 = run_alone(1, {next_of_1});
  EXPECT_LE(max_difference(logits.subspan(vocab, vocab), alone_0[1]), kBatchBound);
  EXPECT_LE(max_difference(logits.subspan(0, vocab), alone_1[1]), kBatchBound);
}

TEST_F(Batching, SmallerCachesStayCloseToFp32) {
  const std::vector<int32_t> decoded = {7, 300, 42, 599, 5, 9};
  // Keys and values are rounded once when stored: a relative error of 2^-11 (F16) or 2^-8 (BF16)
  // per value, or up to 1/254 of its block's largest (Q8_0), which moves these logits (magnitude
  // ~1) by far less than the bound stated here. Q8_0 needs heads of whole 32-value blocks: a model
  // with heads of 32 values (the fixture's have 8, which a Q8_0 cache refuses).
  const std::string wide = write_model("wide.gguf", 256);
  EXPECT_THROW(Model(path_, ModelOptions{.context = 64, .kv_type = KvType::q8_0}), Error);
  for (auto [kv, bound] : {std::pair{KvType::f16, 2e-3}, std::pair{KvType::bf16, 2e-2}, std::pair{KvType::q8_0, 2e-2}}) {
    if (kv == KvType::q8_0) path_ = wide;
    const auto reference = run_alone(2, decoded, KvType::f32);
    const auto half = run_alone(2, decoded, kv);
    for (std::size_t step = 0; step < reference.size(); ++step) {
      EXPECT_LE(max_difference(half[step], reference[step]), bound) << kv_type_name(kv) << " step " << step;
      EXPECT_GT(max_difference(half[step], reference[step]), 0.0) << kv_type_name(kv) << ": not rounded at all?";
      const auto top = [](const std::vector<float>& v) { return std::max_element(v.begin(), v.end()) - v.begin(); };
      EXPECT_EQ(top(half[step]), top(reference[step])) << kv_type_name(kv) << " step " << step;
    }
  }
  EXPECT_THROW(parse_kv_type("q4_0"), Error);
}

TEST_F(Batching, RefusesBatchesThatBreakASequence) {
  Model model(path_, ModelOptions{.context = 16, .sequences = 2});
  auto refuses = [&](std::vector<BatchToken> batch, const std::string& expected) {
    try {
      model.forward(batch);
      ADD_FAILURE() << "accepted; expected: " << expected;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  };
  refuses({{1, 2, 0, true}}, "sequence 2 does not exist");
  refuses({{1, 0, 3, true}}, "position 3 does not follow position -1");
  refuses({{1, 0, 0, false}, {2, 0, 2, true}}, "position 2 does not follow position 0");
  refuses({{1, 0, 16, true}}, "outside the context");
  model.forward(std::vector<BatchToken>{{1, 0, 0, false}, {2, 0, 1, true}});
  refuses({{1, 0, 3, true}}, "position 3 does not follow position 1");
  model.forward(std::vector<BatchToken>{{1, 0, 2, true}, {1, 1, 0, true}});  // continue 0, start 1
  model.forward(std::vector<BatchToken>{{1, 0, 0, true}});                     // restart 0
  EXPECT_THROW(Model(path_, ModelOptions{.sequences = 0}), Error);
}

TEST_F(Batching, RefusesARunThatDoesNotFitTheMachine) {
  // 4096 sequences of 2^24 positions: petabytes of cache, refused before any allocation.
  try {
    Model model(path_, ModelOptions{.context = int64_t{1} << 22, .sequences = 4096});
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("KV cache"), std::string::npos) << e.what();
  }
  // Large enough to need more than this machine has, small enough to plan: the plan's numbers.
  const MemoryPlan fitting = Model(path_, ModelOptions{.context = 64, .kv_type = KvType::f32}).memory_plan();
  const int64_t context = static_cast<int64_t>(fitting.total_bytes / (2 * 64 * 4 * 16 * 4)) + 1;
  try {
    Model model(path_, ModelOptions{.context = std::min<int64_t>(context, int64_t{1} << 24), .sequences = 64, .kv_type = KvType::f32});
    FAIL() << "accepted";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("does not fit the memory of this machine"), std::string::npos) << message;
    EXPECT_NE(message.find("available"), std::string::npos) << message;
  }
  EXPECT_GT(fitting.weight_bytes, 0u);
  EXPECT_EQ(fitting.kv_cache_bytes, 2u * 4 * 64 * 16 * 4);  // layers x context x kv_dim x FP32, keys and values
}

TEST_F(Batching, PrefetchAndMlockChangeNoResult) {
  const std::vector<int32_t> prompt = prompt_of(1);
  Model plain(path_, ModelOptions{.context = 32});
  const auto expected = plain.forward_batch(prompt, 0);
  const std::vector<float> expected_copy(expected.begin(), expected.end());

  Model prefetching(path_, ModelOptions{.context = 32, .prefetch = true});
  const auto logits = prefetching.forward_batch(prompt, 0);
  EXPECT_EQ(std::vector<float>(logits.begin(), logits.end()), expected_copy);
  // Layers 1..3 were requested while layers 0..2 ran, and the embedding table while layer 3 ran;
  // wait for the thread to map them.
  const WeightMatrix& embedding = prefetching.weights().token_embedding;
  uint64_t expected_bytes = embedding.rows * row_bytes(embedding);
  for (int l = 1; l < 4; ++l)
    for (const WeightMatrix* m : {&prefetching.weights().layers[l].wq, &prefetching.weights().layers[l].wk,
                                  &prefetching.weights().layers[l].wv, &prefetching.weights().layers[l].wo,
                                  &prefetching.weights().layers[l].w_gate, &prefetching.weights().layers[l].w_up,
                                  &prefetching.weights().layers[l].w_down})
      expected_bytes += m->rows * row_bytes(*m);
  for (int i = 0; i < 500 && prefetching.prefetched_bytes() < expected_bytes; ++i) usleep(2000);
  EXPECT_EQ(prefetching.prefetched_bytes(), expected_bytes);

  Model locked(path_, ModelOptions{.context = 32, .mlock = true});
  const auto locked_logits = locked.forward_batch(prompt, 0);
  EXPECT_EQ(std::vector<float>(locked_logits.begin(), locked_logits.end()), expected_copy);
  std::ifstream status("/proc/self/status");
  std::string line;
  uint64_t locked_kib = 0;
  while (std::getline(status, line))
    if (line.rfind("VmLck:", 0) == 0) locked_kib = std::stoull(line.substr(6));
  EXPECT_GE(locked_kib * 1024, locked.file().file_size() / 4096 * 4096) << "the weights are not locked";
}

}  // namespace
}  // namespace cpullm
