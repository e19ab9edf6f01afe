// Hardware profiles: JSON files (tuning/profiles/*.json) describing a machine: its topology,
// ISA, clocks, memory, TDP and price, every figure with its source next to it. The engine reads
// them by path and knows nothing of tuning/; docs/topology.md and docs/tuning.md describe the format.
#pragma once
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "engine/runtime/topology.hpp"

namespace cpullm {

// A number from a profile and where it comes from: one value, or a range where the sources give
// no single figure ("value": [low, high] in the file).
struct Figure {
  std::optional<double> value;  // the value, or the range's low end; nullopt: unknown (not measured, not published)
  std::optional<double> high;   // the range's high end; nullopt: a single value
  std::string source;           // the datasheet, measurement or reference; or why it is unknown
  double upper() const { return high.value_or(*value); }  // of a known figure: the value, or the range's high end
};

// "2.6", "2.2-2.6" or "unknown".
std::string figure_text(const Figure& figure);

// A text fact from a profile and where it comes from.
struct TextFigure {
  std::string value;   // e.g. "avx2", or "detect": found on the machine at run time
  std::string source;
};

// One OS setting the profile recommends for its box; `cpullm tune` checks it against the OS.
struct Recommendation {
  std::string setting;  // one of recommendation_settings(), e.g. "vm.swappiness"
  std::string value;    // the recommended value, e.g. "1"; "any" or "n/a" where it does not matter
  std::string why;      // the reason, printed next to the check
};

// The settings a profile may recommend: isolation (housekeeping cores per node, the rest isolated),
// vm.swappiness, transparent_hugepage, governor, boost, numa_balancing, smt.
const std::vector<std::string>& recommendation_settings();

struct HardwareProfile {
  std::string path;         // the file it was read from
  std::string name;         // e.g. "e5-4627v4"; the file is NAME.json
  std::string description;  // one line for people
  TextFigure topology;      // "detect" (hwloc on this machine) or an hwloc synthetic description
  TextFigure isa;           // the best kernel level: "scalar", "avx2", "avx512", or "detect" (CPUID)
  TextFigure isa_detail;    // the instruction-set extensions that matter here, in words
  TextFigure caches;        // L1d, L2, L3 sizes in words ("detect" for host)
  Figure base_clock_ghz;    // all-core base clock
  Figure turbo_clock_ghz;   // maximum single-core turbo
  Figure avx2_clock_ghz;    // sustained all-core clock running AVX2 (a range where no table is published)
  Figure avx512_clock_ghz;  // the same under AVX-512; unknown where the CPU has none
  Figure fp32_flops_per_cycle;  // per core: the FP32 compute roof is cores x clock x this
  Figure int8_ops_per_cycle;    // per core: the int8 dot-product roof (Q8_0, INT8 weights)
  Figure q4_0_ops_per_cycle;    // per core: the same for Q4_0, whose AVX2 tile skips sign and madd
  Figure memory_channels;   // per package
  Figure memory_speed_mts;  // DIMM transfer rate, MT/s
  Figure memory_bandwidth_gbs;  // per package, GB/s (10^9 bytes): theoretical
  Figure memory_bandwidth_measured_gbs;  // per package, GB/s: measured (STREAM-like read), where known
  Figure memory_per_package_gib;  // installed memory per package
  Figure socket_link_gbs;   // per package, GB/s each way to the other packages (QPI/UPI/xGMI)
  Figure core_to_core_ns;   // a cache line from one core to another of the same package, ns
  Figure socket_to_socket_ns;  // the same between cores of different packages (the farthest pair), ns
  Figure tdp_watts;         // per package
  Figure idle_watts;        // per package
  Figure price_usd;         // per package (one CPU), new
  Figure used_price_usd;    // per package, second-hand
  std::vector<Recommendation> recommendations;  // OS settings for this box
};

// The numeric figures in file order, as (JSON field name, member): one table for reading and printing.
const std::vector<std::pair<const char*, Figure HardwareProfile::*>>& profile_figure_fields();
// The same, as (field name, figure) of one profile: what `topo` prints.
std::vector<std::pair<const char*, const Figure*>> profile_figures(const HardwareProfile& profile);

// Reads and checks a profile: an error names the file and the field.
HardwareProfile read_hardware_profile(const std::string& path);

// A profile argument: a path (it has a '/' or ends in .json) or a name looked up as NAME.json in
// `dirs`, first match wins. Error: no such file, listing the directories and the names in them.
std::string find_hardware_profile(const std::string& name_or_path, const std::vector<std::filesystem::path>& dirs);

// The profile's machine: hwloc's view of this one ("detect") or the emulated synthetic topology.
Topology profile_topology(const HardwareProfile& profile);

}  // namespace cpullm
