// The analytic cost of each op: FLOPs and the bytes it must move at least (each array it touches
// once: weights as stored, activations in FP32), from shapes and formats alone. Divided by a
// region's wall time they give GFLOP/s, GB/s and arithmetic intensity: the roofline's inputs.
// Conventions: a multiply-add is 2 FLOPs; exp, sqrt and divide count 1 each; comparisons 1;
// conversions (F16/BF16 to FP32, Q8_0 activation quantization) and the per-position cos/sin of
// RoPE are not counted.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "engine/format/llama_tensors.hpp"
#include "engine/instrument/regions.hpp"
#include "engine/kernels/attention.hpp"
#include "engine/kernels/matvec.hpp"

namespace cpullm {

// Y (tokens, rows) = X (tokens, cols) . W^T: 2 * rows * cols FLOPs per token; the weights once
// (rows * the type's row bytes), X read and Y written in FP32. tokens = 1 is a matvec.
RegionCost matmul_cost(const WeightMatrix& w, int64_t tokens);

// One row of the table per token, converted to FP32: the stored row read, the FP32 row written.
RegionCost embedding_cost(const WeightMatrix& table, int64_t tokens);

// RMSNorm of `tokens` vectors of n: 4n FLOPs each (square and sum; scale and weight), x read and
// out written per token, the weight once.
RegionCost rmsnorm_cost(int64_t n, int64_t tokens);

// RoPE over `values` per token (q and k together: (n_heads + n_kv_heads) * head_dim): each pair
// turns with 4 multiplies and 2 adds, 3 FLOPs per value; read and written in place.
RegionCost rope_cost(int64_t values, int64_t tokens);

// Causal attention of `queries` consecutive positions from first_position: query i meets
// first_position + i + 1 keys, or the shape's window of them. Per (head, query, key): q.k
// (2 * head_dim), softmax (5: scale, subtract the maximum, exp, sum, divide), V weighted sum
// (2 * head_dim). Bytes: every cached key and value that a query sees once, at kv_value_bytes
// each; q read and the output written.
RegionCost attention_cost(const AttentionShape& shape, int64_t first_position, int64_t queries,
                          double kv_value_bytes);

// SwiGLU over n values per token: silu(gate) * up = gate / (1 + exp(-gate)) * up, 4 FLOPs per
// value; gate and up read, gate written.
RegionCost swiglu_cost(int64_t n, int64_t tokens);

// Picking a token from vocab logits: greedy is one comparison per logit; otherwise temperature,
// softmax and a draw, counted as 4 per logit (scale, exp, sum, divide; top-k/top-p sorting is
// not arithmetic). The logits are read once.
RegionCost sampling_cost(int64_t vocab, bool greedy);

// What one decoded token costs in each op of a LLaMA model, summed over the layers: the ops the
// forward pass enters (model.cpp), each at the cost above, the matrices at the types `types`
// gives, one per tensor of `tensors` (llama_tensors), the token at `position` (keys cached
// before it), the KV cache at kv_value_bytes a value. `info --costs` prints it.
struct OpCost {
  Region op;
  RegionCost cost;
};
struct DecodeShape {
  AttentionShape attention;     // heads and head width
  int64_t position = 0;         // positions cached before the token
  double kv_value_bytes = 4;     // F32 cache; Q8_0's block scales make it fractional
  bool greedy = true;           // sampling
};
std::vector<OpCost> decode_token_costs(std::span<const LlamaTensor> tensors, std::span<const GgmlType> types,
                                       const DecodeShape& shape);

}  // namespace cpullm
