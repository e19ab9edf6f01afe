// The per-ISA kernel tables (GemmKernels' micro-kernels, SparseKernels) share one shape: a table
// per ISA level. This picks the table. (The row kernels of each weight format are in the format
// registry, weight_formats.hpp.)
#pragma once
#include "engine/kernels/isa.hpp"
#include "engine/util/error.hpp"

namespace cpullm {

// The table of `isa`; a level this CPU cannot run is an Error, never a crash on an illegal
// instruction.
template <typename Table>
const Table& table_for_isa(Isa isa, const Table& (*scalar)(), const Table& (*avx2)(), const Table& (*avx512)()) {
  if (!cpu_supports(isa)) fail("this CPU cannot run the {} kernels", isa_name(isa));
  switch (isa) {
    case Isa::Scalar: return scalar();
    case Isa::Avx2: return avx2();
    case Isa::Avx512: return avx512();
  }
  fail("unknown ISA");
}

}  // namespace cpullm
