// What quantization costs in accuracy: a model is quantized to each format, and every copy is
// scored against the original on a text: perplexity, mean KL divergence of the next-token
// distributions, and how often the most likely next token is the same (top-1 agreement). The
// KV cache's types are scored the same way: the original model run with each cache type against
// the original run with the reference run's (--kv-type, F32 by default).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engine/quant/quantize_model.hpp"
#include "engine/run/run_config.hpp"

namespace cpullm {

struct QuantEvalOptions {
  std::vector<std::string> formats;  // see quantize_options_for
  std::vector<std::string> keep;     // quantize --keep list, applied to every format
  int64_t window = 256;              // tokens per window (BOS + text); each window starts a fresh context
  std::string work_dir;              // where the quantized copies are written
  RunConfig run = {};                // how each model runs (threads, kernels, its KV type, ...); its model and context are set per model
  std::vector<std::string> kv_types = {};  // KV cache types the source model also runs with (f16, q8_0, ...)
};

struct QuantEvalResult {
  std::string format;          // "source" for the original, else the format name
  std::string kv_type;         // the KV cache's type it ran with
  uint64_t file_bytes = 0;
  int64_t positions = 0;       // next-token predictions scored
  double perplexity = 0;       // exp(mean negative log-likelihood of the text's next token)
  double mean_kl = 0;          // mean KL(source || this), nats; 0 for the source
  double top1_agreement = 1;   // fraction of positions whose argmax is the source's
  std::string run = {};        // how it ran, as applied (Session::describe)
};

// What a format name asks `quantize` for: a --type name (a registry name: q8_0, q4_0, ...),
// optionally followed by "+" and a sparsity: sparseS (unstructured, S pruned, e.g. sparse0.2),
// blockS (block4x4) or N:M (e.g. 2:4). A sparsity alone keeps the source's precision.
QuantizeOptions quantize_options_for(std::string_view format);

// The source first, then one result per format, then one per KV type (the source's file), in order.
std::vector<QuantEvalResult> evaluate_quantization(const std::string& model_path, std::string_view text,
                                                   const QuantEvalOptions& options);

// The project's evaluation text: short simple stories written for cpullm (suites/data).
std::string_view default_eval_text();

}  // namespace cpullm
