#include "engine/run/session.hpp"

#include <fmt/format.h>

#include "engine/kernels/attention.hpp"
#include "engine/model/kv_cache.hpp"
#include "engine/run/numa_run.hpp"
#include "engine/util/error.hpp"

namespace cpullm {

Session::Session(const RunConfig& config) : config_(config) {
  // MPI first: MPI_Init comes before any thread is started.
  tensor_parallel_ = start_tensor_parallel(config_);
  topology_ = detect_topology();
  report_ = apply_machine_settings(config_, topology_);
  report_.ranks = tensor_parallel_ ? tensor_parallel_->size() : 0;
  // Every value is checked before the model is mapped: a bad flag costs no load.
  tiles_ = parse_attention_tiles(config_.attn_tile);
  parse_kv_type(config_.kv_type);
  placement_ = plan_weight_placement(config_, topology_, report_);
  for (int s = 0; s < config_.sequences; ++s) {
    SamplingParams params = config_.sampling;
    params.seed += static_cast<uint64_t>(s);
    samplers_.emplace_back(params);
  }
  load();
}

Session::~Session() = default;

void Session::unload() {
  logits_ = {};
  model_.reset();
}

void Session::load() {
  model_.reset();
  if (placement_ && placement_->copied_bytes() > 0) {  // a reload: fresh copies of the new mapping
    RunReport again;
    placement_ = plan_weight_placement(config_, topology_, again);
  }
  const ModelOptions options{.context = config_.context,
                             .sequences = config_.sequences,
                             .kv_type = parse_kv_type(config_.kv_type),
                             .mlock = config_.mlock,
                             .prefetch = config_.prefetch,
                             .placement = placement_,
                             .tensor_parallel = tensor_parallel_,
                             .kernels = report_.kernels};
  model_ = std::make_unique<Model>(config_.model, options);
  if (placement_) placed_ = place_weights(*placement_, *model_);
  model_->set_attention_tiles(tiles_);
  logits_ = {};
  logits_row_.assign(static_cast<std::size_t>(config_.sequences), -1);
}

std::string Session::describe() const {
  return fmt::format(
      "threads={} bind={} cpuset={} housekeeping={} isa={} placement={} ranks={} attn_tile={} kv_type={} context={} "
      "sequences={} prefetch={} mlock={} temp={} top_k={} top_p={} seed={}",
      report_.threads, report_.binding, config_.cpuset.empty() ? "all" : config_.cpuset, config_.housekeeping,
      isa_name(report_.kernels.isa), report_.placement, report_.ranks, config_.attn_tile, config_.kv_type, model_->context(),
      config_.sequences, config_.prefetch ? 1 : 0, config_.mlock ? 1 : 0, config_.sampling.temperature,
      config_.sampling.top_k, config_.sampling.top_p, config_.sampling.seed);
}

std::span<const float> Session::forward(std::span<const BatchToken> batch) {
  logits_ = model_->forward(batch);
  std::fill(logits_row_.begin(), logits_row_.end(), -1);
  int64_t row = 0;
  for (const BatchToken& t : batch)
    if (t.want_logits) logits_row_[static_cast<std::size_t>(t.sequence)] = row++;
  return logits_;
}

std::span<const float> Session::prefill(std::span<const BatchToken> tokens, int64_t n_batch) {
  const std::size_t call = n_batch > 0 ? static_cast<std::size_t>(n_batch) : tokens.size();
  for (std::size_t first = 0; first < tokens.size(); first += call)
    forward(tokens.subspan(first, std::min(call, tokens.size() - first)));
  return logits_;
}

std::span<const float> Session::logits_of(int32_t sequence) const {
  const int64_t row = logits_row_[static_cast<std::size_t>(sequence)];
  if (row < 0) return {};
  const auto vocab = static_cast<std::size_t>(model_->config().vocab_size);
  return logits_.subspan(static_cast<std::size_t>(row) * vocab, vocab);
}

int64_t Session::decode(const DecodeLoop& loop) {
  std::vector<int32_t> running(static_cast<std::size_t>(config_.sequences));
  for (int32_t s = 0; s < config_.sequences; ++s) running[s] = s;
  int64_t chosen = 0;
  for (int64_t step = 0; step < loop.steps && !running.empty(); ++step) {
    step_.clear();
    for (int32_t s : running) {
      const int32_t token = loop.choose(step, s, logits_of(s));
      if (token != DecodeLoop::stop)
        step_.push_back({.token = token, .sequence = s, .position = loop.first_position + step, .want_logits = true});
    }
    chosen += static_cast<int64_t>(step_.size());
    if (loop.chosen) loop.chosen(step);
    running.clear();
    for (const BatchToken& t : step_) running.push_back(t.sequence);
    if (step_.empty() || (!loop.run_last && step + 1 == loop.steps)) break;
    forward(step_);
    if (loop.ran) loop.ran(step);
  }
  return chosen;
}

}  // namespace cpullm
