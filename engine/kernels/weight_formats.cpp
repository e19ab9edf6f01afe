#include "engine/kernels/weight_formats.hpp"

#include <array>
#include <type_traits>

#include "engine/kernels/int8_rows.hpp"
#include "engine/kernels/iq4_nl.hpp"
#include "engine/kernels/k_quants.hpp"
#include "engine/kernels/q4_1.hpp"
#include "engine/kernels/q5.hpp"
#include "engine/kernels/quant_formats.hpp"
#include "engine/kernels/row_convert.hpp"
#include "engine/kernels/sub_block_panels.hpp"
#include "engine/util/error.hpp"

namespace cpullm {
namespace {

// A block quantizer or dequantizer of quant_formats.hpp as a row codec over bytes.
template <typename Block, void (*Quantize)(const float*, Block*, int64_t)>
void encode_blocks(const float* x, std::byte* row, int64_t n) { Quantize(x, reinterpret_cast<Block*>(row), n); }
template <typename Block, void (*Dequantize)(const Block*, float*, int64_t)>
void decode_blocks(const std::byte* row, float* out, int64_t n) { Dequantize(reinterpret_cast<const Block*>(row), out, n); }

// Matmul streams the float formats' rows up to 4 tokens. Q8_0, INT8_CHANNEL and Q4_0 stream
// while the tokens' quantized activations fit half of L1d: 36 bytes a block (values and scale),
// Q4_0's 40 (and its offset); Q4_0's kernels take one int32 per block before any scaling and
// stream up to 8 tokens, where Q8_0 and INT8_CHANNEL lost to the GEMM (matmul.cpp).
constexpr Streaming kFloatStreaming{.most_tokens = kRowDotTokens, .activation_block_bytes = 0};
constexpr Streaming kQ8_0Streaming{.most_tokens = kRowDotTokens, .activation_block_bytes = 36};
constexpr Streaming kQ4_0Streaming{.most_tokens = kRowStreamTokens, .activation_block_bytes = 40};
// The sub-block formats stream up to 24 tokens at any width, 8 a pass: their GEMM packs sub-block
// panels of the whole matrix for every call, which a few tokens do not repay. `bench -p 0 -n 16
// -np 3,4,6,8 -t 2` on llama.cpp's Q4_K_M files (LLaMA-7B width with 4 layers, TinyLlama-1.1B)
// and a Q4_1 one, the GEMM's rule (stream only while the activations fit half of L1d, at most 4
// tokens) against streaming, alternated: 3 tokens 1.0-2.1x, 4 tokens 1.8-2.3x, 6 and 8 tokens
// 2.6-3.6x (7B width, 8 sequences: 44 -> 125 tokens/s). Up to 24 tokens the passes beat the
// GEMM, at 32 the GEMM wins (docs/kernels-prefill.md, "Streaming a few tokens").
constexpr Streaming kSubBlockStreaming{.most_tokens = 3 * kRowStreamTokens, .activation_block_bytes = 0};

// The table. Every field by name; a format leaves out what it lacks (no GEMM panel, no
// llama.cpp file type). Q2_K and Q3_K have no AVX-512 row kernel of their own: their AVX-512
// level runs the AVX2 one, named as such. Built on first use, so no other file's static initialisation can find it
// empty.
const auto& table() {
  static const std::array kFormats = {
      WeightFormat{
          .name = "f32",
          .type = GgmlType::F32,
          .layout = "4-byte IEEE floats",
          .activations = Activations::f32,
          .encode = encode_f32_row,
          .decode = decode_f32_row,
          .output_layer = GgmlType::F32,
          .llama_file_type = 0,  // ALL_F32
          .dot = {.scalar = scalar_dot::f32, .avx2 = avx2_dot::f32, .avx512 = avx512_dot::f32},
          .gemm = {.panels = GemmPanels::f32},
          .streaming = kFloatStreaming,
      },
      WeightFormat{
          .name = "f16",
          .type = GgmlType::F16,
          .layout = "2-byte IEEE half floats",
          .activations = Activations::f32,
          .encode = encode_f16_row,
          .decode = decode_f16_row,
          .output_layer = GgmlType::F16,
          .llama_file_type = 1,  // MOSTLY_F16
          .dot = {.scalar = scalar_dot::f16, .avx2 = avx2_dot::f16, .avx512 = avx512_dot::f16},
          .gemm = {.panels = GemmPanels::f32},
          .streaming = kFloatStreaming,
      },
      WeightFormat{
          .name = "bf16",
          .type = GgmlType::BF16,
          .layout = "2-byte bfloat16 (the upper half of an FP32)",
          .activations = Activations::f32,
          .encode = encode_bf16_row,
          .decode = decode_bf16_row,
          .output_layer = GgmlType::BF16,
          .llama_file_type = 32,  // MOSTLY_BF16
          .dot = {.scalar = scalar_dot::bf16, .avx2 = avx2_dot::bf16, .avx512 = avx512_dot::bf16},
          .gemm = {.panels = GemmPanels::f32},
          .streaming = kFloatStreaming,
      },
      WeightFormat{
          .name = "q8_0",
          .type = GgmlType::Q8_0,
          .layout = "32 values per 34-byte block: FP16 d, 32 int8 q; x = d * q",
          .activations = Activations::q8_0,
          .encode = encode_blocks<BlockQ8_0, quantize_row_q8_0>,
          .decode = decode_blocks<BlockQ8_0, dequantize_row_q8_0>,
          .output_layer = GgmlType::Q8_0,
          .llama_file_type = 7,  // MOSTLY_Q8_0
          .dot = {.scalar = scalar_dot::q8_0, .avx2 = avx2_dot::q8_0, .avx512 = avx512_dot::q8_0},
          .gemm = {.panels = GemmPanels::integer, .pack = pack_integer_rows<Q8_0Row>},
          .streaming = kQ8_0Streaming,
      },
      WeightFormat{
          .name = "q4_0",
          .type = GgmlType::Q4_0,
          .layout = "32 values per 18-byte block: FP16 d, 16 bytes of nibbles (low: values 0-15, high: 16-31); "
                    "x = d * (nibble - 8)",
          .activations = Activations::q8_0,
          .encode = encode_blocks<BlockQ4_0, quantize_row_q4_0>,
          .decode = decode_blocks<BlockQ4_0, dequantize_row_q4_0>,
          .output_layer = GgmlType::Q6_K,
          .llama_file_type = 2,  // MOSTLY_Q4_0
          .dot = {.scalar = scalar_dot::q4_0, .avx2 = avx2_dot::q4_0, .avx512 = avx512_dot::q4_0},
          .gemm = {.panels = GemmPanels::integer, .pack = pack_integer_rows<Q4_0Row>, .nibbles = true},
          .streaming = kQ4_0Streaming,
      },
      WeightFormat{
          .name = "q4_1",
          .type = GgmlType::Q4_1,
          .layout = "32 values per 20-byte block: FP16 d, FP16 m, 16 bytes of nibbles (low: values 0-15, "
                    "high: 16-31); x = d * q + m",
          .activations = Activations::q8_0,
          .encode = quantize_row_q4_1,
          .decode = dequantize_row_q4_1,
          .output_layer = GgmlType::Q6_K,
          .llama_file_type = 3,  // MOSTLY_Q4_1
          .dot = {.scalar = scalar_dot::q4_1, .avx2 = avx2_dot::q4_1, .avx512 = avx512_dot::q4_1},
          .gemm = {.panels = GemmPanels::sub_blocks, .pack = pack_q4_1_panel, .whole_blocks = true},
          .streaming = kSubBlockStreaming,
      },
      WeightFormat{
          .name = "q5_0",
          .type = GgmlType::Q5_0,
          .layout = "32 values per 22-byte block: FP16 d, 32 fifth bits, 16 bytes of nibbles (low: values 0-15, "
                    "high: 16-31); x = d * (q - 16)",
          .activations = Activations::q8_0,
          .encode = quantize_row_q5_0,
          .decode = dequantize_row_q5_0,
          .output_layer = GgmlType::Q6_K,
          .llama_file_type = 8,  // MOSTLY_Q5_0
          .dot = {.scalar = scalar_dot::q5_0, .avx2 = avx2_dot::q5_0, .avx512 = avx512_dot::q5_0},
          .gemm = {.panels = GemmPanels::sub_blocks, .pack = pack_q5_0_panel, .whole_blocks = true},
          .streaming = kSubBlockStreaming,
      },
      WeightFormat{
          .name = "q5_1",
          .type = GgmlType::Q5_1,
          .layout = "32 values per 24-byte block: FP16 d, FP16 m, 32 fifth bits, 16 bytes of nibbles; x = d * q + m",
          .activations = Activations::q8_0,
          .encode = quantize_row_q5_1,
          .decode = dequantize_row_q5_1,
          .output_layer = GgmlType::Q6_K,
          .llama_file_type = 9,  // MOSTLY_Q5_1
          .dot = {.scalar = scalar_dot::q5_1, .avx2 = avx2_dot::q5_1, .avx512 = avx512_dot::q5_1},
          .gemm = {.panels = GemmPanels::sub_blocks, .pack = pack_q5_1_panel, .whole_blocks = true},
          .streaming = kSubBlockStreaming,
      },
      WeightFormat{
          .name = "q2_k",
          .type = GgmlType::Q2_K,
          .layout = "256 values per 84-byte block: 16 scale/minimum nibble pairs, 2-bit q, FP16 d and dmin; "
                    "x = d * sc * q - dmin * m per 16 values",
          .activations = Activations::q8_0,
          .encode = quantize_row_q2_k,
          .decode = dequantize_row_q2_k,
          .output_layer = GgmlType::Q6_K,
          .llama_file_type = 10,  // MOSTLY_Q2_K
          .dot = {.scalar = scalar_dot::q2_k, .avx2 = avx2_dot::q2_k, .avx512 = avx2_dot::q2_k},
          .gemm = {.panels = GemmPanels::sub_blocks, .pack = pack_q2_k_panel},
          .streaming = kSubBlockStreaming,
      },
      WeightFormat{
          .name = "q3_k",
          .type = GgmlType::Q3_K,
          .layout = "256 values per 110-byte block: 32 bytes of third bits, 2-bit low bits, 16 six-bit scales, "
                    "FP16 d; x = d * (sc - 32) * (q - 4) per 16 values",
          .activations = Activations::q8_0,
          .encode = quantize_row_q3_k,
          .decode = dequantize_row_q3_k,
          .output_layer = GgmlType::Q6_K,
          .llama_file_type = 11,  // MOSTLY_Q3_K_S
          .dot = {.scalar = scalar_dot::q3_k, .avx2 = avx2_dot::q3_k, .avx512 = avx2_dot::q3_k},
          .gemm = {.panels = GemmPanels::sub_blocks, .pack = pack_q3_k_panel},
          .streaming = kSubBlockStreaming,
      },
      WeightFormat{
          .name = "q4_k",
          .type = GgmlType::Q4_K,
          .layout = "256 values per 144-byte block: FP16 d and dmin, 8 six-bit scales and minimums, 4-bit q; "
                    "x = d * sc * q - dmin * m per 32 values",
          .activations = Activations::q8_0,
          .encode = quantize_row_q4_k,
          .decode = dequantize_row_q4_k,
          .output_layer = GgmlType::Q6_K,
          .llama_file_type = 14,  // MOSTLY_Q4_K_S
          .dot = {.scalar = scalar_dot::q4_k, .avx2 = avx2_dot::q4_k, .avx512 = avx512_dot::q4_k},
          .gemm = {.panels = GemmPanels::sub_blocks, .pack = pack_q4_k_panel, .whole_blocks = true},
          .streaming = kSubBlockStreaming,
      },
      WeightFormat{
          .name = "q5_k",
          .type = GgmlType::Q5_K,
          .layout = "256 values per 176-byte block: FP16 d and dmin, 8 six-bit scales and minimums, fifth bits, "
                    "4-bit low bits; x = d * sc * q - dmin * m per 32 values",
          .activations = Activations::q8_0,
          .encode = quantize_row_q5_k,
          .decode = dequantize_row_q5_k,
          .output_layer = GgmlType::Q6_K,
          .llama_file_type = 16,  // MOSTLY_Q5_K_S
          .dot = {.scalar = scalar_dot::q5_k, .avx2 = avx2_dot::q5_k, .avx512 = avx512_dot::q5_k},
          .gemm = {.panels = GemmPanels::sub_blocks, .pack = pack_q5_k_panel, .whole_blocks = true},
          .streaming = kSubBlockStreaming,
      },
      WeightFormat{
          .name = "q6_k",
          .type = GgmlType::Q6_K,
          .layout = "256 values per 210-byte block: 4-bit low and 2-bit high parts of q, 16 int8 scales, FP16 d; "
                    "x = d * sc * (q - 32) per 16 values",
          .activations = Activations::q8_0,
          .encode = quantize_row_q6_k,
          .decode = dequantize_row_q6_k,
          .output_layer = GgmlType::Q6_K,
          .llama_file_type = 18,  // MOSTLY_Q6_K
          .dot = {.scalar = scalar_dot::q6_k, .avx2 = avx2_dot::q6_k, .avx512 = avx512_dot::q6_k},
          .gemm = {.panels = GemmPanels::sub_blocks, .pack = pack_q6_k_panel},
          .streaming = kSubBlockStreaming,
      },
      WeightFormat{
          .name = "iq4_nl",
          .type = GgmlType::IQ4_NL,
          .layout = "32 values per 18-byte block: FP16 d, 16 bytes of 4-bit indices (low: values 0-15, high: "
                    "16-31) into 16 int8 levels; x = d * level",
          .activations = Activations::q8_0,
          .encode = quantize_row_iq4_nl,
          .decode = dequantize_row_iq4_nl,
          .output_layer = GgmlType::Q6_K,
          .llama_file_type = 25,  // MOSTLY_IQ4_NL
          .dot = {.scalar = scalar_dot::iq4_nl, .avx2 = avx2_dot::iq4_nl, .avx512 = avx512_dot::iq4_nl},
          .gemm = {.panels = GemmPanels::integer, .pack = pack_integer_rows<Iq4NlRow>},
          .streaming = kQ8_0Streaming,
      },
      WeightFormat{
          .name = "q8_0-r8",
          .type = GgmlType::CPULLM_Q8_0_R8,
          .layout = "Q8_0 with every 8 rows interleaved block by block: 8 FP16 scales, then 8 chunks of "
                    "4 bytes of each row",
          .activations = Activations::q8_0,
          .plain = GgmlType::Q8_0,
          .output_layer = GgmlType::CPULLM_Q8_0_R8,
          .dot = {.scalar = scalar_dot::q8_0_r8, .avx2 = avx2_dot::q8_0_r8, .avx512 = avx512_dot::q8_0_r8},
          .gemm = {.panels = GemmPanels::integer, .pack = pack_interleaved_rows<BlockQ8_0>},
          .streaming = kQ8_0Streaming,
      },
      WeightFormat{
          .name = "q4_0-r8",
          .type = GgmlType::CPULLM_Q4_0_R8,
          .layout = "Q4_0 with every 8 rows interleaved block by block: 8 FP16 scales, then 4 chunks of "
                    "4 nibble bytes of each row",
          .activations = Activations::q8_0,
          .plain = GgmlType::Q4_0,
          .output_layer = GgmlType::CPULLM_Q8_0_R8,
          .dot = {.scalar = scalar_dot::q4_0_r8, .avx2 = avx2_dot::q4_0_r8, .avx512 = avx512_dot::q4_0_r8},
          .gemm = {.panels = GemmPanels::integer, .pack = pack_interleaved_rows<BlockQ4_0>, .nibbles = true},
          .streaming = kQ4_0Streaming,
      },
      WeightFormat{
          .name = "int8-channel",
          .type = GgmlType::CPULLM_INT8_CHANNEL,
          .layout = "per row: FP32 d = amax / 127, then one int8 q per value; x = d * q",
          .activations = Activations::q8_0,
          .encode = quantize_row_int8_channel,
          .decode = dequantize_row_int8_channel,
          .output_layer = GgmlType::CPULLM_INT8_CHANNEL,
          .dot = {.scalar = scalar_dot::int8_channel, .avx2 = avx2_dot::int8_channel, .avx512 = avx512_dot::int8_channel},
          .gemm = {.panels = GemmPanels::integer, .pack = pack_integer_rows<Int8ChannelRow>},
          .streaming = kQ8_0Streaming,
      },
  };
  return kFormats;
}

}  // namespace

const GgmlTypeTraits& WeightFormat::traits() const {
  // Every registered type is one ggml_types knows: looked up once per entry.
  static const auto kTraits = [] {
    std::array<GgmlTypeTraits, std::tuple_size_v<std::remove_cvref_t<decltype(table())>>> traits;
    for (std::size_t i = 0; i < traits.size(); ++i) traits[i] = *ggml_type_traits(static_cast<uint32_t>(table()[i].type));
    return traits;
  }();
  return kTraits[static_cast<std::size_t>(this - table().data())];
}

double WeightFormat::bits_per_weight() const {
  return 8.0 * static_cast<double>(traits().block_bytes) / static_cast<double>(traits().block_elements);
}

RowDot WeightFormat::dot_for(Isa isa) const {
  if (!cpu_supports(isa)) fail("this CPU cannot run the {} kernels", isa_name(isa));
  switch (isa) {
    case Isa::Scalar: return dot.scalar;
    case Isa::Avx2: return dot.avx2;
    case Isa::Avx512: return dot.avx512;
  }
  fail("unknown ISA");
}

std::span<const WeightFormat> weight_formats() { return table(); }

const WeightFormat* find_weight_format(GgmlType type) {
  for (const WeightFormat& f : table())
    if (f.type == type) return &f;
  return nullptr;
}

const WeightFormat& weight_format(GgmlType type) {
  if (const WeightFormat* f = find_weight_format(type)) return *f;
  fail("no kernel for weight type {}", ggml_type_name(type));
}

const WeightFormat& weight_format_named(std::string_view name, std::string_view what) {
  for (const WeightFormat& f : table())
    if (f.name == name) return f;
  fail("{} '{}' ({})", what, name, weight_format_names());
}

std::string_view gemm_panels_name(GemmPanels panels) {
  switch (panels) {
    case GemmPanels::none: return "none";
    case GemmPanels::f32: return "f32";
    case GemmPanels::integer: return "integer";
    case GemmPanels::sub_blocks: return "sub-blocks";
  }
  return "?";
}

std::string weight_format_names() {
  std::string names;
  for (const WeightFormat& f : table()) names += (names.empty() ? "" : ", ") + std::string(f.name);
  return names;
}

}  // namespace cpullm
