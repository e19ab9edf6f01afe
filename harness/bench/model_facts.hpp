// What llama-bench says about a model (file, size, parameters, a type line) and cpullm's
// weight format, read from the GGUF file without running it.
#pragma once
#include <cstdint>
#include <string>

namespace cpullm {

class GgufFile;

struct ModelFacts {
  std::string filename;     // the path as given, made valid UTF-8 (it goes into JSON and the database)
  uint64_t size = 0;        // bytes of tensor data (llama-bench's model_size)
  uint64_t n_params = 0;    // elements of every tensor
  std::string format;       // the matrices' type: its registry name (q4_0, q8_0-r8, ...), else ggml's in lower case;
                            // a Top-K sparse file's: its kept values' type (f16), with the pruned share in sparsity
  double sparsity = 0;      // share of the matrices' weights pruned (quantize --sparsity): 0 for dense files
  std::string type;         // llama-bench's model_type: "llama 7B Q8_0"
  // The weights a decode step of one token reads: every tensor once, but of the token embedding
  // table one row (all of it where the output projection is the table itself, tied).
  uint64_t decode_step_bytes = 0;
  uint64_t embedding_row_bytes = 0;  // each further sequence of a step reads one more row
};

ModelFacts describe_model(const GgufFile& file);

}  // namespace cpullm
