// OpenAI's completion API as `cpullm serve` speaks it: request bodies of POST /v1/completions and
// /v1/chat/completions checked and turned into a CompletionJob, and the response, chunk and
// error bodies built from what the scheduler produced. Refusals are ApiErrors carrying the HTTP
// status and OpenAI's error fields; nothing here touches the network.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "engine/tokenizer/chat_template.hpp"
#include "engine/tokenizer/tokenizer.hpp"
#include "serve/scheduler.hpp"

namespace cpullm {

// A refused request, as OpenAI describes one: {"error": {"message", "type", "param", "code"}}.
struct ApiError : std::runtime_error {
  ApiError(int status, std::string message, std::string param = {}, std::string code = {},
           std::string type = "invalid_request_error");
  int status;          // HTTP status
  std::string param;   // the field at fault; empty: none
  std::string code;    // e.g. context_length_exceeded; empty: none
  std::string type;    // invalid_request_error, server_error, ...
};
nlohmann::json error_body(const ApiError& error);

// What the server fills in where a request is silent, and what it checks against.
struct ApiSettings {
  const Tokenizer* tokenizer = nullptr;
  std::optional<ChatTemplate> chat;    // none: the file has no template and --chat-template gave none
  std::string chat_missing;            // why not, for the refusal
  SamplingParams sampling;             // the server's --temp, --top-k, --top-p
  int64_t context = 0;                 // positions per sequence
  std::size_t max_prompt_bytes = 0;    // longer prompt text cannot fit the context (max_prompt_bytes()); 0: no limit
  std::function<uint64_t()> next_seed; // a request without "seed" draws one
};

struct ApiRequest {
  bool chat = false;           // /v1/chat/completions
  bool stream = false;         // "stream": server-sent events
  bool include_usage = false;  // "stream_options": {"include_usage": true}
  CompletionJob job;
};

// Text of more bytes than context x the longest piece cannot be `context` tokens or fewer (a token
// stands for at most its piece's bytes of text): such prompts are refused before tokenizing them.
std::size_t max_prompt_bytes(const Tokenizer& tokenizer, int64_t context);

// Parses and checks a request body; ApiError (400) names the field at fault.
ApiRequest parse_api_request(std::string_view body, bool chat, const ApiSettings& settings);

// The fields every response and chunk of one request share.
struct ResponseHead {
  std::string id;     // cmpl-N or chatcmpl-N
  int64_t created = 0;  // Unix seconds
  std::string model;  // the served model's name
  bool chat = false;
};

nlohmann::json usage_body(const RequestRecord& record);
// The whole answer of a request that did not stream.
nlohmann::json response_body(const ResponseHead& head, const std::string& text, FinishReason finish,
                             const RequestRecord& record);
// One streamed chunk: text (chat: a content delta; `role` adds the assistant role) and, on the
// last, the finish reason.
nlohmann::json chunk_body(const ResponseHead& head, const std::string& text, FinishReason finish, bool role = false);
// The chunk after the last one when "include_usage" is asked for: no choices, the counts.
nlohmann::json usage_chunk_body(const ResponseHead& head, const RequestRecord& record);

// JSON text as sent: invalid UTF-8 (none should reach here) replaced, never thrown on.
std::string json_text(const nlohmann::json& value);

}  // namespace cpullm
