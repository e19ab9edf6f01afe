// A progress bar with rate and ETA on stderr. On a terminal it redraws one line; in a log it
// prints a line every 10% so CI output stays short.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

namespace cpullm {

class ProgressBar {
 public:
  ProgressBar(std::string label, uint64_t total_bytes);
  void update(uint64_t done_bytes);
  void finish();

 private:
  void draw(uint64_t done, bool final);
  std::string label_;
  uint64_t total_;
  bool terminal_;
  int last_decile_ = -1;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace cpullm
