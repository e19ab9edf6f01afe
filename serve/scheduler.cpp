#include "serve/scheduler.hpp"

#include <algorithm>

#include "engine/util/error.hpp"

namespace cpullm {

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::stop: return "stop";
    case FinishReason::length: return "length";
    case FinishReason::cancelled: return "cancelled";
    case FinishReason::none: break;
  }
  return "";
}

bool RequestStream::take(std::vector<StreamEvent>& out, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  ready_.wait_for(lock, timeout, [&] { return !events_.empty() || ended_; });
  for (StreamEvent& e : events_) out.push_back(std::move(e));
  events_.clear();
  return !ended_;
}

RequestRecord RequestStream::record() const {
  std::lock_guard lock(mutex_);
  return record_;
}

void RequestStream::push(StreamEvent event, const RequestRecord& record) {
  {
    std::lock_guard lock(mutex_);
    ended_ = ended_ || event.finish != FinishReason::none;
    events_.push_back(std::move(event));
    record_ = record;
  }
  ready_.notify_all();
}

Scheduler::Scheduler(Session& session, const Tokenizer& tokenizer, SchedulerLimits limits, ServeMetrics* metrics)
    : session_(session),
      tokenizer_(tokenizer),
      limits_(limits),
      metrics_(metrics),
      context_(session.model().context()),
      slots_(static_cast<std::size_t>(session.model().options().sequences)),
      taken_(slots_.size(), 0) {
  if (limits_.chunk < 1 || limits_.queue < 0) fail("serve: needs a chunk of at least 1 token and a queue of 0 or more");
  if (session.tensor_parallel()) fail("serve: --numa mpi is not supported: every rank would need the same batches");
}

std::shared_ptr<RequestStream> Scheduler::submit(CompletionJob job, ServeClock::time_point arrival) {
  const int64_t prompt = static_cast<int64_t>(job.prompt.size());
  if (prompt < 1 || job.max_tokens < 1 || prompt + job.max_tokens > context_)
    fail("serve: a request needs 1 to {} prompt and generated tokens together, at least one of each", context_);
  std::lock_guard lock(mutex_);
  if (closed_ || static_cast<int64_t>(waiting_.size()) >= limits_.queue + running_free_slots()) return nullptr;
  auto stream = std::make_shared<RequestStream>();
  RequestRecord record;
  record.arrival = arrival;
  record.prompt_tokens = prompt;
  waiting_.push_back({std::move(job), stream, record});
  work_.notify_all();
  return stream;
}

int64_t Scheduler::running_free_slots() const { return static_cast<int64_t>(slots_.size()) - running_; }

void Scheduler::wait_for_work(ServeClock::time_point until) {
  std::unique_lock lock(mutex_);
  work_.wait_until(lock, until, [&] { return !waiting_.empty() || woken_ || cancel_all_; });
  woken_ = false;
}

void Scheduler::wake() {
  {
    std::lock_guard lock(mutex_);
    woken_ = true;
  }
  work_.notify_all();
}

void Scheduler::close() {
  std::lock_guard lock(mutex_);
  closed_ = true;
}

void Scheduler::cancel_all() {
  {
    std::lock_guard lock(mutex_);
    closed_ = cancel_all_ = true;
  }
  work_.notify_all();
}

ServeGauges Scheduler::gauges() const {
  std::lock_guard lock(mutex_);
  const int64_t slots = static_cast<int64_t>(slots_.size());
  return {running_, static_cast<int64_t>(waiting_.size()), slots, kv_used_, slots * context_};
}

double Scheduler::mean_service_seconds() const {
  std::lock_guard lock(mutex_);
  return served_ > 0 ? service_seconds_ / static_cast<double>(served_) : 0.0;
}

void Scheduler::admit() {
  std::lock_guard lock(mutex_);
  for (Slot& slot : slots_) {
    while (!slot.stream && !waiting_.empty()) {
      Waiting w = std::move(waiting_.front());
      waiting_.pop_front();
      if (w.stream->cancelled() || cancel_all_) {  // gone before it ran
        w.record.finish = ServeClock::now();
        w.stream->push({"", -1, FinishReason::cancelled}, w.record);
        continue;
      }
      slot.stream = std::move(w.stream);
      slot.job = std::move(w.job);
      slot.record = w.record;
      slot.sampler.emplace(slot.job.sampling);
      slot.decoder.emplace(tokenizer_);
      slot.text.emplace(slot.job.stop);
      slot.prompt_done = 0;
      slot.last = slot.job.prompt.back();
      slot.generating = false;
      ++running_;
      if (metrics_) metrics_->prompt_tokens(slot.record.prompt_tokens);
    }
  }
}

void Scheduler::end(Slot& slot, StreamEvent event) {
  slot.record.finish = ServeClock::now();
  const RequestRecord& r = slot.record;
  if (metrics_) {
    metrics_->generated_tokens(r.generated_tokens);
    if (r.generated_tokens > 1)
      metrics_->per_output_token(std::chrono::duration<double>(r.finish - r.first_token).count() /
                                 static_cast<double>(r.generated_tokens - 1));
  }
  slot.stream->push(std::move(event), r);
  {
    std::lock_guard lock(mutex_);
    --running_;
    service_seconds_ += std::chrono::duration<double>(r.finish - r.arrival).count();
    ++served_;
  }
  // A TextDecoder holds a reference, so a Slot is reset field by field, not assigned.
  slot.stream.reset();
  slot.job = {};
  slot.sampler.reset();
  slot.decoder.reset();
  slot.text.reset();
  slot.generating = false;
}

void Scheduler::choose(Slot& slot, std::span<const float> logits) {
  const int32_t token = slot.sampler->sample(logits);
  RequestRecord& r = slot.record;
  if (!slot.generating) {  // the prompt's last logits: the first token
    slot.generating = true;
    r.first_token = ServeClock::now();
    if (metrics_) metrics_->first_token(std::chrono::duration<double>(r.first_token - r.arrival).count());
  }
  CompletionText& text = *slot.text;
  if (tokenizer_.ends_generation(token) && !slot.job.ignore_eos) {
    std::string rest = text.add(slot.decoder->finish());
    rest += text.finish();
    end(slot, {std::move(rest), -1, FinishReason::stop});
    return;
  }
  ++r.generated_tokens;
  std::string out = text.add(slot.decoder->push(slot.last, token));
  slot.last = token;
  if (!text.stopped() && r.generated_tokens == slot.job.max_tokens) {
    out += text.add(slot.decoder->finish());
    out += text.finish();
    end(slot, {std::move(out), token, text.stopped() ? FinishReason::stop : FinishReason::length});
  } else if (text.stopped()) {
    end(slot, {std::move(out), token, FinishReason::stop});
  } else {
    slot.stream->push({std::move(out), token, FinishReason::none}, r);
  }
}

bool Scheduler::step() {
  bool cancel;
  {
    std::lock_guard lock(mutex_);
    cancel = cancel_all_;
  }
  for (Slot& slot : slots_)
    if (slot.stream && (cancel || slot.stream->cancelled())) end(slot, {"", -1, FinishReason::cancelled});
  admit();

  // Decode tokens first (every generating request advances each step), then prompt pieces.
  batch_.clear();
  logits_slot_.clear();
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    const Slot& slot = slots_[i];
    taken_[i] = 0;
    if (!slot.stream || !slot.generating) continue;
    const int64_t position = static_cast<int64_t>(slot.job.prompt.size()) + slot.record.generated_tokens - 1;
    batch_.push_back({slot.last, static_cast<int32_t>(i), position, true});
    logits_slot_.push_back(static_cast<int32_t>(i));
  }
  int64_t room = limits_.chunk - static_cast<int64_t>(batch_.size());
  for (std::size_t i = 0; i < slots_.size() && room > 0; ++i) {
    const Slot& slot = slots_[i];
    if (!slot.stream || slot.generating) continue;
    const int64_t prompt = static_cast<int64_t>(slot.job.prompt.size());
    taken_[i] = std::min(room, prompt - slot.prompt_done);
    for (int64_t k = 0; k < taken_[i]; ++k) {
      const int64_t position = slot.prompt_done + k;
      batch_.push_back({slot.job.prompt[static_cast<std::size_t>(position)], static_cast<int32_t>(i), position,
                        position == prompt - 1});
    }
    if (slot.prompt_done + taken_[i] == prompt) logits_slot_.push_back(static_cast<int32_t>(i));
    room -= taken_[i];
  }
  if (batch_.empty()) return false;

  const std::span<const float> logits = session_.forward(batch_);
  ++steps_;
  largest_batch_ = std::max(largest_batch_, static_cast<int64_t>(batch_.size()));
  if (metrics_) metrics_->forward_call(static_cast<int64_t>(batch_.size()));
  for (std::size_t i = 0; i < slots_.size(); ++i) slots_[i].prompt_done += taken_[i];
  const std::size_t vocab = logits.size() / std::max<std::size_t>(1, logits_slot_.size());
  for (std::size_t row = 0; row < logits_slot_.size(); ++row)
    choose(slots_[static_cast<std::size_t>(logits_slot_[row])], logits.subspan(row * vocab, vocab));

  int64_t used = 0;
  for (const Slot& slot : slots_)
    if (slot.stream) used += slot.prompt_done + slot.record.generated_tokens;
  std::lock_guard lock(mutex_);
  kv_used_ = used;
  return true;
}

}  // namespace cpullm
