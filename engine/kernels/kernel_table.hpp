// The kernel tables (DotKernels for matvec, GemmKernels for matmul) share one shape: a table per
// ISA level, an entry per weight type. These pick the table and the entry for both.
#pragma once
#include "engine/format/ggml_types.hpp"
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

// The table's entry for a weight type, or an Error naming a type no kernel runs.
template <typename Table>
auto entry_for_type(const Table& table, GgmlType type) {
  switch (type) {
    case GgmlType::F32: return table.f32;
    case GgmlType::F16: return table.f16;
    case GgmlType::BF16: return table.bf16;
    case GgmlType::Q8_0: return table.q8_0;
    case GgmlType::Q4_0: return table.q4_0;
    case GgmlType::CPULLM_INT8_CHANNEL: return table.int8_channel;
    case GgmlType::CPULLM_Q4_0_R8: return table.q4_0_r8;
    case GgmlType::CPULLM_Q8_0_R8: return table.q8_0_r8;
    default: fail("no kernel for weight type {}", ggml_type_name(type));
  }
}

}  // namespace cpullm
