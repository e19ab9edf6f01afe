#include "engine/quant/file_types.hpp"

#include <vector>

#include "engine/kernels/weight_formats.hpp"
#include "engine/util/error.hpp"

namespace cpullm {
namespace {

// llama_ftype numbers the rules below test.
enum LlamaFileType : uint32_t {
  kMostlyQ2_K = 10,
  kMostlyQ3_K_S = 11,
  kMostlyQ3_K_M = 12,
  kMostlyQ3_K_L = 13,
  kMostlyQ4_K_S = 14,
  kMostlyQ4_K_M = 15,
  kMostlyQ5_K_S = 16,
  kMostlyQ5_K_M = 17,
  kMostlyIQ4_NL = 25,
};

// The mixtures whose names are not a registry format's. q3_k, q4_k and q5_k are the _S types
// (llama.cpp's Q3_K_S, Q4_K_S, Q5_K_S), named both ways.
constexpr FileType kMixtures[] = {
    {"q3_k_s", GgmlType::Q3_K, kMostlyQ3_K_S}, {"q3_k_m", GgmlType::Q3_K, kMostlyQ3_K_M},
    {"q3_k_l", GgmlType::Q3_K, kMostlyQ3_K_L}, {"q4_k_s", GgmlType::Q4_K, kMostlyQ4_K_S},
    {"q4_k_m", GgmlType::Q4_K, kMostlyQ4_K_M}, {"q5_k_s", GgmlType::Q5_K, kMostlyQ5_K_S},
    {"q5_k_m", GgmlType::Q5_K, kMostlyQ5_K_M},
};

// Layers that get more bits under the _M mixtures: the first and last eighth, and every third
// one between.
bool use_more_bits(int layer, int layers) {
  return layer < layers / 8 || layer >= 7 * layers / 8 || (layer - layers / 8) % 3 == 2;
}

// The types whose file types follow llama-quantize's per-tensor rules (mixture_type).
bool has_mixture_rules(GgmlType t) {
  return t == GgmlType::Q2_K || t == GgmlType::Q3_K || t == GgmlType::Q4_K || t == GgmlType::Q5_K ||
         t == GgmlType::Q6_K || t == GgmlType::IQ4_NL;
}

GgmlType mixture_type(uint32_t ftype, GgmlType type, const TensorSite& site) {
  const std::string_view name = site.name;
  if (name.find("attn_v.weight") != std::string_view::npos) {
    if (ftype == kMostlyQ2_K) return site.gqa >= 4 ? GgmlType::Q4_K : GgmlType::Q3_K;
    if (ftype == kMostlyQ3_K_M) return site.layer < 2 ? GgmlType::Q5_K : GgmlType::Q4_K;
    if (ftype == kMostlyQ3_K_L) return GgmlType::Q5_K;
    if ((ftype == kMostlyQ4_K_M || ftype == kMostlyQ5_K_M) && use_more_bits(site.layer, site.layers)) return GgmlType::Q6_K;
    if (ftype == kMostlyQ4_K_S && site.layer < 4) return GgmlType::Q5_K;
    if (ftype == kMostlyIQ4_NL && site.gqa >= 4) return GgmlType::Q5_K;
  } else if (name.find("ffn_down") != std::string_view::npos) {
    if (ftype == kMostlyQ2_K) return GgmlType::Q3_K;
    if (ftype == kMostlyQ3_K_M)
      return site.layer < site.layers / 16 ? GgmlType::Q5_K : GgmlType::Q4_K;
    if (ftype == kMostlyQ3_K_L) return GgmlType::Q5_K;
    if ((ftype == kMostlyQ4_K_M || ftype == kMostlyQ5_K_M) && use_more_bits(site.layer, site.layers)) return GgmlType::Q6_K;
    if (ftype == kMostlyQ4_K_S && site.layer < site.layers / 8) return GgmlType::Q5_K;
    if (ftype == kMostlyIQ4_NL && site.layer < site.layers / 8) return GgmlType::Q5_K;
  } else if (name.find("attn_output.weight") != std::string_view::npos) {
    if (ftype == kMostlyQ2_K) return GgmlType::Q3_K;
    if (ftype == kMostlyQ3_K_M) return GgmlType::Q4_K;
    if (ftype == kMostlyQ3_K_L) return GgmlType::Q5_K;
  }
  return type;
}

}  // namespace

std::span<const FileType> file_types() {
  static const std::vector<FileType> kTypes = [] {
    std::vector<FileType> types;
    for (const WeightFormat& f : weight_formats()) types.push_back({f.name, f.type, f.llama_file_type});
    types.insert(types.end(), std::begin(kMixtures), std::end(kMixtures));
    return types;
  }();
  return kTypes;
}

std::string file_type_names() {
  std::string names;
  for (const FileType& t : file_types()) names += (names.empty() ? "" : ", ") + std::string(t.name);
  return names;
}

const FileType& file_type_named(std::string_view name) {
  for (const FileType& t : file_types())
    if (t.name == name) return t;
  fail("quantize: unknown --type '{}' ({})", name, file_type_names());
}

const FileType& file_type_of(GgmlType format) { return file_type_named(weight_format(format).name); }

GgmlType tensor_type(const FileType& file_type, const TensorSite& site) {
  if (site.is_output) return weight_format(file_type.base).output_layer;
  if (file_type.llama_file_type && has_mixture_rules(file_type.base))
    return mixture_type(*file_type.llama_file_type, file_type.base, site);
  return file_type.base;
}

GgmlType fit_row_length(GgmlType type, int64_t cols) {
  const auto whole = [cols](GgmlType t) { return cols % ggml_type_traits(static_cast<uint32_t>(t))->block_elements == 0; };
  if (whole(type)) return type;
  switch (type) {
    case GgmlType::Q4_K: type = GgmlType::Q5_0; break;
    case GgmlType::Q5_K: type = GgmlType::Q5_1; break;
    case GgmlType::Q6_K: type = GgmlType::Q8_0; break;
    case GgmlType::Q2_K:
    case GgmlType::Q3_K: type = GgmlType::IQ4_NL; break;
    default: type = GgmlType::F16;
  }
  return whole(type) ? type : GgmlType::F16;
}

}  // namespace cpullm
