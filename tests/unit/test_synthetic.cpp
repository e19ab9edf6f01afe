// Synthetic models: real shapes, the vocabularies' layouts (SentencePiece, and byte-level BPE
// against llama.cpp's own Llama 3 and Qwen2 vocabulary files), and a file the engine loads.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <tuple>

#include "engine/format/gguf.hpp"
#include "engine/model/model.hpp"
#include "engine/synthetic/synthetic_model.hpp"
#include "engine/synthetic/synthetic_vocab.hpp"
#include "engine/tokenizer/bpe.hpp"
#include "engine/tokenizer/tokenizer.hpp"
#include "engine/util/error.hpp"
#include "tests/unit/test_support.hpp"

namespace cpullm {
namespace {

// The widths each model's published config gives, and what else its family's files carry.
TEST(SyntheticShapes, MatchThePublishedConfigs) {
  struct Published {
    const char* name;
    int64_t layers, dim, ffn, heads, kv_heads, vocab, context;
  };
  for (const Published& p : {Published{"tinyllama-1.1b", 22, 2048, 5632, 32, 4, 32000, 2048},
                             Published{"llama-7b", 32, 4096, 11008, 32, 32, 32000, 4096},
                             Published{"llama-13b", 40, 5120, 13824, 40, 40, 32000, 4096},
                             Published{"llama3-8b", 32, 4096, 14336, 32, 8, 128256, 131072},
                             Published{"mistral-7b", 32, 4096, 14336, 32, 8, 32000, 32768},
                             Published{"qwen2.5-7b", 28, 3584, 18944, 28, 4, 152064, 32768}}) {
    const std::optional<SyntheticShape> s = named_shape(p.name);
    ASSERT_TRUE(s) << p.name;
    EXPECT_EQ(std::tuple(s->n_layers, s->dim, s->ffn_dim, s->n_heads, s->n_kv_heads, s->vocab_size, s->context),
              std::tuple(p.layers, p.dim, p.ffn, p.heads, p.kv_heads, p.vocab, p.context))
        << p.name;
  }
  const SyntheticShape llama3 = *named_shape("llama3-8b");
  EXPECT_EQ(llama3.rope_base, 500000.0f);
  EXPECT_EQ(llama3.rope_scaling, SyntheticRopeScaling::llama3);
  EXPECT_EQ(llama3.vocab, SyntheticVocabKind::llama3);
  EXPECT_EQ(named_shape("mistral-7b")->sliding_window, 4096);
  const SyntheticShape qwen = *named_shape("qwen2.5-7b");
  EXPECT_EQ(qwen.architecture, Architecture::qwen2);
  EXPECT_EQ(qwen.rope_base, 1e6f);
  EXPECT_EQ(qwen.rms_eps, 1e-6f);
  EXPECT_EQ(qwen.vocab, SyntheticVocabKind::qwen2);
  EXPECT_EQ(named_shape("tinyllama-1.1b")->architecture, Architecture::llama);
  for (const std::string& name : shape_names()) EXPECT_TRUE(named_shape(name)) << name;
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

// A byte-level BPE vocabulary: the 256 byte symbols first ('!' first, byte 0's U+0100 at 188, as
// GPT-2 orders them), then tokens each made by the merge of its rank from two earlier tokens,
// then the family's specials.
TEST(SyntheticVocab, BpeMergesBuildEveryTokenFromTwoEarlierOnes) {
  for (SyntheticVocabKind kind : {SyntheticVocabKind::llama3, SyntheticVocabKind::qwen2}) {
    const SyntheticVocab v = make_synthetic_vocab(1024, kind);
    ASSERT_EQ(v.pieces.size(), 1024u);
    EXPECT_EQ(v.model, "gpt2");
    EXPECT_TRUE(v.scores.empty());
    EXPECT_EQ(std::set<std::string>(v.pieces.begin(), v.pieces.end()).size(), 1024u);
    std::set<std::string> byte_symbols;
    for (int byte = 0; byte < 256; ++byte) byte_symbols.insert(to_byte_alphabet(std::string(1, static_cast<char>(byte))));
    EXPECT_EQ(byte_symbols, std::set<std::string>(v.pieces.begin(), v.pieces.begin() + 256));
    EXPECT_EQ(v.pieces[0], "!");
    EXPECT_EQ(v.pieces[188], "\xc4\x80");        // U+0100: byte 0
    EXPECT_EQ(to_byte_alphabet(" "), "\xc4\xa0");  // U+0120, the Ġ before words
    std::map<std::string, int64_t> id;
    for (std::size_t i = 0; i < v.pieces.size(); ++i) id[v.pieces[i]] = static_cast<int64_t>(i);
    for (std::size_t rank = 0; rank < v.merges.size(); ++rank) {
      const std::string& merge = v.merges[rank];
      const std::size_t space = merge.find(' ');
      ASSERT_NE(space, std::string::npos) << merge;
      const std::string left = merge.substr(0, space), right = merge.substr(space + 1);
      const int64_t made = 256 + static_cast<int64_t>(rank);
      EXPECT_EQ(left + right, v.pieces[made]) << "merge " << rank;
      EXPECT_LT(id.at(left), made) << merge;
      EXPECT_LT(id.at(right), made) << merge;
      EXPECT_EQ(v.types[made], static_cast<int32_t>(TokenType::Normal));
    }
    const int32_t first_special = 256 + static_cast<int32_t>(v.merges.size());
    EXPECT_EQ(v.bos, first_special);
    if (kind == SyntheticVocabKind::llama3) {
      EXPECT_EQ(v.pre, "llama-bpe");
      EXPECT_EQ(1024 - first_special, 256);  // all of Llama 3's specials
      EXPECT_EQ(v.pieces[first_special], "<|begin_of_text|>");
      EXPECT_EQ(v.pieces[first_special + 9], "<|eot_id|>");
      EXPECT_EQ(v.eos, first_special + 1);
      EXPECT_TRUE(v.add_bos);
    } else {
      EXPECT_EQ(v.pre, "qwen2");
      EXPECT_EQ(1024 - first_special, 22);
      EXPECT_EQ(v.pieces[first_special], "<|endoftext|>");
      EXPECT_EQ(v.pieces[first_special + 1], "<|im_start|>");
      EXPECT_EQ(v.eos, first_special + 2);  // <|im_end|>
      EXPECT_EQ(v.types[first_special + 14], static_cast<int32_t>(TokenType::UserDefined));  // <tool_call>
      EXPECT_FALSE(v.add_bos);
    }
    EXPECT_EQ(v.types[first_special], static_cast<int32_t>(TokenType::Control));
  }
  EXPECT_THROW(make_synthetic_vocab(512, SyntheticVocabKind::llama3), Error);
  EXPECT_EQ(make_synthetic_vocab(513, SyntheticVocabKind::llama3).merges.size(), 1u);
  EXPECT_THROW(make_synthetic_vocab(278, SyntheticVocabKind::qwen2), Error);
  EXPECT_EQ(make_synthetic_vocab(279, SyntheticVocabKind::qwen2).merges.size(), 1u);
}

// At full size, the layouts of llama.cpp's own vocabulary files (../shared/models): the same 256
// byte symbols in the same order, and the specials at the same ids (all 256 of Llama 3's, with
// their types), BOS included. Qwen2.5's embedding is padded past them with unused [PADn] tokens.
TEST(SyntheticVocab, FullSizeLayoutsMatchLlamaCppsVocabularyFiles) {
  struct Family {
    SyntheticVocabKind kind;
    const char* file;
    int64_t size, first_special, specials_compared;
  };
  int compared = 0;
  for (const Family& f : {Family{SyntheticVocabKind::llama3, "ggml-vocab-llama-bpe.gguf", 128256, 128000, 256},
                          Family{SyntheticVocabKind::qwen2, "ggml-vocab-qwen2.gguf", 152064, 151643, 3}}) {
    const auto path = test::shared_model(f.file);
    if (!path) continue;
    ++compared;
    const GgufFile file(*path);
    const GgufValue& tokens = file.require_array("tokenizer.ggml.tokens", GgufValueType::STRING);
    const GgufValue& types = file.require_array("tokenizer.ggml.token_type", GgufValueType::I32);
    const SyntheticVocab v = make_synthetic_vocab(f.size, f.kind);
    ASSERT_EQ(static_cast<int64_t>(v.pieces.size()), f.size);
    for (int64_t i = 0; i < 256; ++i) EXPECT_EQ(v.pieces[i], tokens.items[i].string) << f.file << " token " << i;
    for (int64_t i = f.first_special; i < f.first_special + f.specials_compared; ++i) {
      EXPECT_EQ(v.pieces[i], tokens.items[i].string) << f.file << " token " << i;
      EXPECT_EQ(v.types[i], types.integer_at(i)) << f.file << " token " << i;
    }
    EXPECT_EQ(v.bos, static_cast<int32_t>(file.require_uint("tokenizer.ggml.bos_token_id"))) << f.file;
    EXPECT_EQ(v.merges.size(), static_cast<std::size_t>(f.first_special - 256)) << f.file;
    if (f.kind == SyntheticVocabKind::qwen2) {
      EXPECT_EQ(v.pieces.back(), "[PAD152063]");
    }
  }
  if (compared == 0) GTEST_SKIP() << "../shared/models/ggml-vocab-llama-bpe.gguf and ggml-vocab-qwen2.gguf not found";
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
