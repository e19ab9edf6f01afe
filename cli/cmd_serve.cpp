// cpullm serve: the model behind an OpenAI-compatible HTTP server (serve/), configured by the
// same flags and --config files as generate, so a configuration that tune chose serves as it
// was measured.
#include <cstdio>
#include <filesystem>
#include <random>

#include "cli/chat_options.hpp"
#include "cli/commands.hpp"
#include "cli/config_file.hpp"
#include "cli/run_options.hpp"
#include "engine/format/gguf.hpp"
#include "engine/model/config.hpp"
#include "engine/model/model.hpp"
#include "engine/run/session.hpp"
#include "engine/util/error.hpp"
#include "serve/http_server.hpp"

namespace cpullm::cli {
namespace {

// Slots when --max-sequences is not given: what half the memory left after the weights holds, at most this.
constexpr int64_t kDefaultSlots = 8;

struct ServeOptions {
  RunConfig run;
  ServerSettings server;
  SchedulerLimits limits;
  ChatOptions chat;  // --chat-template only
};

// --max-sequences 0: as many KV caches of the context as fit in half the memory the weights leave, at most kDefaultSlots.
int planned_sequences(const RunConfig& run) {
  const GgufFile file(run.model);
  const LlamaConfig c = LlamaConfig::from_gguf(file);
  const KvCacheShape one = Model::cache_shape(c, {.context = run.context, .sequences = 1, .kv_type = parse_kv_type(run.kv_type)});
  const int64_t context = one.context;
  const MemoryPlan plan = plan_memory(file, c, one, std::min(Model::kMaxChunk, context));
  const int64_t fit = sequences_that_fit(plan, 0.5);
  const int sequences = static_cast<int>(std::clamp<int64_t>(fit, 1, kDefaultSlots));
  std::fprintf(stderr,
               "cpullm: serve: %d sequence slots (--max-sequences): a KV cache (%s) of %ld positions is %.1f MiB; "
               "half the memory left after the weights holds %ld\n",
               sequences, run.kv_type.c_str(), static_cast<long>(context), plan.kv_cache_bytes / 1048576.0,
               static_cast<long>(fit));
  return sequences;
}

void run_serve(ServeOptions& o) {
  block_shutdown_signals();  // before any thread starts: the server's signal thread alone takes them
  if (!o.run.numa.empty()) fail("serve: --numa mpi is not supported (every rank would need the same batches)");
  if (o.run.sequences == 0) o.run.sequences = planned_sequences(o.run);
  Session session(o.run);
  const Model& model = session.model();
  const Tokenizer tokenizer = Tokenizer::from_gguf(model.file());
  std::fprintf(stderr, "cpullm: memory plan: %s\n", model.memory_plan().describe().c_str());
  std::fprintf(stderr, "cpullm: run: %s\n", session.describe().c_str());
  for (const std::string& note : session.report().notes) std::fprintf(stderr, "cpullm: note: %s\n", note.c_str());

  ApiSettings api;
  api.tokenizer = &tokenizer;
  try {
    api.chat = chosen_template(o.chat, model.file());
  } catch (const Error& e) {
    if (!o.chat.template_choice.empty()) throw;  // a bad --chat-template is the user's to fix now
    api.chat_missing = e.what();
    std::fprintf(stderr, "cpullm: serve: /v1/chat/completions is off: %s\n", api.chat_missing.c_str());
  }
  api.sampling = o.run.sampling;
  api.context = model.context();
  api.max_prompt_bytes = max_prompt_bytes(tokenizer, model.context());
  // A request without a seed draws one from the server's, so a run of the server is repeatable.
  auto seeds = std::make_shared<std::mt19937_64>(o.run.sampling.seed);
  auto seed_mutex = std::make_shared<std::mutex>();
  api.next_seed = [seeds, seed_mutex] {
    std::lock_guard lock(*seed_mutex);
    return (*seeds)();
  };
  if (o.server.model_name.empty()) o.server.model_name = std::filesystem::path(o.run.model).filename().string();
  serve(session, tokenizer, api, o.limits, o.server);
}

}  // namespace

void register_serve(CLI::App& app) {
  auto o = std::make_shared<ServeOptions>();
  o->run.sequences = 0;
  CLI::App* command = app.add_subcommand("serve", "Serve the model over HTTP with OpenAI's completion API");
  auto config_file = std::make_shared<std::string>();
  add_config_option(*command, *config_file);
  command->add_option("-m,--model", o->run.model, "GGUF model file (required)")->check(CLI::ExistingFile);
  command->add_option("--host", o->server.host, "Address to listen on")->capture_default_str();
  command->add_option("--port", o->server.port, "Port to listen on (0: any free port)")
      ->check(CLI::Range(0, 65535))->capture_default_str();
  command->add_option("--alias", o->server.model_name, "The model's name in /v1/models and responses (default: the file's name)");
  command->add_option("--max-sequences,--np,--parallel", o->run.sequences,
                      "Sequence slots: requests generating at once, each with its own KV cache of the context "
                      "(0: what half the memory after the weights holds, at most 8)")
      ->check(CLI::Range(0, static_cast<int>(Model::kMaxSequences)));
  command->add_option("--queue", o->limits.queue, "Requests that may wait for a slot; beyond them: 429")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20))->capture_default_str();
  command->add_option("-b,--batch-size", o->limits.chunk,
                      "Tokens per forward call at most: decode tokens, then prompt pieces in the room left")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))->capture_default_str();
  command->add_option("--max-body-bytes", o->server.max_body_bytes, "Largest request body (larger: 413)")
      ->check(CLI::Range(std::size_t{1024}, std::size_t{1} << 30))->capture_default_str();
  command->add_option("--read-timeout", o->server.read_timeout_s, "Seconds a request may stall while being read or written")
      ->check(CLI::Range(1, 3600))->capture_default_str();
  command->add_option("--grace", o->server.grace_s, "Seconds in-flight requests get to finish after SIGTERM")
      ->check(CLI::Range(0.0, 86400.0))->capture_default_str();
  command->add_option("--chat-template", o->chat.template_choice,
                      "The chat format instead of the file's tokenizer.chat_template: llama2, llama3, llama3.1, "
                      "mistral-v0, mistral-v1, mistral-v3, chatml, or a Jinja template file to recognise");
  add_run_options(*command, o->run,
                  {RunFlag::threads, RunFlag::bind, RunFlag::cpuset, RunFlag::housekeeping, RunFlag::isa,
                   RunFlag::placement, RunFlag::attn_tile, RunFlag::kv_type, RunFlag::context, RunFlag::prefetch,
                   RunFlag::mlock, RunFlag::sampling});
  command->callback([o, command, config_file] {
    apply_config_file(*command, *config_file);
    if (o->run.model.empty()) fail("serve: -m/--model is required (on the command line or in --config)");
    run_serve(*o);
  });
}

}  // namespace cpullm::cli
