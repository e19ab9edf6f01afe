// Decode attention's row kernels, written once over a float vector that each SIMD level supplies
// (`Ops`: __m256 for AVX2, __m512 for AVX-512). Included by attention_rows_avx2.cpp and, after
// its target pragma, by attention_rows_avx512.cpp: everything here is a template over Ops, whose
// types are local to those files, so each level's instantiations stay in its own file and no
// AVX-512 code can reach baseline callers. Nothing from the standard library is used.
//   Ops::kLanes, Ops::Vec            floats per vector, the vector
//   Ops::kLongestRun                 the most vectors of columns `accumulate` sums in one pass
//                                    (twice as many accumulators must fit the registers)
//   zero, add, mul, fma, broadcast(float), load(const float*), store(float*, Vec)
//   values<V>(const std::byte*)      kLanes cache values of type V widened (Q8_0's before scale)
//   eight_sums(const Vec acc[8], float out[8]): out[r] = the sum of acc[r]'s lanes
#pragma once
#include "engine/kernels/attention_rows.hpp"

namespace cpullm {

template <typename Ops>
struct SimdAttentionRows {
  using Vec = typename Ops::Vec;
  static constexpr int64_t kLanes = Ops::kLanes;
  static constexpr int kVectorsPerBlock = static_cast<int>(kQuantBlock / kLanes);  // Q8_0's scale spans these

  template <GgmlType V>
  struct Rows {
    // Columns c0 .. c0 + kLanes kRun - 1 of kHeads heads' outputs += sum over k < n of each head's
    // coefficients[k] * row k's values there, each row's vectors widened once for the kHeads heads.
    // A single head sums even and odd k apart, so that no FMA chain waits on the previous one's
    // latency; several heads' chains are independent already. A Q8_0 row's block scale joins a
    // single head's coefficient, once a block (a run of several vectors starts a block; a single
    // vector lies within one); for several heads it multiplies the widened values instead, once
    // for all of them.
    template <int kRun, int kHeads>
    static void columns(float* out, int64_t out_stride, const float* coefficients, int64_t coefficients_stride,
                        const std::byte* rows, int64_t stride, int64_t n, int64_t c0) {
      constexpr int kChains = kHeads == 1 ? 2 : 1;
      Vec acc[kChains][kHeads][kRun];
      for (int h = 0; h < kHeads; ++h)
        for (int v = 0; v < kRun; ++v) {
          acc[0][h][v] = Ops::load(out + h * out_stride + c0 + v * kLanes);
          for (int chain = 1; chain < kChains; ++chain) acc[chain][h][v] = Ops::zero();
        }
      const auto add_row = [&](Vec (&sums)[kHeads][kRun], int64_t k) {
        const std::byte* row = rows + k * stride;
        Vec w[kRun];
        for (int v = 0; v < kRun; ++v) w[v] = Ops::template values<V>(row + column_offset<V>(c0 + v * kLanes));
        if constexpr (kBlockScaled<V> && kHeads == 1) {
          Vec coefficient = Ops::zero();
          for (int v = 0; v < kRun; ++v) {
            if (v % kVectorsPerBlock == 0) coefficient = Ops::broadcast(coefficients[k] * q8_0_scale(row, c0 + v * kLanes));
            sums[0][v] = Ops::fma(coefficient, w[v], sums[0][v]);
          }
          return;
        }
        if constexpr (kBlockScaled<V>) {
          Vec scale = Ops::zero();
          for (int v = 0; v < kRun; ++v) {
            if (v % kVectorsPerBlock == 0) scale = Ops::broadcast(q8_0_scale(row, c0 + v * kLanes));
            w[v] = Ops::mul(w[v], scale);
          }
        }
        for (int h = 0; h < kHeads; ++h) {
          const Vec coefficient = Ops::broadcast(coefficients[h * coefficients_stride + k]);
          for (int v = 0; v < kRun; ++v) sums[h][v] = Ops::fma(coefficient, w[v], sums[h][v]);
        }
      };
      int64_t k = 0;
      for (; k + kChains <= n; k += kChains)
        for (int chain = 0; chain < kChains; ++chain) add_row(acc[chain], k + chain);
      for (; k < n; ++k) add_row(acc[0], k);
      for (int h = 0; h < kHeads; ++h)
        for (int v = 0; v < kRun; ++v) {
          Vec sum = acc[0][h][v];
          for (int chain = 1; chain < kChains; ++chain) sum = Ops::add(sum, acc[chain][h][v]);
          Ops::store(out + h * out_stride + c0 + v * kLanes, sum);
        }
    }

    // A run of kRun vectors of columns for every head, as many heads at a time as leave their
    // accumulators and the widened run in registers (at most 4: twice kLongestRun accumulators).
    template <int kRun>
    static void columns_of_heads(float* out, int64_t out_stride, const float* coefficients,
                                 int64_t coefficients_stride, int64_t heads, const std::byte* rows, int64_t stride,
                                 int64_t n, int64_t c0) {
      constexpr int kMost = 2 * Ops::kLongestRun / kRun;
      int64_t h = 0;
      const auto pass = [&]<int kHeads>() {
        columns<kRun, kHeads>(out + h * out_stride, out_stride, coefficients + h * coefficients_stride,
                              coefficients_stride, rows, stride, n, c0);
        h += kHeads;
      };
      if constexpr (kMost >= 4)
        while (h + 4 <= heads) pass.template operator()<4>();
      if constexpr (kMost >= 2)
        while (h + 2 <= heads) pass.template operator()<2>();
      while (h < heads) pass.template operator()<1>();
    }

    // Columns in runs of kLongestRun vectors (AVX-512: a head of 128 in one pass over the rows),
    // then 4, then single vectors, then one at a time.
    static void accumulate(float* out, int64_t out_stride, const float* coefficients, int64_t coefficients_stride,
                           int64_t heads, const std::byte* rows, int64_t stride, int64_t n, int64_t head_dim) {
      constexpr int kLongest = Ops::kLongestRun;
      int64_t c = 0;
      for (; c + kLongest * kLanes <= head_dim; c += kLongest * kLanes)
        columns_of_heads<kLongest>(out, out_stride, coefficients, coefficients_stride, heads, rows, stride, n, c);
      for (; c + 4 * kLanes <= head_dim; c += 4 * kLanes)
        columns_of_heads<4>(out, out_stride, coefficients, coefficients_stride, heads, rows, stride, n, c);
      for (; c + kLanes <= head_dim; c += kLanes)
        columns_of_heads<1>(out, out_stride, coefficients, coefficients_stride, heads, rows, stride, n, c);
      for (; c < head_dim; ++c)
        for (int64_t h = 0; h < heads; ++h)
          for (int64_t k = 0; k < n; ++k)
            out[h * out_stride + c] += coefficients[h * coefficients_stride + k] * value_at<V>(rows + k * stride, c);
    }

    // kHeads heads against 8 / kHeads rows at a time: eight accumulators, one a (row, head), reduced
    // together (eight_sums), each row's vectors widened once for the kHeads heads. One dot
    // product at a time spent more instructions on reducing its accumulator to a float than on
    // its products (head_dim 64 at AVX2: 8 FMAs, then about 11 reduction steps). A last group of
    // fewer rows reads row n - 1 again in the missing places and drops those scores. Q8_0 steps a
    // block at a time: a single head sums the block's products, then adds them times the block's
    // scale; several heads multiply the widened values by it, once for all of them.
    template <int kHeads>
    static void score_pass(float* scores, int64_t scores_stride, const float* q, const std::byte* rows, int64_t stride,
                           int64_t n, int64_t head_dim, float scale) {
      constexpr int kRows = 8 / kHeads;
      constexpr int kStepVectors = kBlockScaled<V> ? kVectorsPerBlock : 1;  // vectors sharing a scale
      constexpr int64_t kStep = kStepVectors * kLanes;
      const int64_t vector_columns = head_dim / kStep * kStep;
      for (int64_t j = 0; j < n; j += kRows) {
        const std::byte* row[kRows];
        for (int r = 0; r < kRows; ++r) row[r] = rows + (j + r < n ? j + r : n - 1) * stride;
        Vec acc[8];
        for (Vec& a : acc) a = Ops::zero();
        for (int64_t c = 0; c < vector_columns; c += kStep)
          for (int r = 0; r < kRows; ++r) {
            Vec w[kStepVectors];
            for (int v = 0; v < kStepVectors; ++v) w[v] = Ops::template values<V>(row[r] + column_offset<V>(c + v * kLanes));
            if constexpr (kBlockScaled<V>) {
              const Vec scale = Ops::broadcast(q8_0_scale(row[r], c));
              if constexpr (kHeads == 1) {
                Vec block = Ops::mul(Ops::load(q + c), w[0]);
                for (int v = 1; v < kStepVectors; ++v) block = Ops::fma(Ops::load(q + c + v * kLanes), w[v], block);
                acc[r] = Ops::fma(block, scale, acc[r]);
                continue;
              }
              for (Vec& x : w) x = Ops::mul(x, scale);
            }
            for (int h = 0; h < kHeads; ++h)
              for (int v = 0; v < kStepVectors; ++v)
                acc[r * kHeads + h] = Ops::fma(Ops::load(q + h * head_dim + c + v * kLanes), w[v], acc[r * kHeads + h]);
          }
        alignas(32) float eight[8];
        Ops::eight_sums(acc, eight);
        if (vector_columns < head_dim)
          for (int r = 0; r < kRows; ++r)
            for (int h = 0; h < kHeads; ++h)
              for (int64_t c = vector_columns; c < head_dim; ++c)
                eight[r * kHeads + h] += q[h * head_dim + c] * value_at<V>(row[r], c);
        // Loops of known length (a last group of fewer rows stops early), so that the stores unroll.
        const int64_t rows_here = n - j;
        for (int r = 0; r < kRows; ++r) {
          if (r == rows_here) break;
          for (int h = 0; h < kHeads; ++h) scores[h * scores_stride + j + r] = eight[r * kHeads + h] * scale;
        }
      }
    }

    // Heads 8 at a time, then 4, 2 and 1.
    static void score(float* scores, int64_t scores_stride, const float* q, int64_t heads, const std::byte* rows,
                      int64_t stride, int64_t n, int64_t head_dim, float scale) {
      int64_t h = 0;
      const auto pass = [&]<int kHeads>() {
        score_pass<kHeads>(scores + h * scores_stride, scores_stride, q + h * head_dim, rows, stride, n, head_dim, scale);
        h += kHeads;
      };
      while (h + 8 <= heads) pass.template operator()<8>();
      if (h + 4 <= heads) pass.template operator()<4>();
      if (h + 2 <= heads) pass.template operator()<2>();
      if (h < heads) pass.template operator()<1>();
    }
  };
};

}  // namespace cpullm
