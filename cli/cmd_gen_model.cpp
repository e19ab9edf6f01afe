// cpullm gen-model: write a random model at a real shape, for benchmarks and tests.
#include <fmt/ranges.h>

#include <cstdio>
#include <map>
#include <optional>

#include "cli/commands.hpp"
#include "engine/synthetic/synthetic_model.hpp"
#include "engine/util/error.hpp"
#include "engine/util/process_memory.hpp"

namespace cpullm::cli {
namespace {

struct GenModelOptions {
  std::string shape = "tinyllama-1.1b";
  std::string dtype = "f16";
  std::string output_path;
  SyntheticShape overrides{"", 0, 0, 0, 0, 0, 0, 0};  // 0: keep the named shape's value
  std::optional<int64_t> sliding_window;                // unset: the named shape's
  std::string rope_scaling;                             // empty: the named shape's
  std::optional<float> rope_factor;                     // unset: the named shape's
  uint64_t seed = 1;
  bool tied_output = false;
};

void run_gen_model(const GenModelOptions& o) {
  SyntheticShape shape = o.overrides;
  if (o.shape == "custom") {
    shape.name = "custom";
    if (!shape.dim || !shape.ffn_dim || !shape.n_heads || !shape.vocab_size || !shape.n_layers)
      fail("gen-model: --shape custom needs --layers, --dim, --ffn, --heads and --vocab");
    if (!shape.n_kv_heads) shape.n_kv_heads = shape.n_heads;
    if (!shape.context) shape.context = 2048;
  } else {
    auto named = named_shape(o.shape);
    if (!named) fail("gen-model: unknown --shape '{}' ({} or custom)", o.shape, fmt::join(shape_names(), ", "));
    auto keep = [](int64_t override_value, int64_t& value) { if (override_value) value = override_value; };
    keep(shape.n_layers, named->n_layers);
    keep(shape.dim, named->dim);
    keep(shape.ffn_dim, named->ffn_dim);
    keep(shape.n_heads, named->n_heads);
    keep(shape.n_kv_heads, named->n_kv_heads);
    keep(shape.vocab_size, named->vocab_size);
    keep(shape.context, named->context);
    shape = *named;
  }
  if (o.sliding_window) shape.sliding_window = *o.sliding_window;
  const std::map<std::string, SyntheticRopeScaling> scalings = {{"none", SyntheticRopeScaling::none},
                                                                {"llama3", SyntheticRopeScaling::llama3},
                                                                {"llama3-keys", SyntheticRopeScaling::llama3_keys},
                                                                {"linear", SyntheticRopeScaling::linear}};
  if (!o.rope_scaling.empty()) shape.rope_scaling = scalings.at(o.rope_scaling);
  if (o.rope_factor) shape.rope_factor = *o.rope_factor;
  SyntheticModelOptions options;
  options.shape = shape;
  options.seed = o.seed;
  options.tied_output = o.tied_output;
  options.dtype = o.dtype == "f32" ? GgmlType::F32 : o.dtype == "bf16" ? GgmlType::BF16 : GgmlType::F16;
  const uint64_t bytes = write_synthetic_model(o.output_path, options);
  std::fprintf(stderr,
               "cpullm: wrote %s: %s (%s), %ld layers, dim %ld, ffn %ld, %ld heads (%ld KV), vocab %ld, %s, %.1f MiB; "
               "peak resident %.1f MiB\n",
               o.output_path.c_str(), shape.name.c_str(), std::string(architecture_name(shape.architecture)).c_str(),
               shape.n_layers, shape.dim, shape.ffn_dim, shape.n_heads,
               shape.n_kv_heads, shape.vocab_size, o.dtype.c_str(), bytes / 1048576.0, peak_resident_bytes() / 1048576.0);
}

}  // namespace

void register_gen_model(CLI::App& app) {
  auto options = std::make_shared<GenModelOptions>();
  CLI::App* command = app.add_subcommand("gen-model", "Write a synthetic model (random weights, real shapes)");
  std::vector<std::string> shapes = shape_names();
  shapes.push_back("custom");
  command->add_option("--shape", options->shape, fmt::format("{} (a LLaMA of the given widths)", fmt::join(shapes, ", ")))
      ->check(CLI::IsMember(shapes));
  command->add_option("--layers", options->overrides.n_layers, "Transformer blocks (overrides the shape's)");
  command->add_option("--dim", options->overrides.dim, "Embedding width");
  command->add_option("--ffn", options->overrides.ffn_dim, "Feed-forward width");
  command->add_option("--heads", options->overrides.n_heads, "Attention heads");
  command->add_option("--kv-heads", options->overrides.n_kv_heads, "Key/value heads (grouped-query attention)");
  command->add_option("--vocab", options->overrides.vocab_size, "Vocabulary size");
  command->add_option("--ctx", options->overrides.context, "Trained context length stored in the file");
  command->add_option("--sliding-window", options->sliding_window,
                      "Positions each query sees, its own included (0: all; mistral-7b's 4096 otherwise)");
  command->add_option("--rope-scaling", options->rope_scaling,
                      "RoPE scaling: none, llama3 (Llama 3.1's factors as rope_freqs.weight: llama3-8b's), llama3-keys "
                      "(the same as rope.scaling keys), linear")
      ->check(CLI::IsMember({"none", "llama3", "llama3-keys", "linear"}));
  command->add_option("--rope-factor", options->rope_factor, "The RoPE scaling's factor (8, Llama 3.1's)");
  command->add_option("--dtype", options->dtype, "Weight type of the matrices")->check(CLI::IsMember({"f32", "f16", "bf16"}));
  add_seed_option(*command, "--seed", options->seed, "Random seed");
  command->add_flag("--tied-output", options->tied_output, "Omit output.weight: the output reuses token_embd");
  command->add_option("-o,--output", options->output_path, "Output GGUF file")->required();
  command->callback([options] { run_gen_model(*options); });
}

}  // namespace cpullm::cli
