// The K-quants' scalar row kernels: the reference every other level is tested against. Each
// 32-value activation block meets one Q4_K/Q5_K sub-block or two 16-value ones of the other
// types; per activation block the products are exact int32 per sub-block, scaled by the
// sub-blocks' integer scales (and their minimums by the sub-blocks' activation sums) in int32,
// then by the super-block's d (and dmin) and the activation block's scale in float; the sums run
// in block order, one token after another, as dot_q4_1's.
#include "engine/kernels/k_quants.hpp"

namespace cpullm {
namespace {

// Weight l (0..31) of activation block k (0..7) of a super-block, as each format stores it.
// Q4_K and Q5_K: chunk k / 2 of 32 bytes, low nibbles for even k, high for odd; Q5_K's fifth
// bit is bit k of qh[l].
int32_t q4_k_weight(const BlockQ4_K& block, int k, int l) { return (block.qs[32 * (k / 2) + l] >> (4 * (k % 2))) & 0x0f; }
int32_t q5_k_weight(const BlockQ5_K& block, int k, int l) {
  return ((block.qs[32 * (k / 2) + l] >> (4 * (k % 2))) & 0x0f) | ((block.qh[l] >> k) & 1) << 4;
}
// Q2_K, Q3_K and Q6_K: block k is value 32 * (k % 4) + l of half k / 4. Q2_K and Q3_K keep the
// low 2 bits in byte l of the half's 32 (shift 2 * (k % 4)), Q3_K the third in bit k of hmask[l];
// Q6_K the low 4 in byte 32 * (k % 2) + l of the half's 64 (the high nibble for k % 4 >= 2) and
// the high 2 in byte l of the half's 32 (shift 2 * (k % 4)). Sub-block 2k + l / 16 gives each
// value its scale.
int32_t q2_k_weight(const BlockQ2_K& block, int k, int l) { return (block.qs[32 * (k / 4) + l] >> (2 * (k % 4))) & 3; }
int32_t q3_k_weight(const BlockQ3_K& block, int k, int l) {
  const int32_t low = (block.qs[32 * (k / 4) + l] >> (2 * (k % 4))) & 3;
  return (block.hmask[l] >> k) & 1 ? low : low - 4;
}
int32_t q6_k_weight(const BlockQ6_K& block, int k, int l) {
  const int half = k / 4, j = k % 4;
  const int32_t low = (block.ql[64 * half + 32 * (j % 2) + l] >> (4 * (j / 2))) & 0x0f;
  const int32_t high = (block.qh[32 * half + l] >> (2 * j)) & 3;
  return (low | high << 4) - 32;
}

// The exact products of activation block k of a super-block with its 32 values a: sums[h] =
// sum(q * a) over the block's values 16h..16h + 15 (h = 0, 1), one 16-value sub-block each.
template <typename Block, int32_t (*Weight)(const Block&, int, int)>
void half_products(const Block& block, int k, const int8_t* a, int32_t (&sums)[2]) {
  sums[0] = sums[1] = 0;
  for (int l = 0; l < 32; ++l) sums[l / 16] += Weight(block, k, l) * a[l];
}

// Every K-quant's row kernel: per token, the sum over activation blocks b (block k of super-block
// i) of the activation scale times Term(super-block, k, activations, b), the block's products
// scaled by d (and its minimums by dmin).
template <typename Block, float (*Term)(const Block&, int, const QuantizedActivations&, int64_t)>
void dot_k_quant(const std::byte* row, const void* const* activations, int tokens, int64_t cols, float* out) {
  const auto* blocks = reinterpret_cast<const Block*>(row);
  for (int t = 0; t < tokens; ++t) {
    const auto& a = *static_cast<const QuantizedActivations*>(activations[t]);
    float sum = 0.0f;
    for (int64_t i = 0; i < cols / kSuperBlock; ++i)
      for (int k = 0; k < 8; ++k) sum += a.scales[8 * i + k] * Term(blocks[i], k, a, 8 * i + k);
    out[t] = sum;
  }
}

// Q2_K: two 16-value sub-blocks, each with a 4-bit scale and minimum; the minimums meet the
// sub-blocks' own activation sums.
float q2_k_term(const BlockQ2_K& block, int k, const QuantizedActivations& a, int64_t b) {
  const int8_t* x = a.values + b * kQuantBlock;
  int32_t products[2], sums[2] = {0, 0};
  half_products<BlockQ2_K, q2_k_weight>(block, k, x, products);
  for (int l = 0; l < 32; ++l) sums[l / 16] += x[l];
  int32_t scaled = 0, minimums = 0;
  for (int h = 0; h < 2; ++h) {
    const uint8_t packed = block.scales[2 * k + h];
    scaled += (packed & 0x0f) * products[h];
    minimums += (packed >> 4) * sums[h];
  }
  return fp16_to_fp32(block.d) * static_cast<float>(scaled) - fp16_to_fp32(block.dmin) * static_cast<float>(minimums);
}

// Q3_K and Q6_K: two 16-value sub-blocks with signed scales, no minimum.
float q3_k_term(const BlockQ3_K& block, int k, const QuantizedActivations& a, int64_t b) {
  int8_t scales[16];
  q3_k_scales(block.scales, scales);
  int32_t products[2];
  half_products<BlockQ3_K, q3_k_weight>(block, k, a.values + b * kQuantBlock, products);
  return fp16_to_fp32(block.d) * static_cast<float>(scales[2 * k] * products[0] + scales[2 * k + 1] * products[1]);
}

float q6_k_term(const BlockQ6_K& block, int k, const QuantizedActivations& a, int64_t b) {
  int32_t products[2];
  half_products<BlockQ6_K, q6_k_weight>(block, k, a.values + b * kQuantBlock, products);
  return fp16_to_fp32(block.d) *
         static_cast<float>(block.scales[2 * k] * products[0] + block.scales[2 * k + 1] * products[1]);
}

// Q4_K and Q5_K: one 32-value sub-block, whose activation sum comes from the block's offset.
template <typename Block, int32_t (*Weight)(const Block&, int, int)>
float q45_k_term(const Block& block, int k, const QuantizedActivations& a, int64_t b) {
  int32_t products[2];
  half_products<Block, Weight>(block, k, a.values + b * kQuantBlock, products);
  uint8_t scale, minimum;
  scale_min_k4(k, block.scales, &scale, &minimum);
  return fp16_to_fp32(block.d) * static_cast<float>(scale * (products[0] + products[1])) -
         fp16_to_fp32(block.dmin) * static_cast<float>(minimum * activation_sum(a, b));
}

}  // namespace

namespace scalar_dot {
const RowDot q2_k = dot_k_quant<BlockQ2_K, q2_k_term>;
const RowDot q3_k = dot_k_quant<BlockQ3_K, q3_k_term>;
const RowDot q4_k = dot_k_quant<BlockQ4_K, q45_k_term<BlockQ4_K, q4_k_weight>>;
const RowDot q5_k = dot_k_quant<BlockQ5_K, q45_k_term<BlockQ5_K, q5_k_weight>>;
const RowDot q6_k = dot_k_quant<BlockQ6_K, q6_k_term>;
}

}  // namespace cpullm
