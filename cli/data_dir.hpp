// Where cpullm finds what it reads at run time besides its arguments: the Python tools (tuning/,
// reports/), the hardware profiles (tuning/profiles) and the workloads (suites/workloads.json).
// They sit in one folder laid out like the source tree, found relative to the binary, so a build
// tree and an installed copy (cmake --install) both work wherever they are moved.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

namespace cpullm::cli {

// The folders looked in: $CPULLM_DATA_DIR alone where it is set; else BIN/../share/cpullm (an
// installed copy: BIN is the folder holding the cpullm binary), then BIN/share/cpullm (a build
// tree: CMake links it to the source tree).
std::vector<std::filesystem::path> data_dirs();

// `relative` (e.g. "suites/workloads.json") in the first of data_dirs() that has it; where none
// has it, its path under the first, so that the error opening it names a real candidate.
std::filesystem::path data_path(const std::string& relative);

// Where --hardware NAME is looked for: $CPULLM_PROFILES (where set), tuning/profiles in the data
// folder, then ./tuning/profiles.
std::vector<std::filesystem::path> profile_dirs();

}  // namespace cpullm::cli
