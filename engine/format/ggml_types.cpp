#include "engine/format/ggml_types.hpp"

#include <array>

namespace cpullm {
namespace {

// Indexed by the ggml_type value; empty name = not a type. Block sizes follow ggml's
// block structs (e.g. Q8_0: fp16 scale + 32 int8 = 34 bytes per 32 values).
constexpr std::array<GgmlTypeTraits, 40> kTraits = {{
    {"F32", 1, 4},        {"F16", 1, 2},       {"Q4_0", 32, 18},    {"Q4_1", 32, 20},
    {"", 0, 0},           {"", 0, 0},          {"Q5_0", 32, 22},    {"Q5_1", 32, 24},
    {"Q8_0", 32, 34},     {"Q8_1", 32, 36},    {"Q2_K", 256, 84},   {"Q3_K", 256, 110},
    {"Q4_K", 256, 144},   {"Q5_K", 256, 176},  {"Q6_K", 256, 210},  {"Q8_K", 256, 292},
    {"IQ2_XXS", 256, 66}, {"IQ2_XS", 256, 74}, {"IQ3_XXS", 256, 98}, {"IQ1_S", 256, 50},
    {"IQ4_NL", 32, 18},   {"IQ3_S", 256, 110}, {"IQ2_S", 256, 82},  {"IQ4_XS", 256, 136},
    {"I8", 1, 1},         {"I16", 1, 2},       {"I32", 1, 4},       {"I64", 1, 8},
    {"F64", 1, 8},        {"IQ1_M", 256, 56},  {"BF16", 1, 2},      {"", 0, 0},
    {"", 0, 0},           {"", 0, 0},          {"TQ1_0", 256, 54},  {"TQ2_0", 256, 66},
    {"", 0, 0},           {"", 0, 0},          {"", 0, 0},          {"MXFP4", 32, 17},
}};

// Bytes of one value of each sparse value precision, and the names, by pattern and precision.
constexpr int64_t kSparseValueBytes[] = {4, 2, 2};
constexpr std::string_view kSparseNames[3][3] = {
    {"CPULLM_SPARSE_ELL_F32", "CPULLM_SPARSE_ELL_F16", "CPULLM_SPARSE_ELL_BF16"},
    {"CPULLM_SPARSE_NM_F32", "CPULLM_SPARSE_NM_F16", "CPULLM_SPARSE_NM_BF16"},
    {"CPULLM_SPARSE_B4X4_F32", "CPULLM_SPARSE_B4X4_F16", "CPULLM_SPARSE_B4X4_BF16"}};

uint32_t value_code(GgmlType values) { return values == GgmlType::F32 ? 0 : values == GgmlType::F16 ? 1 : 2; }

// A sparse type's row layout (engine/kernels/sparse.hpp): ELL stores per kept weight its value
// and a uint16 column; N:M per group of M its N values and N uint8 positions; BLOCK4X4 per
// strip of 4 rows each kept block's 16 values and an int32 block column, a quarter per row.
GgmlTypeTraits sparse_traits(const SparseType& s) {
  const int64_t e = kSparseValueBytes[value_code(s.values)];
  const std::string_view name = kSparseNames[static_cast<int>(s.pattern) - 1][value_code(s.values)];
  switch (s.pattern) {
    case SparsePattern::ell: return {name, 1, e + 2, 0, s.pruned_permille};
    case SparsePattern::n_of_m: return {name, s.m, s.n * (e + 1)};
    case SparsePattern::block4x4: return {name, 4, 4 * e + 1, 0, s.pruned_permille, 4};
  }
  return {};
}

}  // namespace

std::optional<SparseType> sparse_type(uint32_t type) {
  if ((type & 0xff000000u) != kSparseTypeTag) return std::nullopt;
  const uint32_t pattern = type >> 20 & 0xf, values = type >> 16 & 0xf, parameter = type & 0xffff;
  if (pattern < 1 || pattern > 3 || values > 2) return std::nullopt;
  SparseType s{static_cast<SparsePattern>(pattern), values == 0 ? GgmlType::F32 : values == 1 ? GgmlType::F16 : GgmlType::BF16};
  if (s.pattern == SparsePattern::n_of_m) {
    s.n = parameter >> 8, s.m = parameter & 0xff;
    if (s.n < 1 || s.n > s.m) return std::nullopt;
  } else {
    s.pruned_permille = parameter;
    if (parameter > 999) return std::nullopt;
  }
  return s;
}

GgmlType sparse_type_number(const SparseType& s) {
  const uint32_t parameter = s.pattern == SparsePattern::n_of_m ? static_cast<uint32_t>(s.n << 8 | s.m)
                                                                : static_cast<uint32_t>(s.pruned_permille);
  return static_cast<GgmlType>(kSparseTypeTag | static_cast<uint32_t>(s.pattern) << 20 | value_code(s.values) << 16 |
                               parameter);
}

std::optional<GgmlTypeTraits> ggml_type_traits(uint32_t type) {
  if (type == static_cast<uint32_t>(GgmlType::CPULLM_INT8_CHANNEL)) return GgmlTypeTraits{"CPULLM_INT8_CHANNEL", 1, 1, 4};
  if (type == static_cast<uint32_t>(GgmlType::CPULLM_Q4_0_R8)) return GgmlTypeTraits{"CPULLM_Q4_0_R8", 32, 18, 0, 0, 8};
  if (type == static_cast<uint32_t>(GgmlType::CPULLM_Q8_0_R8)) return GgmlTypeTraits{"CPULLM_Q8_0_R8", 32, 34, 0, 0, 8};
  if (const auto sparse = sparse_type(type)) return sparse_traits(*sparse);
  if (type >= kTraits.size() || kTraits[type].name.empty()) return std::nullopt;
  return kTraits[type];
}

std::string_view ggml_type_rejection(uint32_t type) {
  switch (type) {
    case 4: return "removed from ggml (was Q4_2)";
    case 5: return "removed from ggml (was Q4_3)";
    case 31: case 32: case 33: return "removed from ggml (was a Q4_0 4x4/4x8/8x8 repack; requantize the file)";
    case 36: case 37: case 38: return "removed from ggml (was an IQ4_NL repack; requantize the file)";
    default:
      return (type & 0xff000000u) == kSparseTypeTag ? "a cpullm sparse type number with invalid fields" : "unknown to ggml";
  }
}

std::string_view ggml_type_name(GgmlType type) {
  auto traits = ggml_type_traits(static_cast<uint32_t>(type));
  return traits ? traits->name : "?";
}

}  // namespace cpullm
