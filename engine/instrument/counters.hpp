// Hardware and software counters from the kernel (perf_event_open), counted on every OpenMP
// thread and summed, for the regions to read at entry and exit. Each event is opened where the
// kernel offers it; where it does not, the event is listed with the reason, never faked:
//   - no PMU: the kernel exposes no hardware counters (a VM without a virtual PMU: software
//     events such as task-clock only);
//   - not permitted: kernel.perf_event_paranoid's value and the fix;
//   - perf_event_open missing or blocked (ENOSYS, a seccomp filter).
// Counts are user-space only (exclude_kernel), which perf_event_paranoid 2 allows any user.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/instrument/regions.hpp"

namespace cpullm {

// An event cpullm asks for: perf's name and its (type, config) for perf_event_open.
struct CounterEvent {
  std::string name;  // as `perf list` names it: "cycles", "task-clock", ...
  uint32_t type;     // PERF_TYPE_HARDWARE, PERF_TYPE_HW_CACHE, PERF_TYPE_SOFTWARE
  uint64_t config;
};

// cycles, instructions, cache-references, cache-misses, LLC-load-misses (hardware);
// task-clock (ns of CPU time), page-faults, context-switches (software).
std::vector<CounterEvent> default_counter_events();

struct UnavailableCounter {
  std::string name;
  std::string reason;
};

// Why perf_event_open failed with `error` (an errno), in words with the fix where there is one.
// `paranoid`: /proc/sys/kernel/perf_event_paranoid (nullopt-like -99 when unreadable);
// `has_cpu_pmu`: whether the kernel lists a CPU PMU under /sys/bus/event_source/devices.
std::string counter_unavailable_reason(int error, int paranoid, bool has_cpu_pmu);
int read_perf_event_paranoid();  // -99 when the file cannot be read
bool has_cpu_pmu();              // a "cpu", "cpu_core" or "cpu_atom" event source

// The events opened on each OpenMP thread (one group per thread: one read() per thread).
class PerfCounters : public RegionCounterSource {
 public:
  // Opens each event on every thread of the next parallel region; call before the threads'
  // count changes (omp_set_num_threads), since threads started later are not counted.
  explicit PerfCounters(const std::vector<CounterEvent>& events = default_counter_events());
  ~PerfCounters() override;
  PerfCounters(const PerfCounters&) = delete;
  PerfCounters& operator=(const PerfCounters&) = delete;

  const std::vector<std::string>& names() const override { return names_; }  // the opened events
  const std::vector<UnavailableCounter>& unavailable() const { return unavailable_; }
  // The threads counted: those that came to the opening region (OMP_DYNAMIC may send fewer).
  int threads() const {
    return static_cast<int>(std::count_if(thread_groups_.begin(), thread_groups_.end(),
                                          [](const ThreadGroup& group) { return !group.fds.empty(); }));
  }
  // Sums over threads, scaled by enabled/running time where the kernel multiplexed the group.
  // Each thread reads its own group (a job on every thread, an OpenMP region outside a team).
  void read(double* values) override;
  // "task-clock, page-faults; unavailable: cycles, instructions (no PMU: ...)"
  std::string describe() const;

 private:
  // One thread's group and what it last read; a cache line of its own, as each thread
  // writes its own group's values.
  struct alignas(64) ThreadGroup {
    std::vector<int> fds;  // leader first; one per opened event, in names_' order
    std::array<double, kMaxRegionCounters> values{};  // at the last read, in names_' order
  };
  void read_group(int index);  // on the thread that group counts, where it can
  std::vector<std::string> names_;
  std::vector<UnavailableCounter> unavailable_;
  std::vector<ThreadGroup> thread_groups_;  // (threads)
};

}  // namespace cpullm
