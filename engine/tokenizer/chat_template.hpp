// Chat prompts. A GGUF file's tokenizer.chat_template is a Jinja program; cpullm does not run
// Jinja. It recognises the templates the Llama 2, Llama 3, Mistral and Qwen (ChatML) families
// publish, by text only they contain, and renders those formats itself. A template it does not
// recognise is refused by name, never approximated.
#pragma once
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/tokenizer/tokenizer.hpp"

namespace cpullm {

class GgufFile;

enum class ChatFormat {
  llama2,      // <s>[INST] <<SYS>>\n..\n<</SYS>>\n\nuser [/INST] assistant </s>
  llama3,      // <|start_header_id|>role<|end_header_id|>\n\ncontent<|eot_id|>
  llama3_1,    // llama3, always with a system turn that starts with the knowledge-date lines
  mistral_v0,  // [INST] user [/INST]assistant</s>, no system message (Mistral-7B-Instruct v0.1/v0.2)
  mistral_v1,  // " [INST] " with the system message before the first user message
  mistral_v3,  // "[INST] " .. "[/INST]", the system message before the last user message (v0.3)
  chatml,      // <|im_start|>role\ncontent<|im_end|>\n (Qwen), with the file's default system message
};

struct ChatTemplate {
  ChatFormat format;           // how messages are laid out
  std::string default_system;  // ChatML: the system message the template adds when none is given
  std::string knowledge_date;  // llama3_1: the "Today Date" of its system turn ("26 Jul 2024")
};

struct ChatMessage {
  std::string role;     // "system", "user" or "assistant"
  std::string content;  // the text, as the user wrote it
};

// A prompt ready for Tokenizer::encode_chat.
struct RenderedChat {
  std::string text;                // the messages in the template's layout, ending where the assistant answers
  std::vector<TextRange> literal;  // where each message's content lies in `text`
};

// The names --chat-template takes, in ChatFormat's order, and the one a name stands for.
std::span<const std::string_view> chat_format_names();
std::string_view chat_format_name(ChatFormat format);
ChatTemplate chat_template_named(std::string_view name);

// What a Jinja template is, recognised by its text; `origin` names it in the error that refuses it.
ChatTemplate recognise_chat_template(std::string_view jinja, std::string_view origin);
// The file's tokenizer.chat_template, recognised; an error naming the file if it has none.
ChatTemplate chat_template_of(const GgufFile& file);

// The conversation in the template's layout, with the assistant's turn opened. `bos` and `eos`
// are the vocabulary's BOS and EOS pieces, which the templates write as text. Refuses roles
// other than system, user and assistant, and orders the template's own Jinja refuses (Llama 2
// and Mistral: an optional system message first, then user and assistant alternating, ending
// with the user).
RenderedChat render_chat(const ChatTemplate& chat, std::span<const ChatMessage> messages, std::string_view bos,
                         std::string_view eos);

// The conversation rendered with the vocabulary's BOS and EOS pieces, and its token ids.
struct ChatPrompt {
  std::string text;             // the rendered conversation
  std::vector<int32_t> tokens;  // its token ids
};
ChatPrompt encode_conversation(const ChatTemplate& chat, std::span<const ChatMessage> messages, const Tokenizer& tokenizer);

}  // namespace cpullm
