// cpullm logits: every position's logits for a prompt, as a float32 .npy [tokens, vocab].
#include <algorithm>
#include <cstdio>
#include <vector>

#include "cli/commands.hpp"
#include "cli/run_options.hpp"
#include "engine/run/session.hpp"
#include "engine/tokenizer/tokenizer.hpp"
#include "engine/util/error.hpp"
#include "engine/util/npy.hpp"

namespace cpullm::cli {
namespace {

struct LogitsOptions {
  RunConfig run;
  std::string prompt;
  std::vector<int32_t> tokens;  // --tokens: the ids themselves; no tokenizer is read
  std::string output_path;
  int64_t batch = 0;            // -b: prompt tokens per forward call; 0: all at once
};

void run_logits(LogitsOptions o) {
  // Tokenize first so the KV cache is sized to the prompt (the second mapping shares pages).
  const std::vector<int32_t> prompt =
      o.tokens.empty() ? Tokenizer::from_gguf(GgufFile(o.run.model)).encode(o.prompt, true) : o.tokens;
  if (prompt.empty()) fail("{}: the prompt is empty and the vocabulary adds no BOS token: give one with -p", o.run.model);
  o.run.context = static_cast<int64_t>(prompt.size());
  Session session(o.run);
  std::fprintf(stderr, "cpullm: run: %s\n", session.describe().c_str());
  for (const std::string& note : session.report().notes) std::fprintf(stderr, "cpullm: note: %s\n", note.c_str());
  // Calls of -b tokens each: the later ones attend over the cache the earlier ones filled, as a
  // long prompt's chunks do; -b 1 runs every position through decode's attention.
  const std::size_t per_call = o.batch > 0 ? static_cast<std::size_t>(o.batch) : prompt.size();
  const int64_t vocab = session.model().config().vocab_size;
  std::vector<float> all_logits;  // [tokens, vocab]
  all_logits.reserve(prompt.size() * static_cast<std::size_t>(vocab));
  for (std::size_t first = 0; first < prompt.size(); first += per_call) {
    std::vector<BatchToken> batch;
    for (std::size_t i = first; i < std::min(prompt.size(), first + per_call); ++i)
      batch.push_back({.token = prompt[i], .sequence = 0, .position = static_cast<int64_t>(i), .want_logits = true});
    const std::span<const float> logits = session.prefill(batch);
    all_logits.insert(all_logits.end(), logits.begin(), logits.end());
  }
  write_npy(o.output_path, all_logits, {static_cast<int64_t>(prompt.size()), vocab});
  std::printf("tokens:");
  for (int32_t token : prompt) std::printf(" %d", token);
  std::printf("\n");
}

}  // namespace

void register_logits(CLI::App& app) {
  auto options = std::make_shared<LogitsOptions>();
  CLI::App* command = app.add_subcommand(
      "logits", "Write every position's logits for a prompt (BOS first where the vocabulary adds one) to .npy");
  command->add_option("-m,--model", options->run.model, "GGUF model file")->required()->check(CLI::ExistingFile);
  CLI::Option* prompt = command->add_option("-p,--prompt", options->prompt, "Prompt text");
  command->add_option("--tokens", options->tokens, "Token ids instead of a prompt (BOS not added), e.g. 1,306,4682")
      ->delimiter(',')
      ->excludes(prompt);
  command->add_option("-o,--output", options->output_path, "Output .npy file")->required();
  command->add_option("-b,--batch-size", options->batch,
                      "Prompt tokens per forward call (default: all); later calls attend over the cache, 1 runs decode's attention")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  // The context is the prompt's length; one sequence.
  add_run_options(*command, options->run,
                  {RunFlag::threads, RunFlag::bind, RunFlag::cpuset, RunFlag::housekeeping, RunFlag::isa,
                   RunFlag::placement, RunFlag::attn_tile, RunFlag::kv_type, RunFlag::prefetch,
                   RunFlag::mlock});
  command->callback([options] { run_logits(*options); });
}

}  // namespace cpullm::cli
