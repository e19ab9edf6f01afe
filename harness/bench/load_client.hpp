// bench --load --url: the load scenario against any OpenAI-compatible server (cpullm serve,
// llama.cpp's llama-server, vLLM, ...), as vLLM's benchmark_serving drives one: requests arrive
// at Poisson times, each a streamed POST /v1/completions of a fixed prompt and output length
// (token-id prompts and "ignore_eos", which those servers take), and every token's arrival is
// timed at the client. Each request runs on its own thread, so a slow server shows as latency
// and errors, never as a client that stops sending.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace cpullm {

// What the server says it serves (GET /v1/models, the first model).
struct ServerIdentity {
  std::string url;       // as given
  std::string model;     // its id
  std::string owned_by;  // e.g. "cpullm", "llamacpp", "vllm"
  int64_t vocab = 0;     // meta.n_vocab where the server reports it (cpullm serve, llama-server); 0: unknown
  int64_t slots = 0;     // meta.n_seq where it reports it (cpullm serve); 0: unknown
};
// Errors (no server, not OpenAI's shape) are cpullm::Error naming the URL.
ServerIdentity query_server(const std::string& url);

struct UrlLoadSettings {
  double rate = 1;                   // requests per second, the mean of the Poisson arrivals
  int requests = 16;                 // requests in the run (duration_s 0)
  double duration_s = 0;             // > 0: arrivals for this long instead of a count
  int64_t n_prompt = 64;             // prompt tokens per request (token-id prompts)
  int64_t n_gen = 16;                // tokens generated per request (max_tokens, ignore_eos)
  std::vector<std::string> prompts;  // --prompts: texts used in turn instead of token ids
  uint64_t seed = 42;                // arrivals and prompt tokens
  double timeout_s = 600;            // a request's limit
};

struct UrlRequest {                  // times in ms from the start of the run
  double arrival_ms = 0;
  double first_token_ms = 0;         // the first streamed token; 0: none
  double finish_ms = 0;              // the stream's end (or the error)
  std::vector<double> token_ms;      // each streamed token's arrival
  int64_t prompt_tokens = 0;         // from the server's usage, where it sent one
  int64_t output_tokens = 0;         // usage's completion_tokens, else the tokens streamed
  std::string error;                 // empty: complete; else its kind ("http 429", "connection", ...)
};

struct UrlLoadRun {
  std::vector<UrlRequest> requests;  // in arrival order
  double wall_ms = 0;                // start to the last request's end
};

UrlLoadRun run_url_load(const ServerIdentity& server, const UrlLoadSettings& settings);

// Per-request latencies of the completed requests (ms): TTFT, TPOT ((finish - first token) /
// (tokens - 1)), every inter-token gap (ITL), end to end; and errors counted by kind.
struct UrlLoadLatencies {
  std::vector<double> ttft_ms, tpot_ms, itl_ms, e2e_ms;
  std::map<std::string, int> errors;
  int completed = 0;
  int64_t output_tokens = 0;
  int meeting_slo = 0;  // completed requests with TTFT <= slo_ttft_ms and TPOT <= slo_tpot_ms (0: no bound)
};
UrlLoadLatencies url_load_latencies(const UrlLoadRun& run, double slo_ttft_ms, double slo_tpot_ms);

}  // namespace cpullm
