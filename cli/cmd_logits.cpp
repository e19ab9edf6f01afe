// cpullm logits: every position's logits for a prompt, as a float32 .npy [tokens, vocab].
#include <cstdio>

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
  std::vector<BatchToken> batch(prompt.size());
  for (std::size_t i = 0; i < prompt.size(); ++i)
    batch[i] = {.token = prompt[i], .sequence = 0, .position = static_cast<int64_t>(i), .want_logits = true};
  const std::span<const float> all_logits = session.prefill(batch);  // [tokens, vocab]
  write_npy(o.output_path, all_logits, {static_cast<int64_t>(prompt.size()), session.model().config().vocab_size});
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
  // The context is the prompt's length; one sequence.
  add_run_options(*command, options->run,
                  {RunFlag::threads, RunFlag::bind, RunFlag::cpuset, RunFlag::housekeeping, RunFlag::isa,
                   RunFlag::placement, RunFlag::attn_tile, RunFlag::kv_type, RunFlag::prefetch,
                   RunFlag::mlock});
  command->callback([options] { run_logits(*options); });
}

}  // namespace cpullm::cli
