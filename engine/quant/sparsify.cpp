#include "engine/quant/sparsify.hpp"

#include <fmt/format.h>
#include <fnmatch.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "engine/kernels/row_convert.hpp"
#include "engine/kernels/sparse.hpp"
#include "engine/util/error.hpp"

namespace cpullm {
namespace {

// keep (count) = the positions of the `count` largest scores, ascending; ties go to the lower
// position and NaN counts as largest, so the choice is deterministic for any input.
void largest(const std::vector<float>& score, int64_t count, std::vector<int32_t>& keep) {
  keep.resize(score.size());
  std::iota(keep.begin(), keep.end(), 0);
  auto key = [&](int32_t i) { return std::isnan(score[i]) ? INFINITY : score[i]; };
  std::nth_element(keep.begin(), keep.begin() + count - 1, keep.end(),
                   [&](int32_t a, int32_t b) { return key(a) > key(b) || (key(a) == key(b) && a < b); });
  keep.resize(count);
  std::sort(keep.begin(), keep.end());
}

// `text` as a whole number of type T, or an Error saying what `what` expected.
template <typename T>
T parse_number(std::string_view text, std::string_view what) {
  T value{};
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || text.empty()) fail("{}", what);
  return value;
}

// What a row group of the layout stores: its kept values (in order) and their indices.
struct Packed {
  std::vector<float> values;
  std::vector<int32_t> indices;  // ELL: columns; N:M: positions in the group; BLOCK4X4: block columns
};

// Prunes one row (ELL, N:M) or strip of 4 rows (BLOCK4X4) starting at `dense`.
Packed prune(const SparseType& s, const SparseView& v, const float* dense, int64_t cols) {
  Packed p;
  std::vector<float> score;
  std::vector<int32_t> keep;
  switch (s.pattern) {
    case SparsePattern::ell:
      score.resize(cols);
      for (int64_t c = 0; c < cols; ++c) score[c] = std::fabs(dense[c]);
      largest(score, v.kept, p.indices);
      for (int32_t c : p.indices) p.values.push_back(dense[c]);
      break;
    case SparsePattern::n_of_m:
      score.resize(s.m);
      for (int64_t g = 0; g < cols / s.m; ++g) {
        for (int64_t k = 0; k < s.m; ++k) score[k] = std::fabs(dense[g * s.m + k]);
        largest(score, s.n, keep);
        for (int32_t k : keep) p.values.push_back(dense[g * s.m + k]), p.indices.push_back(k);
      }
      break;
    case SparsePattern::block4x4:
      score.assign(cols / 4, 0.0f);
      for (int64_t i = 0; i < 4; ++i)
        for (int64_t c = 0; c < cols; ++c) score[c / 4] += std::fabs(dense[i * cols + c]);
      largest(score, v.kept, p.indices);
      for (int32_t b : p.indices)
        for (int64_t i = 0; i < 4; ++i)
          for (int64_t k = 0; k < 4; ++k) p.values.push_back(dense[i * cols + 4 * b + k]);
      break;
  }
  return p;
}

// Bytes of one stored index of each pattern.
int64_t index_bytes(SparsePattern pattern) {
  return pattern == SparsePattern::ell ? 2 : pattern == SparsePattern::n_of_m ? 1 : 4;
}

}  // namespace

SparseType parse_sparsity(std::string_view pattern, std::optional<double> sparsity) {
  SparseType s;
  const std::string expected =
      fmt::format("--sparsity-pattern '{}': expected unstructured, block4x4 or N:M such as 2:4", pattern);
  if (const std::size_t colon = pattern.find(':'); colon != std::string_view::npos) {
    s.pattern = SparsePattern::n_of_m;
    s.n = parse_number<int64_t>(pattern.substr(0, colon), expected);
    s.m = parse_number<int64_t>(pattern.substr(colon + 1), expected);
    if (s.n < 1 || s.n > s.m || s.m > 255)
      fail("--sparsity-pattern '{}': N:M needs 1 <= N <= M <= 255", pattern);
    const double implied = 1.0 - static_cast<double>(s.n) / s.m;
    if (sparsity && std::fabs(*sparsity - implied) > 1e-3)
      fail("--sparsity {} contradicts --sparsity-pattern {}, which prunes {:.4g}", *sparsity, pattern, implied);
    return s;
  }
  if (pattern == "unstructured") s.pattern = SparsePattern::ell;
  else if (pattern == "block4x4") s.pattern = SparsePattern::block4x4;
  else fail("{}", expected);
  if (!sparsity) fail("--sparsity-pattern {} needs --sparsity (the fraction of weights to prune)", pattern);
  const double permille = *sparsity * 1000;
  if (!(permille >= 0 && permille <= 999) || std::fabs(permille - std::round(permille)) > 1e-6)
    fail("--sparsity {}: must lie in [0, 0.999] in steps of 0.001", *sparsity);
  s.pruned_permille = std::lround(permille);
  return s;
}

SparseType parse_sparsity_name(std::string_view name) {
  const std::string expected = fmt::format("sparsity '{}': expected sparseS, blockS or N:M, as in sparse0.2", name);
  if (name.starts_with("sparse")) return parse_sparsity("unstructured", parse_number<double>(name.substr(6), expected));
  if (name.starts_with("block")) return parse_sparsity("block4x4", parse_number<double>(name.substr(5), expected));
  if (name.find(':') != std::string_view::npos) return parse_sparsity(name, std::nullopt);
  fail("{}", expected);
}

std::string sparsity_name(const SparseType& s) {
  if (s.pattern == SparsePattern::n_of_m) return fmt::format("{}:{}", s.n, s.m);
  return fmt::format("{} {:g}%", s.pattern == SparsePattern::ell ? "unstructured" : "block4x4", s.pruned_permille / 10.0);
}

bool is_block_projection(std::string_view name) {
  const std::string n(name);
  for (const char* part : {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"})
    if (fnmatch(fmt::format("blk.*.{}.weight", part).c_str(), n.c_str(), 0) == 0) return true;
  return false;
}

void encode_sparse_rows(GgmlType type, const float* dense, int64_t rows, int64_t cols, std::byte* out) {
  const SparseType s = *sparse_type(static_cast<uint32_t>(type));
  const SparseView v = sparse_view({out, type, rows, cols});
  const int64_t group_rows = s.pattern == SparsePattern::block4x4 ? 4 : 1;
  const int64_t value_bytes = row_bytes(s.values, 1), index_size = index_bytes(s.pattern);
  for (int64_t g = 0; g < rows / group_rows; ++g) {
    const Packed p = prune(s, v, dense + g * group_rows * cols, cols);
    std::byte* at = out + g * v.stride;
    encode_row(s.values, p.values.data(), at, static_cast<int64_t>(p.values.size()));
    at += static_cast<int64_t>(p.values.size()) * value_bytes;
    for (int32_t index : p.indices) std::memcpy(at, &index, index_size), at += index_size;  // little-endian
  }
}

void decode_sparse_rows(GgmlType type, const std::byte* in, int64_t rows, int64_t cols, float* dense) {
  const SparseType s = *sparse_type(static_cast<uint32_t>(type));
  const SparseView v = sparse_view({in, type, rows, cols});
  const int64_t value_count = s.pattern == SparsePattern::block4x4 ? v.kept * 16 : v.kept;
  const int64_t value_bytes = row_bytes(s.values, 1), index_size = index_bytes(s.pattern);
  std::fill(dense, dense + rows * cols, 0.0f);
  std::vector<float> values(value_count);
  for (int64_t g = 0; g < (s.pattern == SparsePattern::block4x4 ? rows / 4 : rows); ++g) {
    const std::byte* at = in + g * v.stride;
    decode_row(s.values, at, values.data(), value_count);
    const std::byte* indices = at + value_count * value_bytes;
    for (int64_t j = 0; j < v.kept; ++j) {
      int32_t index = 0;
      std::memcpy(&index, indices + j * index_size, index_size);
      switch (s.pattern) {
        case SparsePattern::ell: dense[g * cols + index] = values[j]; break;
        case SparsePattern::n_of_m: dense[g * cols + v.group_start[j] + index] = values[j]; break;
        case SparsePattern::block4x4:
          for (int64_t i = 0; i < 4; ++i)
            for (int64_t k = 0; k < 4; ++k) dense[(4 * g + i) * cols + 4 * index + k] = values[j * 16 + i * 4 + k];
          break;
      }
    }
  }
}

}  // namespace cpullm
