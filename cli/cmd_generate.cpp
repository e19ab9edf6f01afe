// cpullm generate: prompt in, text out, and one timing summary line on stderr.
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <filesystem>

#include "cli/commands.hpp"
#include "cli/numa_run.hpp"
#include "cli/config_file.hpp"
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
  NumaOptions numa;
  bool ignore_eos = false;
  SamplingParams sampling;
  int sequences = 1;             // -np: copies of the prompt generated together, batched
  std::string kv_type = "f32";
  bool mlock = false;
  bool prefetch = false;
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
  const std::shared_ptr<TensorParallel> parallel = start_tensor_parallel(o.numa);
  apply_threads(o.threads);
  apply_isa(o.isa);
  apply_cache_sizes(detect_topology());
  if (o.binding.given()) bind_threads(o.binding, o.threads);
  const auto load_start = Clock::now();
  const AttentionTiles tiles = parse_attention_tiles(o.attention_tiles);
  // NUMA copies are made from the model's matrices once it has mapped them, before the first token.
  const std::shared_ptr<WeightPlacement> placement = plan_weight_placement(o.numa, o.binding, o.threads, o.model_path);
  const ModelOptions model_options{.context = o.context,
                                   .sequences = o.sequences,
                                   .kv_type = parse_kv_type(o.kv_type),
                                   .mlock = o.mlock,
                                   .prefetch = o.prefetch,
                                   .placement = placement,
                                   .tensor_parallel = parallel};
  Model model(o.model_path, model_options);
  if (placement) place_weights(*placement, model);
  model.set_attention_tiles(tiles);
  const Tokenizer tokenizer = Tokenizer::from_gguf(model.file());
  const double load_seconds = seconds_between(load_start, Clock::now());
  std::fprintf(stderr,
               "cpullm: loaded %s in %.0f ms%s: %.1f MiB mapped, %.1f MiB resident after load, KV cache (%s) %.1f MiB "
               "for %d sequence(s) of %ld positions\n",
               o.model_path.c_str(), load_seconds * 1e3, o.mlock ? " (weights locked)" : "",
               model.file().file_size() / 1048576.0, resident_bytes() / 1048576.0, o.kv_type.c_str(),
               model.kv_cache_bytes() / 1048576.0, o.sequences, static_cast<long>(model.context()));
  std::fprintf(stderr, "cpullm: memory plan: %s\n", model.memory_plan().describe().c_str());

  const std::vector<int32_t> prompt = tokenizer.encode(o.prompt, true);
  if (static_cast<int64_t>(prompt.size()) + o.n_predict > model.context())
    fail("the prompt ({} tokens) plus -n {} exceeds the context of {} positions; raise -c or lower -n", prompt.size(),
         o.n_predict, model.context());
  // One sampler and one decoder per sequence; sequence s samples with seed + s.
  std::vector<Sampler> samplers;
  std::vector<TextDecoder> decoders;
  std::vector<std::string> texts(o.sequences);
  for (int s = 0; s < o.sequences; ++s) {
    SamplingParams params = o.sampling;
    params.seed += s;
    samplers.emplace_back(params);
    decoders.emplace_back(tokenizer);
  }
  const bool stream = o.sequences == 1;  // several sequences print when they are done
  if (stream) {
    std::fputs(o.prompt.c_str(), stdout);
    std::fflush(stdout);
  }

  const auto start = Clock::now();
  // The prompt goes through in batches (blocked GEMM); generation then runs one token per
  // sequence per step, the sequences still going together in one batch.
  std::span<const float> logits = model.forward(prompt_copies(prompt, o.sequences));
  const auto prompt_done = Clock::now();

  Clock::time_point first_token_time = prompt_done, last_token_time = prompt_done;
  std::vector<int32_t> previous(o.sequences, prompt.back());
  std::vector<int> active(o.sequences);  // sequences still generating, in the order of the logits rows
  for (int s = 0; s < o.sequences; ++s) active[s] = s;
  int64_t pos = static_cast<int64_t>(prompt.size());
  int steps = 0, generated = 0;
  while (steps < o.n_predict && !active.empty()) {
    std::vector<BatchToken> next_batch;
    for (std::size_t row = 0; row < active.size(); ++row) {
      const int s = active[row];
      const int32_t next = samplers[s].sample(logits.subspan(row * model.config().vocab_size, model.config().vocab_size));
      if (next == tokenizer.eos() && !o.ignore_eos) continue;
      ++generated;
      texts[s] += decoders[s].push(previous[s], next);
      previous[s] = next;
      next_batch.push_back({.token = next, .sequence = s, .position = pos, .want_logits = true});
    }
    last_token_time = Clock::now();
    if (steps == 0) first_token_time = last_token_time;
    if (stream) {
      std::fputs(texts[0].c_str(), stdout);
      std::fflush(stdout);
      texts[0].clear();
    }
    ++steps;
    ++pos;
    active.clear();
    for (const BatchToken& t : next_batch) active.push_back(t.sequence);
    if (steps < o.n_predict && !next_batch.empty()) logits = model.forward(next_batch);
  }
  for (int s = 0; s < o.sequences; ++s) {
    texts[s] += decoders[s].finish();
    if (stream) std::fputs((texts[s] + "\n").c_str(), stdout);
    else std::printf("--- sequence %d ---\n%s%s\n", s, o.prompt.c_str(), texts[s].c_str());
  }

  const double prompt_seconds = seconds_between(start, prompt_done);
  const double generation_seconds = seconds_between(first_token_time, last_token_time);
  const int later_tokens = generated - static_cast<int>(std::min<std::size_t>(generated, o.sequences));
  std::fprintf(stderr,
               "cpullm: prompt %zu tokens, %.1f tokens/s | time to first token %.1f ms | generated %d tokens, "
               "%.2f tokens/s | %d threads, kernels %s, peak resident %.1f MiB, %s%s%s\n",
               prompt.size() * o.sequences, prompt.size() * o.sequences / prompt_seconds,
               seconds_between(start, first_token_time) * 1e3, generated,
               steps > 1 ? later_tokens / generation_seconds : 0.0, omp_get_max_threads(),
               std::string(isa_name(active_isa())).c_str(), peak_resident_bytes() / 1048576.0,
               describe_page_sizes(model.file().mapping()).c_str(), o.sequences > 1 ? fmt::format(", {} sequences", o.sequences).c_str() : "",
               o.prefetch ? fmt::format(", prefetched {:.1f} MiB", model.prefetched_bytes() / 1048576.0).c_str() : "");
  if (parallel) print_rank_memory(*parallel, model);
}

}  // namespace

void register_generate(CLI::App& app) {
  auto options = std::make_shared<GenerateOptions>();
  CLI::App* command = app.add_subcommand("generate", "Generate text from a prompt");
  auto config_file = std::make_shared<std::string>();  // --config: what cpullm sweep writes
  add_config_option(*command, *config_file);
  // Required, but checked after --config is applied: the file may name the model.
  command->add_option("-m,--model", options->model_path, "GGUF model file (required)")->check(CLI::ExistingFile);
  command->add_option("-p,--prompt", options->prompt, "Prompt text (empty: start from BOS alone)");
  command->add_option("-n,--n-predict", options->n_predict, "Tokens to generate")->check(CLI::Range(0, 1 << 24));
  command->add_option("-c,--ctx-size", options->context, "Context positions (0: the model's, at most 4096)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 24));
  command->add_option("--temp", options->sampling.temperature, "Temperature (0: greedy)")->check(CLI::Range(0.0, 100.0));
  command->add_option("--top-k", options->sampling.top_k, "Keep the k most likely tokens (0: all)")->check(CLI::NonNegativeNumber);
  command->add_option("--top-p", options->sampling.top_p, "Nucleus probability mass")->check(CLI::Range(0.0, 1.0));
  add_seed_option(*command, "-s,--seed", options->sampling.seed, "Random seed");
  command->add_flag("--ignore-eos", options->ignore_eos, "Keep generating past the end-of-sequence token");
  add_threads_option(*command, options->threads);
  add_isa_option(*command, options->isa);
  command->add_option("--attn-tile", options->attention_tiles, "Prompt attention tile, QUERIESxKEYS, 1..128 each (the seed used 8x8)");
  add_binding_options(*command, options->binding);
  add_numa_options(*command, options->numa);
  command->add_option("--np,--parallel", options->sequences,
                      "Sequences generated together from the prompt, batched (sequence s samples with seed + s)")
      ->check(CLI::Range(1, static_cast<int>(Model::kMaxSequences)));
  command->add_option("--kv-type", options->kv_type, "KV cache precision: f32, f16, bf16");
  command->add_flag("--mlock", options->mlock, "Lock the weights in memory");
  command->add_flag("--prefetch", options->prefetch,
                    "Double buffering: a thread maps layer l + 1's weights while layer l computes, then the embedding table");
  command->callback([options, command, config_file] {
    apply_config_file(*command, *config_file);
    if (options->model_path.empty()) fail("generate: -m/--model is required (on the command line or in --config)");
    run_generate(*options);
  });
}

}  // namespace cpullm::cli
