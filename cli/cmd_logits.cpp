// cpullm logits: every position's logits for a prompt, as a float32 .npy [tokens, vocab].
#include <cstdio>

#include "cli/commands.hpp"
#include "engine/runtime/topology.hpp"
#include "engine/model/model.hpp"
#include "engine/tokenizer/tokenizer.hpp"
#include "engine/util/error.hpp"
#include "engine/util/npy.hpp"

namespace cpullm::cli {
namespace {

struct LogitsOptions {
  std::string model_path;
  std::string prompt;
  std::string output_path;
  int threads = 0;
  std::string isa;
  std::string attention_tiles = "64x64";
};

void run_logits(const LogitsOptions& o) {
  apply_threads(o.threads);
  apply_isa(o.isa);
  apply_cache_sizes(detect_topology());
  // Tokenize first so the KV cache is sized to the prompt (the second mapping shares pages).
  const std::vector<int32_t> prompt = Tokenizer::from_gguf(GgufFile(o.model_path)).encode(o.prompt, true);
  Model model(o.model_path, static_cast<int64_t>(prompt.size()));
  model.set_attention_tiles(parse_attention_tiles(o.attention_tiles));
  const int64_t vocab = model.config().vocab_size;
  const std::span<const float> all_logits = model.forward_batch(prompt, 0, true);  // [tokens, vocab]
  write_npy(o.output_path, all_logits, {static_cast<int64_t>(prompt.size()), vocab});
  std::printf("tokens:");
  for (int32_t token : prompt) std::printf(" %d", token);
  std::printf("\n");
}

}  // namespace

void register_logits(CLI::App& app) {
  auto options = std::make_shared<LogitsOptions>();
  CLI::App* command = app.add_subcommand("logits", "Write every position's logits for a prompt (BOS first) to .npy");
  command->add_option("-m,--model", options->model_path, "GGUF model file")->required()->check(CLI::ExistingFile);
  command->add_option("-p,--prompt", options->prompt, "Prompt text");
  command->add_option("-o,--output", options->output_path, "Output .npy file")->required();
  add_threads_option(*command, options->threads);
  add_isa_option(*command, options->isa);
  command->add_option("--attn-tile", options->attention_tiles, "Prompt attention tile, QUERIESxKEYS, 1..128 each (the seed used 8x8)");
  command->callback([options] { run_logits(*options); });
}

}  // namespace cpullm::cli
