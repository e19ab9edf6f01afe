// Which instruction set the kernels use. Each run resolves its level once (resolve_isa: `--isa`,
// else the CPULLM_ISA environment variable, else the best CPUID reports) and passes it to every
// kernel call as an argument; nothing in the process holds a current level, so runs at different
// levels can share a process, and the AVX2 path (all the Xeon E5 v4 target has) is tested and
// benchmarked on any machine.
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

// The level a run asks for: `requested` ("scalar", "avx2", "avx512"), else $CPULLM_ISA where
// set, else best_isa(). A level this CPU cannot run is an Error, never a silent fallback.
Isa resolve_isa(std::string_view requested = {});
// An Error where this CPU cannot run `isa`'s kernels (a level given as a value, not resolved).
void check_cpu_runs(Isa isa);

}  // namespace cpullm
