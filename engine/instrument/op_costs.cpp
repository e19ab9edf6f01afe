#include "engine/instrument/op_costs.hpp"

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
                          int64_t kv_element_bytes) {
  const double n = static_cast<double>(queries), first = static_cast<double>(first_position);
  const double keys_met = n * first + n * (n + 1) / 2;  // sum over queries of the positions each attends to
  const double pairs = static_cast<double>(shape.n_heads) * keys_met;
  const double kv_row = static_cast<double>(shape.n_kv_heads * shape.head_dim);
  const double q_row = static_cast<double>(shape.n_heads * shape.head_dim);
  return {pairs * (4 * static_cast<double>(shape.head_dim) + 5),
          (first + n) * 2 * kv_row * static_cast<double>(kv_element_bytes) + 2 * n * q_row * kFloatBytes};
}

RegionCost swiglu_cost(int64_t n, int64_t tokens) {
  const double total = static_cast<double>(n) * static_cast<double>(tokens);
  return {4 * total, 3 * total * kFloatBytes};
}

RegionCost sampling_cost(int64_t vocab, bool greedy) {
  const double v = static_cast<double>(vocab);
  return {(greedy ? 1 : 4) * v, v * kFloatBytes};
}

}  // namespace cpullm
