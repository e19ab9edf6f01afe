// cpullm eval-quant: what each weight format costs in accuracy against the source model.
#include <cstdio>
#include <filesystem>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "engine/quant/file_types.hpp"
#include "engine/runtime/topology.hpp"
#include "cli/run_options.hpp"
#include "harness/eval/quant_eval.hpp"
#include "engine/model/kv_cache.hpp"
#include "engine/util/error.hpp"
#include "engine/util/input_file.hpp"
#include "engine/util/output_file.hpp"

namespace cpullm::cli {
namespace {

// Perplexity over a few megabytes of text already takes hours on a 7B model; more is a mistake.
constexpr std::uintmax_t kMaxEvalTextBytes = 64u << 20;

struct EvalQuantCliOptions {
  std::string model_path;
  std::vector<std::string> formats;
  std::vector<std::string> kv_types;
  std::vector<std::string> keep;
  std::string text_path;   // empty: the built-in stories
  std::string files_dir;   // empty: a temporary folder, removed afterwards
  int64_t window = 256;
  bool json = false;
  RunConfig run;  // every model's run settings; the model and context are each candidate's
};

void run_eval_quant(const EvalQuantCliOptions& o) {
  const std::string text = o.text_path.empty() ? std::string(default_eval_text()) : read_input_file(o.text_path, "the evaluation text", kMaxEvalTextBytes);
  if (o.formats.empty() && o.kv_types.empty()) fail("eval-quant: nothing to score: give --formats, --kv-types or both");
  QuantEvalOptions options{o.formats, o.keep, o.window, o.files_dir, o.run, o.kv_types};
  const bool temporary = options.work_dir.empty();
  if (temporary) options.work_dir = make_private_temporary_folder("cpullm-eval-");
  std::vector<QuantEvalResult> results;
  try {
    results = evaluate_quantization(o.model_path, text, options);
  } catch (...) {
    if (temporary) std::filesystem::remove_all(options.work_dir);
    throw;
  }
  if (temporary) std::filesystem::remove_all(options.work_dir);

  const QuantEvalResult& source = results.front();
  std::fprintf(stderr, "cpullm: run: %s\n", source.run.c_str());
  if (o.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& r : results)
      out.push_back({{"format", r.format}, {"kv_type", r.kv_type}, {"file_bytes", r.file_bytes}, {"positions", r.positions},
                     {"perplexity", r.perplexity}, {"mean_kl", r.mean_kl}, {"top1_agreement", r.top1_agreement}, {"run", r.run}});
    std::printf("%s\n", out.dump(2).c_str());
    return;
  }
  std::printf("%s, %ld positions in windows of %ld tokens%s\n", o.model_path.c_str(), static_cast<long>(source.positions),
              static_cast<long>(o.window), o.keep.empty() ? "" : ", keeping source precision for --keep");
  std::printf("%-18s %-5s %10s %11s %10s %10s %7s\n", "format", "kv", "file MiB", "perplexity", "vs source", "mean KL", "top-1");
  for (const auto& r : results) {
    const std::string change =
        &r == &source ? "-" : fmt::format("{:+.2f}%", 100.0 * (r.perplexity / source.perplexity - 1));
    std::printf("%-18s %-5s %10.2f %11.4f %10s %10.3e %7.4f\n", r.format.c_str(), r.kv_type.c_str(), r.file_bytes / 1048576.0, r.perplexity,
                change.c_str(), r.mean_kl, r.top1_agreement);
  }
}

}  // namespace

void register_eval_quant(CLI::App& app) {
  auto options = std::make_shared<EvalQuantCliOptions>();
  CLI::App* command = app.add_subcommand(
      "eval-quant", "Quantize a model to each format (and run it with each KV cache type) and score it against the source: perplexity, KL, top-1");
  command->add_option("-m,--model", options->model_path, "Source GGUF model (full precision)")
      ->required()->check(CLI::ExistingFile);
  command->add_option("--formats", options->formats, "Comma-separated: " + file_type_names() + ", each optionally +sparseS (unstructured Top-K, "
                      "e.g. f16+sparse0.2), +blockS (block4x4) or +N:M (e.g. f16+2:4); a sparsity alone keeps the source precision")
      ->delimiter(',');
  command->add_option("--kv-types", options->kv_types, "Comma-separated KV cache types (" + fmt::format("{}", fmt::join(kv_type_names(), ", ")) +
                      ") to score the source model with, against its run with --kv-type")
      ->delimiter(',')->check(CLI::IsMember(kv_type_names()));
  command->add_option("--keep", options->keep, "Tensors left at source precision (quantize --keep), e.g. first,last")
      ->delimiter(',');
  command->add_option("--text", options->text_path, "Evaluation text (default: the built-in stories)");
  command->add_option("--window", options->window, "Tokens per window, BOS included")->check(CLI::Range(2, 1 << 16));
  command->add_option("--files", options->files_dir, "Keep the quantized models in this folder");
  command->add_flag("--json", options->json, "Print JSON");
  add_run_options(*command, options->run,
                  {RunFlag::threads, RunFlag::bind, RunFlag::cpuset, RunFlag::housekeeping, RunFlag::isa,
                   RunFlag::placement, RunFlag::attn_tile, RunFlag::kv_type, RunFlag::prefetch, RunFlag::mlock});
  command->callback([options] { run_eval_quant(*options); });
}

}  // namespace cpullm::cli
