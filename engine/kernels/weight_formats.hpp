// The format registry: every weight type cpullm runs, in one table (weight_formats.cpp). Each
// entry names the type, its reference quantizer and dequantizer, its row kernel at each ISA
// level and how the GEMM packs it; the matvec and matmul dispatch, row conversion, `quantize`,
// `bench`, `info --formats` and, through `cpullm info --formats --json`, the Python tools
// (tuning/, reports/) all read it. docs/adding-a-format.md walks through adding an entry.
//
// The block layouts (block size, bytes per block) are ggml's facts about the file format and stay
// in format/ggml_types.cpp, which knows every type a GGUF file may hold; an entry reads them from
// there. Sparse types are a family of numbers (format/ggml_types.hpp) with kernels of their own
// (kernels/sparse.hpp), not entries here.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "engine/format/ggml_types.hpp"
#include "engine/kernels/dot.hpp"
#include "engine/kernels/gemm.hpp"
#include "engine/kernels/isa.hpp"

namespace cpullm {

// A format's row kernel at each ISA level, filled by name ({.scalar = ..., .avx2 = ..., .avx512 = ...}).
struct IsaRowDots {
  RowDot scalar = nullptr;  // the reference every other level is tested against
  RowDot avx2 = nullptr;
  RowDot avx512 = nullptr;
};

// What a format's kernels take: the activations in FP32, or quantized to Q8_0 once per call
// (dot.hpp's QuantizedActivations; rows must then be whole 32-value blocks).
enum class Activations : uint8_t { f32, q8_0 };

// How the GEMM (prefill, batches) reads a format's rows (gemm.hpp).
enum class GemmPanels : uint8_t {
  none,     // no panel: matmul streams the rows through the row kernels, kRowStreamTokens tokens a pass
  f32,      // float panels, converted with load8_as_f32 (F32, F16, BF16)
  integer,  // integer panels, packed by `pack`
  sub_blocks, // sub-block panels (scale and offset per 16 values), packed by `pack`
};
// The name `info --formats` gives each.
std::string_view gemm_panels_name(GemmPanels panels);
using PackIntegerPanel = void (*)(const WeightMatrix& w, int64_t r0, int64_t b0, int64_t blocks, int R,
                                  PanelWeights encoding, std::byte* panel);
struct GemmEntry {
  GemmPanels panels = GemmPanels::none;
  PackIntegerPanel pack = nullptr;  // integer: rows [r0, r0 + R) over blocks [b0, b0 + blocks) into a panel
  bool nibbles = false;             // integer: the weights fit w + 8 (0..15), so the ISA's Q4_0 tile runs them
  bool whole_blocks = false;        // sub_blocks: both halves of a block share scale and offset (32-value
                                    // sub-blocks), so the ISA's whole-block tile runs them
};

// When matmul streams rows through the row kernels instead of packing GEMM panels (measured per
// format with bench_kernels' matvec_decode against the GEMM; matmul.cpp says how).
struct Streaming {
  int64_t most_tokens = 0;           // beyond 2 tokens, stream up to this many (past kRowStreamTokens, in passes)
  int64_t activation_block_bytes = 0;  // Q8_0 activations: bytes one token's kernel reads per block, which
                                       // must fit half of L1d for all the tokens; 0: no such limit
};

struct WeightFormat {
  std::string_view name;          // cpullm's name: `quantize --type`, bench's format, the sweep space ("q4_0")
  GgmlType type;                  // the number GGUF tensor infos store
  std::string_view layout;        // the block layout in one line (info --formats, docs)
  Activations activations;        // what its kernels take
  // One row of n values to and from FP32, rounded as llama.cpp rounds (the reference quantizer
  // and dequantizer). Null for the types stored in groups of rows (the _R8 ones): row_convert
  // reads and writes those through `plain`.
  void (*encode)(const float* x, std::byte* row, int64_t n) = nullptr;
  void (*decode)(const std::byte* row, float* out, int64_t n) = nullptr;
  std::optional<GgmlType> plain = std::nullopt;  // the _R8 types: the format whose rows they interleave in groups
  GgmlType output_layer;          // what `quantize` gives the output layer under this type: llama.cpp's
                                  // Q6_K for its 2- to 6-bit types (Q8_0 where rows are not whole
                                  // 256-value blocks: quant/file_types.cpp)
  std::optional<uint32_t> llama_file_type = std::nullopt;  // general.file_type (llama_ftype) of a file of this type; none for cpullm's own
  IsaRowDots dot = {};            // matvec's row kernels
  GemmEntry gemm = {};            // matmul's panels
  Streaming streaming = {};       // matmul: streaming rows against the GEMM

  const GgmlTypeTraits& traits() const;  // ggml_types' block layout of `type`
  double bits_per_weight() const;        // block bits over block values (a per-row scale not counted)
  RowDot dot_for(Isa isa) const;         // the kernel of that level; an Error where this CPU lacks it
};

// Every entry, in the order `info --formats` lists them.
std::span<const WeightFormat> weight_formats();
// The entry for a type, or null where cpullm has no kernel for it.
const WeightFormat* find_weight_format(GgmlType type);
// The same, or an Error naming the type.
const WeightFormat& weight_format(GgmlType type);
// By cpullm's name, or an Error that lists the names (`what` starts it: "quantize: unknown --type").
const WeightFormat& weight_format_named(std::string_view name, std::string_view what);
// "f32, f16, ..., q4_1": every name, for help texts and errors.
std::string weight_format_names();

}  // namespace cpullm
