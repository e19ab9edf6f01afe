// One error type for everything a user can get wrong: bad files, bad flags, bad shapes.
// The CLI prints what() and exits non-zero; nothing in the engine aborts on bad input.
#pragma once
#include <fmt/format.h>
#include <stdexcept>
#include <string>

namespace cpullm {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

// "FILE: message" errors, so every complaint about a file names it.
template <typename... Args>
[[noreturn]] void fail_file(const std::string& path, fmt::format_string<Args...> format, Args&&... args) {
  throw Error(path + ": " + fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace cpullm
