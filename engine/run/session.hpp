// One run of the model, as every command runs it: a Session applies a RunConfig once (threads,
// binding, kernels, cache blocking, NUMA placement, MPI ranks, the model's run options,
// sampling), loads the model, and owns the loops that run it: prefill (the prompt in forward
// calls) and decode (each step a token of every running sequence, in one batch).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/model/model.hpp"
#include "engine/run/machine_settings.hpp"
#include "engine/run/run_config.hpp"
#include "engine/sampling/sampler.hpp"

namespace cpullm {

// A decode loop: each step, every running sequence's next token is chosen, then the chosen
// tokens run through the model as one batch, all at the step's position.
struct DecodeLoop {
  int64_t steps = 0;           // steps at most
  int64_t first_position = 0;  // the first step's position (the prompt's length)
  bool run_last = true;        // false: the last step's tokens are chosen but not run (nothing reads their logits)
  // The next token of `sequence` from its row of the logits (empty where it has none yet: the
  // first step without a prompt), or DecodeLoop::stop to end that sequence.
  std::function<int32_t(int64_t step, int32_t sequence, std::span<const float> logits)> choose;
  std::function<void(int64_t step)> chosen;  // after a step's tokens are chosen, before they run
  std::function<void(int64_t step)> ran;     // after a step's forward pass
  static constexpr int32_t stop = -1;
};

class Session {
 public:
  // Applies the configuration and loads the model. Errors (bad values, a machine that cannot
  // do what is asked) are cpullm::Error. Prints nothing but what --numa mpi does to output.
  explicit Session(const RunConfig& config);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const RunConfig& config() const { return config_; }
  const RunReport& report() const { return report_; }
  Model& model() { return *model_; }
  const Model& model() const { return *model_; }
  // --numa mpi's ranks; null in one process.
  const TensorParallel* tensor_parallel() const { return tensor_parallel_.get(); }
  // What the last load's placement copied, in a line; empty at first touch.
  const std::string& placed() const { return placed_; }
  // The configuration as applied, in one line of key=value fields (threads=2 isa=avx2 ...).
  std::string describe() const;

  // Unmaps the model (bench --cold drops the file from the page cache meanwhile); load() maps
  // it again and places its weights as the first load did.
  void unload();
  void load();

  // `tokens` in forward calls of at most n_batch tokens (0: one call); the last call's logits.
  std::span<const float> prefill(std::span<const BatchToken> tokens, int64_t n_batch = 0);
  // One forward call of the batch as given (the load scenario's scheduler builds its own).
  std::span<const float> forward(std::span<const BatchToken> batch);
  // Runs the loop over the configured sequences, starting from the last call's logits. Returns
  // the tokens chosen.
  int64_t decode(const DecodeLoop& loop);
  // Sequence s's next token under the configured sampling (seed + s).
  int32_t sample(int32_t sequence, std::span<const float> logits) { return samplers_[sequence].sample(logits); }

 private:
  std::span<const float> logits_of(int32_t sequence) const;

  RunConfig config_;
  RunReport report_;
  std::shared_ptr<TensorParallel> tensor_parallel_;
  Topology topology_;                               // this machine's, as detected at the start
  std::shared_ptr<WeightPlacement> placement_;       // null at first touch; planned afresh for a reload
  std::string placed_;
  std::unique_ptr<Model> model_;
  AttentionTiles tiles_;
  std::vector<Sampler> samplers_;         // (sequences)
  std::span<const float> logits_;         // the last forward call's
  std::vector<int64_t> logits_row_;       // (sequences) each sequence's row in logits_; -1: none
  std::vector<BatchToken> step_;          // a decode step's tokens, reused
};

}  // namespace cpullm
