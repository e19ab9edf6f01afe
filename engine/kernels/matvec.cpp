#include "engine/kernels/matvec.hpp"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <vector>

#include "engine/kernels/dot.hpp"
#include "engine/kernels/parallel.hpp"
#include "engine/kernels/row_convert.hpp"
#include "engine/kernels/row_shares.hpp"
#include "engine/kernels/sparse.hpp"
#include "engine/kernels/weight_formats.hpp"
#include "engine/util/aligned_vector.hpp"
#include "engine/util/error.hpp"

namespace cpullm {
namespace {

// One input vector's quantized forms: buffers reused from call to call.
struct ActivationArena {
  std::vector<BlockQ8_0> quantized;
  std::vector<std::byte> bytes;
  QuantizedActivations view;
};

// x (cols) quantized to Q8_0 blocks and laid out as dot.hpp's QuantizedActivations says, in the
// calling thread's arena number `slot` (one per token of a call): done once per input vector,
// however many rows and matrices read it.
const QuantizedActivations& quantize_activations(const float* x, int64_t cols, int64_t slot = 0) {
  constexpr int64_t kPadding = 16;  // the Q4_0 kernels read 8 (AVX2) or 16 (AVX-512) blocks at a time
  const int64_t blocks = cols / kQuantBlock, padded = (blocks + kPadding - 1) / kPadding * kPadding;
  thread_local std::array<ActivationArena, kRowStreamTokens> arenas;  // fixed: views of earlier slots stay valid
  std::vector<BlockQ8_0>& quantized = arenas[slot].quantized;
  std::vector<std::byte>& arena = arenas[slot].bytes;
  QuantizedActivations& view = arenas[slot].view;
  quantized.resize(static_cast<std::size_t>(blocks));
  quantize_row_q8_0(x, quantized.data(), cols);  // vectorised: a libm roundf per value once took a quarter of a small matvec

  // The arrays, each starting on a 64-byte boundary of one per-thread arena: the kernels' 64-byte
  // loads then never straddle two cache lines.
  constexpr int64_t kLine = 64;
  const int64_t bytes_per_block[] = {kQuantBlock, kQuantBlock, kQuantBlock, 4, 4, 4, 4};
  int64_t total = kLine;
  for (int64_t bytes : bytes_per_block) total += (padded * bytes + kLine - 1) / kLine * kLine;
  arena.resize(static_cast<std::size_t>(total));
  std::byte* next = arena.data() + (kLine - reinterpret_cast<uintptr_t>(arena.data()) % kLine) % kLine;
  const auto carve = [&](int64_t bytes) {
    std::byte* start = next;
    next += (padded * bytes + kLine - 1) / kLine * kLine;
    return start;
  };
  auto* values = reinterpret_cast<int8_t*>(carve(kQuantBlock));
  auto* values_biased = reinterpret_cast<uint8_t*>(carve(kQuantBlock));
  auto* nibble_order = reinterpret_cast<int8_t*>(carve(kQuantBlock));
  auto* scales = reinterpret_cast<float*>(carve(4));
  auto* nibble_scales = reinterpret_cast<float*>(carve(4));
  auto* offsets = reinterpret_cast<int32_t*>(carve(4));
  auto* block_offsets = reinterpret_cast<int32_t*>(carve(4));
  const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1), bias = _mm256_set1_epi8(static_cast<char>(0x80));
  for (int64_t b = 0; b < padded; ++b) {
    const bool real = b < blocks;  // the padding blocks are zeros with zero scales
    const __m256i q = real ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(quantized[b].q)) : _mm256_setzero_si256();
    const float scale = real ? fp16_to_fp32(quantized[b].scale) : 0.0f;
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(&values[b * kQuantBlock]), q);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(&values_biased[b * kQuantBlock]), _mm256_xor_si256(q, bias));
    int8_t* first_half = &nibble_order[nibble_order_first_half(b)];
    _mm_storeu_si128(reinterpret_cast<__m128i*>(first_half), _mm256_castsi256_si128(q));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(first_half + 2 * kQuantBlock), _mm256_extracti128_si256(q, 1));
    const __m256i quads = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, q), ones16);  // 8 sums of 4 values
    __m128i sum = _mm_add_epi32(_mm256_castsi256_si128(quads), _mm256_extracti128_si256(quads, 1));
    sum = _mm_hadd_epi32(sum, sum);
    const int64_t place = reduction_order_index(b);
    offsets[place] = block_offsets[b] = -8 * _mm_cvtsi128_si32(_mm_hadd_epi32(sum, sum));
    scales[b] = nibble_scales[place] = scale;
  }
  view = {values, values_biased, nibble_order, scales, nibble_scales, offsets, block_offsets};
  return view;
}

// Several tokens' FP32 activations copied into the calling thread's arena, token k's row starting
// k * 512 bytes into a 4 KiB page: rows a multiple of 4 KiB apart (a 2048-wide model's, as the
// engine lays them out) made a 4-token F16 step 25-35% slower, as the rows' lines then collide in
// the core's L1 (bench_kernels' matvec_decode; 256-byte offsets were not enough; docs/kernels.md).
// Returns the first row; the rest follow `stride` floats apart.
const float* stage_float_activations(const float* x, int64_t x_stride, int64_t tokens, int64_t cols, int64_t& stride) {
  constexpr int64_t kPage = 4096 / sizeof(float), kStagger = 512 / sizeof(float);
  thread_local AlignedVector<float> staged;
  stride = (cols + kPage - 1) / kPage * kPage + kStagger;
  staged.resize(static_cast<std::size_t>(tokens * stride));
  for (int64_t k = 0; k < tokens; ++k) std::copy_n(x + k * x_stride, cols, staged.data() + k * stride);
  return staged.data();
}

// The activations in the form the weight type's kernel reads: x itself, or x quantized.
const void* prepare_activations(const WeightMatrix& w, const float* x) {
  return uses_q8_0_activations(w.type) ? static_cast<const void*>(&quantize_activations(x, w.cols)) : x;
}

// One matrix of a group, ready to run: its kernel, the activations each token reads, its rows.
// A unit is what one kernel call takes: a row, or a group of rows stored interleaved.
struct PreparedTask {
  float* y;                 // (tokens, y_stride)
  int64_t y_stride;         // floats from one token's outputs to the next's
  const std::byte* w;       // (units, stride)
  int64_t stride;           // bytes per unit
  int64_t units;
  int64_t group;            // rows per unit
  RowDot dot;
  std::array<const void*, kRowStreamTokens> activations;  // (tokens) x or its quantized form
};

// What a thread takes at a time: 64 KiB of weights, ~2.5 µs of a decode thread's streaming, so
// claims cost well under 1% and a thread waits at most that long for the last chunk.
constexpr int64_t kStealChunkBytes = 64 * 1024;

}  // namespace

bool uses_q8_0_activations(GgmlType type) {
  const WeightFormat* format = find_weight_format(type);
  return format && format->activations == Activations::q8_0;
}

bool matvec_supports(GgmlType type, int64_t cols) {
  if (!row_convertible(type)) return false;
  const int64_t block = ggml_type_traits(static_cast<uint32_t>(type))->block_elements;
  // Q8_0 activations come in blocks of 32, which the K-quants' 256 hold whole.
  return cols % (uses_q8_0_activations(type) ? std::max<int64_t>(kQuantBlock, block) : block) == 0;
}

int64_t row_bytes(const WeightMatrix& w) { return row_bytes(w.type, w.cols); }

int64_t rows_per_kernel_call(const WeightMatrix& w) {
  const int64_t group = ggml_type_traits(static_cast<uint32_t>(w.type))->row_group;
  if (w.rows % group != 0)
    fail("a {} matrix stores its rows in groups of {}, and {} rows are not whole groups", ggml_type_name(w.type), group,
         w.rows);
  return group;
}

void matvec(float* y, const WeightMatrix& w, const float* x, Isa isa) {
  if (is_sparse(w.type)) return sparse_matvec(y, w, x, isa);
  const MatvecTask task{y, &w};
  matvec_group({&task, 1}, x, isa);
}

void matvec_group(std::span<const MatvecTask> tasks, const float* x, Isa isa) {
  if (!tasks.empty()) matvec_group(tasks, x, tasks[0].w->cols, 1, isa);
}

void matvec_group(std::span<const MatvecTask> tasks, const float* x, int64_t x_stride, int64_t tokens, Isa isa) {
  if (tasks.empty() || tokens <= 0) return;
  if (tokens > kRowStreamTokens) {  // passes of kRowStreamTokens tokens, each reading every row again
    thread_local std::vector<MatvecTask> pass;  // kept from call to call: no allocation per decode step
    pass.assign(tasks.begin(), tasks.end());
    for (int64_t t0 = 0; t0 < tokens; t0 += kRowStreamTokens) {
      for (std::size_t i = 0; i < pass.size(); ++i) pass[i].y = tasks[i].y + t0 * tasks[i].y_stride;
      matvec_group(pass, x + t0 * x_stride, x_stride, std::min(kRowStreamTokens, tokens - t0), isa);
    }
    return;
  }
  const int64_t cols = tasks[0].w->cols;
  thread_local std::vector<PreparedTask> prepared;
  prepared.clear();
  std::array<const void*, kRowStreamTokens> quantized{};  // each token's x quantized once for all the integer matrices
  const float* staged = nullptr;                          // for the float matrices: x itself for one token, else staged
  int64_t staged_stride = x_stride;
  int64_t total_units = 0;
  for (const MatvecTask& task : tasks) {
    const WeightMatrix& w = *task.w;
    if (w.cols != cols) fail("matvec_group: matrices of {} and {} columns cannot share one input", cols, w.cols);
    if (is_sparse(w.type)) {  // sparse matrices run their own kernels, outside the group
      if (tokens == 1) matvec(task.y, w, x, isa);
      else sparse_matmul(task.y, task.y_stride, w, x, x_stride, tokens, isa);
      continue;
    }
    const int64_t group = rows_per_kernel_call(w);
    const WeightFormat& format = weight_format(w.type);
    PreparedTask& t = prepared.emplace_back(PreparedTask{task.y, task.y_stride, w.data, row_bytes(w) * group,
                                                         w.rows / group, group, format.dot_for(isa), {}});
    for (int64_t k = 0; k < tokens; ++k) {
      if (format.activations == Activations::f32) {
        if (!staged) staged = tokens == 1 ? x : stage_float_activations(x, x_stride, tokens, cols, staged_stride);
        t.activations[k] = staged + k * staged_stride;
        continue;
      }
      if (!quantized[k]) quantized[k] = &quantize_activations(x + k * x_stride, cols, k);
      t.activations[k] = quantized[k];
    }
    total_units += t.units;
  }

  // The units (rows, or interleaved groups of rows) of all the matrices, end to end, in one
  // fork/join, each output one thread's sequential dot product whatever the thread count. Each
  // thread streams its equal share from the front; one that finishes early takes chunks from the
  // back of the others' (RowShares). A row comes from memory once and is widened or unpacked once
  // per kRowDotTokens tokens.
  if (total_units == 0) return;
  const std::span<const PreparedTask> work(prepared);  // this thread's list, copied into every thread's closure
  const auto run_units = [work, tokens, cols](int64_t begin, int64_t end) {
    int64_t first = 0;  // the task's first unit in the concatenation
    for (const PreparedTask& t : work) {
      const int64_t lo = std::max(begin, first) - first, hi = std::min(end, first + t.units) - first;
      first += t.units;
      if (tokens == 1) {  // decode's common case: straight into y
        for (int64_t u = lo; u < hi; ++u) t.dot(t.w + u * t.stride, t.activations.data(), 1, cols, &t.y[u * t.group]);
        continue;
      }
      for (int64_t u = lo; u < hi; ++u) {
        const std::byte* unit = t.w + u * t.stride;
        for (int64_t k0 = 0; k0 < tokens; k0 += kRowDotTokens) {
          const int n = static_cast<int>(std::min<int64_t>(kRowDotTokens, tokens - k0));
          float out[kRowDotTokens * kInterleavedRows];  // (n, t.group)
          t.dot(unit, &t.activations[k0], n, cols, out);
          for (int k = 0; k < n; ++k)
            std::copy_n(out + k * t.group, t.group, &t.y[(k0 + k) * t.y_stride + u * t.group]);
        }
      }
    }
  };
  int64_t total_bytes = 0;
  for (const PreparedTask& t : work) total_bytes += t.units * t.stride;
  RowShares shares(total_units, parallel_threads(), kStealChunkBytes * total_units / total_bytes);
  // By value: each thread reads the shares' handle and the closure from its own stack (on_every_thread).
  on_every_thread([shares, run_units](int thread, int) mutable {
    for (int64_t begin, end; shares.next(thread, begin, end);) run_units(begin, end);
  });
}

void matvec_reference(float* y, const WeightMatrix& w, const float* x) {
  if (is_sparse(w.type)) return sparse_matvec(y, w, x, Isa::Scalar);
  const RowDot dot = weight_format(w.type).dot.scalar;
  const void* activations = prepare_activations(w, x);
  const int64_t group = rows_per_kernel_call(w), stride = row_bytes(w) * group;
  for (int64_t r = 0; r < w.rows; r += group) dot(w.data + r / group * stride, &activations, 1, w.cols, &y[r]);
}

void weight_row_to_float(float* out, const WeightMatrix& w, int64_t row) {
  decode_matrix_row(w.type, w.data, row, out, w.cols);
}

}  // namespace cpullm
