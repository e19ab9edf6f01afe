// --chat and the flags around it, shared by generate and tokenize: the prompt becomes a
// conversation laid out in the model's chat template (engine/tokenizer/chat_template.hpp).
#pragma once
#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

namespace cpullm {
class GgufFile;
class Tokenizer;
}  // namespace cpullm

namespace cpullm::cli {

struct ChatOptions {
  bool chat = false;            // --chat: the prompt is the user's message
  std::string template_choice;  // --chat-template NAME|FILE; empty: the file's tokenizer.chat_template
  std::string system;           // --system TEXT: a system message before it
  std::string messages_path;    // --messages FILE: the whole conversation, as JSON
};

void add_chat_options(CLI::App& command, ChatOptions& options);

struct ChatPrompt {
  std::string text;             // the rendered conversation
  std::vector<int32_t> tokens;  // its token ids
};

// The conversation (--messages, or --system and `user`) in the chosen template, tokenized.
ChatPrompt chat_prompt(const ChatOptions& options, const std::string& user, const GgufFile& file,
                       const Tokenizer& tokenizer);

}  // namespace cpullm::cli
