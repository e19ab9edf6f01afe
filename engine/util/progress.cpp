#include "engine/util/progress.hpp"

#include <unistd.h>

#include <cstdio>

namespace cpullm {

ProgressBar::ProgressBar(std::string label, uint64_t total_bytes)
    : label_(std::move(label)), total_(total_bytes ? total_bytes : 1), terminal_(isatty(STDERR_FILENO)),
      start_(std::chrono::steady_clock::now()), last_draw_(start_) {}

void ProgressBar::update(uint64_t done_bytes) {
  if (done_bytes >= total_) return;  // finish() draws the last line
  auto now = std::chrono::steady_clock::now();
  int decile = static_cast<int>(done_bytes * 10 / total_);
  bool due = terminal_ ? now - last_draw_ > std::chrono::milliseconds(200) : decile > last_decile_;
  if (!due) return;
  last_draw_ = now;
  last_decile_ = decile;
  draw(done_bytes, false);
}

void ProgressBar::finish() { draw(total_, true); }

void ProgressBar::draw(uint64_t done, bool final) {
  constexpr int kWidth = 30;
  double fraction = static_cast<double>(done) / static_cast<double>(total_);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  double rate = seconds > 0 ? done / seconds : 0;
  double eta = rate > 0 ? (total_ - done) / rate : 0;
  int filled = static_cast<int>(fraction * kWidth);
  std::string bar(filled, '#');
  bar.resize(kWidth, '.');
  std::fprintf(stderr, "%s%s [%s] %3.0f%% %.1f/%.1f MiB %.0f MiB/s %s %.0fs%s", terminal_ ? "\r" : "", label_.c_str(),
               bar.c_str(), fraction * 100, done / 1048576.0, total_ / 1048576.0, rate / 1048576.0,
               final ? "took" : "ETA", final ? seconds : eta, terminal_ && !final ? "" : "\n");
  std::fflush(stderr);
}

}  // namespace cpullm
