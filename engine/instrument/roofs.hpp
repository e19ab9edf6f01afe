// The two roofs of this machine's roofline, measured in a second or less so that `cpullm profile`
// compares a run with the machine as it is now (a host's bandwidth can move from run to run):
//   memory: a read of a buffer far beyond the last-level cache, on every OpenMP thread;
//   compute: independent FMA chains at the vector width of a kernel level, on every thread.
// Or they come from a hardware profile (cli/cmd_profile.cpp), each with its source.
#pragma once
#include <cstdint>
#include <string>

#include "engine/kernels/isa.hpp"
#include "engine/util/anonymous_memory.hpp"

namespace cpullm {

struct Roofs {
  double bytes_per_s = 0;      // memory read bandwidth
  double flops_per_s = 0;      // FP32 FMA peak
  std::string memory_source;   // how it was found: "measured: ..." or "profile ...: ..."
  std::string compute_source;
  double ridge() const { return flops_per_s / bytes_per_s; }  // FLOP/byte where the roofs meet
};

// What the memory roof reads: anonymous memory, asked for in 2 MiB pages (as the model's mapping
// is, engine/util/mapped_file.hpp), written once by the same static schedule that reads it, so
// each OpenMP thread's share lies on its own node.
class ReadBuffer {
 public:
  explicit ReadBuffer(int64_t bytes);  // rounded down to a multiple of 128, at least 128
  int64_t bytes() const { return bytes_; }
  const std::byte* data() const { return start_; }  // (bytes()) every byte 1
  // Seconds for the OpenMP threads to read the whole buffer once, each its static share.
  double read_seconds() const;

 private:
  AnonymousMemory memory_;
  const std::byte* start_ = nullptr;  // (bytes_) the first 2 MiB boundary in memory_
  int64_t bytes_ = 0;
};

// Best of `passes` reads of a ReadBuffer of `buffer_bytes`.
double measure_read_bandwidth(int64_t buffer_bytes = int64_t{256} << 20, int passes = 5);
// Best of 3 runs of about `seconds` each of FMA chains at the vector width of `isa`.
double measure_fma_peak(Isa isa, double seconds = 0.1);

// How close a region came to its roof: attainable = min(compute roof, intensity * memory roof).
struct RoofUse {
  double fraction = 0;        // achieved FLOP/s (memory-bound: bytes/s) over the roof that binds
  bool memory_bound = false;  // arithmetic intensity below the ridge
};
RoofUse roof_use(const Roofs& roofs, double flops, double bytes, double seconds);

}  // namespace cpullm
