// A completion's text as it streams out, cut at the first stop string (OpenAI's `stop`). Text
// that could still turn into a stop string is held back until the next piece decides it, so a
// client never receives part of a stop string.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace cpullm {

class CompletionText {
 public:
  explicit CompletionText(std::vector<std::string> stop);  // empty strings stop nothing
  // Adds decoded text; returns what may be sent now. After a stop string appears, returns the
  // text before it and stopped() is true; later pieces are ignored.
  std::string add(std::string_view piece);
  // The text held back, at the end of generation.
  std::string finish();
  bool stopped() const { return stopped_; }
  const std::string& sent() const { return sent_; }  // everything returned so far

 private:
  std::string release(std::size_t count);
  std::vector<std::string> stop_;  // non-empty strings
  std::string pending_;            // received, not yet sent
  std::string sent_;
  bool stopped_ = false;
};

}  // namespace cpullm
