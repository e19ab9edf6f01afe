// Another engine measured at cpullm bench's points (`bench --engine llama.cpp[=PATH]`), so that the
// results database holds both engines' numbers for the same file, lengths and threads, measured
// one after the other on the same machine, and the report's Peers section can set them side by
// side. One kind exists: llama.cpp's llama-bench. The interface is what another kind (an
// OpenAI-compatible server's URL, say) would implement.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "harness/bench/bench_plan.hpp"
#include "harness/results/results_db.hpp"

namespace cpullm {

class PeerEngine {
 public:
  virtual ~PeerEngine() = default;
  // The engine's name as the results' `engine` column holds it ("llama.cpp").
  virtual std::string name() const = 0;
  // Why the engine cannot measure `point` as cpullm does (several sequences, say); empty: it can.
  virtual std::string cannot_measure(const BenchPoint& point) const = 0;
  // The engine's results at `point`, each of them a row of `results` (engine, version, commit
  // filled). An Error names the engine and says what went wrong.
  virtual std::vector<ResultRecord> measure(const BenchPoint& point) = 0;
};

// `spec`: "llama.cpp" (llama-bench from $PATH) or "llama.cpp=PATH" (PATH: llama-bench itself or
// the folder holding it, as scripts/peer-llamacpp prints it). Any other name is an Error that
// lists the engines there are. The executable must exist and be runnable, checked here.
std::unique_ptr<PeerEngine> make_peer_engine(const std::string& spec);

}  // namespace cpullm
