// cpullm quantize: rewrite a model with its matrices in Q8_0, Q4_0, INT8 per channel, BF16 or F16.
#include <cstdio>

#include "cli/commands.hpp"
#include "engine/quant/quantize_model.hpp"
#include "engine/util/process_memory.hpp"

namespace cpullm::cli {
namespace {

struct QuantizeCliOptions {
  std::string input_path;
  std::string output_path;
  std::string type;               // q8_0, q4_0, int8-channel, bf16 or f16
  std::vector<std::string> keep;  // --keep, split at commas
  int threads = 0;
};

void run_quantize(const QuantizeCliOptions& o) {
  apply_threads(o.threads);
  QuantizeOptions options;
  options.type = quantize_type_from_name(o.type);
  options.keep = o.keep;
  const QuantizeSummary s = quantize_model(o.input_path, o.output_path, options);
  std::fprintf(stderr,
               "cpullm: wrote %s (%s): %d tensors converted, %d fell back, %d kept, %d unchanged; "
               "%.1f MiB -> %.1f MiB; peak resident %.1f MiB\n",
               o.output_path.c_str(), o.type.c_str(), s.converted, s.fell_back, s.kept, s.unchanged,
               s.input_bytes / 1048576.0, s.output_bytes / 1048576.0, peak_resident_bytes() / 1048576.0);
}

}  // namespace

void register_quantize(CLI::App& app) {
  auto options = std::make_shared<QuantizeCliOptions>();
  CLI::App* command = app.add_subcommand("quantize", "Rewrite a model with its matrices in Q8_0, Q4_0, INT8 per channel, BF16 or F16");
  command->add_option("input", options->input_path, "Source GGUF model")->required();
  command->add_option("output", options->output_path, "GGUF file to write")->required();
  command->add_option("--type", options->type, "Type of the matrices: q8_0, q4_0, int8-channel (cpullm only), bf16 or f16")->required();
  command
      ->add_option("--keep", options->keep,
                   "Comma-separated tensors to leave at their source type: first, last (transformer block), "
                   "embeddings, output, or name globs such as 'blk.*.ffn_down.weight'")
      ->delimiter(',');
  add_threads_option(*command, options->threads);
  command->callback([options] { run_quantize(*options); });
}

}  // namespace cpullm::cli
