// The K-quants' reference: llama.cpp's quantizers (quantize_row_q*_K_ref, their search for each
// sub-block's scale and minimum included) and dequantizers (dequantize_row_q*_K), with the float
// arithmetic in llama.cpp's order and types, so the same FP32 input gives the same bytes.
#include "engine/kernels/k_quants.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "engine/util/half.hpp"

// Every product and sum below is rounded on its own, as in llama.cpp's ggml-base (built for plain
// x86-64, no FMA). The project's gnu++20 + x86-64-v3 build would otherwise fuse a * b + c into
// FMAs (GCC's default -ffp-contract=fast), and one changed rounding flips a level or a scale.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace cpullm {

namespace {

// Below this a group is all zeros (llama.cpp's GROUP_MAX_EPS).
constexpr float kGroupMaxEps = 1e-15f;

// Round to nearest, ties to even, for |value| < 2^22: adding 1.5 * 2^23 leaves the rounded
// integer in the low mantissa bits (llama.cpp's nearest_int; the same result as lrintf, faster).
inline int nearest_int(float value) {
  const float shifted = value + 12582912.f;
  return (std::bit_cast<int32_t>(shifted) & 0x007fffff) - 0x00400000;
}

inline int clamp_int(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

// The value of largest magnitude, sign kept (the first of equals).
float signed_extreme(int n, const float* x) {
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) amax = ax, max = x[i];
  }
  return max;
}

// Symmetric levels -nmax..nmax-1 (stored + nmax) and their scale for n values, x ~ scale * l
// (llama.cpp's make_qx_quants). rmse_type 0: the scale that maps the largest magnitude to -nmax;
// otherwise the least-squares scale for weights (x^2, 1, |x|, sqrt|x| for types 1..4, or
// `weights` when given), refined over 18 nearby starting scales; a negative rmse_type returns
// after the first fit, the mean of the fitted and the starting scale.
float fit_symmetric(int n, int nmax, const float* x, int8_t* levels, int rmse_type, const float* weights) {
  const float max = signed_extreme(n, x);
  if (std::fabs(max) < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) levels[i] = 0;
    return 0.f;
  }
  float iscale = static_cast<float>(-nmax) / max;
  if (rmse_type == 0) {
    for (int i = 0; i < n; ++i) levels[i] = static_cast<int8_t>(nmax + clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1));
    return 1 / iscale;
  }
  bool return_early = false;
  if (rmse_type < 0) rmse_type = -rmse_type, return_early = true;
  const auto weight = [&](int i) -> float {
    if (weights) return weights[i];
    switch (rmse_type) {
      case 1: return x[i] * x[i];
      case 2: return 1;
      case 3: return std::fabs(x[i]);
      default: return std::sqrt(std::fabs(x[i]));
    }
  };
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1);
    levels[i] = static_cast<int8_t>(l + nmax);
    const float w = weight(i);
    sumlx += w * x[i] * static_cast<float>(l);
    suml2 += w * static_cast<float>(l) * static_cast<float>(l);
  }
  float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
  if (return_early) return suml2 > 0 ? 0.5f * (scale + 1 / iscale) : 1 / iscale;
  float best = scale * sumlx;
  for (int step = -9; step <= 9; ++step) {
    if (step == 0) continue;
    iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(step)) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1);
      const float w = weight(i);
      sumlx += w * x[i] * static_cast<float>(l);
      suml2 += w * static_cast<float>(l) * static_cast<float>(l);
    }
    // A better fit: sumlx^2 / suml2 (the error it removes) beats the best so far.
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) levels[i] = static_cast<int8_t>(nmax + clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1));
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// Q3_K's sub-block fit (llama.cpp's make_q3_quants): symmetric levels -nmax..nmax-1 (stored + nmax)
// weighted by x^2; with `refine`, up to 5 passes that move single levels while the weighted
// least-squares error falls, and the least-squares scale is returned.
float fit_q3(int n, int nmax, const float* x, int8_t* levels, bool refine) {
  const float max = signed_extreme(n, x);
  if (std::fabs(max) < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) levels[i] = 0;
    return 0.f;
  }
  const float iscale = static_cast<float>(-nmax) / max;
  if (refine) {
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1);
      levels[i] = static_cast<int8_t>(l);
      const float w = x[i] * x[i];
      sumlx += w * x[i] * static_cast<float>(l);
      suml2 += w * static_cast<float>(l) * static_cast<float>(l);
    }
    for (int pass = 0; pass < 5; ++pass) {
      int changed = 0;
      for (int i = 0; i < n; ++i) {
        const float w = x[i] * x[i];
        float slx = sumlx - w * x[i] * static_cast<float>(levels[i]);
        if (slx > 0) {
          float sl2 = suml2 - w * static_cast<float>(levels[i]) * static_cast<float>(levels[i]);
          const int new_l = clamp_int(nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
          if (new_l != levels[i]) {
            slx += w * x[i] * static_cast<float>(new_l);
            sl2 += w * static_cast<float>(new_l) * static_cast<float>(new_l);
            if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
              levels[i] = static_cast<int8_t>(new_l), sumlx = slx, suml2 = sl2;
              ++changed;
            }
          }
        }
      }
      if (!changed) break;
    }
    for (int i = 0; i < n; ++i) levels[i] = static_cast<int8_t>(levels[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
  }
  for (int i = 0; i < n; ++i) levels[i] = static_cast<int8_t>(clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1) + nmax);
  return 1 / iscale;
}

// Affine levels 0..nmax for n values, x ~ scale * l - minimum with minimum >= 0 (llama.cpp's
// make_qkx2_quants): starts from the range, then tries nstep + 1 inverse scales
// (rmin + rdelta * step + nmax) / range, solving the weighted least-squares scale and offset for
// each one's levels and keeping the one with the least weighted error (absolute with use_mad,
// else squared). scratch holds n candidate levels.
float fit_affine(int n, int nmax, const float* x, const float* weights, uint8_t* levels, float* minimum,
                 uint8_t* scratch, float rmin, float rdelta, int nstep, bool use_mad) {
  float min = x[0], max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    const float w = weights[i];
    sum_w += w;
    sum_x += w * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    for (int i = 0; i < n; ++i) levels[i] = 0;
    *minimum = -min;
    return 0.f;
  }
  float iscale = static_cast<float>(nmax) / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    levels[i] = static_cast<uint8_t>(clamp_int(nearest_int(iscale * (x[i] - min)), 0, nmax));
    float diff = scale * static_cast<float>(levels[i]) + min - x[i];
    diff = use_mad ? std::fabs(diff) : diff * diff;
    best_error += weights[i] * diff;
  }
  if (nstep < 1) {
    *minimum = -min;
    return scale;
  }
  for (int step = 0; step <= nstep; ++step) {
    iscale = (rmin + rdelta * static_cast<float>(step) + static_cast<float>(nmax)) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = clamp_int(nearest_int(iscale * (x[i] - min)), 0, nmax);
      scratch[i] = static_cast<uint8_t>(l);
      const float w = weights[i];
      sum_l += w * static_cast<float>(l);
      sum_l2 += w * static_cast<float>(l) * static_cast<float>(l);
      sum_xl += w * static_cast<float>(l) * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (det > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
      if (this_min > 0) {  // the offset may only lower values: refit the scale alone
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float error = 0;
      for (int i = 0; i < n; ++i) {
        float diff = this_scale * static_cast<float>(scratch[i]) + this_min - x[i];
        diff = use_mad ? std::fabs(diff) : diff * diff;
        error += weights[i] * diff;
      }
      if (error < best_error) {
        for (int i = 0; i < n; ++i) levels[i] = scratch[i];
        best_error = error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *minimum = -min;
  return scale;
}

// Q3_K's sub-block j scale (biased by 32) from its packed 12 bytes: low 4 bits in byte j (j < 8)
// or the high nibble of byte j - 8, top 2 bits in byte 8 + j % 4 at bit 2 * (j / 4).
inline int q3_k_scale(const uint8_t* packed, int j) {
  const int low = j < 8 ? packed[j] & 0xf : packed[j - 8] >> 4;
  return low | ((packed[8 + j % 4] >> (2 * (j / 4))) & 3) << 4;
}

// Q4_K's and Q5_K's common first half: 8 sub-blocks of 32 fitted by fit_affine with weights
// rms + |x|, their scales and minimums quantized to 6 bits against the largest ones and packed
// into `packed`, then every value's level 0..nmax redone against the stored scales.
void quantize_k4_levels(const float* x, int nmax, float rmin, int nstep, uint8_t* levels, uint8_t packed[kPackedScales],
                        uint16_t* d, uint16_t* dmin) {
  float scales[kSuperBlock / 32], mins[kSuperBlock / 32], weights[32];
  uint8_t scratch[32];
  float max_scale = 0, max_min = 0;  // the minimum is taken off, so the scales are positive
  for (int j = 0; j < kSuperBlock / 32; ++j) {
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
    const float rms = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = rms + std::fabs(x[32 * j + l]);
    scales[j] = fit_affine(32, nmax, x + 32 * j, weights, levels + 32 * j, &mins[j], scratch, rmin, 0.1f, nstep, false);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  for (int j = 0; j < kSuperBlock / 32; ++j) {
    // Narrowed to uint8_t before the clamp, as llama.cpp does.
    uint8_t ls = static_cast<uint8_t>(nearest_int(inv_scale * scales[j]));
    uint8_t lm = static_cast<uint8_t>(nearest_int(inv_min * mins[j]));
    if (ls > 63) ls = 63;
    if (lm > 63) lm = 63;
    if (j < 4) {
      packed[j] = ls;
      packed[j + 4] = lm;
    } else {
      packed[j + 4] = static_cast<uint8_t>((ls & 0xf) | ((lm & 0xf) << 4));
      packed[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
      packed[j] |= static_cast<uint8_t>((lm >> 4) << 6);
    }
  }
  *d = fp32_to_fp16(max_scale / 63.f);
  *dmin = fp32_to_fp16(max_min / 63.f);
  for (int j = 0; j < kSuperBlock / 32; ++j) {
    uint8_t sc, m;
    scale_min_k4(j, packed, &sc, &m);
    const float step = fp16_to_fp32(*d) * static_cast<float>(sc);
    if (step == 0) continue;  // keeps the fit's levels
    const float offset = fp16_to_fp32(*dmin) * static_cast<float>(m);
    for (int i = 0; i < 32; ++i) levels[32 * j + i] = static_cast<uint8_t>(clamp_int(nearest_int((x[32 * j + i] + offset) / step), 0, nmax));
  }
}

}  // namespace

void q3_k_scales(const uint8_t packed[kPackedScales], int8_t out[16]) {
  for (int j = 0; j < 16; ++j) out[j] = static_cast<int8_t>(q3_k_scale(packed, j) - 32);
}

namespace {

// Q2_K's and Q3_K's low two bits of 256 levels (0..3) into 64 bytes: byte l of each 32-byte half
// holds values l, l + 32, l + 64, l + 96 of its 128, low bits first.
void pack_two_bits(const uint8_t* levels, uint8_t* qs) {
  for (int j = 0; j < kSuperBlock; j += 128)
    for (int l = 0; l < 32; ++l)
      qs[j / 4 + l] = static_cast<uint8_t>(levels[j + l] | (levels[j + l + 32] << 2) | (levels[j + l + 64] << 4) |
                                           (levels[j + l + 96] << 6));
}

}  // namespace

void quantize_row_q2_k(const float* x, std::byte* row, int64_t n) {
  auto* out = reinterpret_cast<BlockQ2_K*>(row);
  constexpr float kLevels = 15.f;  // 4-bit scales and minimums
  uint8_t levels[kSuperBlock], scratch[16];
  float weights[16], scales[kSuperBlock / 16], mins[kSuperBlock / 16];
  for (int64_t b = 0; b < n / kSuperBlock; ++b, x += kSuperBlock) {
    BlockQ2_K& y = out[b];
    float max_scale = 0, max_min = 0;  // the minimum is taken off, so the scales are positive
    for (int j = 0; j < kSuperBlock / 16; ++j) {
      for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
      scales[j] = fit_affine(16, 3, x + 16 * j, weights, levels + 16 * j, &mins[j], scratch, -0.5f, 0.1f, 15, true);
      if (scales[j] > max_scale) max_scale = scales[j];
      if (mins[j] > max_min) max_min = mins[j];
    }
    if (max_scale > 0) {
      const float iscale = kLevels / max_scale;
      for (int j = 0; j < kSuperBlock / 16; ++j) y.scales[j] = static_cast<uint8_t>(nearest_int(iscale * scales[j]));
      y.d = fp32_to_fp16(max_scale / kLevels);
    } else {
      for (int j = 0; j < kSuperBlock / 16; ++j) y.scales[j] = 0;
      y.d = fp32_to_fp16(0.f);
    }
    if (max_min > 0) {
      const float iscale = kLevels / max_min;
      for (int j = 0; j < kSuperBlock / 16; ++j) y.scales[j] |= static_cast<uint8_t>(nearest_int(iscale * mins[j]) << 4);
      y.dmin = fp32_to_fp16(max_min / kLevels);
    } else {
      y.dmin = fp32_to_fp16(0.f);
    }
    // The levels again, against the scales and minimums as stored.
    for (int j = 0; j < kSuperBlock / 16; ++j) {
      const float step = fp16_to_fp32(y.d) * static_cast<float>(y.scales[j] & 0xf);
      if (step == 0) continue;
      const float offset = fp16_to_fp32(y.dmin) * static_cast<float>(y.scales[j] >> 4);
      for (int i = 0; i < 16; ++i) levels[16 * j + i] = static_cast<uint8_t>(clamp_int(nearest_int((x[16 * j + i] + offset) / step), 0, 3));
    }
    pack_two_bits(levels, y.qs);
  }
}

void quantize_row_q3_k(const float* x, std::byte* row, int64_t n) {
  auto* out = reinterpret_cast<BlockQ3_K*>(row);
  int8_t levels[kSuperBlock];
  float scales[kSuperBlock / 16];
  for (int64_t b = 0; b < n / kSuperBlock; ++b, x += kSuperBlock) {
    BlockQ3_K& y = out[b];
    for (int j = 0; j < kSuperBlock / 16; ++j) scales[j] = fit_q3(16, 4, x + 16 * j, levels + 16 * j, true);
    const float max_scale = signed_extreme(kSuperBlock / 16, scales);
    std::memset(y.scales, 0, kPackedScales);
    if (max_scale != 0) {
      const float iscale = -32.f / max_scale;
      for (int j = 0; j < kSuperBlock / 16; ++j) {
        // Narrowed to int8_t before the clamp, as llama.cpp does.
        int8_t l = static_cast<int8_t>(nearest_int(iscale * scales[j]));
        l = static_cast<int8_t>(clamp_int(l, -32, 31) + 32);
        if (j < 8) {
          y.scales[j] = static_cast<uint8_t>(l & 0xf);
        } else {
          y.scales[j - 8] |= static_cast<uint8_t>((l & 0xf) << 4);
        }
        l = static_cast<int8_t>(l >> 4);
        y.scales[j % 4 + 8] |= static_cast<uint8_t>(l << (2 * (j / 4)));
      }
      y.d = fp32_to_fp16(1 / iscale);
    } else {
      y.d = fp32_to_fp16(0.f);
    }
    // The levels again, against the scales as stored.
    for (int j = 0; j < kSuperBlock / 16; ++j) {
      const int8_t sc = static_cast<int8_t>(q3_k_scale(y.scales, j) - 32);
      const float step = fp16_to_fp32(y.d) * static_cast<float>(sc);
      if (step == 0) continue;
      for (int i = 0; i < 16; ++i) levels[16 * j + i] = static_cast<int8_t>(clamp_int(nearest_int(x[16 * j + i] / step), -4, 3) + 4);
    }
    // The third bit of value j goes to hmask[j % 32] bit j / 32; the low two bits pack as Q2_K's.
    std::memset(y.hmask, 0, kSuperBlock / 8);
    for (int j = 0; j < kSuperBlock; ++j) {
      if (levels[j] > 3) {
        y.hmask[j % 32] |= static_cast<uint8_t>(1 << (j / 32));
        levels[j] = static_cast<int8_t>(levels[j] - 4);
      }
    }
    pack_two_bits(reinterpret_cast<const uint8_t*>(levels), y.qs);
  }
}

void quantize_row_q4_k(const float* x, std::byte* row, int64_t n) {
  auto* out = reinterpret_cast<BlockQ4_K*>(row);
  uint8_t levels[kSuperBlock];
  for (int64_t b = 0; b < n / kSuperBlock; ++b, x += kSuperBlock) {
    BlockQ4_K& y = out[b];
    quantize_k4_levels(x, 15, -1.f, 20, levels, y.scales, &y.d, &y.dmin);
    // Each 32 bytes hold 64 values: the first 32 in the low nibbles, the next 32 in the high ones.
    for (int j = 0; j < kSuperBlock; j += 64) {
      for (int l = 0; l < 32; ++l) y.qs[j / 2 + l] = static_cast<uint8_t>(levels[j + l] | (levels[j + l + 32] << 4));
    }
  }
}

void quantize_row_q5_k(const float* x, std::byte* row, int64_t n) {
  auto* out = reinterpret_cast<BlockQ5_K*>(row);
  uint8_t levels[kSuperBlock];
  for (int64_t b = 0; b < n / kSuperBlock; ++b, x += kSuperBlock) {
    BlockQ5_K& y = out[b];
    quantize_k4_levels(x, 31, -0.5f, 15, levels, y.scales, &y.d, &y.dmin);
    // Low 4 bits as Q4_K's; the fifth bit of value 64 * g + l (l < 32) in qh[l] bit 2g, of value
    // 64 * g + 32 + l in bit 2g + 1.
    std::memset(y.qh, 0, kSuperBlock / 8);
    for (int g = 0; g < kSuperBlock / 64; ++g) {
      for (int l = 0; l < 32; ++l) {
        int low = levels[64 * g + l], high = levels[64 * g + l + 32];
        if (low > 15) low -= 16, y.qh[l] |= static_cast<uint8_t>(1 << (2 * g));
        if (high > 15) high -= 16, y.qh[l] |= static_cast<uint8_t>(2 << (2 * g));
        y.qs[32 * g + l] = static_cast<uint8_t>(low | (high << 4));
      }
    }
  }
}

void quantize_row_q6_k(const float* x, std::byte* row, int64_t n) {
  auto* out = reinterpret_cast<BlockQ6_K*>(row);
  int8_t levels[kSuperBlock];
  float scales[kSuperBlock / 16];
  for (int64_t b = 0; b < n / kSuperBlock; ++b, x += kSuperBlock) {
    BlockQ6_K& y = out[b];
    for (int j = 0; j < kSuperBlock / 16; ++j) scales[j] = fit_symmetric(16, 32, x + 16 * j, levels + 16 * j, 1, nullptr);
    const float max_scale = signed_extreme(kSuperBlock / 16, scales);
    if (std::fabs(max_scale) < kGroupMaxEps) {
      std::memset(&y, 0, sizeof y);
      y.d = fp32_to_fp16(0.f);
      continue;
    }
    const float iscale = -128.f / max_scale;
    y.d = fp32_to_fp16(1 / iscale);
    for (int j = 0; j < kSuperBlock / 16; ++j) y.scales[j] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[j])));
    // The levels again, against the scales as stored.
    for (int j = 0; j < kSuperBlock / 16; ++j) {
      const float step = fp16_to_fp32(y.d) * static_cast<float>(y.scales[j]);
      if (step == 0) continue;
      for (int i = 0; i < 16; ++i) levels[16 * j + i] = static_cast<int8_t>(clamp_int(nearest_int(x[16 * j + i] / step), -32, 31) + 32);
    }
    // Per 128 values: ql[l] holds values l (low) and l + 64 (high), ql[l + 32] values l + 32 and
    // l + 96; qh[l] their top two bits, value l + 32k at bits 2k.
    uint8_t* ql = y.ql;
    uint8_t* qh = y.qh;
    for (int j = 0; j < kSuperBlock; j += 128, ql += 64, qh += 32) {
      for (int l = 0; l < 32; ++l) {
        const int q0 = levels[j + l], q1 = levels[j + l + 32], q2 = levels[j + l + 64], q3 = levels[j + l + 96];
        ql[l] = static_cast<uint8_t>((q0 & 0xf) | ((q2 & 0xf) << 4));
        ql[l + 32] = static_cast<uint8_t>((q1 & 0xf) | ((q3 & 0xf) << 4));
        qh[l] = static_cast<uint8_t>((q0 >> 4) | ((q1 >> 4) << 2) | ((q2 >> 4) << 4) | ((q3 >> 4) << 6));
      }
    }
  }
}

void dequantize_row_q2_k(const std::byte* row, float* out, int64_t n) {
  const auto* blocks = reinterpret_cast<const BlockQ2_K*>(row);
  for (int64_t b = 0; b < n / kSuperBlock; ++b) {
    const float d = fp16_to_fp32(blocks[b].d), dmin = fp16_to_fp32(blocks[b].dmin);
    const uint8_t* q = blocks[b].qs;
    int sub = 0;
    for (int half = 0; half < kSuperBlock / 128; ++half, q += 32) {
      for (int shift = 0; shift < 8; shift += 2) {
        for (int part = 0; part < 2; ++part, ++sub) {  // 16 values from bytes 0..15, then 16..31
          const uint8_t sc = blocks[b].scales[sub];
          const float step = d * static_cast<float>(sc & 0xf), offset = dmin * static_cast<float>(sc >> 4);
          for (int l = 0; l < 16; ++l) *out++ = step * static_cast<float>((q[16 * part + l] >> shift) & 3) - offset;
        }
      }
    }
  }
}

void dequantize_row_q3_k(const std::byte* row, float* out, int64_t n) {
  const auto* blocks = reinterpret_cast<const BlockQ3_K*>(row);
  for (int64_t b = 0; b < n / kSuperBlock; ++b) {
    const float d = fp16_to_fp32(blocks[b].d);
    int8_t scales[16];
    q3_k_scales(blocks[b].scales, scales);
    const uint8_t* q = blocks[b].qs;
    const uint8_t* hmask = blocks[b].hmask;
    uint8_t bit = 1;
    int sub = 0;
    for (int half = 0; half < kSuperBlock / 128; ++half, q += 32) {
      for (int shift = 0; shift < 8; shift += 2, bit = static_cast<uint8_t>(bit << 1)) {
        for (int part = 0; part < 2; ++part, ++sub) {
          const float step = d * static_cast<float>(scales[sub]);
          for (int l = 0; l < 16; ++l) {
            const int i = 16 * part + l;
            const int level = ((q[i] >> shift) & 3) - ((hmask[i] & bit) ? 0 : 4);
            *out++ = step * static_cast<float>(level);
          }
        }
      }
    }
  }
}

void dequantize_row_q4_k(const std::byte* row, float* out, int64_t n) {
  const auto* blocks = reinterpret_cast<const BlockQ4_K*>(row);
  for (int64_t b = 0; b < n / kSuperBlock; ++b) {
    const float d = fp16_to_fp32(blocks[b].d), dmin = fp16_to_fp32(blocks[b].dmin);
    const uint8_t* q = blocks[b].qs;
    for (int j = 0; j < kSuperBlock / 64; ++j, q += 32) {
      uint8_t sc, m;
      scale_min_k4(2 * j, blocks[b].scales, &sc, &m);
      const float step1 = d * static_cast<float>(sc), offset1 = dmin * static_cast<float>(m);
      scale_min_k4(2 * j + 1, blocks[b].scales, &sc, &m);
      const float step2 = d * static_cast<float>(sc), offset2 = dmin * static_cast<float>(m);
      for (int l = 0; l < 32; ++l) *out++ = step1 * static_cast<float>(q[l] & 0xf) - offset1;
      for (int l = 0; l < 32; ++l) *out++ = step2 * static_cast<float>(q[l] >> 4) - offset2;
    }
  }
}

void dequantize_row_q5_k(const std::byte* row, float* out, int64_t n) {
  const auto* blocks = reinterpret_cast<const BlockQ5_K*>(row);
  for (int64_t b = 0; b < n / kSuperBlock; ++b) {
    const float d = fp16_to_fp32(blocks[b].d), dmin = fp16_to_fp32(blocks[b].dmin);
    const uint8_t* ql = blocks[b].qs;
    const uint8_t* qh = blocks[b].qh;
    for (int j = 0; j < kSuperBlock / 64; ++j, ql += 32) {
      uint8_t sc, m;
      scale_min_k4(2 * j, blocks[b].scales, &sc, &m);
      const float step1 = d * static_cast<float>(sc), offset1 = dmin * static_cast<float>(m);
      scale_min_k4(2 * j + 1, blocks[b].scales, &sc, &m);
      const float step2 = d * static_cast<float>(sc), offset2 = dmin * static_cast<float>(m);
      const int bit1 = 1 << (2 * j), bit2 = 2 << (2 * j);
      for (int l = 0; l < 32; ++l) *out++ = step1 * static_cast<float>((ql[l] & 0xf) + (qh[l] & bit1 ? 16 : 0)) - offset1;
      for (int l = 0; l < 32; ++l) *out++ = step2 * static_cast<float>((ql[l] >> 4) + (qh[l] & bit2 ? 16 : 0)) - offset2;
    }
  }
}

void dequantize_row_q6_k(const std::byte* row, float* out, int64_t n) {
  const auto* blocks = reinterpret_cast<const BlockQ6_K*>(row);
  for (int64_t b = 0; b < n / kSuperBlock; ++b) {
    const float d = fp16_to_fp32(blocks[b].d);
    const uint8_t* ql = blocks[b].ql;
    const uint8_t* qh = blocks[b].qh;
    const int8_t* sc = blocks[b].scales;
    for (int j = 0; j < kSuperBlock; j += 128, out += 128, ql += 64, qh += 32, sc += 8) {
      for (int l = 0; l < 32; ++l) {
        const int sub = l / 16;
        const int q0 = ((ql[l] & 0xf) | ((qh[l] & 3) << 4)) - 32;
        const int q1 = ((ql[l + 32] & 0xf) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q2 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q3 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        out[l] = d * static_cast<float>(sc[sub]) * static_cast<float>(q0);
        out[l + 32] = d * static_cast<float>(sc[sub + 2]) * static_cast<float>(q1);
        out[l + 64] = d * static_cast<float>(sc[sub + 4]) * static_cast<float>(q2);
        out[l + 96] = d * static_cast<float>(sc[sub + 6]) * static_cast<float>(q3);
      }
    }
  }
}

}  // namespace cpullm
