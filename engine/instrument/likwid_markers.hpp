// likwid's marker API behind the regions. Built with -DCPULLM_LIKWID=ON (Debian's likwid),
// every region is a likwid region of the same name, started and stopped on every OpenMP thread,
// so `likwid-perfctr -C 0-1 -g MEM -m cpullm profile ...` reports per-region counters for the
// cores the threads run on. In the default build these are no-ops and the status says so.
#pragma once
#include <string>

namespace cpullm {

// Starts the marker API when the program runs under `likwid-perfctr -m` and says what it did:
// "likwid: markers on, ..." or why no likwid counters come ("not built with ...", "not run under
// likwid-perfctr -m", "likwid does not know this CPU ..."). Call once, before the regions run.
std::string start_likwid_markers();
bool likwid_markers_active();
// On every OpenMP thread: the region's counters start / stop.
void likwid_region_start(const char* name);
void likwid_region_stop(const char* name);
// Writes the marker results likwid-perfctr reads; call once at the end when active.
void close_likwid_markers();

}  // namespace cpullm
