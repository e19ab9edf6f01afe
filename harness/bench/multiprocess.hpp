// The multi-process scenario: N cpullm processes run one model at the same time, each mapping
// the file read-only and shared (engine/util/mapped_file), and the memory they hold is read
// from the kernel: Rss (pages resident in the process) and Pss (each shared page divided by
// the processes sharing it). Sharing saves 1 - sum(Pss) / sum(Rss); copying the weights into
// each process would save nothing. The seed claimed 40%.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace cpullm {

struct SharingSettings {
  std::string cpullm;               // the binary the processes run (this one: /proc/self/exe)
  std::string model;
  int processes = 2;
  int threads = 1;                  // each process's threads
  double touch_timeout_s = 300;     // how long the processes may take to touch every weight
};

struct ProcessMemory {
  int pid = 0;
  uint64_t rss_bytes = 0;           // the whole process (smaps_rollup)
  uint64_t pss_bytes = 0;
  uint64_t model_rss_bytes = 0;     // the model file's mapping alone (smaps)
  uint64_t model_pss_bytes = 0;
};

struct SharingResult {
  std::vector<ProcessMemory> processes;  // read while all ran, each having touched the whole model
  uint64_t model_file_bytes = 0;
  uint64_t touched_bytes = 0;       // what a forward pass reads: the file but the embedding table's unused rows
  double saved_fraction = 0;        // 1 - sum(Pss) / sum(Rss), whole processes
  double model_saved_fraction = 0;  // the same over the model's mapping alone
  double touch_seconds = 0;         // start until every process held the whole model
};

// Starts the processes (`cpullm bench` generating until killed), waits until every one is
// resident for 95% of what a forward pass reads, reads their memory, then kills them. An Error when a
// process dies or the timeout passes first.
SharingResult run_shared_processes(const SharingSettings& settings);

}  // namespace cpullm
