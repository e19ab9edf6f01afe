#include "engine/kernels/matvec.hpp"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <vector>

#include "engine/kernels/dot.hpp"
#include "engine/kernels/kernel_table.hpp"
#include "engine/kernels/row_convert.hpp"
#include "engine/kernels/sparse.hpp"
#include "engine/util/error.hpp"

namespace cpullm {
namespace {

const DotKernels& kernels_for(Isa isa) {
  return table_for_isa(isa, scalar_dot_kernels, avx2_dot_kernels, avx512_dot_kernels);
}

// Q4_0's zero-point offsets of one quantized block: 8 times the sums of its values four by four.
void zero_point_offsets(const BlockQ8_0& block, int32_t* offsets) {
  const __m256i values = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block.q));
  const __m256i pairs = _mm256_maddubs_epi16(_mm256_set1_epi8(1), values);
  const __m256i quads = _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(offsets), _mm256_slli_epi32(quads, 3));
}

// x (cols) quantized to Q8_0 blocks, with each block's FP32 scale and zero-point offsets, in a
// per-thread buffer reused from call to call: done once per input vector, however many rows and
// matrices read it.
const QuantizedActivations& quantize_activations(const float* x, int64_t cols) {
  thread_local std::vector<BlockQ8_0> blocks;
  thread_local std::vector<float> scales;
  thread_local std::vector<int32_t> offsets;
  thread_local QuantizedActivations view;
  const auto n = static_cast<std::size_t>(cols / kQuantBlock);
  constexpr std::size_t kQuads = kQuantBlock / 4;
  blocks.resize(n), scales.resize(n), offsets.resize((n + 1) * kQuads);
  quantize_row_q8_0(x, blocks.data(), cols);  // vectorised: a libm roundf per value once took a quarter of a small matvec
  for (std::size_t b = 0; b < n; ++b) {
    scales[b] = fp16_to_fp32(blocks[b].scale);
    zero_point_offsets(blocks[b], &offsets[b * kQuads]);
  }
  std::fill(offsets.end() - kQuads, offsets.end(), 0);  // one block's worth of zeros past the end
  view = {blocks.data(), scales.data(), offsets.data()};
  return view;
}

// The activations in the form the weight type's kernel reads: x itself, or x quantized.
const void* prepare_activations(const WeightMatrix& w, const float* x) {
  return uses_q8_0_activations(w.type) ? static_cast<const void*>(&quantize_activations(x, w.cols)) : x;
}

// One matrix of a group, ready to run: its kernel, the activations it reads, its rows.
struct PreparedTask {
  float* y;                 // (rows)
  const std::byte* w;       // (rows, stride)
  int64_t stride;           // bytes per row
  int64_t rows;
  RowDot dot;
  const void* activations;  // x or its quantized form
};

}  // namespace

bool uses_q8_0_activations(GgmlType type) {
  return type == GgmlType::Q8_0 || type == GgmlType::Q4_0 || type == GgmlType::CPULLM_INT8_CHANNEL;
}

bool matvec_supports(GgmlType type, int64_t cols) {
  return row_convertible(type) && (!uses_q8_0_activations(type) || cols % kQuantBlock == 0);
}

int64_t row_bytes(const WeightMatrix& w) { return row_bytes(w.type, w.cols); }

void matvec(float* y, const WeightMatrix& w, const float* x) { matvec(y, w, x, active_isa()); }

void matvec(float* y, const WeightMatrix& w, const float* x, Isa isa) {
  if (is_sparse(w.type)) return sparse_matvec(y, w, x, isa);
  const MatvecTask task{y, &w};
  matvec_group({&task, 1}, x, isa);
}

void matvec_group(std::span<const MatvecTask> tasks, const float* x) { matvec_group(tasks, x, active_isa()); }

void matvec_group(std::span<const MatvecTask> tasks, const float* x, Isa isa) {
  if (tasks.empty()) return;
  const int64_t cols = tasks[0].w->cols;
  thread_local std::vector<PreparedTask> prepared;
  prepared.clear();
  const QuantizedActivations* quantized = nullptr;  // x quantized once for all the integer matrices
  int64_t total_rows = 0;
  for (const MatvecTask& task : tasks) {
    const WeightMatrix& w = *task.w;
    if (w.cols != cols) fail("matvec_group: matrices of {} and {} columns cannot share one input", cols, w.cols);
    if (is_sparse(w.type)) {  // sparse matrices run their own kernels, outside the group
      matvec(task.y, w, x, isa);
      continue;
    }
    const RowDot dot = entry_for_type(kernels_for(isa), w.type);
    const void* activations = x;
    if (uses_q8_0_activations(w.type)) {
      if (!quantized) quantized = &quantize_activations(x, cols);
      activations = quantized;
    }
    prepared.push_back({task.y, w.data, row_bytes(w), w.rows, dot, activations});
    total_rows += w.rows;
  }

  // The rows of all the matrices, end to end, in one static split: one fork/join for the group,
  // and each output is one thread's sequential dot product, whatever the thread count. (Chunks
  // of 128 KiB handed out dynamically, for threads the OS deschedules on a shared host, were
  // slower in 13 of 20 cases of bench_kernels' matvec and matvec_group, by up to 47%.)
  if (total_rows == 0) return;
  const std::vector<PreparedTask>& work = prepared;  // this thread's list, named for the workers
#pragma omp parallel
  {
    const int64_t threads = omp_get_num_threads(), id = omp_get_thread_num();
    const int64_t begin = total_rows * id / threads, end = total_rows * (id + 1) / threads;
    int64_t first = 0;  // the task's first row in the concatenation
    for (const PreparedTask& t : work) {
      const int64_t lo = std::max(begin, first) - first, hi = std::min(end, first + t.rows) - first;
      for (int64_t r = lo; r < hi; ++r) t.y[r] = t.dot(t.w + r * t.stride, t.activations, cols);
      first += t.rows;
    }
  }
}

void matvec_reference(float* y, const WeightMatrix& w, const float* x) {
  if (is_sparse(w.type)) return sparse_matvec(y, w, x, Isa::Scalar);
  const RowDot dot = entry_for_type(scalar_dot_kernels(), w.type);
  const void* activations = prepare_activations(w, x);
  const int64_t stride = row_bytes(w);
  for (int64_t r = 0; r < w.rows; ++r) y[r] = dot(w.data + r * stride, activations, w.cols);
}

void weight_row_to_float(float* out, const WeightMatrix& w, int64_t row) {
  decode_row(w.type, w.data + row * row_bytes(w), out, w.cols);
}

}  // namespace cpullm
