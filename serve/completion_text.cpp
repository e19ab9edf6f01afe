#include "serve/completion_text.hpp"

#include <algorithm>

namespace cpullm {

CompletionText::CompletionText(std::vector<std::string> stop) {
  for (std::string& s : stop)
    if (!s.empty()) stop_.push_back(std::move(s));
}

std::string CompletionText::release(std::size_t count) {
  std::string out = pending_.substr(0, count);
  pending_.erase(0, count);
  sent_ += out;
  return out;
}

std::string CompletionText::add(std::string_view piece) {
  if (stopped_) return {};
  pending_ += piece;
  // The earliest stop string wins; the text before it is the rest of the answer.
  std::size_t first = std::string::npos;
  for (const std::string& s : stop_)
    first = std::min(first, pending_.find(s));
  if (first != std::string::npos) {
    stopped_ = true;
    std::string out = release(first);
    pending_.clear();
    return out;
  }
  // Hold back the longest tail of the pending text that begins some stop string.
  std::size_t hold = 0;
  for (const std::string& s : stop_)
    for (std::size_t n = std::min(s.size() - 1, pending_.size()); n > hold; --n)
      if (pending_.compare(pending_.size() - n, n, s, 0, n) == 0) {
        hold = n;
        break;
      }
  return release(pending_.size() - hold);
}

std::string CompletionText::finish() { return stopped_ ? std::string() : release(pending_.size()); }

}  // namespace cpullm
