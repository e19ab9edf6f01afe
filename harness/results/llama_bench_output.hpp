// What llama.cpp's llama-bench writes with -o json, jsonl or sql, read as rows of the results
// database: one ResultRecord per test, engine "llama.cpp" with llama-bench's build number and
// commit, so that a peer's numbers sit in the same tables as cpullm's and the report can set them
// side by side (docs/bench.md, "Peers in the database"). `cpullm db import` reads files written
// elsewhere; `bench --engine llama.cpp` reads the output of the llama-bench it runs.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "harness/results/results_db.hpp"

namespace cpullm {

struct LlamaBenchOutput {
  std::string cpu_info;               // llama-bench's cpu_info (of the first test)
  std::vector<ResultRecord> results;  // one per test, in the order written
};

// llama-bench's name of a test without its depth: pp512, tg128, pp512+tg128 (cpullm bench's too).
std::string llama_bench_test_name(int64_t n_prompt, int64_t n_gen);

// Whether text is llama-bench output in one of its formats: a JSON array of tests, JSON lines of
// tests (a test: an object with build_commit and avg_ts), or SQL inserting into llama_bench.
bool is_llama_bench_output(const std::string& text);

// The tests of such output. Each result's case name is unique within the output: the model's file
// name, llama-bench's test name, threads, batch sizes, flash attention and K cache type
// ("tiny-1b-q4_0/pp64/t2/b2048/ub512/fa-1/kf16"). Its format is the weight type llama-bench names
// in lower case ("llama 7B Q4_K - Medium": q4_k, cpullm's name for the file's matrices); its
// kv_type the K and V types ("f16", or "q8_0/f16" where they differ); config_json every field that
// is not a measurement. An Error names `path` and the test where a field is missing or mistyped.
LlamaBenchOutput read_llama_bench_output(const std::string& text, const std::string& path);

}  // namespace cpullm
