// Hardware profiles: JSON files (tuning/profiles/*.json) describing a machine: its topology,
// ISA, clocks, memory, TDP and price, every figure with its source next to it. The engine reads
// them by path and knows nothing of tuning/; docs/topology.md describes the format.
#pragma once
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "engine/runtime/topology.hpp"

namespace cpullm {

// A number from a profile and where it comes from.
struct Figure {
  std::optional<double> value;  // nullopt: unknown (not measured, not published)
  std::string source;           // the datasheet, measurement or reference; or why it is unknown
};

// A text fact from a profile and where it comes from.
struct TextFigure {
  std::string value;   // e.g. "avx2", or "detect": found on the machine at run time
  std::string source;
};

struct HardwareProfile {
  std::string path;         // the file it was read from
  std::string name;         // e.g. "e5-4627v4"; the file is NAME.json
  std::string description;  // one line for people
  TextFigure topology;      // "detect" (hwloc on this machine) or an hwloc synthetic description
  TextFigure isa;           // the best kernel level: "scalar", "avx2", "avx512", or "detect" (CPUID)
  TextFigure isa_detail;    // the instruction-set extensions that matter here, in words
  Figure base_clock_ghz;    // all-core base clock
  Figure turbo_clock_ghz;   // maximum single-core turbo
  Figure memory_channels;   // per package
  Figure memory_speed_mts;  // DIMM transfer rate, MT/s
  Figure memory_bandwidth_gbs;  // per package, GB/s (10^9 bytes): theoretical, or measured where the source says so
  Figure memory_per_package_gib;  // installed memory per package
  Figure tdp_watts;         // per package
  Figure price_usd;         // per package (one CPU)
};

// Reads and checks a profile: an error names the file and the field.
HardwareProfile read_hardware_profile(const std::string& path);

// A profile argument: a path (it has a '/' or ends in .json) or a name looked up as NAME.json in
// `dirs`, first match wins. Error: no such file, listing the directories and the names in them.
std::string find_hardware_profile(const std::string& name_or_path, const std::vector<std::filesystem::path>& dirs);

// The profile's machine: hwloc's view of this one ("detect") or the emulated synthetic topology.
Topology profile_topology(const HardwareProfile& profile);

}  // namespace cpullm
