// llama-bench's way of giving several values to one flag: "1,2,4", "64-512*2" (64, 128, 256,
// 512), "1-8+3" (1, 4, 7), "4-6" (4, 5, 6). Every flag of `cpullm bench` that takes a list goes
// through here, so all of them accept the same syntax.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace cpullm {

// Values one list may give: far more than a benchmark can run, few enough that a list such as
// "0-1048576,0-1048576,..." is refused before it takes gigabytes.
inline constexpr std::size_t kMaxListValues = 10000;

// Comma-separated items, each a number or a range first-last[+step|*factor]. `flag` names the
// flag in errors. Values must lie in [min, max]; ranges must go upwards and advance; at most
// kMaxListValues of them.
std::vector<int64_t> parse_int_list(const std::string& text, const std::string& flag, int64_t min, int64_t max);

// Comma-separated words, each checked against `allowed` (empty: anything goes), e.g. "none,scatter".
std::vector<std::string> parse_word_list(const std::string& text, const std::string& flag,
                                         const std::vector<std::string>& allowed = {});

// llama-bench's -pg: "PROMPT,GEN" pairs, several pairs separated by ';' or given as separate flags.
std::pair<int64_t, int64_t> parse_prompt_gen_pair(const std::string& text);

}  // namespace cpullm
