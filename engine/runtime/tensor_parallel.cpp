#include "engine/runtime/tensor_parallel.hpp"

#include <limits>

#include "engine/util/error.hpp"

#if CPULLM_HAVE_MPI
#define OMPI_SKIP_MPICXX 1  // MPI's C API only: the C++ bindings are deprecated and need libmpi_cxx
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace cpullm {

#if CPULLM_HAVE_MPI

TensorParallel::TensorParallel() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) fail("MPI is already initialised: one TensorParallel per process");
  // Only the main thread calls MPI, between parallel regions.
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
}

TensorParallel::~TensorParallel() { MPI_Finalize(); }

void TensorParallel::all_gather_rows(float* y, int64_t y_stride, int64_t rows, int64_t tokens, int64_t group) const {
  if (size_ == 1) return;
  constexpr int64_t kIntMax = std::numeric_limits<int>::max();
  if (rows > kIntMax || tokens > kIntMax || y_stride > kIntMax)
    fail("all_gather_rows: {} rows x {} tokens (stride {}) exceed MPI's int counts", rows, tokens, y_stride);
  // One column of y: `tokens` floats y_stride apart, resized to the extent of one float, so n of
  // them are n consecutive columns and a rank's share is its row count of them at its first row.
  // Every rank's columns go in place, with no packing.
  MPI_Datatype column, column_per_float;
  MPI_Type_vector(static_cast<int>(tokens), 1, static_cast<int>(y_stride), MPI_FLOAT, &column);
  MPI_Type_create_resized(column, 0, sizeof(float), &column_per_float);
  MPI_Type_commit(&column_per_float);
  std::vector<int> counts(static_cast<std::size_t>(size_)), firsts(static_cast<std::size_t>(size_));
  for (int r = 0; r < size_; ++r) {
    const RowSpan span = equal_share(rows, r, size_, group);
    counts[static_cast<std::size_t>(r)] = static_cast<int>(span.end - span.begin);
    firsts[static_cast<std::size_t>(r)] = static_cast<int>(span.begin);
  }
  MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, y, counts.data(), firsts.data(), column_per_float, MPI_COMM_WORLD);
  MPI_Type_free(&column_per_float);
  MPI_Type_free(&column);
}

std::vector<double> TensorParallel::all_gather_value(double value) const {
  std::vector<double> values(static_cast<std::size_t>(size_));
  MPI_Allgather(&value, 1, MPI_DOUBLE, values.data(), 1, MPI_DOUBLE, MPI_COMM_WORLD);
  return values;
}

#else

TensorParallel::TensorParallel() {
  fail("--numa mpi: this cpullm was built without MPI (install libopenmpi-dev openmpi-bin and reconfigure with -DCPULLM_MPI=ON)");
}
TensorParallel::~TensorParallel() = default;
void TensorParallel::all_gather_rows(float*, int64_t, int64_t, int64_t, int64_t) const {}
std::vector<double> TensorParallel::all_gather_value(double value) const { return {value}; }

#endif

}  // namespace cpullm
