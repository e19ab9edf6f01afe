// cpullm generate: prompt in, text out, and one timing summary line on stderr.
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <filesystem>

#include "cli/commands.hpp"
#include "engine/kernels/isa.hpp"
#include "engine/model/model.hpp"
#include "engine/runtime/bind_threads.hpp"
#include "engine/runtime/topology.hpp"
#include "engine/sampling/sampler.hpp"
#include "engine/tokenizer/tokenizer.hpp"
#include "engine/util/error.hpp"
#include "engine/util/process_memory.hpp"

namespace cpullm::cli {
namespace {

struct GenerateOptions {
  std::string model_path;
  std::string prompt;
  int n_predict = 128;
  int64_t context = 0;
  int threads = 0;
  std::string isa;
  std::string attention_tiles = "64x64";
  BindingOptions binding;
  bool ignore_eos = false;
  SamplingParams sampling;
};

using Clock = std::chrono::steady_clock;
double seconds_between(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// Plans the threads on this machine and pins them; prints where each thread may run, as the OS
// reports it after pinning, and what the plan reduced (e.g. scatter over one package).
void bind_threads(const BindingOptions& binding, int threads) {
  const Topology topology = detect_topology();
  const ThreadPlan plan = plan_threads(topology, thread_request(binding, threads));
  const auto granted = apply_thread_plan(topology, plan);
  std::string placement;
  for (std::size_t i = 0; i < granted.size(); ++i)
    placement += fmt::format("{}thread {} on CPU {}", i ? ", " : "", i, format_cpu_list(granted[i]));
  std::fprintf(stderr, "cpullm: threads (bind %s): %s\n", std::string(bind_policy_name(plan.policy)).c_str(),
               placement.c_str());
  for (const std::string& note : plan.notes) std::fprintf(stderr, "cpullm: note: %s\n", note.c_str());
}

void run_generate(const GenerateOptions& o) {
  apply_threads(o.threads);
  apply_isa(o.isa);
  if (o.binding.given()) bind_threads(o.binding, o.threads);
  const auto load_start = Clock::now();
  const AttentionTiles tiles = parse_attention_tiles(o.attention_tiles);
  Model model(o.model_path, o.context);
  model.set_attention_tiles(tiles);
  const Tokenizer tokenizer = Tokenizer::from_gguf(model.file());
  const double load_seconds = seconds_between(load_start, Clock::now());
  std::fprintf(stderr,
               "cpullm: loaded %s in %.0f ms: %.1f MiB mapped, %.1f MiB resident after load, KV cache %.1f MiB "
               "for %ld positions\n",
               o.model_path.c_str(), load_seconds * 1e3, model.file().file_size() / 1048576.0,
               resident_bytes() / 1048576.0, model.kv_cache_bytes() / 1048576.0, static_cast<long>(model.context()));

  const std::vector<int32_t> prompt = tokenizer.encode(o.prompt, true);
  if (static_cast<int64_t>(prompt.size()) + o.n_predict > model.context())
    fail("the prompt ({} tokens) plus -n {} exceeds the context of {} positions; raise -c or lower -n", prompt.size(),
         o.n_predict, model.context());
  Sampler sampler(o.sampling);
  TextDecoder decoder(tokenizer);
  std::fputs(o.prompt.c_str(), stdout);
  std::fflush(stdout);

  const auto start = Clock::now();
  // The prompt goes through in batches (blocked GEMM); generation then runs one token at a time.
  std::span<const float> logits = model.forward_batch(prompt, 0);
  int64_t pos = static_cast<int64_t>(prompt.size());
  const auto prompt_done = Clock::now();

  Clock::time_point first_token_time = prompt_done, last_token_time = prompt_done;
  int generated = 0;
  int32_t previous = prompt.back();
  while (generated < o.n_predict) {
    const int32_t next = sampler.sample(logits);
    last_token_time = Clock::now();
    if (generated == 0) first_token_time = last_token_time;
    if (next == tokenizer.eos() && !o.ignore_eos) break;
    ++generated;
    std::fputs(decoder.push(previous, next).c_str(), stdout);
    std::fflush(stdout);
    previous = next;
    if (generated < o.n_predict) logits = model.forward(next, pos++);
  }
  std::fputs(decoder.finish().c_str(), stdout);
  std::fputs("\n", stdout);

  const double prompt_seconds = seconds_between(start, prompt_done);
  const double generation_seconds = seconds_between(first_token_time, last_token_time);
  std::fprintf(stderr,
               "cpullm: prompt %zu tokens, %.1f tokens/s | time to first token %.1f ms | generated %d tokens, "
               "%.2f tokens/s | %d threads, kernels %s, peak resident %.1f MiB\n",
               prompt.size(), prompt.size() / prompt_seconds, seconds_between(start, first_token_time) * 1e3,
               generated, generated > 1 ? (generated - 1) / generation_seconds : 0.0, omp_get_max_threads(),
               std::string(isa_name(active_isa())).c_str(), peak_resident_bytes() / 1048576.0);
}

}  // namespace

void register_generate(CLI::App& app) {
  auto options = std::make_shared<GenerateOptions>();
  CLI::App* command = app.add_subcommand("generate", "Generate text from a prompt");
  command->add_option("-m,--model", options->model_path, "GGUF model file")->required()->check(CLI::ExistingFile);
  command->add_option("-p,--prompt", options->prompt, "Prompt text (empty: start from BOS alone)");
  command->add_option("-n,--n-predict", options->n_predict, "Tokens to generate")->check(CLI::Range(0, 1 << 24));
  command->add_option("-c,--ctx-size", options->context, "Context positions (0: the model's, at most 4096)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 24));
  command->add_option("--temp", options->sampling.temperature, "Temperature (0: greedy)")->check(CLI::Range(0.0, 100.0));
  command->add_option("--top-k", options->sampling.top_k, "Keep the k most likely tokens (0: all)")->check(CLI::NonNegativeNumber);
  command->add_option("--top-p", options->sampling.top_p, "Nucleus probability mass")->check(CLI::Range(0.0, 1.0));
  command->add_option("-s,--seed", options->sampling.seed, "Random seed");
  command->add_flag("--ignore-eos", options->ignore_eos, "Keep generating past the end-of-sequence token");
  add_threads_option(*command, options->threads);
  add_isa_option(*command, options->isa);
  command->add_option("--attn-tile", options->attention_tiles, "Prompt attention tile, QUERIESxKEYS, 1..128 each (the seed used 8x8)");
  add_binding_options(*command, options->binding);
  command->callback([options] { run_generate(*options); });
}

}  // namespace cpullm::cli
