#include "harness/bench/peer_engine.hpp"

#include <fcntl.h>
#include <omp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/util/error.hpp"
#include "harness/results/llama_bench_output.hpp"

namespace cpullm {
namespace {

constexpr std::size_t kMaxOutput = std::size_t{64} << 20;  // llama-bench's JSON for one point is a few KiB

// The last lines of a child's error output, for the message when it fails.
std::string tail_of(const std::string& text, int lines) {
  std::size_t at = text.size();
  while (lines-- > 0 && at > 0) {
    const std::size_t newline = text.rfind('\n', at - 1);
    if (newline == std::string::npos) return text;
    at = newline;
  }
  return text.substr(at + (at < text.size() && text[at] == '\n' ? 1 : 0));
}

// Runs argv (argv[0] a path) and returns its standard output; its error output goes to a
// temporary file (mkstemp, removed at once), quoted in the Error when it exits other than 0.
std::string run_capturing(const std::vector<std::string>& argv, const std::string& engine) {
  char errors_path[] = "/tmp/cpullm-peer-XXXXXX";
  const int errors = mkstemp(errors_path);
  if (errors < 0) fail("{}: cannot make a temporary file for its error output: {}", engine, std::strerror(errno));
  unlink(errors_path);  // the descriptor keeps it until both processes close it
  int out[2];
  if (pipe(out) != 0) {
    close(errors);
    fail("{}: cannot make a pipe: {}", engine, std::strerror(errno));
  }
  const pid_t pid = fork();
  if (pid < 0) {
    close(errors), close(out[0]), close(out[1]);
    fail("{}: cannot start a process: {}", engine, std::strerror(errno));
  }
  if (pid == 0) {
    dup2(out[1], STDOUT_FILENO);
    dup2(errors, STDERR_FILENO);
    close(out[0]), close(out[1]), close(errors);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    std::fprintf(stderr, "cannot run %s: %s\n", args[0], std::strerror(errno));
    _exit(127);
  }
  close(out[1]);
  std::string output;
  char buffer[65536];
  bool too_much = false;
  for (ssize_t n; (n = read(out[0], buffer, sizeof buffer)) != 0;) {
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (output.size() + static_cast<std::size_t>(n) > kMaxOutput) too_much = true;
    if (!too_much) output.append(buffer, static_cast<std::size_t>(n));
  }
  close(out[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  std::string stderr_text;
  if (lseek(errors, 0, SEEK_SET) == 0) {
    for (ssize_t n; (n = read(errors, buffer, sizeof buffer)) > 0 && stderr_text.size() < kMaxOutput;)
      stderr_text.append(buffer, static_cast<std::size_t>(n));
  }
  close(errors);
  std::string command;
  for (const std::string& a : argv) command += (command.empty() ? "" : " ") + a;
  if (too_much) fail("{}: `{}` wrote more than {} MiB", engine, command, kMaxOutput >> 20);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    fail("{}: `{}` {}: {}", engine, command,
         WIFEXITED(status) ? "exited " + std::to_string(WEXITSTATUS(status)) : "was killed by signal " + std::to_string(WTERMSIG(status)),
         tail_of(stderr_text, 3));
  return output;
}

// llama.cpp's llama-bench at one point: the same file, lengths, depth, threads, batch, KV cache
// type and repetitions, JSON out. The options only cpullm has (ISA level, attention tile, binding,
// placement, prefetch) take llama.cpp's own behaviour.
class LlamaBench : public PeerEngine {
 public:
  explicit LlamaBench(std::string executable) : executable_(std::move(executable)) {}
  std::string name() const override { return "llama.cpp"; }

  std::string cannot_measure(const BenchPoint& point) const override {
    if (point.n_seq > 1) return "llama-bench decodes one sequence; the point has " + std::to_string(point.n_seq);
    if (point.cold) return "llama-bench has no cold repetitions";
    return "";
  }

  std::vector<ResultRecord> measure(const BenchPoint& point) override {
    const int threads = point.threads > 0 ? point.threads : omp_get_max_threads();
    std::vector<std::string> argv = {executable_, "-m", point.model, "-t", std::to_string(threads),
                                     "-r", std::to_string(point.repetitions), "-b", std::to_string(point.n_batch),
                                     "-ub", std::to_string(point.n_batch), "-ctk", point.kv_type, "-ctv", point.kv_type,
                                     "-d", std::to_string(point.n_depth), "-o", "json"};
    if (point.n_prompt > 0 && point.n_gen > 0) {
      argv.insert(argv.end(), {"-p", "0", "-n", "0", "-pg", std::to_string(point.n_prompt) + "," + std::to_string(point.n_gen)});
    } else {
      argv.insert(argv.end(), {"-p", std::to_string(point.n_prompt), "-n", std::to_string(point.n_gen)});
    }
    const std::string output = run_capturing(argv, "llama.cpp");
    std::vector<ResultRecord> results = read_llama_bench_output(output, executable_ + " output").results;
    for (ResultRecord& r : results) r.model_filename = point.model;  // as cpullm's result names it
    return results;
  }

 private:
  std::string executable_;
};

// PATH as given: llama-bench itself or its folder; none: llama-bench on $PATH.
std::string llama_bench_executable(const std::string& given) {
  namespace fs = std::filesystem;
  std::string path;
  if (!given.empty()) {
    path = fs::is_directory(given) ? (fs::path(given) / "llama-bench").string() : given;
  } else if (const char* search = std::getenv("PATH")) {
    std::istringstream dirs(search);
    for (std::string dir; std::getline(dirs, dir, ':');)
      if (!dir.empty() && access((fs::path(dir) / "llama-bench").c_str(), X_OK) == 0) {
        path = (fs::path(dir) / "llama-bench").string();
        break;
      }
    if (path.empty())
      fail("--engine llama.cpp: no llama-bench on $PATH; give its folder as --engine llama.cpp=DIR "
           "(scripts/peer-llamacpp builds llama.cpp and prints it)");
  }
  if (fs::is_directory(path) || access(path.c_str(), X_OK) != 0)
    fail("--engine llama.cpp={}: {} is not an executable llama-bench", given, path);
  return path;
}

}  // namespace

std::unique_ptr<PeerEngine> make_peer_engine(const std::string& spec) {
  const std::size_t equals = spec.find('=');
  const std::string name = spec.substr(0, equals), where = equals == std::string::npos ? "" : spec.substr(equals + 1);
  if (name == "llama.cpp") {
    if (equals != std::string::npos && where.empty()) fail("--engine llama.cpp=: give the folder of llama-bench after '='");
    return std::make_unique<LlamaBench>(llama_bench_executable(where));
  }
  fail("--engine {}: the engines cpullm can run beside itself are: llama.cpp (as llama.cpp or llama.cpp=PATH)", name);
}

}  // namespace cpullm
