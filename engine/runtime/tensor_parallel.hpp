// --numa mpi: tensor parallelism over MPI ranks, one rank per NUMA node (or per host). Every
// projection's output rows are split over the ranks: each rank computes its rows with the
// ordinary kernels on a row slice of the weight matrix (so it reads, and has resident, only its
// share of every matrix's pages), then an allgather gives every rank the whole output. Everything
// between projections (norms, RoPE, attention, sampling) runs redundantly on every rank on equal
// data, so every rank samples the same tokens. docs/topology.md compares this with
// xFasterTransformer's split (heads and FFN columns, two allreduces per layer).
#pragma once
#include <cstdint>
#include <vector>

#include "engine/runtime/row_split.hpp"

namespace cpullm {

class TensorParallel {
 public:
  // MPI_Init (only the main thread calls MPI; in a forward pass the other threads of its team
  // spin, then yield, while it waits in a collective; parallel.hpp). Run without mpirun it is
  // one rank. At most one per process; Error in a build without MPI.
  TensorParallel();
  ~TensorParallel();  // MPI_Finalize
  TensorParallel(const TensorParallel&) = delete;
  TensorParallel& operator=(const TensorParallel&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // This rank's share of a matrix's `rows`: consecutive, in rank order, in whole groups of
  // `group` rows (row_group), sizes differing by at most one group.
  RowSpan rows(int64_t rows, int64_t group = 1) const { return equal_share(rows, rank_, size_, group); }
  // y is (tokens, y_stride), of which this rank has filled columns rows(rows, group) for every
  // token; afterwards every rank holds all `rows` columns of every token.
  void all_gather_rows(float* y, int64_t y_stride, int64_t rows, int64_t tokens, int64_t group = 1) const;
  // Every rank's `value`, in rank order, on every rank (e.g. resident memory, for rank 0 to print).
  std::vector<double> all_gather_value(double value) const;

 private:
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace cpullm
