// Top-K magnitude pruning (`quantize --sparsity`): each row keeps its largest weights (by |w|),
// written in the sparse layouts of engine/kernels/sparse.hpp, and read back as dense rows with
// the pruned weights zero (the tests' and the evaluation's reference).
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "engine/format/ggml_types.hpp"

namespace cpullm {

// `--sparsity-pattern` and `--sparsity`: "unstructured" (ELL) and "block4x4" take a sparsity
// in [0, 0.999] in steps of 0.001; "N:M" (e.g. "2:4") keeps N of every M and implies 1 - N/M,
// so a --sparsity given with it must say the same. The values' precision is left F32.
SparseType parse_sparsity(std::string_view pattern, std::optional<double> sparsity);
// The short names eval-quant formats use: sparseS (unstructured, S pruned, e.g. sparse0.2),
// blockS (block4x4, e.g. block0.5) or N:M (e.g. 2:4).
SparseType parse_sparsity_name(std::string_view name);
// "unstructured 20%", "2:4", "block4x4 50%".
std::string sparsity_name(const SparseType& sparse);
// Whether a tensor is one that --sparsity prunes: a projection of a transformer block.
bool is_block_projection(std::string_view tensor_name);

// out = `rows` rows of `cols` dense values, pruned and packed in `type` (a sparse type; rows a
// multiple of its row group, the shape one sparse_shape_problem accepts).
void encode_sparse_rows(GgmlType type, const float* dense, int64_t rows, int64_t cols, std::byte* out);
// dense (rows, cols) = the stored values at their columns, zero elsewhere.
void decode_sparse_rows(GgmlType type, const std::byte* in, int64_t rows, int64_t cols, float* dense);

}  // namespace cpullm
