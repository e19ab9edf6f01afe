// cpullm generate: prompt in, text out, and one timing summary line on stderr.
#include <chrono>
#include <cstdio>

#include "cli/chat_options.hpp"
#include "cli/commands.hpp"
#include "cli/config_file.hpp"
#include "cli/run_options.hpp"
#include "engine/run/numa_run.hpp"
#include "engine/run/session.hpp"
#include "engine/tokenizer/tokenizer.hpp"
#include "engine/util/error.hpp"
#include "engine/util/process_memory.hpp"

namespace cpullm::cli {
namespace {

struct GenerateOptions {
  RunConfig run;
  std::string prompt;
  int n_predict = 128;
  bool ignore_eos = false;
  bool special = false;  // control tokens' text in the prompt as those tokens
  ChatOptions chat;      // --chat: the prompt is a user's message in the chat template
};

using Clock = std::chrono::steady_clock;
double seconds_between(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// What the session applied before the first token: MPI ranks, where each thread may run (as the
// OS reports it after pinning), what the machine reduced, and the placement's copies.
void print_applied(const Session& session) {
  const RunReport& report = session.report();
  if (report.ranks > 0)
    std::fprintf(stderr,
                 "cpullm: --numa mpi: %d ranks; each computes its share of every projection's rows, then an allgather "
                 "gives every rank all of them (rank 0 prints)\n",
                 report.ranks);
  if (binding_given(session.config()))
    std::fprintf(stderr, "cpullm: threads (bind %s): %s\n", report.binding.c_str(), report.thread_cpus.c_str());
  for (const std::string& note : report.notes) std::fprintf(stderr, "cpullm: note: %s\n", note.c_str());
  if (!session.placed().empty()) std::fprintf(stderr, "cpullm: %s\n", session.placed().c_str());
}

void run_generate(const GenerateOptions& o) {
  const int sequences = o.run.sequences;
  const auto load_start = Clock::now();
  Session session(o.run);
  print_applied(session);
  const Model& model = session.model();
  const Tokenizer tokenizer = Tokenizer::from_gguf(model.file());
  const double load_seconds = seconds_between(load_start, Clock::now());
  std::fprintf(stderr,
               "cpullm: loaded %s in %.0f ms%s: %.1f MiB mapped, %.1f MiB resident after load, KV cache (%s) %.1f MiB "
               "for %d sequence(s) of %ld positions\n",
               o.run.model.c_str(), load_seconds * 1e3, o.run.mlock ? " (weights locked)" : "",
               model.file().file_size() / 1048576.0, resident_bytes() / 1048576.0, o.run.kv_type.c_str(),
               model.kv_cache_bytes() / 1048576.0, sequences, static_cast<long>(model.context()));
  std::fprintf(stderr, "cpullm: memory plan: %s\n", model.memory_plan().describe().c_str());
  std::fprintf(stderr, "cpullm: run: %s\n", session.describe().c_str());

  // A chat prints the answer alone; a plain prompt is printed before its continuation.
  const std::vector<int32_t> prompt = o.chat.chat ? chat_prompt(o.chat, o.prompt, model.file(), tokenizer).tokens
                                                  : tokenizer.encode(o.prompt, true, o.special);
  const std::string echoed = o.chat.chat ? std::string() : o.prompt;
  if (prompt.empty()) fail("{}: the prompt is empty and the vocabulary adds no BOS token: give one with -p", o.run.model);
  if (static_cast<int64_t>(prompt.size()) + o.n_predict > model.context())
    fail("the prompt ({} tokens) plus -n {} exceeds the context of {} positions; raise -c or lower -n", prompt.size(),
         o.n_predict, model.context());
  // One decoder per sequence; the session samples sequence s with seed + s.
  std::vector<TextDecoder> decoders;
  std::vector<std::string> texts(sequences);
  std::vector<int32_t> previous(sequences, prompt.back());
  for (int s = 0; s < sequences; ++s) decoders.emplace_back(tokenizer);
  const bool stream = sequences == 1;  // several sequences print when they are done
  if (stream) {
    std::fputs(echoed.c_str(), stdout);
    std::fflush(stdout);
  }

  const auto start = Clock::now();
  // The prompt goes through in batches (blocked GEMM); generation then runs one token per
  // sequence per step, the sequences still going together in one batch.
  session.prefill(prompt_copies(prompt, sequences));
  const auto prompt_done = Clock::now();

  Clock::time_point first_token_time = prompt_done, last_token_time = prompt_done;
  int steps = 0;
  DecodeLoop loop;
  loop.steps = o.n_predict;
  loop.first_position = static_cast<int64_t>(prompt.size());
  loop.run_last = false;  // the last token is printed, never run
  loop.choose = [&](int64_t, int32_t s, std::span<const float> logits) {
    const int32_t next = session.sample(s, logits);
    if (tokenizer.ends_generation(next) && !o.ignore_eos) return DecodeLoop::stop;
    texts[s] += decoders[s].push(previous[s], next);
    previous[s] = next;
    return next;
  };
  loop.chosen = [&](int64_t step) {
    last_token_time = Clock::now();
    if (step == 0) first_token_time = last_token_time;
    ++steps;
    if (stream) {
      std::fputs(texts[0].c_str(), stdout);
      std::fflush(stdout);
      texts[0].clear();
    }
  };
  const int generated = static_cast<int>(session.decode(loop));
  for (int s = 0; s < sequences; ++s) {
    texts[s] += decoders[s].finish();
    if (stream) std::fputs((texts[s] + "\n").c_str(), stdout);
    else std::printf("--- sequence %d ---\n%s%s\n", s, echoed.c_str(), texts[s].c_str());
  }

  const double prompt_seconds = seconds_between(start, prompt_done);
  const double generation_seconds = seconds_between(first_token_time, last_token_time);
  const int later_tokens = generated - std::min(generated, sequences);
  std::fprintf(stderr,
               "cpullm: prompt %zu tokens, %.1f tokens/s | time to first token %.1f ms | generated %d tokens, "
               "%.2f tokens/s | %d threads, kernels %s, peak resident %.1f MiB, %s%s%s\n",
               prompt.size() * sequences, prompt.size() * sequences / prompt_seconds,
               seconds_between(start, first_token_time) * 1e3, generated,
               steps > 1 ? later_tokens / generation_seconds : 0.0, session.report().threads,
               std::string(isa_name(session.report().kernels.isa)).c_str(), peak_resident_bytes() / 1048576.0,
               describe_page_sizes(model.file().mapping()).c_str(),
               sequences > 1 ? fmt::format(", {} sequences", sequences).c_str() : "",
               o.run.prefetch ? fmt::format(", prefetched {:.1f} MiB", model.prefetched_bytes() / 1048576.0).c_str() : "");
  if (session.tensor_parallel())
    std::fprintf(stderr, "cpullm: %s\n", rank_memory(*session.tensor_parallel(), model).c_str());
}

}  // namespace

void register_generate(CLI::App& app) {
  auto options = std::make_shared<GenerateOptions>();
  CLI::App* command = app.add_subcommand("generate", "Generate text from a prompt");
  auto config_file = std::make_shared<std::string>();  // --config: what cpullm sweep writes
  add_config_option(*command, *config_file);
  // Required, but checked after --config is applied: the file may name the model.
  command->add_option("-m,--model", options->run.model, "GGUF model file (required)")->check(CLI::ExistingFile);
  command->add_option("-p,--prompt", options->prompt, "Prompt text (empty: start from BOS alone)");
  command->add_option("-n,--n-predict", options->n_predict, "Tokens to generate")->check(CLI::Range(0, 1 << 24));
  command->add_flag("--ignore-eos", options->ignore_eos, "Keep generating past the tokens that end generation (EOS, EOT, ...)");
  command->add_flag("--special", options->special, "Read control tokens in the prompt (<|eot_id|>, <|im_start|>) as those tokens");
  add_chat_options(*command, options->chat);
  add_run_options(*command, options->run, kAllRunFlags);
  command->callback([options, command, config_file] {
    apply_config_file(*command, *config_file);
    if (options->run.model.empty()) fail("generate: -m/--model is required (on the command line or in --config)");
    run_generate(*options);
  });
}

}  // namespace cpullm::cli
