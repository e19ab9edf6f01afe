#include "engine/instrument/counters.hpp"

#include <linux/perf_event.h>
#include <omp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "engine/kernels/parallel.hpp"

namespace cpullm {
namespace {

constexpr uint64_t kLastLevelReadMisses = PERF_COUNT_HW_CACHE_LL | (PERF_COUNT_HW_CACHE_OP_READ << 8) |
                                          (PERF_COUNT_HW_CACHE_RESULT_MISS << 16);

// Opens `event` for the calling thread, in `group` (-1: as a leader). -errno on failure.
int open_event(const CounterEvent& event, int group) {
  perf_event_attr attr{};
  attr.size = sizeof(attr);
  attr.type = event.type;
  attr.config = event.config;
  attr.exclude_kernel = 1;  // user space only: what paranoid 2, the common default, allows anyone
  attr.exclude_hv = 1;
  attr.read_format = PERF_FORMAT_GROUP | PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
  const long fd = syscall(SYS_perf_event_open, &attr, 0 /* this thread */, -1 /* any CPU */, group, 0);
  return fd >= 0 ? static_cast<int>(fd) : -errno;
}

}  // namespace

std::vector<CounterEvent> default_counter_events() {
  return {
      {"cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES},
      {"instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS},
      {"cache-references", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_REFERENCES},
      {"cache-misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES},
      {"LLC-load-misses", PERF_TYPE_HW_CACHE, kLastLevelReadMisses},
      {"task-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK},
      {"page-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS},
  };
}

int read_perf_event_paranoid() {
  std::ifstream file("/proc/sys/kernel/perf_event_paranoid");
  int value = -99;
  return file >> value ? value : -99;
}

bool has_cpu_pmu() {
  const std::filesystem::path devices = "/sys/bus/event_source/devices";
  for (const char* name : {"cpu", "cpu_core", "cpu_atom"})
    if (std::filesystem::exists(devices / name)) return true;
  return false;
}

std::string counter_unavailable_reason(int error, int paranoid, bool cpu_pmu) {
  const std::string paranoid_text = paranoid == -99 ? "unreadable" : std::to_string(paranoid);
  switch (error) {
    case EACCES:
    case EPERM:
      if (paranoid == -99 || paranoid > 2)
        return fmt::format("not permitted: kernel.perf_event_paranoid is {}; allow user-space counting with "
                           "`sysctl -w kernel.perf_event_paranoid=2` (or 1) as root, or give the program CAP_PERFMON",
                           paranoid_text);
      return fmt::format("not permitted although kernel.perf_event_paranoid is {}: a seccomp filter (containers) "
                         "or a security module blocks perf_event_open",
                         paranoid_text);
    case ENOENT:
    case EOPNOTSUPP:
    case ENODEV:
    case EINVAL:
      if (!cpu_pmu)
        return "no PMU: the kernel exposes no hardware counters (no cpu event source in "
               "/sys/bus/event_source/devices; a VM without a virtual PMU offers software events only)";
      return fmt::format("this CPU's PMU does not offer it ({})", std::strerror(error));
    case ENOSYS:
      return "perf_event_open does not exist in this kernel (built without CONFIG_PERF_EVENTS)";
    default:
      return fmt::format("perf_event_open failed: {}", std::strerror(error));
  }
}

PerfCounters::PerfCounters(const std::vector<CounterEvent>& events) {
  const int paranoid = read_perf_event_paranoid();
  const bool cpu_pmu = has_cpu_pmu();
  // Which events the kernel offers, tried once on this thread.
  std::vector<CounterEvent> available;
  for (const CounterEvent& event : events) {
    const int fd = open_event(event, -1);
    if (fd < 0) {
      unavailable_.push_back({event.name, counter_unavailable_reason(-fd, paranoid, cpu_pmu)});
      continue;
    }
    close(fd);
    available.push_back(event);
  }
  if (available.size() > kMaxRegionCounters) available.resize(kMaxRegionCounters);
  if (available.empty()) return;

  // The same group on every OpenMP thread, each counting itself.
  thread_groups_.resize(omp_get_max_threads());
  int failed_thread = -1, failed_error = 0;
#pragma omp parallel num_threads(static_cast<int>(thread_groups_.size()))
  {
    ThreadGroup& group = thread_groups_[omp_get_thread_num()];
    for (const CounterEvent& event : available) {
      const int fd = open_event(event, group.fds.empty() ? -1 : group.fds.front());
      if (fd < 0) {
#pragma omp critical
        {
          failed_thread = omp_get_thread_num();
          failed_error = -fd;
        }
        break;
      }
      group.fds.push_back(fd);
    }
  }
  if (failed_thread >= 0) {  // e.g. the events together do not fit the PMU: none of them is counted
    for (ThreadGroup& group : thread_groups_)
      for (int fd : group.fds) close(fd);
    thread_groups_.clear();
    for (const CounterEvent& event : available)
      unavailable_.push_back({event.name, fmt::format("opened alone but not as a group on thread {}: {}", failed_thread,
                                                      counter_unavailable_reason(failed_error, paranoid, cpu_pmu))});
    return;
  }
  for (const CounterEvent& event : available) names_.push_back(event.name);
}

PerfCounters::~PerfCounters() {
  for (ThreadGroup& group : thread_groups_)
    for (int fd : group.fds) close(fd);
}

void PerfCounters::read(double* values) {
  // Every thread reads its own group, in one job of the forward pass's team (docs/instrumentation.md,
  // "Overhead"): a read of a group counting a thread that runs on another CPU makes the kernel
  // interrupt that CPU and wait for it: in a VM that can make decode with counters 2.6x
  // slower than without, and the other threads, spinning between jobs, counted CPU time all
  // through those reads, charged to every short region. With fewer threads than groups (a read
  // inside a job runs on one thread) thread t reads groups t, t + threads, ...
  if (thread_groups_.empty()) return;  // no counters opened: nothing to read
  const int groups = static_cast<int>(thread_groups_.size());
  on_every_thread(
      [this, groups](int thread, int threads) {
        for (int group = thread; group < groups; group += threads) read_group(group);
      },
      groups);
  for (std::size_t i = 0; i < names_.size(); ++i) {
    values[i] = 0;
    for (const ThreadGroup& group : thread_groups_) values[i] += group.values[i];
  }
}

void PerfCounters::read_group(int index) {
  ThreadGroup& group = thread_groups_[index];
  if (group.fds.empty()) return;  // its thread never came (OMP_DYNAMIC gave the opening region fewer)
  std::array<uint64_t, 3 + kMaxRegionCounters> buffer;  // nr, time_enabled, time_running, values
  const std::size_t bytes = (3 + names_.size()) * sizeof(uint64_t);
  if (::read(group.fds.front(), buffer.data(), bytes) != static_cast<ssize_t>(bytes)) return;  // keeps the last values
  const uint64_t enabled = buffer[1], running = buffer[2];
  // A multiplexed group counted only part of the time: scale up, as perf stat does.
  const double scale = running == 0 ? 0.0 : static_cast<double>(enabled) / static_cast<double>(running);
  for (std::size_t i = 0; i < names_.size(); ++i) group.values[i] = static_cast<double>(buffer[3 + i]) * scale;
}

std::string PerfCounters::describe() const {
  std::string text = names_.empty() ? "none" : "";
  for (std::size_t i = 0; i < names_.size(); ++i) text += (i ? ", " : "") + names_[i];
  if (!names_.empty()) text += fmt::format(" (user space, summed over {} threads)", threads());
  // Events failing for the same reason are listed together.
  for (std::size_t i = 0; i < unavailable_.size();) {
    std::string events = unavailable_[i].name;
    std::size_t j = i + 1;
    for (; j < unavailable_.size() && unavailable_[j].reason == unavailable_[i].reason; ++j)
      events += ", " + unavailable_[j].name;
    text += fmt::format("; unavailable: {} ({})", events, unavailable_[i].reason);
    i = j;
  }
  return text;
}

}  // namespace cpullm
