// Which instruction set the kernels use. Chosen at run time from CPUID; `--isa` or the
// CPULLM_ISA environment variable force a lower level, so the AVX2 path (all the Xeon E5 v4
// target has) is tested and benchmarked on any machine.
#pragma once
#include <string>
#include <string_view>

namespace cpullm {

enum class Isa {
  Scalar,  // plain C++: the reference every other level is checked against
  Avx2,    // AVX2 + FMA + F16C: the program's baseline, Broadwell and later
  Avx512,  // AVX-512 F/BW/VL with VNNI: Ice Lake, Zen 4 and later
};

std::string_view isa_name(Isa isa);
Isa parse_isa(std::string_view name);  // "scalar", "avx2", "avx512"; Error otherwise
bool cpu_supports(Isa isa);
Isa best_isa();                        // the highest level this CPU runs

// The level the kernels use: best_isa(), or CPULLM_ISA when set. Forcing a level this CPU
// cannot run is an Error, never a silent fallback.
Isa active_isa();
void force_isa(Isa isa);

}  // namespace cpullm
