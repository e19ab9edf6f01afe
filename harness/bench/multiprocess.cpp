#include "harness/bench/multiprocess.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/ranges.h>

#include "engine/format/gguf.hpp"
#include "engine/util/error.hpp"

namespace cpullm {
namespace {

// Starts `args` with stdin, stdout and stderr on /dev/null.
int spawn(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) fail("multi-process: fork failed");
  if (pid == 0) {
    const int null = open("/dev/null", O_RDWR);
    for (int fd = 0; fd < 3; ++fd) dup2(null, fd);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

// Rss and Pss (KiB lines of /proc/PID/smaps) summed over every mapping, and over the mappings
// of `path` alone. False when the process is gone.
bool read_memory(int pid, const std::string& path, ProcessMemory& m) {
  std::ifstream smaps("/proc/" + std::to_string(pid) + "/smaps");
  if (!smaps) return false;
  m = ProcessMemory{pid, 0, 0, 0, 0};
  bool in_model = false;
  for (std::string line; std::getline(smaps, line);) {
    std::istringstream fields(line);
    std::string key;
    uint64_t kib = 0;
    fields >> key;
    if (key.find('-') != std::string::npos) {  // a mapping's header: "start-end perms offset dev inode path"
      in_model = line.size() >= path.size() && line.compare(line.size() - path.size(), path.size(), path) == 0;
    } else if (key == "Rss:" && fields >> kib) {
      m.rss_bytes += kib * 1024;
      if (in_model) m.model_rss_bytes += kib * 1024;
    } else if (key == "Pss:" && fields >> kib) {
      m.pss_bytes += kib * 1024;
      if (in_model) m.model_pss_bytes += kib * 1024;
    }
  }
  return true;
}

// Every tensor but the embedding table, of which a forward pass reads one row per token
// (unless the output reuses it: then all of it).
uint64_t bytes_a_forward_reads(const std::string& path) {
  const GgufFile file(path);
  uint64_t bytes = 0;
  for (const GgufTensorInfo& t : file.tensors())
    if (t.name != "token_embd.weight" || !file.find_tensor("output.weight")) bytes += t.bytes;
  return bytes;
}

}  // namespace

SharingResult run_shared_processes(const SharingSettings& s) {
  if (s.processes < 2) fail("--processes: sharing needs at least 2 processes, not {}", s.processes);
  SharingResult result;
  const std::string model = std::filesystem::canonical(s.model).string();  // as smaps names it
  result.model_file_bytes = std::filesystem::file_size(model);
  result.touched_bytes = bytes_a_forward_reads(model);
  const std::vector<std::string> args = {s.cpullm, "bench", "-m", model, "-p", "0", "-n", "32", "-r", "1000000000",
                                         "-t", std::to_string(s.threads), "-o", "jsonl"};
  std::vector<int> pids;
  for (int i = 0; i < s.processes; ++i) pids.push_back(spawn(args));

  const auto start = std::chrono::steady_clock::now();
  std::string problem;
  std::vector<ProcessMemory> memory(pids.size());
  while (problem.empty()) {
    bool all_resident = true;
    for (std::size_t i = 0; i < pids.size() && problem.empty(); ++i) {
      int status = 0;
      if (waitpid(pids[i], &status, WNOHANG) != 0 || !read_memory(pids[i], model, memory[i]))
        problem = fmt::format("process {} ({}) ended before the measurement", pids[i], fmt::join(args, " "));
      all_resident = all_resident && memory[i].model_rss_bytes >= 0.95 * result.touched_bytes;
    }
    result.touch_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (problem.empty() && all_resident) break;
    if (result.touch_seconds > s.touch_timeout_s)
      problem = fmt::format("the processes did not touch the whole model within {} s", s.touch_timeout_s);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  // Read once more with everything resident, so every process's Pss divides by all of them.
  for (std::size_t i = 0; i < pids.size() && problem.empty(); ++i)
    if (!read_memory(pids[i], model, memory[i])) problem = fmt::format("process {} ended before the measurement", pids[i]);
  for (int pid : pids) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  if (!problem.empty()) fail("multi-process: {}", problem);

  result.processes = memory;
  double rss = 0, pss = 0, model_rss = 0, model_pss = 0;
  for (const ProcessMemory& m : memory) {
    rss += m.rss_bytes, pss += m.pss_bytes;
    model_rss += m.model_rss_bytes, model_pss += m.model_pss_bytes;
  }
  result.saved_fraction = 1 - pss / rss;
  result.model_saved_fraction = 1 - model_pss / model_rss;
  return result;
}

}  // namespace cpullm
