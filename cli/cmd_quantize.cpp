// cpullm quantize: rewrite a model with its matrices in another format of the registry.
#include <omp.h>

#include <cstdio>

#include "cli/commands.hpp"
#include "cli/run_options.hpp"
#include "engine/quant/file_types.hpp"
#include "engine/quant/quantize_model.hpp"
#include "engine/quant/sparsify.hpp"
#include "engine/util/error.hpp"
#include "engine/util/process_memory.hpp"

namespace cpullm::cli {
namespace {

struct QuantizeCliOptions {
  std::string input_path;
  std::string output_path;
  std::string type;               // a registry name (q8_0, q4_0, ...); empty: matrices keep theirs
  std::optional<double> sparsity;  // --sparsity: fraction of each pruned row's weights dropped
  std::string sparsity_pattern;    // unstructured, block4x4 or N:M
  std::vector<std::string> keep;  // --keep, split at commas
  RunConfig run;  // -t only: quantizing runs no model
};

void run_quantize(const QuantizeCliOptions& o) {
  if (o.run.threads > 0) omp_set_num_threads(o.run.threads);
  QuantizeOptions options;
  if (o.type.empty() && !o.sparsity && o.sparsity_pattern.empty())
    fail("quantize: give --type, --sparsity or both");
  options.type = o.type.empty() ? std::nullopt : std::optional(quantize_type_from_name(o.type));
  if (o.sparsity || !o.sparsity_pattern.empty())
    options.sparsity = parse_sparsity(o.sparsity_pattern.empty() ? "unstructured" : o.sparsity_pattern, o.sparsity);
  options.keep = o.keep;
  const QuantizeSummary s = quantize_model(o.input_path, o.output_path, options);
  std::fprintf(stderr,
               "cpullm: wrote %s (%s): %d tensors converted, %d fell back, %d kept, %d unchanged; "
               "%.1f MiB -> %.1f MiB; peak resident %.1f MiB\n",
               o.output_path.c_str(),
               (o.type + (options.sparsity ? (o.type.empty() ? "" : ", ") + sparsity_name(*options.sparsity) : "")).c_str(),
               s.converted, s.fell_back, s.kept, s.unchanged,
               s.input_bytes / 1048576.0, s.output_bytes / 1048576.0, peak_resident_bytes() / 1048576.0);
}

}  // namespace

void register_quantize(CLI::App& app) {
  auto options = std::make_shared<QuantizeCliOptions>();
  CLI::App* command = app.add_subcommand("quantize", "Rewrite a model with its matrices in another format (cpullm info --formats lists them)");
  command->add_option("input", options->input_path, "Source GGUF model")->required();
  command->add_option("output", options->output_path, "GGUF file to write")->required();
  command->add_option("--type", options->type, "Type of the matrices: " + file_type_names() +
                      " (the -r8 ones and int8-channel are cpullm's own; q3_k, q4_k and q5_k are llama.cpp's _s mixtures)");
  command->add_option("--sparsity", options->sparsity,
                      "Prune this fraction of each block projection's weights (Top-K by magnitude per row), e.g. 0.2");
  command->add_option("--sparsity-pattern", options->sparsity_pattern,
                      "unstructured (default), block4x4, or N:M such as 2:4 (N of every M kept; implies the sparsity)");
  command
      ->add_option("--keep", options->keep,
                   "Comma-separated tensors to leave at their source type: first, last (transformer block), "
                   "embeddings, output, or name globs such as 'blk.*.ffn_down.weight'")
      ->delimiter(',');
  add_run_options(*command, options->run, {RunFlag::threads});
  command->callback([options] { run_quantize(*options); });
}

}  // namespace cpullm::cli
