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

}  // namespace

std::optional<GgmlTypeTraits> ggml_type_traits(uint32_t type) {
  if (type == static_cast<uint32_t>(GgmlType::CPULLM_INT8_CHANNEL)) return GgmlTypeTraits{"CPULLM_INT8_CHANNEL", 1, 1, 4};
  if (type >= kTraits.size() || kTraits[type].name.empty()) return std::nullopt;
  return kTraits[type];
}

std::string_view ggml_type_rejection(uint32_t type) {
  switch (type) {
    case 4: return "removed from ggml (was Q4_2)";
    case 5: return "removed from ggml (was Q4_3)";
    case 31: case 32: case 33: return "removed from ggml (was a Q4_0 4x4/4x8/8x8 repack; requantize the file)";
    case 36: case 37: case 38: return "removed from ggml (was an IQ4_NL repack; requantize the file)";
    default: return "unknown to ggml";
  }
}

std::string_view ggml_type_name(GgmlType type) {
  auto traits = ggml_type_traits(static_cast<uint32_t>(type));
  return traits ? traits->name : "?";
}

}  // namespace cpullm
