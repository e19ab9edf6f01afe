#include "engine/kernels/isa.hpp"

#include <cpuid.h>

#include <cstdlib>

#include "engine/util/error.hpp"

namespace cpullm {
namespace {

// F16C from CPUID leaf 1 (ECX bit 29): clang before 15 does not know "f16c" in __builtin_cpu_supports.
bool has_f16c() {
  unsigned eax, ebx, ecx, edx;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C);
}

}  // namespace

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return "scalar";
    case Isa::Avx2: return "avx2";
    case Isa::Avx512: return "avx512";
  }
  return "?";
}

Isa parse_isa(std::string_view name) {
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512})
    if (name == isa_name(isa)) return isa;
  fail("unknown ISA '{}' (scalar, avx2 or avx512)", name);
}

bool cpu_supports(Isa isa) {
  __builtin_cpu_init();
  switch (isa) {
    case Isa::Scalar: return true;
    case Isa::Avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c();
    case Isa::Avx512:
      return cpu_supports(Isa::Avx2) && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
  }
  return false;
}

Isa best_isa() {
  return cpu_supports(Isa::Avx512) ? Isa::Avx512 : cpu_supports(Isa::Avx2) ? Isa::Avx2 : Isa::Scalar;
}

Isa resolve_isa(std::string_view requested) {
  const char* env = std::getenv("CPULLM_ISA");
  const Isa isa = !requested.empty() ? parse_isa(requested) : env && *env ? parse_isa(env) : best_isa();
  check_cpu_runs(isa);
  return isa;
}

void check_cpu_runs(Isa isa) {
  if (!cpu_supports(isa)) fail("this CPU cannot run the {} kernels (best available: {})", isa_name(isa), isa_name(best_isa()));
}

}  // namespace cpullm
