// cpullm tokenize: a text's token ids on one line, space-separated. Only the vocabulary
// (tokenizer.ggml.*) is read, never the weights, so vocabulary-only files work too.
#include <cstdio>
#include <string>

#include "cli/chat_options.hpp"
#include "cli/commands.hpp"
#include "engine/format/gguf.hpp"
#include "engine/tokenizer/tokenizer.hpp"
#include "engine/util/error.hpp"
#include "engine/util/input_file.hpp"

namespace cpullm::cli {
namespace {

// Tokenizing runs at about a MiB a second: a bigger text is more likely a mistake.
constexpr std::uintmax_t kMaxTextBytes = 16u << 20;

struct TokenizeOptions {
  std::string model;      // GGUF file with a vocabulary
  std::string prompt;     // -p: the text
  std::string text_path;  // -f: a file holding the text
  bool no_bos = false;    // leave out the BOS the vocabulary would add
  bool special = false;   // control tokens' text as those tokens
  ChatOptions chat;       // --chat: the text is a user's message in the chat template
  bool show_prompt = false;  // --chat: print the rendered conversation instead of its ids
};

void run_tokenize(const TokenizeOptions& o, bool prompt_given, bool file_given) {
  const bool conversation = !o.chat.messages_path.empty();
  if (conversation ? prompt_given || file_given : prompt_given == file_given)
    fail("tokenize: give the text with -p TEXT or -f FILE, one of the two{}", o.chat.chat ? ", or --messages" : "");
  if (o.show_prompt && !o.chat.chat) fail("tokenize: --show-prompt prints a chat prompt: it needs --chat");
  const std::string text = file_given ? read_input_file(o.text_path, "the text to tokenize", kMaxTextBytes) : o.prompt;
  const GgufFile file(o.model);
  const Tokenizer tokenizer = Tokenizer::from_gguf(file);
  std::vector<int32_t> ids;
  if (o.chat.chat) {
    ChatPrompt prompt = chat_prompt(o.chat, text, file, tokenizer);
    if (o.show_prompt) {
      std::fwrite(prompt.text.data(), 1, prompt.text.size(), stdout);
      return;
    }
    ids = std::move(prompt.tokens);
  } else {
    ids = tokenizer.encode(text, !o.no_bos, o.special);
  }
  std::string line;
  for (int32_t id : ids) line += (line.empty() ? "" : " ") + std::to_string(id);
  std::printf("%s\n", line.c_str());
}

}  // namespace

void register_tokenize(CLI::App& app) {
  auto options = std::make_shared<TokenizeOptions>();
  CLI::App* command = app.add_subcommand("tokenize", "Print a text's token ids (the vocabulary alone is read)");
  command->add_option("-m,--model", options->model, "GGUF file with a vocabulary")->required()->check(CLI::ExistingFile);
  CLI::Option* prompt = command->add_option("-p,--prompt", options->prompt, "The text");
  CLI::Option* file = command->add_option("-f,--file", options->text_path, "A file holding the text (at most 16 MiB)");
  command->add_flag("--no-bos", options->no_bos, "No BOS first, even where the vocabulary adds one");
  command->add_flag("--special", options->special, "Read control tokens in the text (<|eot_id|>, <s>) as those tokens");
  add_chat_options(*command, options->chat);
  command->add_flag("--show-prompt", options->show_prompt, "With --chat: print the rendered conversation, not its ids");
  command->callback([options, prompt, file] { run_tokenize(*options, prompt->count() > 0, file->count() > 0); });
}

}  // namespace cpullm::cli
