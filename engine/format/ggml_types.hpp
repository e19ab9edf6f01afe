// Every tensor type llama.cpp's ggml defines, with its block layout, so the reader can size
// (and `info` can list) any file, and the engine can refuse precisely the types it cannot run.
#pragma once
#include <cstdint>
#include <optional>
#include <string_view>

namespace cpullm {

// Values are ggml's `enum ggml_type`, the numbers stored in GGUF tensor infos.
enum class GgmlType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
  IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22,
  IQ4_XS = 23, I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, IQ1_M = 29, BF16 = 30,
  TQ1_0 = 34, TQ2_0 = 35, MXFP4 = 39,
  // cpullm's own: per-output-channel symmetric INT8 (the seed's "symmetric INT8"). Each row is
  // one FP32 scale then its int8 values. The number is far outside ggml's range, so llama.cpp
  // and other GGUF readers refuse such a tensor as an unknown type instead of misreading it.
  CPULLM_INT8_CHANNEL = 4097,
  // cpullm's own: Q4_0's blocks and values, with every 8 rows interleaved block by block so that
  // one AVX2 register holds 4 bytes of each of the 8 rows (quant_formats.hpp, BlockQ4_0x8). The
  // decode kernel then keeps one row per int32 lane and needs no horizontal sums. Stored in the
  // file, so the mapping stays shared between processes.
  CPULLM_Q4_0_R8 = 4098,
  // cpullm's own: Q8_0's blocks and values, every 8 rows interleaved the same way (BlockQ8_0x8).
  CPULLM_Q8_0_R8 = 4099,
};

// cpullm's sparse types (Top-K pruned matrices, engine/kernels/sparse.hpp): one number carries
// the layout, the value precision and the density, so a tensor's size follows from its type and
// row length alone, as for ggml's types. Bits 31-24 are 0x53 ('S'), far outside ggml's range;
// bits 23-20 the pattern, 19-16 the values (0 F32, 1 F16, 2 BF16), 15-0 the parameter: the
// pruned fraction in per mille (ELL, BLOCK4X4) or N << 8 | M (N:M, N of every M kept).
enum class SparsePattern : uint32_t { ell = 1, n_of_m = 2, block4x4 = 3 };
inline constexpr uint32_t kSparseTypeTag = 0x53u << 24;

struct GgmlTypeTraits {
  std::string_view name;
  int64_t block_elements;  // elements per block; a row's length must be a multiple
  int64_t block_bytes;     // bytes per block
  int64_t row_bytes_extra = 0;  // bytes each row carries besides its blocks (a per-row scale)
  int64_t pruned_permille = 0;  // sparse types: blocks stored per row = blocks - floor(blocks * this / 1000)
  int64_t row_group = 1;        // rows are stored in groups of this many (the row count must be a multiple)
};

// Blocks a row of `blocks` dense blocks stores: all of them, or the kept ones of a sparse type.
// Exact and overflow-free for any non-negative count.
inline int64_t ggml_stored_blocks(const GgmlTypeTraits& traits, int64_t blocks) {
  return blocks - (blocks / 1000 * traits.pruned_permille + blocks % 1000 * traits.pruned_permille / 1000);
}

// Bytes of one row of `row_length` elements (row_length a multiple of block_elements).
inline int64_t ggml_row_bytes(const GgmlTypeTraits& traits, int64_t row_length) {
  return ggml_stored_blocks(traits, row_length / traits.block_elements) * traits.block_bytes + traits.row_bytes_extra;
}

// What a sparse type number says; nullopt for any other number, or one with invalid fields.
struct SparseType {
  SparsePattern pattern = SparsePattern::ell;
  GgmlType values = GgmlType::F32;  // F32, F16 or BF16: the kept weights' precision
  int64_t pruned_permille = 0;      // ELL, BLOCK4X4: 0..999 of each row's weights (blocks) pruned
  int64_t n = 0, m = 0;             // N:M: n of every m consecutive weights kept, 1 <= n <= m <= 255
};
std::optional<SparseType> sparse_type(uint32_t type);
GgmlType sparse_type_number(const SparseType& sparse);

// nullopt for values ggml never defined or has removed (Q4_2, Q4_3, the 4x4/4x8 repacks).
std::optional<GgmlTypeTraits> ggml_type_traits(uint32_t type);
// Why a number is not a usable type: "removed from ggml (was Q4_2)" or "unknown".
std::string_view ggml_type_rejection(uint32_t type);
std::string_view ggml_type_name(GgmlType type);

}  // namespace cpullm
