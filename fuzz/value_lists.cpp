// llama-bench's value lists ("1,2,4", "64-512*2", "1-8+3") on arbitrary text, with the bounds
// `cpullm bench` gives its flags; also its word lists and -pg pairs. Refusing the text with a
// cpullm::Error is a pass. Checked: every value returned lies within the bounds.
#include <cstdio>
#include <cstdlib>

#include "engine/util/error.hpp"
#include "harness/bench/value_lists.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  struct Bounds {
    int64_t min, max;
  };
  static constexpr Bounds kBounds[] = {{0, 1 << 20}, {0, 4096}, {1, 1 << 20}};  // -p/-n, -t, -b (cmd_bench.cpp)
  const Bounds bounds = kBounds[data[0] % std::size(kBounds)];
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    for (int64_t v : cpullm::parse_int_list(text, "-p", bounds.min, bounds.max))
      if (v < bounds.min || v > bounds.max) {
        std::fprintf(stderr, "fuzz_value_lists: %lld is outside %lld..%lld\n", static_cast<long long>(v),
                     static_cast<long long>(bounds.min), static_cast<long long>(bounds.max));
        std::abort();
      }
  } catch (const cpullm::Error&) {
  }
  try {
    (void)cpullm::parse_word_list(text, "--bind", {"none", "compact", "scatter", "numa"});
  } catch (const cpullm::Error&) {
  }
  try {
    (void)cpullm::parse_prompt_gen_pair(text);
  } catch (const cpullm::Error&) {
  }
  return 0;
}
