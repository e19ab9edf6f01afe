// Continuous batching over a Session: the engine behind `cpullm serve` and `bench --load`.
// Requests wait in a bounded queue for one of the model's sequence slots; every step is one
// forward call carrying the next token of every generating request, then, in the room left of
// `chunk` tokens, the next pieces of admitted prompts, so a long prompt never stalls the decodes.
// A request joins the batch at the first step after a slot frees; one that is cancelled (its
// client went away) frees its slot at the next step. Tokens go out through a RequestStream as
// they are chosen, with the text they complete.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/run/session.hpp"
#include "engine/sampling/sampler.hpp"
#include "engine/tokenizer/tokenizer.hpp"
#include "serve/completion_text.hpp"
#include "serve/metrics.hpp"

namespace cpullm {

using ServeClock = std::chrono::steady_clock;

// What one request asks the engine for.
struct CompletionJob {
  std::vector<int32_t> prompt;    // token ids, at least one
  int64_t max_tokens = 16;        // tokens to generate at most (>= 1)
  SamplingParams sampling;        // temperature 0: greedy
  std::vector<std::string> stop;  // the text ends before the first of these
  bool ignore_eos = false;        // go past end-of-generation tokens (load tests' fixed lengths)
};

enum class FinishReason { none, stop, length, cancelled };
const char* finish_reason_name(FinishReason reason);  // OpenAI's: "stop", "length"; "cancelled"

// One generated token, or the end of a request.
struct StreamEvent {
  std::string text;                          // the text this token completes (may be empty)
  int32_t token = -1;                        // the token; -1: an end without a token
  FinishReason finish = FinishReason::none;  // set on the request's last event
};

// A request's times and counts, final once its last event is out.
struct RequestRecord {
  ServeClock::time_point arrival, first_token, finish;
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;  // chosen tokens, end-of-generation tokens not counted
};

// One request's events, from the engine thread to whoever waits for them.
class RequestStream {
 public:
  // Moves the events that arrived into `out` (appending), waiting up to `timeout` for one.
  // Returns false when the request's last event is among them (or was taken before).
  bool take(std::vector<StreamEvent>& out, std::chrono::milliseconds timeout);
  void cancel() { cancelled_.store(true); }
  bool cancelled() const { return cancelled_.load(); }
  RequestRecord record() const;  // a copy; final after the last event

 private:
  friend class Scheduler;
  void push(StreamEvent event, const RequestRecord& record);
  mutable std::mutex mutex_;
  std::condition_variable ready_;
  std::vector<StreamEvent> events_;
  bool ended_ = false;  // the last event has been pushed
  std::atomic<bool> cancelled_{false};
  RequestRecord record_;
};

struct SchedulerLimits {
  int64_t chunk = 512;  // tokens per forward call at most: decode tokens always go, prompt pieces fill the rest
  int64_t queue = 64;   // requests waiting for a slot at most
};

class Scheduler {
 public:
  // Slots are the session's sequences; the session's configuration is used as configured.
  Scheduler(Session& session, const Tokenizer& tokenizer, SchedulerLimits limits, ServeMetrics* metrics = nullptr);

  // Queues a job (prompt + max_tokens must fit the context: the caller checks). Null when the
  // queue is full or the scheduler no longer admits. Thread-safe.
  std::shared_ptr<RequestStream> submit(CompletionJob job, ServeClock::time_point arrival = ServeClock::now());
  // One forward call; false when nothing was waiting or running. Engine thread only.
  bool step();
  // Waits until a job is queued, wake() is called, or `until` passes.
  void wait_for_work(ServeClock::time_point until);
  void wake();
  // From now on submit() refuses; queued and running requests go on.
  void close();
  // Ends every queued and running request with FinishReason::cancelled at the next step.
  void cancel_all();
  ServeGauges gauges() const;
  int64_t context() const { return context_; }
  int64_t steps() const { return steps_; }                  // forward calls so far (engine thread)
  int64_t largest_batch() const { return largest_batch_; }  // the most tokens one carried
  // Mean seconds a finished request held its slot (0 before any): for Retry-After.
  double mean_service_seconds() const;

 private:
  struct Waiting {
    CompletionJob job;
    std::shared_ptr<RequestStream> stream;
    RequestRecord record;
  };
  struct Slot {
    std::shared_ptr<RequestStream> stream;  // null: free
    CompletionJob job;
    RequestRecord record;
    std::optional<Sampler> sampler;
    std::optional<TextDecoder> decoder;
    std::optional<CompletionText> text;
    int64_t prompt_done = 0;  // prompt tokens run
    int32_t last = 0;         // the last token chosen: the next decode step's input
    bool generating = false;  // the prompt has run; `last` waits to run
  };
  void admit();
  void choose(Slot& slot, std::span<const float> logits);
  void end(Slot& slot, StreamEvent event);
  int64_t running_free_slots() const;  // under mutex_

  Session& session_;
  const Tokenizer& tokenizer_;
  SchedulerLimits limits_;
  ServeMetrics* metrics_;
  int64_t context_;
  std::vector<Slot> slots_;             // (sequences) engine thread only
  std::vector<BatchToken> batch_;       // a step's tokens, reused
  std::vector<int32_t> logits_slot_;    // the slot of each logits row of the step
  std::vector<int64_t> taken_;          // (slots) prompt tokens each slot put in the step
  int64_t steps_ = 0, largest_batch_ = 0;
  mutable std::mutex mutex_;            // guards what follows
  std::condition_variable work_;
  std::deque<Waiting> waiting_;
  bool closed_ = false, cancel_all_ = false, woken_ = false;
  int64_t running_ = 0, kv_used_ = 0;   // the engine thread's counts, for gauges()
  double service_seconds_ = 0;
  int64_t served_ = 0;
};

}  // namespace cpullm
