#include "harness/bench/value_lists.hpp"

#include <charconv>

#include "engine/util/error.hpp"

namespace cpullm {
namespace {

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (true) {
    const std::size_t end = text.find(separator, start);
    parts.push_back(text.substr(start, end - start));
    if (end == std::string::npos) return parts;
    start = end + 1;
  }
}

int64_t parse_number(const std::string& text, const std::string& flag, const std::string& item) {
  int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size())
    fail("{}: '{}' is not a whole number or a range first-last[+step|*factor]", flag, item);
  return value;
}

}  // namespace

std::vector<int64_t> parse_int_list(const std::string& text, const std::string& flag, int64_t min, int64_t max) {
  std::vector<int64_t> values;
  for (const std::string& item : split(text, ',')) {
    // A range is "first-last" with an optional "+step" or "*factor" after last.
    const std::size_t dash = item.find('-', 1);  // position 0 would be a minus sign
    if (dash == std::string::npos) {
      values.push_back(parse_number(item, flag, item));
    } else {
      const int64_t first = parse_number(item.substr(0, dash), flag, item);
      std::string rest = item.substr(dash + 1);
      const std::size_t op = rest.find_first_of("+*");
      const int64_t last = parse_number(rest.substr(0, op), flag, item);
      const char kind = op == std::string::npos ? '+' : rest[op];
      const int64_t step = op == std::string::npos ? 1 : parse_number(rest.substr(op + 1), flag, item);
      if (last < first) fail("{}: range '{}' goes downwards", flag, item);
      if (kind == '+' ? step < 1 : (step < 2 || first < 1))
        fail("{}: range '{}' never advances (a step must be >= 1, a factor >= 2 from a first value >= 1)", flag, item);
      for (int64_t v = first; values.size() <= kMaxListValues;) {
        values.push_back(v);
        if (v > max) break;  // the range check below reports it (as the count does a long range)
        int64_t next = 0;  // checked: a step or factor near 2^63 overflows int64
        const bool overflow = kind == '+' ? __builtin_add_overflow(v, step, &next) : __builtin_mul_overflow(v, step, &next);
        if (overflow || next > last) break;
        v = next;
      }
    }
  }
  if (values.size() > kMaxListValues) fail("{}: '{}' gives more than {} values", flag, text, kMaxListValues);
  for (int64_t v : values)
    if (v < min || v > max) fail("{}: {} is outside {}..{}", flag, v, min, max);
  return values;
}

std::vector<std::string> parse_word_list(const std::string& text, const std::string& flag,
                                         const std::vector<std::string>& allowed) {
  std::vector<std::string> words = split(text, ',');
  for (const std::string& word : words) {
    if (word.empty()) fail("{}: empty item in '{}'", flag, text);
    if (allowed.empty()) continue;
    bool known = false;
    std::string choices;
    for (const std::string& a : allowed) {
      known = known || a == word;
      choices += (choices.empty() ? "" : ", ") + a;
    }
    if (!known) fail("{}: unknown value '{}' (choices: {})", flag, word, choices);
  }
  return words;
}

std::pair<int64_t, int64_t> parse_prompt_gen_pair(const std::string& text) {
  const std::vector<std::string> parts = split(text, ',');
  if (parts.size() != 2) fail("-pg: '{}' is not PROMPT,GEN (e.g. 512,128)", text);
  const int64_t prompt = parse_number(parts[0], "-pg", text), gen = parse_number(parts[1], "-pg", text);
  if (prompt < 1 || gen < 1) fail("-pg: '{}' needs both counts >= 1", text);
  return {prompt, gen};
}

}  // namespace cpullm
