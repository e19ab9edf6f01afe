#include "cli/chat_options.hpp"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "engine/format/gguf.hpp"
#include "engine/tokenizer/chat_template.hpp"
#include "engine/util/error.hpp"
#include "engine/util/input_file.hpp"

namespace cpullm::cli {
namespace {

constexpr std::uintmax_t kMaxConversationBytes = 16u << 20;
constexpr std::uintmax_t kMaxTemplateBytes = 1u << 20;

// [{"role": "system"|"user"|"assistant", "content": "..."}, ...]
std::vector<ChatMessage> read_messages(const std::string& path) {
  const nlohmann::json doc =
      nlohmann::json::parse(read_input_file(path, "the conversation (--messages)", kMaxConversationBytes), nullptr, false);
  if (doc.is_discarded()) fail_file(path, "not valid JSON (--messages wants [{{\"role\": ..., \"content\": ...}}, ...])");
  if (!doc.is_array()) fail_file(path, "--messages wants a JSON array of {{\"role\", \"content\"}} objects");
  std::vector<ChatMessage> messages;
  for (std::size_t i = 0; i < doc.size(); ++i) {
    const nlohmann::json& m = doc[i];
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string() || !m.contains("content") ||
        !m["content"].is_string())
      fail_file(path, "message {} is not an object with string \"role\" and \"content\"", i);
    for (const auto& [key, value] : m.items())
      if (key != "role" && key != "content") fail_file(path, "message {} has a field '{}' cpullm does not know", i, key);
    messages.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
  }
  return messages;
}

}  // namespace

ChatTemplate chosen_template(const ChatOptions& o, const GgufFile& file) {
  if (o.template_choice.empty()) return chat_template_of(file);
  std::error_code ec;
  if (std::filesystem::exists(o.template_choice, ec))
    return recognise_chat_template(read_input_file(o.template_choice, "the chat template", kMaxTemplateBytes),
                                   o.template_choice);
  return chat_template_named(o.template_choice);
}

void add_chat_options(CLI::App& command, ChatOptions& o) {
  CLI::Option* chat = command.add_flag(
      "--chat", o.chat, "The prompt is a user's message: lay it out in the model's chat template (tokenizer.chat_template)");
  command
      .add_option("--chat-template", o.template_choice,
                  "The chat format instead of the file's: llama2, llama3, llama3.1, mistral-v0, mistral-v1, mistral-v3, "
                  "chatml, or a Jinja template file to recognise")
      ->needs(chat);
  CLI::Option* system = command.add_option("--system", o.system, "A system message before the user's")->needs(chat);
  command
      .add_option("--messages", o.messages_path,
                  "A conversation to continue, as a JSON array of {\"role\", \"content\"} (instead of -p and --system)")
      ->needs(chat)
      ->excludes(system);
}

ChatPrompt chat_prompt(const ChatOptions& o, const std::string& user, const GgufFile& file,
                       const Tokenizer& tokenizer) {
  std::vector<ChatMessage> messages;
  if (!o.messages_path.empty()) {
    messages = read_messages(o.messages_path);
  } else {
    if (!o.system.empty()) messages.push_back({"system", o.system});
    messages.push_back({"user", user});
  }
  return encode_conversation(chosen_template(o, file), messages, tokenizer);
}

}  // namespace cpullm::cli
