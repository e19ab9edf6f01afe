// Synthetic models: real shapes, the LLaMA vocabulary layout, and a file the engine loads.
#include <gtest/gtest.h>

#include <set>

#include "engine/format/gguf.hpp"
#include "engine/model/model.hpp"
#include "engine/synthetic/synthetic_model.hpp"
#include "engine/synthetic/synthetic_vocab.hpp"
#include "engine/tokenizer/tokenizer.hpp"
#include "engine/util/error.hpp"
#include "tests/unit/test_support.hpp"

namespace cpullm {
namespace {

TEST(SyntheticShapes, MatchThePublishedConfigs) {
  auto tiny = named_shape("tinyllama-1.1b");
  ASSERT_TRUE(tiny);
  EXPECT_EQ(tiny->dim, 2048);
  EXPECT_EQ(tiny->ffn_dim, 5632);
  EXPECT_EQ(tiny->n_layers, 22);
  EXPECT_EQ(tiny->n_kv_heads, 4);
  auto llama7 = named_shape("llama-7b");
  ASSERT_TRUE(llama7);
  EXPECT_EQ(llama7->dim, 4096);
  EXPECT_EQ(llama7->ffn_dim, 11008);
  EXPECT_EQ(named_shape("llama-13b")->n_layers, 40);
  EXPECT_FALSE(named_shape("gpt-2"));
}

TEST(SyntheticVocab, HasTheLlamaLayoutAndUniquePieces) {
  SyntheticVocab vocab = make_synthetic_vocab(32000);
  ASSERT_EQ(vocab.pieces.size(), 32000u);
  EXPECT_EQ(vocab.pieces[0], "<unk>");
  EXPECT_EQ(vocab.pieces[1], "<s>");
  EXPECT_EQ(vocab.pieces[2], "</s>");
  EXPECT_EQ(vocab.pieces[3], "<0x00>");
  EXPECT_EQ(vocab.pieces[258], "<0xFF>");
  EXPECT_EQ(vocab.types[3], static_cast<int32_t>(TokenType::Byte));
  EXPECT_EQ(std::set<std::string>(vocab.pieces.begin(), vocab.pieces.end()).size(), 32000u);
  EXPECT_THROW(make_synthetic_vocab(353), Error);
  EXPECT_EQ(make_synthetic_vocab(354).pieces.size(), 354u);
}

TEST(SyntheticModelFile, LoadsWithLlamaCppNamesAndTokenizesWords) {
  test::TempDir dir;
  SyntheticModelOptions options;
  options.shape = {"custom", 2, 64, 128, 4, 2, 32000, 128};
  options.progress = false;
  write_synthetic_model(dir.file("m.gguf"), options);
  Model model(dir.file("m.gguf"), 8);
  EXPECT_EQ(model.config().n_layers, 2);
  EXPECT_EQ(model.config().n_kv_heads, 2);
  EXPECT_EQ(model.config().vocab_size, 32000);
  EXPECT_FALSE(model.weights().tied_output);
  EXPECT_EQ(model.file().require_tensor("blk.1.ffn_down.weight").type, GgmlType::F16);
  EXPECT_EQ(model.file().require_tensor("blk.1.ffn_norm.weight").type, GgmlType::F32);
  const Tokenizer tokenizer = Tokenizer::from_gguf(model.file());
  // Every word of this sentence is in the synthetic vocabulary: one piece each after BOS.
  EXPECT_EQ(tokenizer.encode("once upon a time there was a little girl", true).size(), 10u);
}

TEST(SyntheticModelFile, TiedOutputLeavesOutOutputWeight) {
  test::TempDir dir;
  SyntheticModelOptions options;
  options.shape = {"custom", 1, 32, 64, 4, 4, 400, 16};
  options.tied_output = true;
  options.progress = false;
  write_synthetic_model(dir.file("tied.gguf"), options);
  Model model(dir.file("tied.gguf"), 4);
  EXPECT_TRUE(model.weights().tied_output);
  EXPECT_EQ(model.file().find_tensor("output.weight"), nullptr);
}

TEST(SyntheticModelFile, RefusesImpossibleShapes) {
  test::TempDir dir;
  SyntheticModelOptions options;
  options.progress = false;
  options.shape = {"custom", 1, 30, 64, 4, 4, 400, 16};  // 30 does not split into 4 heads
  EXPECT_THROW(write_synthetic_model(dir.file("x.gguf"), options), Error);
  options.shape = {"custom", 1, 32, 64, 4, 3, 400, 16};  // 4 heads over 3 KV heads
  EXPECT_THROW(write_synthetic_model(dir.file("x.gguf"), options), Error);
}

}  // namespace
}  // namespace cpullm
