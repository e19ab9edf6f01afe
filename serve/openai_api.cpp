#include "serve/openai_api.hpp"

#include <fmt/format.h>

#include <set>

#include "engine/util/error.hpp"

namespace cpullm {

ApiError::ApiError(int status_, std::string message, std::string param_, std::string code_, std::string type_)
    : std::runtime_error(std::move(message)),
      status(status_),
      param(std::move(param_)),
      code(std::move(code_)),
      type(std::move(type_)) {}

nlohmann::json error_body(const ApiError& e) {
  auto or_null = [](const std::string& s) { return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s); };
  return {{"error", {{"message", e.what()}, {"type", e.type}, {"param", or_null(e.param)}, {"code", or_null(e.code)}}}};
}

std::string json_text(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

namespace {

using nlohmann::json;

[[noreturn]] void refuse(const std::string& param, const std::string& message) { throw ApiError(400, message, param); }

// Fields both endpoints take: OpenAI's, plus top_k and ignore_eos as llama.cpp's and vLLM's
// servers take them.
const std::set<std::string> kCommonFields = {"model", "stream", "stream_options", "max_tokens", "temperature",
                                             "top_p", "top_k", "seed", "stop", "n", "user", "ignore_eos",
                                             "presence_penalty", "frequency_penalty", "logit_bias", "logprobs"};
const std::set<std::string> kCompletionFields = {"prompt", "echo", "best_of", "suffix"};
const std::set<std::string> kChatFields = {"messages", "max_completion_tokens", "top_logprobs", "response_format",
                                           "tools", "tool_choice", "functions", "function_call", "parallel_tool_calls"};

// The fields above that cpullm acts on; the others are OpenAI's that it does not implement, accepted
// only at the value that changes nothing (is_default).
const std::set<std::string> kImplemented = {"model", "stream", "stream_options", "max_tokens", "max_completion_tokens",
                                            "temperature", "top_p", "top_k", "seed", "stop", "n", "user",
                                            "ignore_eos", "prompt", "messages"};

// OpenAI's fields cpullm does not implement are accepted only at the value that changes nothing.
bool is_default(const std::string& key, const json& v) {
  if (v.is_null()) return true;
  if (key == "presence_penalty" || key == "frequency_penalty") return v.is_number() && v.get<double>() == 0;
  if (key == "logit_bias") return v.is_object() && v.empty();
  if (key == "logprobs" || key == "echo") return v.is_boolean() && !v.get<bool>();
  if (key == "best_of") return v.is_number_integer() && v.get<int64_t>() == 1;
  if (key == "tools" || key == "functions") return v.is_array() && v.empty();
  if (key == "tool_choice") return v == "none";
  if (key == "response_format") return v.is_object() && v.size() == 1 && v.value("type", "") == "text";
  if (key == "parallel_tool_calls") return v.is_boolean();
  return false;
}

double number_in(const json& body, const char* key, double low, double high, double otherwise) {
  if (!body.contains(key) || body[key].is_null()) return otherwise;
  const json& v = body[key];
  if (!v.is_number()) refuse(key, fmt::format("'{}' must be a number", key));
  const double x = v.get<double>();
  if (!(x >= low && x <= high)) refuse(key, fmt::format("'{}' must be between {} and {}; got {}", key, low, high, x));
  return x;
}

std::optional<int64_t> integer(const json& body, const char* key, int64_t low, int64_t high) {
  if (!body.contains(key) || body[key].is_null()) return std::nullopt;
  const json& v = body[key];
  if (!v.is_number_integer()) refuse(key, fmt::format("'{}' must be an integer", key));
  // Unsigned values above int64's range come back negative from get<int64_t>: read them as what they are.
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(high))
    refuse(key, fmt::format("'{}' must be between {} and {}", key, low, high));
  const int64_t x = v.get<int64_t>();
  if (x < low || x > high) refuse(key, fmt::format("'{}' must be between {} and {}; got {}", key, low, high, x));
  return x;
}

bool boolean(const json& body, const char* key) {
  if (!body.contains(key) || body[key].is_null()) return false;
  if (!body[key].is_boolean()) refuse(key, fmt::format("'{}' must be a boolean", key));
  return body[key].get<bool>();
}

std::vector<std::string> stop_strings(const json& body) {
  if (!body.contains("stop") || body["stop"].is_null()) return {};
  const json& v = body["stop"];
  if (v.is_string()) return {v.get<std::string>()};
  if (!v.is_array() || v.size() > 4) refuse("stop", "'stop' must be a string or an array of up to 4 strings");
  std::vector<std::string> stop;
  for (const json& s : v) {
    if (!s.is_string()) refuse("stop", "'stop' must be a string or an array of up to 4 strings");
    stop.push_back(s.get<std::string>());
  }
  return stop;
}

std::vector<int32_t> token_ids(const json& array, const Tokenizer& tokenizer) {
  std::vector<int32_t> ids;
  for (const json& t : array) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= tokenizer.vocab_size())
      refuse("prompt", fmt::format("a prompt of token ids needs integers from 0 to {}", tokenizer.vocab_size() - 1));
    ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  return ids;
}

[[noreturn]] void refuse_length(const std::string& param, std::size_t bytes, const ApiSettings& s) {
  throw ApiError(400,
                 fmt::format("This model's maximum context length is {} tokens; the {} bytes of text given cannot fit "
                             "in it.",
                             s.context, bytes),
                 param, "context_length_exceeded");
}

std::vector<int32_t> encode_text(const std::string& text, const ApiSettings& s) {
  if (s.max_prompt_bytes > 0 && text.size() > s.max_prompt_bytes) refuse_length("prompt", text.size(), s);
  return s.tokenizer->encode(text, true);
}

// "prompt": a string, token ids, or an array holding one of those (OpenAI's batch form, n = 1).
std::vector<int32_t> completion_prompt(const json& body, const ApiSettings& s) {
  const Tokenizer& tokenizer = *s.tokenizer;
  if (!body.contains("prompt")) refuse("prompt", "'prompt' is required");
  const json& p = body["prompt"];
  if (p.is_string()) return encode_text(p.get<std::string>(), s);
  if (p.is_array() && !p.empty() && p[0].is_number()) return token_ids(p, tokenizer);
  if (p.is_array() && p.size() == 1 && p[0].is_string()) return encode_text(p[0].get<std::string>(), s);
  if (p.is_array() && p.size() == 1 && p[0].is_array()) return token_ids(p[0], tokenizer);
  if (p.is_array() && p.size() > 1) refuse("prompt", "one prompt per request: cpullm serve answers n = 1");
  refuse("prompt", "'prompt' must be a string, an array of token ids, or an array holding one of those");
}

std::string message_content(const json& content, std::size_t i) {
  if (content.is_string()) return content.get<std::string>();
  std::string text;
  if (content.is_array()) {
    for (const json& part : content) {
      if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string())
        refuse(fmt::format("messages[{}].content", i), "content parts must be {\"type\": \"text\", \"text\": ...}");
      text += part["text"].get<std::string>();
    }
    return text;
  }
  refuse(fmt::format("messages[{}].content", i), "'content' must be a string or an array of text parts");
}

std::vector<int32_t> chat_prompt(const json& body, const ApiSettings& s) {
  if (!body.contains("messages")) refuse("messages", "'messages' is required");
  const json& m = body["messages"];
  if (!m.is_array() || m.empty()) refuse("messages", "'messages' must be a non-empty array");
  std::vector<ChatMessage> messages;
  std::size_t bytes = 0;
  for (std::size_t i = 0; i < m.size(); ++i) {
    const json& msg = m[i];
    const std::string where = fmt::format("messages[{}]", i);
    if (!msg.is_object() || !msg.contains("role") || !msg["role"].is_string() || !msg.contains("content"))
      refuse(where, "each message must be an object with a string 'role' and a 'content'");
    for (const auto& [key, value] : msg.items())
      if (key != "role" && key != "content" && key != "name")
        refuse(where + "." + key, fmt::format("Unrecognized message field: {}", key));
    messages.push_back({msg["role"].get<std::string>(), message_content(msg["content"], i)});
    bytes += messages.back().content.size();
  }
  if (s.max_prompt_bytes > 0 && bytes > s.max_prompt_bytes) refuse_length("messages", bytes, s);
  if (!s.chat) throw ApiError(400, s.chat_missing, "messages", "chat_template_missing");
  try {
    return encode_conversation(*s.chat, messages, *s.tokenizer).tokens;
  } catch (const Error& e) {  // a role or order the template refuses
    refuse("messages", e.what());
  }
}

}  // namespace

std::size_t max_prompt_bytes(const Tokenizer& tokenizer, int64_t context) {
  std::size_t longest = 1;
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) longest = std::max(longest, tokenizer.piece(id).size());
  return static_cast<std::size_t>(context) * longest;
}

ApiRequest parse_api_request(std::string_view text, bool chat, const ApiSettings& s) {
  const json body = json::parse(text, nullptr, false);
  if (body.is_discarded())
    refuse("", "We could not parse the JSON body of your request: it is not valid JSON (UTF-8, RFC 8259)");
  if (!body.is_object()) refuse("", "The request body must be a JSON object");
  const std::set<std::string>& own = chat ? kChatFields : kCompletionFields;
  for (const auto& [key, value] : body.items()) {
    if (!kCommonFields.contains(key) && !own.contains(key))
      refuse(key, fmt::format("Unrecognized request argument supplied: {}", key));
    if (!kImplemented.contains(key) && !is_default(key, value))
      refuse(key, fmt::format("'{}' is not supported by cpullm serve (only at its default value)", key));
  }
  if (body.contains("model") && !body["model"].is_string()) refuse("model", "'model' must be a string");
  if (body.contains("user") && !body["user"].is_string()) refuse("user", "'user' must be a string");
  if (integer(body, "n", 1, 128).value_or(1) != 1) refuse("n", "cpullm serve answers n = 1 choice per request");

  ApiRequest r;
  r.chat = chat;
  r.stream = boolean(body, "stream");
  if (body.contains("stream_options") && !body["stream_options"].is_null()) {
    const json& o = body["stream_options"];
    if (!o.is_object()) refuse("stream_options", "'stream_options' must be an object");
    for (const auto& [key, value] : o.items())
      if (key != "include_usage") refuse("stream_options." + key, fmt::format("Unrecognized stream option: {}", key));
    r.include_usage = boolean(o, "include_usage");
  }
  CompletionJob& job = r.job;
  job.sampling.temperature = static_cast<float>(number_in(body, "temperature", 0, 2, s.sampling.temperature));
  job.sampling.top_p = static_cast<float>(number_in(body, "top_p", 0, 1, s.sampling.top_p));
  job.sampling.top_k = static_cast<int32_t>(integer(body, "top_k", 0, 1 << 30).value_or(s.sampling.top_k));
  const std::optional<int64_t> seed = integer(body, "seed", INT64_MIN, INT64_MAX);
  job.sampling.seed = seed ? static_cast<uint64_t>(*seed) : s.next_seed();
  job.stop = stop_strings(body);
  job.ignore_eos = boolean(body, "ignore_eos");
  job.prompt = chat ? chat_prompt(body, s) : completion_prompt(body, s);
  if (job.prompt.empty()) refuse("prompt", "the prompt is empty and the vocabulary adds no BOS token");

  const int64_t prompt = static_cast<int64_t>(job.prompt.size());
  std::optional<int64_t> max_tokens = integer(body, "max_tokens", 1, INT64_MAX);
  if (chat && !max_tokens) max_tokens = integer(body, "max_completion_tokens", 1, INT64_MAX);
  // OpenAI's defaults: 16 tokens for a completion; a chat answer may fill the context.
  job.max_tokens = max_tokens.value_or(chat ? s.context - prompt : 16);
  const int64_t asked = std::max<int64_t>(job.max_tokens, 1);  // a chat prompt that fills the context leaves 0
  if (asked > s.context - prompt)
    throw ApiError(400,
                   fmt::format("This model's maximum context length is {} tokens. However, you requested {} tokens ({} "
                               "in the prompt, {} for the completion). Please reduce the prompt or the completion.",
                               s.context, fmt::format("{}{}", asked > INT64_MAX - prompt ? "more than " : "",
                                                      asked > INT64_MAX - prompt ? INT64_MAX : prompt + asked),
                               prompt, asked),
                   chat ? "messages" : "prompt", "context_length_exceeded");
  return r;
}

nlohmann::json usage_body(const RequestRecord& r) {
  return {{"prompt_tokens", r.prompt_tokens},
          {"completion_tokens", r.generated_tokens},
          {"total_tokens", r.prompt_tokens + r.generated_tokens}};
}

namespace {

json finish_value(FinishReason finish) {
  return finish == FinishReason::none ? json(nullptr) : json(finish_reason_name(finish));
}

json head_fields(const ResponseHead& h, const char* object) {
  return {{"id", h.id}, {"object", object}, {"created", h.created}, {"model", h.model}};
}

}  // namespace

nlohmann::json response_body(const ResponseHead& h, const std::string& text, FinishReason finish, const RequestRecord& r) {
  json body = head_fields(h, h.chat ? "chat.completion" : "text_completion");
  json choice = {{"index", 0}, {"finish_reason", finish_value(finish)}, {"logprobs", nullptr}};
  if (h.chat) choice["message"] = {{"role", "assistant"}, {"content", text}};
  else choice["text"] = text;
  body["choices"] = json::array({choice});
  body["usage"] = usage_body(r);
  return body;
}

nlohmann::json chunk_body(const ResponseHead& h, const std::string& text, FinishReason finish, bool role) {
  json body = head_fields(h, h.chat ? "chat.completion.chunk" : "text_completion");
  json choice = {{"index", 0}, {"finish_reason", finish_value(finish)}, {"logprobs", nullptr}};
  if (h.chat) {
    choice["delta"] = json::object();
    if (role) choice["delta"]["role"] = "assistant";
    if (!text.empty() || !role) choice["delta"]["content"] = text;
  } else {
    choice["text"] = text;
  }
  body["choices"] = json::array({choice});
  return body;
}

nlohmann::json usage_chunk_body(const ResponseHead& h, const RequestRecord& r) {
  json body = head_fields(h, h.chat ? "chat.completion.chunk" : "text_completion");
  body["choices"] = json::array();
  body["usage"] = usage_body(r);
  return body;
}

}  // namespace cpullm
