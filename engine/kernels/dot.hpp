// Row dot products: one row of a weight matrix, as stored, against the activations. One table
// per ISA level; matvec picks the table and the entry for the weight type.
#pragma once
#include <cstddef>
#include <cstdint>

#include "engine/kernels/quant_formats.hpp"
#include "engine/util/half.hpp"

namespace cpullm {

// row: (cols) weights in the table entry's format. activations: (cols) floats for the float
// formats, (cols / 32) BlockQ8_0 for the block-quantized ones (quantized once per matvec).
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
