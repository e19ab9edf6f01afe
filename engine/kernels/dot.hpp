// Row dot products: one row of a weight matrix, as stored, against the activations. One table
// per ISA level; matvec picks the table and the entry for the weight type.
#pragma once
#include <cstddef>
#include <cstdint>

#include "engine/kernels/quant_formats.hpp"
#include "engine/util/half.hpp"

namespace cpullm {

// An activation vector quantized to Q8_0 once per matvec, with what the integer kernels would
// otherwise redo for every row precomputed: each block's scale in FP32, and 8 times the sum of
// every 4 consecutive values. Q4_0 weights are nibble - 8, so the int32 lane that maddubs + madd
// or vpdpbusd fills from values 4j..4j+3 is nibbles . a - 8 * (their sum): the nibbles go into
// the unsigned side as they are, the lane loses its offset, and holds exactly sum((nibble - 8) * a).
struct QuantizedActivations {
  const BlockQ8_0* blocks;            // (cols / 32) the quantized values and their FP16 scales
  const float* scales;                // (cols / 32) blocks[b].scale in FP32
  const int32_t* zero_point_offsets;  // (cols / 4 + 8) 8 * (q[4j] + .. + q[4j + 3]), then 8 zeros,
                                      // so that a load of two blocks' 16 lanes at an odd last
                                      // block reads zeros
};

// row: (cols) weights in the table entry's format. activations: (cols) floats for the float
// formats, a QuantizedActivations for the block-quantized ones.
using RowDot = float (*)(const std::byte* row, const void* activations, int64_t cols);

struct DotKernels {
  RowDot f32, f16, bf16;             // FP32 activations, FP32 accumulation
  RowDot q8_0, q4_0, int8_channel;   // Q8_0 activations, exact int32 sums per block, FP32 across blocks
};

// An INT8_CHANNEL row: one FP32 scale for the whole row, then its int8 values.
inline float int8_channel_scale(const std::byte* row) { float v; __builtin_memcpy(&v, row, 4); return v; }
inline const int8_t* int8_channel_values(const std::byte* row) { return reinterpret_cast<const int8_t*>(row + 4); }

// One stored element as FP32, from any byte address (memcpy: rows need not be aligned).
inline float load_f32(const std::byte* p) { float v; __builtin_memcpy(&v, p, 4); return v; }
inline float load_f16(const std::byte* p) { uint16_t v; __builtin_memcpy(&v, p, 2); return fp16_to_fp32(v); }
inline float load_bf16(const std::byte* p) { uint16_t v; __builtin_memcpy(&v, p, 2); return bf16_to_fp32(v); }

const DotKernels& scalar_dot_kernels();
const DotKernels& avx2_dot_kernels();
const DotKernels& avx512_dot_kernels();  // only call where cpu_supports(Isa::Avx512)

}  // namespace cpullm
