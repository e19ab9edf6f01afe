// Packing of weight panels and activations for the GEMM (layouts in gemm.hpp). Baseline code
// (AVX2): the same packing serves every ISA level's micro-kernels.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "engine/kernels/gemm.hpp"
#include "engine/kernels/int8_rows.hpp"
#include "engine/kernels/row_convert.hpp"
#include "engine/kernels/weight_formats.hpp"
#include "engine/util/error.hpp"

namespace cpullm {
namespace {

// Panels are packed 8 rows at a time (every R is a multiple of 8).

// v[i] (8 int32 of row i) becomes v[g] (element g of each of the 8 rows): the 8 x 8 transpose.
[[gnu::always_inline]] inline void transpose_8x8_epi32(__m256i v[8]) {
  __m256i pairs[8], quads[8];
  for (int i = 0; i < 8; i += 2) {
    pairs[i] = _mm256_unpacklo_epi32(v[i], v[i + 1]);
    pairs[i + 1] = _mm256_unpackhi_epi32(v[i], v[i + 1]);
  }
  for (int i = 0; i < 8; i += 4)
    for (int j = 0; j < 2; ++j) {
      quads[i + j] = _mm256_unpacklo_epi64(pairs[i + j], pairs[i + j + 2]);
      quads[i + j + 2] = _mm256_unpackhi_epi64(pairs[i + j], pairs[i + j + 2]);
    }
  // quads[0..3] hold rows 0-3 and quads[4..7] rows 4-7, elements (0, 4), (2, 6), (1, 5), (3, 7).
  constexpr int element_pair[4] = {0, 2, 1, 3};
  for (int q = 0; q < 4; ++q) {
    v[element_pair[q]] = _mm256_permute2x128_si256(quads[q], quads[q + 4], 0x20);
    v[element_pair[q] + 4] = _mm256_permute2x128_si256(quads[q], quads[q + 4], 0x31);
  }
}

// 32 signed weights as a panel stores them.
__m256i encode(__m256i weights, PanelWeights encoding) {
  switch (encoding) {
    case PanelWeights::Plus128: return _mm256_xor_si256(weights, _mm256_set1_epi8(static_cast<char>(0x80)));
    case PanelWeights::Plus8: return _mm256_add_epi8(weights, _mm256_set1_epi8(Q4_0Row::kZeroPoint));
    case PanelWeights::Signed:
    case PanelWeights::Unsigned: break;  // the byte formats' packers are never asked for Unsigned
  }
  return weights;
}

const char* panel_weights_name(PanelWeights encoding) {
  switch (encoding) {
    case PanelWeights::Signed: return "signed bytes";
    case PanelWeights::Plus128: return "w + 128";
    case PanelWeights::Plus8: return "w + 8";
    case PanelWeights::Unsigned: return "unsigned sub-block values";
  }
  return "?";
}

}  // namespace

// Eight rows at a time: their blocks' 8 groups of 4 weights are transposed in registers, so
// each group of the panel is written as one 32-byte store.
template <typename Row>
void pack_integer_rows(const WeightMatrix& w, int64_t r0, int64_t b0, int64_t blocks, int R, PanelWeights encoding,
                       std::byte* panel) {
  const int64_t stride = row_bytes(w);
  const int64_t block_bytes = integer_panel_block_bytes(R);
  for (int r8 = 0; r8 < R; r8 += 8) {
    Row rows[8];
    const int real = static_cast<int>(std::clamp<int64_t>(w.rows - (r0 + r8), 0, 8));  // rows 0..real-1 exist
    for (int i = 0; i < real; ++i) rows[i] = Row::from(w.data + (r0 + r8 + i) * stride);
    for (int64_t b = 0; b < blocks; ++b) {
      std::byte* block = panel + b * block_bytes;
      __m256i v[8];
      for (int i = 0; i < 8; ++i) v[i] = encode(i < real ? rows[i].weights(b0 + b) : _mm256_setzero_si256(), encoding);
      transpose_8x8_epi32(v);
      for (int g = 0; g < kQuantBlock / 4; ++g)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(block + (g * R + r8) * 4), v[g]);
      auto* scales = reinterpret_cast<float*>(block + kQuantBlock * R) + r8;
      for (int i = 0; i < 8; ++i) scales[i] = i < real ? rows[i].scale(b0 + b) : 0.0f;
    }
  }
}

// The _R8 types are stored as the panel is laid out, 4 weights of each of 8 rows per 32 bytes:
// no transpose. A CPULLM_Q8_0_R8 chunk is panel group c; a CPULLM_Q4_0_R8 chunk unpacks into two
// (its low nibbles are group c, its high nibbles group 4 + c). Panels start on multiples of R and
// the matrix has whole groups of 8 rows, so a panel's 8 rows are one group or all padding.
template <typename Block>
void pack_interleaved_rows(const WeightMatrix& w, int64_t r0, int64_t b0, int64_t blocks, int R, PanelWeights encoding,
                           std::byte* panel) {
  const int64_t group_stride = row_bytes(w) * kInterleavedRows;
  const int64_t block_bytes = integer_panel_block_bytes(R);
  const __m256i mask = _mm256_set1_epi8(0x0f), zero_point = _mm256_set1_epi8(Q4_0Row::kZeroPoint);
  const auto store = [&](std::byte* at, __m256i weights) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(at), encode(weights, encoding));
  };
  const __m256i zeros = encode(_mm256_setzero_si256(), encoding);
  for (int r8 = 0; r8 < R; r8 += kInterleavedRows) {
    const bool real = r0 + r8 < w.rows;
    const auto* group = reinterpret_cast<const Interleaved8<Block>*>(w.data + (r0 + r8) / kInterleavedRows * group_stride);
    for (int64_t b = 0; b < blocks; ++b) {
      std::byte* block = panel + b * block_bytes;
      auto* scales = reinterpret_cast<float*>(block + kQuantBlock * R) + r8;
      if (!real) {
        for (int g = 0; g < kQuantBlock / 4; ++g) _mm256_storeu_si256(reinterpret_cast<__m256i*>(block + (g * R + r8) * 4), zeros);
        std::fill_n(scales, kInterleavedRows, 0.0f);
        continue;
      }
      const Interleaved8<Block>& source = group[b0 + b];
      for (int c = 0; c < Interleaved8<Block>::kChunks; ++c) {
        const __m256i chunk = load32_i8(source.chunks[c]);
        if constexpr (std::is_same_v<Block, BlockQ8_0>) {
          store(block + (c * R + r8) * 4, chunk);
        } else {
          store(block + (c * R + r8) * 4, _mm256_sub_epi8(_mm256_and_si256(chunk, mask), zero_point));
          store(block + ((c + 4) * R + r8) * 4, _mm256_sub_epi8(_mm256_and_si256(_mm256_srli_epi16(chunk, 4), mask), zero_point));
        }
      }
      _mm256_storeu_ps(scales, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(source.scales))));
    }
  }
}

// Eight consecutive weights of a float-format row as FP32 (F16C converts, BF16 is a shift).
__m256 load8_as_f32(GgmlType type, const std::byte* p) {
  const auto* halves = reinterpret_cast<const __m128i*>(p);
  switch (type) {
    case GgmlType::F16: return _mm256_cvtph_ps(_mm_loadu_si128(halves));
    case GgmlType::BF16: return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(halves)), 16));
    default: return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
  }
}

void pack_float_panel(const WeightMatrix& w, int64_t r0, int64_t k0, int64_t depth, int R, float* panel) {
  const int64_t stride = row_bytes(w);
  const int64_t element = row_bytes(w.type, 1);
  for (int r8 = 0; r8 < R; r8 += 8) {
    const int real = static_cast<int>(std::clamp<int64_t>(w.rows - (r0 + r8), 0, 8));  // rows 0..real-1 exist
    const std::byte* rows[8];
    for (int i = 0; i < real; ++i) rows[i] = w.data + (r0 + r8 + i) * stride + k0 * element;
    int64_t k = 0;
    for (; k + 8 <= depth; k += 8) {  // 8 columns of 8 rows, transposed in registers: one store per column
      __m256i v[8];
      for (int i = 0; i < 8; ++i)
        v[i] = i < real ? _mm256_castps_si256(load8_as_f32(w.type, rows[i] + k * element)) : _mm256_setzero_si256();
      transpose_8x8_epi32(v);
      for (int j = 0; j < 8; ++j) _mm256_storeu_si256(reinterpret_cast<__m256i*>(panel + (k + j) * R + r8), v[j]);
    }
    for (; k < depth; ++k)
      for (int i = 0; i < 8; ++i) {
        float value = 0.0f;
        if (i < real) decode_row(w.type, rows[i] + k * element, &value, 1);
        panel[k * R + r8 + i] = value;
      }
  }
}

const IntegerTileKernel& integer_tile_kernel(const GemmKernels& kernels, GgmlType type) {
  const GemmEntry& gemm = weight_format(type).gemm;
  if (gemm.panels == GemmPanels::sub_blocks) return gemm.whole_blocks ? kernels.whole_blocks : kernels.sub_blocks;
  return gemm.nibbles ? kernels.q4_0 : kernels.integer;
}

void pack_integer_panel(const WeightMatrix& w, int64_t r0, int64_t b0, int64_t blocks, int R, PanelWeights encoding,
                        std::byte* panel) {
  const GemmEntry& gemm = weight_format(w.type).gemm;
  if (gemm.panels != GemmPanels::integer && gemm.panels != GemmPanels::sub_blocks)
    fail("matmul: no integer panel for weight type {}", ggml_type_name(w.type));
  if ((encoding == PanelWeights::Unsigned) != (gemm.panels == GemmPanels::sub_blocks) ||
      (encoding == PanelWeights::Plus8 && !gemm.nibbles))
    fail("matmul: {} weights do not fit a panel of {}", ggml_type_name(w.type), panel_weights_name(encoding));
  gemm.pack(w, r0, b0, blocks, R, encoding, panel);
}

// The packers the format registry names.
template void pack_integer_rows<Q8_0Row>(const WeightMatrix&, int64_t, int64_t, int64_t, int, PanelWeights, std::byte*);
template void pack_integer_rows<Q4_0Row>(const WeightMatrix&, int64_t, int64_t, int64_t, int, PanelWeights, std::byte*);
template void pack_integer_rows<Int8ChannelRow>(const WeightMatrix&, int64_t, int64_t, int64_t, int, PanelWeights, std::byte*);
template void pack_integer_rows<Iq4NlRow>(const WeightMatrix&, int64_t, int64_t, int64_t, int, PanelWeights, std::byte*);
template void pack_interleaved_rows<BlockQ8_0>(const WeightMatrix&, int64_t, int64_t, int64_t, int, PanelWeights, std::byte*);
template void pack_interleaved_rows<BlockQ4_0>(const WeightMatrix&, int64_t, int64_t, int64_t, int, PanelWeights, std::byte*);

}  // namespace cpullm
