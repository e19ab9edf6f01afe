#include "engine/instrument/op_costs.hpp"

#include <algorithm>

namespace cpullm {
namespace {
constexpr double kFloatBytes = 4;
}

RegionCost matmul_cost(const WeightMatrix& w, int64_t tokens) {
  const double rows = static_cast<double>(w.rows), cols = static_cast<double>(w.cols), n = static_cast<double>(tokens);
  return {2 * rows * cols * n, rows * static_cast<double>(row_bytes(w)) + n * (cols + rows) * kFloatBytes};
}

RegionCost embedding_cost(const WeightMatrix& table, int64_t tokens) {
  const double n = static_cast<double>(tokens);
  return {0, n * (static_cast<double>(row_bytes(table)) + static_cast<double>(table.cols) * kFloatBytes)};
}

RegionCost rmsnorm_cost(int64_t n, int64_t tokens) {
  const double values = static_cast<double>(n), count = static_cast<double>(tokens);
  return {4 * values * count, (2 * count + 1) * values * kFloatBytes};
}

RegionCost rope_cost(int64_t values, int64_t tokens) {
  const double total = static_cast<double>(values) * static_cast<double>(tokens);
  return {3 * total, 2 * total * kFloatBytes};
}

RegionCost attention_cost(const AttentionShape& shape, int64_t first_position, int64_t queries,
                          double kv_value_bytes) {
  const double n = static_cast<double>(queries), first = static_cast<double>(first_position);
  // Positions met by the queries at positions 0 .. m - 1: p + 1 each, at most the window.
  const double window = shape.window > 0 ? static_cast<double>(shape.window) : first + n;
  const auto met_before = [window](double m) {
    return m <= window ? m * (m + 1) / 2 : window * (window + 1) / 2 + (m - window) * window;
  };
  const double keys_met = met_before(first + n) - met_before(first);
  const double pairs = static_cast<double>(shape.n_heads) * keys_met;
  const double kv_row = static_cast<double>(shape.n_kv_heads * shape.head_dim);
  const double q_row = static_cast<double>(shape.n_heads * shape.head_dim);
  const double rows_read = first + n - std::max(0.0, first + 1 - window);  // from the first query's first key on
  return {pairs * (4 * static_cast<double>(shape.head_dim) + 5),
          rows_read * 2 * kv_row * kv_value_bytes + 2 * n * q_row * kFloatBytes};
}

RegionCost swiglu_cost(int64_t n, int64_t tokens) {
  const double total = static_cast<double>(n) * static_cast<double>(tokens);
  return {4 * total, 3 * total * kFloatBytes};
}

RegionCost sampling_cost(int64_t vocab, bool greedy) {
  const double v = static_cast<double>(vocab);
  return {(greedy ? 1 : 4) * v, v * kFloatBytes};
}

std::vector<OpCost> decode_token_costs(std::span<const LlamaTensor> tensors, std::span<const GgmlType> types,
                                       const DecodeShape& shape) {
  std::vector<OpCost> costs;
  for (int r = 0; r < kRegionCount; ++r) costs.push_back({static_cast<Region>(r), {}});
  const auto add = [&](Region op, RegionCost c) {
    costs[static_cast<int>(op)].cost.flops += c.flops, costs[static_cast<int>(op)].cost.bytes += c.bytes;
  };
  const AttentionShape& a = shape.attention;
  const bool tied = std::none_of(tensors.begin(), tensors.end(), [](const LlamaTensor& t) { return t.role == LlamaRole::output; });
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const LlamaTensor& t = tensors[i];
    const WeightMatrix w{nullptr, types[i], t.rows, t.cols};
    switch (t.role) {
      case LlamaRole::token_embd:
        add(Region::embedding, embedding_cost(w, 1));
        if (tied) add(Region::lm_head, matmul_cost(w, 1));
        break;
      case LlamaRole::attn_norm: add(Region::attn_norm, rmsnorm_cost(t.cols, 1)); break;
      case LlamaRole::attn_q:
        add(Region::q_proj, matmul_cost(w, 1));
        add(Region::rope, rope_cost((a.n_heads + a.n_kv_heads) * a.head_dim, 1));
        add(Region::attention, attention_cost(a, shape.position, 1, shape.kv_value_bytes));
        break;
      case LlamaRole::attn_k: add(Region::k_proj, matmul_cost(w, 1)); break;
      case LlamaRole::attn_v: add(Region::v_proj, matmul_cost(w, 1)); break;
      case LlamaRole::attn_output: add(Region::o_proj, matmul_cost(w, 1)); break;
      case LlamaRole::ffn_norm: add(Region::ffn_norm, rmsnorm_cost(t.cols, 1)); break;
      case LlamaRole::ffn_gate:
        add(Region::ffn_gate, matmul_cost(w, 1));
        add(Region::ffn_act, swiglu_cost(t.rows, 1));
        break;
      case LlamaRole::ffn_up: add(Region::ffn_up, matmul_cost(w, 1)); break;
      case LlamaRole::ffn_down: add(Region::ffn_down, matmul_cost(w, 1)); break;
      case LlamaRole::output_norm: add(Region::final_norm, rmsnorm_cost(t.cols, 1)); break;
      case LlamaRole::output:
        add(Region::lm_head, matmul_cost(w, 1));
        add(Region::sampling, sampling_cost(t.rows, shape.greedy));
        break;
    }
    if (tied && t.role == LlamaRole::token_embd) add(Region::sampling, sampling_cost(t.rows, shape.greedy));
  }
  return costs;
}

}  // namespace cpullm
