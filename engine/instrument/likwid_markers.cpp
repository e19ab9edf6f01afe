#include "engine/instrument/likwid_markers.hpp"

#ifdef CPULLM_LIKWID
#include <likwid-marker.h>
#include <likwid.h>
#include <omp.h>

#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "engine/kernels/parallel.hpp"
#endif

namespace cpullm {

#ifdef CPULLM_LIKWID
namespace {

bool markers_active = false;

// likwid names the CPUs it has event tables for; an unknown one gets no short name, and
// likwid-perfctr stops with "Unsupported Processor" before the program starts.
std::string unsupported_cpu_reason() {
  if (topology_init() != 0) return "likwid could not read this machine's topology";
  const CpuInfo_t info = get_cpuInfo();
  const bool known = info->short_name != nullptr && std::strcmp(info->short_name, "nil") != 0 &&
                     std::strlen(info->short_name) > 0;
  if (known) return "";
  std::string name = info->osname ? info->osname : "unnamed";
  name.erase(name.find_last_not_of(' ') + 1);  // the CPUID brand string is padded with spaces
  return fmt::format("likwid does not know this CPU ({}, family {} model {}): likwid-perfctr refuses it with "
                     "'Unsupported Processor', so no counters can be programmed",
                     name, info->family, info->model);
}

}  // namespace

std::string start_likwid_markers() {
  const std::string cpu = unsupported_cpu_reason();
  if (!cpu.empty()) return "likwid: marker build, but no likwid counters: " + cpu;
  if (std::getenv("LIKWID_EVENTS") == nullptr)
    return "likwid: marker build, but not run under `likwid-perfctr -m` (LIKWID_EVENTS is unset), so no likwid "
           "counters";
  likwid_markerInit();
#pragma omp parallel
  likwid_markerThreadInit();
  markers_active = true;
  return fmt::format("likwid: markers on, events '{}' (likwid-perfctr prints the regions at exit)",
                     std::getenv("LIKWID_EVENTS"));
}

bool likwid_markers_active() { return markers_active; }

// On every thread of the team the region's kernels run on (parallel.hpp), inside a pass too.
void likwid_region_start(const char* name) {
  on_every_thread([&](int, int) { likwid_markerStartRegion(name); });
}

void likwid_region_stop(const char* name) {
  on_every_thread([&](int, int) { likwid_markerStopRegion(name); });
}

void close_likwid_markers() {
  if (markers_active) likwid_markerClose();
  markers_active = false;
}

#else

std::string start_likwid_markers() { return "likwid: not built in (configure with -DCPULLM_LIKWID=ON for likwid-perfctr markers)"; }
bool likwid_markers_active() { return false; }
void likwid_region_start(const char*) {}
void likwid_region_stop(const char*) {}
void close_likwid_markers() {}

#endif

}  // namespace cpullm
