// --chat and the flags around it, shared by generate and tokenize: the prompt becomes a
// conversation laid out in the model's chat template (engine/tokenizer/chat_template.hpp).
#pragma once
#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/tokenizer/chat_template.hpp"

namespace cpullm {
class GgufFile;
}  // namespace cpullm

namespace cpullm::cli {

struct ChatOptions {
  bool chat = false;            // --chat: the prompt is the user's message
  std::string template_choice;  // --chat-template NAME|FILE; empty: the file's tokenizer.chat_template
  std::string system;           // --system TEXT: a system message before it
  std::string messages_path;    // --messages FILE: the whole conversation, as JSON
};

void add_chat_options(CLI::App& command, ChatOptions& options);

// --chat-template's choice (a name, or a Jinja file to recognise), else the file's own template.
ChatTemplate chosen_template(const ChatOptions& options, const GgufFile& file);

// The conversation (--messages, or --system and `user`) in the chosen template, tokenized.
ChatPrompt chat_prompt(const ChatOptions& options, const std::string& user, const GgufFile& file,
                       const Tokenizer& tokenizer);

}  // namespace cpullm::cli
