// The model end to end in C++: the known stories260K text, determinism across threads and
// runs, and clear refusals of files and requests it cannot serve.
#include <gtest/gtest.h>
#include <omp.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "engine/kernels/isa.hpp"
#include "engine/kernels/matmul.hpp"
#include "engine/kernels/parallel.hpp"
#include "engine/model/kv_cache.hpp"
#include "engine/model/model.hpp"
#include "engine/sampling/sampler.hpp"
#include "engine/synthetic/synthetic_model.hpp"
#include "engine/tokenizer/tokenizer.hpp"
#include "engine/util/error.hpp"
#include "tests/unit/test_support.hpp"

namespace cpullm {
namespace {

// The known-good text is the fenced block under "## Known-good output" in the models' README.
std::string known_good_story(const std::string& readme_path) {
  std::ifstream in(readme_path);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string readme = ss.str();
  const std::size_t section = readme.find("## Known-good output");
  const std::size_t open = readme.find("```\n", section);
  const std::size_t close = readme.find("\n```", open + 4);
  if (section == std::string::npos || open == std::string::npos || close == std::string::npos) return {};
  return readme.substr(open + 4, close - open - 4);
}

TEST(Model, Stories260KGreedyReproducesTheKnownText) {
  auto model_path = test::shared_model("stories260K.gguf");
  auto readme = test::shared_model("README.md");
  if (!model_path || !readme) GTEST_SKIP() << "../shared/models/stories260K.gguf or README.md not found";
  const std::string expected = known_good_story(*readme);
  ASSERT_GT(expected.size(), 100u);

  Model model(*model_path, 256);
  const Tokenizer tokenizer = Tokenizer::from_gguf(model.file());
  TextDecoder decoder(tokenizer);
  std::string text;
  int32_t token = tokenizer.bos();
  for (int64_t pos = 0; pos < 200; ++pos) {  // 200 forward steps, as llama2.c's run -n 200
    const int32_t next = argmax(model.forward(token, pos));
    text += decoder.push(token, next);
    token = next;
  }
  text += decoder.finish();
  EXPECT_EQ(text, expected);
}

class SyntheticModel : public ::testing::Test {
 protected:
  void SetUp() override {
    SyntheticModelOptions options;
    options.shape = {"custom", 32, 64, 160, 8, 2, 600, 64};  // LLaMA-7B depth
    options.dtype = GgmlType::BF16;
    options.progress = false;
    write_synthetic_model(path_ = dir_.file("deep.gguf"), options);
  }
  std::vector<float> logits_after(Model& model, const std::vector<int32_t>& tokens) {
    std::span<const float> logits;
    for (std::size_t pos = 0; pos < tokens.size(); ++pos) logits = model.forward(tokens[pos], static_cast<int64_t>(pos));
    return {logits.begin(), logits.end()};
  }
  test::TempDir dir_;
  std::string path_;
};

TEST_F(SyntheticModel, ActivationsStayFiniteThroughDepth) {
  Model model(path_, 64);
  std::vector<int32_t> tokens;
  for (int32_t i = 0; i < 64; ++i) tokens.push_back((i * 37) % 600);
  std::span<const float> logits;
  for (int64_t pos = 0; pos < 64; ++pos) {
    logits = model.forward(tokens[pos], pos);
    for (float v : logits) ASSERT_TRUE(std::isfinite(v) && std::abs(v) < 100) << "position " << pos << ": " << v;
  }
}

TEST_F(SyntheticModel, DeterministicAcrossRunsAndThreadCounts) {
  const std::vector<int32_t> tokens = {1, 50, 300, 7, 599};
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  Model one(path_, 16);
  std::vector<float> single = logits_after(one, tokens);
  omp_set_num_threads(2);
  Model two(path_, 16);
  std::vector<float> parallel = logits_after(two, tokens);
  omp_set_num_threads(3);  // a team of three (parallel.hpp), more threads than CI's cores
  Model three(path_, 16);
  std::vector<float> odd = logits_after(three, tokens);
  omp_set_num_threads(threads);
  EXPECT_EQ(single, parallel);
  EXPECT_EQ(single, odd);
  // Re-running a prompt from position 0 overwrites the cache: same logits again.
  EXPECT_EQ(logits_after(two, tokens), parallel);
}

// decode_step_parallel_loops, the count tuning/roofline.py's per-step overhead multiplies by a
// fork/join's cost, against the loops real decode steps hand their threads: one sequence (rows
// streamed, element-wise work on the calling thread), 3 (still streamed), 8 and 16 (the
// element-wise rows split over the threads; at 16 the BF16 matrices go through the GEMM).
TEST_F(SyntheticModel, DecodeStepParallelLoopsCountsTheStepsLoops) {
  const int threads = omp_get_max_threads();
  omp_set_num_threads(2);
  for (int32_t sequences : {1, 3, 8, 16}) {
    Model model(path_, ModelOptions{.context = 8, .sequences = sequences});
    const LlamaConfig& c = model.config();
    const std::vector<LlamaTensor> tensors = llama_tensors(
        {c.n_layers, c.dim, c.ffn_dim, c.kv_dim(), c.vocab_size, model.file().find_tensor("output.weight") == nullptr});
    std::vector<GgmlType> types;
    for (const LlamaTensor& t : tensors) types.push_back(model.file().require_tensor(t.name).type);
    std::vector<BatchToken> step;
    for (int32_t s = 0; s < sequences; ++s) step.push_back({.token = 7 * s + 1, .sequence = s, .position = 0, .want_logits = true});
    const uint64_t before = parallel_loops_dispatched.load();
    model.forward(step);
    EXPECT_EQ(parallel_loops_dispatched.load() - before,
              static_cast<uint64_t>(decode_step_parallel_loops(tensors, types, sequences, default_kernels().caches.l1d_bytes)))
        << sequences << " sequences";
  }
  omp_set_num_threads(threads);
}

// A context filled to its last position, in a prompt and decode steps, with every cache type:
// the next position is refused with one error naming the context, and nothing wraps around: the
// refused call leaves the cache as it was, so the last position runs again to the same logits.
TEST_F(SyntheticModel, FillsTheContextToItsEndAndRefusesPastIt) {
  for (KvType kv : {KvType::f32, KvType::f16, KvType::bf16}) {  // the fixture's heads of 8 are no Q8_0 blocks
    Model model(path_, ModelOptions{.context = 24, .kv_type = kv});
    std::vector<int32_t> prompt;
    for (int32_t i = 0; i < 20; ++i) prompt.push_back((i * 37 + 5) % 600);
    model.forward_batch(prompt, 0);
    std::span<const float> logits;
    for (int64_t pos = 20; pos < 24; ++pos) logits = model.forward(static_cast<int32_t>(pos), pos);
    const std::vector<float> last(logits.begin(), logits.end());
    try {
      model.forward(1, 24);
      FAIL() << "position 24 of a 24-position context accepted";
    } catch (const Error& e) {
      EXPECT_STREQ(e.what(), "position 24 is outside the context of 24 positions");
    }
    EXPECT_THROW(model.forward_batch(std::vector<int32_t>{1, 2}, 23), Error);  // a batch that runs past the end
    logits = model.forward(23, 23);
    EXPECT_EQ(std::vector<float>(logits.begin(), logits.end()), last) << kv_type_name(kv);
  }
}

TEST_F(SyntheticModel, RefusesPositionsAndTokensOutOfRange) {
  Model model(path_, 4);
  EXPECT_THROW(model.forward(1, 4), Error);
  EXPECT_THROW(model.forward(1, -1), Error);
  EXPECT_THROW(model.forward(600, 0), Error);
  EXPECT_THROW(model.forward(-1, 0), Error);
}

TEST_F(SyntheticModel, RefusesACacheLargerThanMemory) {
  try {
    Model model(path_, int64_t{1} << 40);
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("KV cache"), std::string::npos) << e.what();
  }
}

// The kernel level travels with each model, not with the process: a scalar and an AVX2 model of
// stories260K forwarded in turn, call by call, each give the logits a model of its level gives on
// its own, bit for bit, and the two levels' logits differ (their sums round differently), so
// neither ran the other's kernels. The calls cover the GEMM and tiled attention (a 16-token
// prompt) and the row kernels (decode steps).
TEST(Model, EachModelRunsItsOwnKernelLevel) {
  auto path = test::shared_model("stories260K.gguf");
  if (!path) GTEST_SKIP() << "../shared/models/stories260K.gguf not found";
  if (!cpu_supports(Isa::Avx2)) GTEST_SKIP() << "this CPU cannot run the avx2 kernels";
  const auto options = [](Isa isa) {
    return ModelOptions{.context = 32, .kernels = KernelConfig{isa, sysconf_cache_sizes()}};
  };
  std::vector<int32_t> prompt(16);
  for (std::size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>(1 + i * 29 % 500);
  // Call `call` of the run: 0 the prompt (every token's logits), then one decode step each.
  const auto forward = [&](Model& model, int call, std::vector<float>& all) {
    const auto logits = call == 0 ? model.forward_batch(prompt, 0, true)
                                  : model.forward(prompt[static_cast<std::size_t>(call)], 15 + call);
    all.insert(all.end(), logits.begin(), logits.end());
  };
  constexpr int kCalls = 5;
  const auto alone = [&](Isa isa) {
    Model model(*path, options(isa));
    std::vector<float> all;
    for (int call = 0; call < kCalls; ++call) forward(model, call, all);
    return all;
  };
  Model scalar(*path, options(Isa::Scalar)), avx2(*path, options(Isa::Avx2));
  EXPECT_EQ(scalar.kernels().isa, Isa::Scalar);
  EXPECT_EQ(avx2.kernels().isa, Isa::Avx2);
  std::vector<float> scalar_logits, avx2_logits;
  for (int call = 0; call < kCalls; ++call) {
    forward(scalar, call, scalar_logits);
    forward(avx2, call, avx2_logits);
  }
  EXPECT_EQ(scalar_logits, alone(Isa::Scalar));
  EXPECT_EQ(avx2_logits, alone(Isa::Avx2));
  ASSERT_EQ(scalar_logits.size(), avx2_logits.size());
  EXPECT_NE(scalar_logits, avx2_logits);
  if (!cpu_supports(Isa::Avx512)) {
    EXPECT_THROW(Model(*path, options(Isa::Avx512)), Error);
  }
}

TEST(Model, RefusesTensorTypesWithoutKernels) {
  auto source = test::shared_model("stories260K.gguf");
  if (!source) GTEST_SKIP() << "../shared/models/stories260K.gguf not found";
  // I32 has F32's element size, so relabelling one tensor keeps the file valid for the reader
  // while no kernel can run it.
  std::vector<std::byte> bytes = test::read_bytes(*source);
  const std::string name = "blk.0.attn_q.weight";
  auto at = std::search(bytes.begin(), bytes.end(), reinterpret_cast<const std::byte*>(name.data()),
                        reinterpret_cast<const std::byte*>(name.data()) + name.size());
  ASSERT_NE(at, bytes.end());
  const std::size_t type_field = (at - bytes.begin()) + name.size() + 4 + 2 * 8;  // after n_dims and ne
  const uint32_t i32 = static_cast<uint32_t>(GgmlType::I32);
  std::memcpy(&bytes[type_field], &i32, 4);
  test::TempDir dir;
  const std::string path = dir.file("relabelled.gguf");
  test::write_bytes(path, bytes);
  try {
    Model model(path, 8);
    FAIL() << "accepted";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.rfind(path, 0), 0u) << message;
    EXPECT_NE(message.find("'blk.0.attn_q.weight' has type I32, which cpullm's kernels cannot run"),
              std::string::npos) << message;
  }
}

TEST(Model, RefusesAVocabularyOnlyFile) {
  auto path = test::shared_model("ggml-vocab-llama-spm.gguf");
  if (!path) GTEST_SKIP() << "../shared/models/ggml-vocab-llama-spm.gguf not found";
  try {
    Model model(*path, 8);
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing required"), std::string::npos) << e.what();
  }
}

// Pages of [data, data + bytes) the kernel has in memory (mincore).
std::size_t resident_bytes_of(const std::byte* data, std::size_t bytes) {
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> in_core((bytes + page - 1) / page);
  if (mincore(const_cast<std::byte*>(data), bytes, in_core.data()) != 0) return SIZE_MAX;
  return static_cast<std::size_t>(std::count_if(in_core.begin(), in_core.end(), [](unsigned char c) { return c & 1; })) * page;
}

// Pages of [data, data + bytes) not in this process's page tables (/proc/self/pagemap's present
// bit), whatever the page cache holds; SIZE_MAX where pagemap cannot be read.
std::size_t unmapped_pages_of(const std::byte* data, std::size_t bytes) {
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t first = reinterpret_cast<uintptr_t>(data) / page, last = (reinterpret_cast<uintptr_t>(data) + bytes - 1) / page;
  std::vector<uint64_t> entries(last - first + 1);
  std::ifstream pagemap("/proc/self/pagemap", std::ios::binary);
  pagemap.seekg(static_cast<std::streamoff>(first * sizeof(uint64_t)));
  pagemap.read(reinterpret_cast<char*>(entries.data()), static_cast<std::streamsize>(entries.size() * sizeof(uint64_t)));
  if (!pagemap) return SIZE_MAX;
  return static_cast<std::size_t>(std::count_if(entries.begin(), entries.end(), [](uint64_t e) { return (e >> 63) == 0; }));
}

// Each decode step reads one row of the embedding table, nearly always one no step read before.
// With --prefetch the table is mapped after the first forward pass's last layer, so that no
// later step starts with a page fault; without it, one forward pass leaves most of it unmapped
// (the control that the probe sees unmapped pages).
TEST(Model, PrefetchMapsTheEmbeddingTable) {
  test::TempDir dir;
  SyntheticModelOptions options;
  options.shape = {"custom", 1, 256, 512, 4, 4, 8192, 64};  // an embedding table of 8192 x 256 FP32: 8 MiB
  options.dtype = GgmlType::F32;
  options.progress = false;
  const std::string path = dir.file("wide_vocabulary.gguf");
  write_synthetic_model(path, options);
  const auto unmapped_after_one_token = [&](bool prefetch) {
    Model model(path, ModelOptions{.context = 64, .prefetch = prefetch});
    model.forward(1, 0);
    const WeightMatrix& embedding = model.weights().token_embedding;
    const auto bytes = static_cast<std::size_t>(embedding.rows * row_bytes(embedding));
    for (int i = 0; i < 500 && prefetch && model.prefetched_bytes() < bytes; ++i) usleep(2000);
    return unmapped_pages_of(embedding.data, bytes);
  };
  EXPECT_EQ(unmapped_after_one_token(true), 0u);
  const std::size_t unmapped = unmapped_after_one_token(false);
  EXPECT_NE(unmapped, SIZE_MAX);
  EXPECT_GT(unmapped, 0u);
}

// The cache is sized for the whole context but takes memory only as positions are stored, a
// 2 MiB step of rows at a time (here 512 rows of 4 KiB): none before the first store; a step for
// a store at position 100; nothing more for one inside that step; a step more past it; and at
// the context's end no more than the mapping. In 4 KiB pages, so that the counts do not depend on
// where 2 MiB pages would fall.
TEST(KvCache, TakesPagesOnlyAsPositionsRun) {
  const KvCacheShape shape{.sequences = 1, .layers = 4, .context = 4096, .kv_dim = 1024, .type = KvType::f32};
  KvCache cache(shape);
  const std::size_t keys_bytes = shape.bytes() / 2, row = 4096;  // the keys (layers, context, kv_dim) floats
  ASSERT_EQ(madvise(const_cast<std::byte*>(cache.keys(0, 0)), keys_bytes, MADV_NOHUGEPAGE), 0);
  EXPECT_EQ(resident_bytes_of(cache.keys(0, 0), keys_bytes), 0u);
  std::vector<float> k(shape.kv_dim), v(shape.kv_dim);
  for (int64_t i = 0; i < shape.kv_dim; ++i) k[i] = static_cast<float>(i), v[i] = -static_cast<float>(i);
  const auto store_and_count = [&](int64_t layer, int64_t position) {
    cache.store(0, layer, position, 1, k.data(), v.data());
    return resident_bytes_of(cache.keys(0, 0), keys_bytes);
  };
  EXPECT_EQ(store_and_count(2, 100), 512 * row);
  EXPECT_EQ(store_and_count(2, 511), 512 * row);
  EXPECT_EQ(store_and_count(2, 512), 1024 * row);
  EXPECT_EQ(store_and_count(3, 4095), (1024 + 4096) * row);  // layer 3 whole, and not past it
  const auto* stored = reinterpret_cast<const float*>(cache.keys(0, 2)) + 100 * shape.kv_dim;
  EXPECT_EQ(std::vector<float>(stored, stored + shape.kv_dim), k);
  EXPECT_EQ(reinterpret_cast<const float*>(cache.keys(0, 1))[5], 0.0f);  // never written: zero
}

}  // namespace
}  // namespace cpullm
