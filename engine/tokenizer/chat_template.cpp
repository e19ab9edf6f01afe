#include "engine/tokenizer/chat_template.hpp"

#include <fmt/format.h>

#include <array>
#include <ctime>

#include "engine/format/gguf.hpp"
#include "engine/util/error.hpp"
#include "engine/util/text.hpp"

namespace cpullm {
namespace {

constexpr std::array<std::string_view, 7> kNames = {"llama2",     "llama3",     "llama3.1", "mistral-v0",
                                                     "mistral-v1", "mistral-v3", "chatml"};

bool contains(std::string_view text, std::string_view part) { return text.find(part) != std::string_view::npos; }

// Python's str.isspace() for one code point: what Jinja's trim filter and str.strip() remove.
bool python_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

// The code point of the valid UTF-8 sequence of `length` bytes at text[i].
char32_t code_point(std::string_view text, std::size_t i, std::size_t length) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[i + k]); };
  if (length == 1) return byte(0);
  char32_t c = byte(0) & (0x7f >> length);
  for (std::size_t k = 1; k < length; ++k) c = (c << 6) | (byte(k) & 0x3f);
  return c;
}

// A turn's text as pieces: the template's own text, and the user's, which stays literal.
struct Piece {
  std::string text;  // bytes
  bool literal;      // written by the user
};

// The output being built, and where the users' text lies in it.
class ChatWriter {
 public:
  void text(std::string_view s) { out_.text += s; }
  // Pieces as one string, stripped of Python whitespace at both ends when `strip` is set, as the
  // templates' `trim` and `.strip()` do to a (possibly concatenated) content.
  void pieces(std::vector<Piece> parts, bool strip) {
    if (strip) {
      while (!parts.empty() && strip_front(parts.front().text)) parts.erase(parts.begin());
      while (!parts.empty() && strip_back(parts.back().text)) parts.pop_back();
    }
    for (const Piece& p : parts) {
      const std::size_t begin = out_.text.size();
      out_.text += p.text;
      if (p.literal && !p.text.empty()) out_.literal.push_back({begin, out_.text.size()});
    }
  }
  void content(std::string_view s, bool strip) { pieces({{std::string(s), true}}, strip); }
  RenderedChat take() { return std::move(out_); }

 private:
  // Whitespace off one end of s; true when all of s went (so stripping goes on to the next piece).
  static bool strip_front(std::string& s) {
    std::size_t i = 0;
    while (i < s.size()) {
      const std::size_t n = utf8_sequence_length(s, i);
      if (n == 0 || !python_space(code_point(s, i, n))) break;
      i += n;
    }
    s.erase(0, i);
    return s.empty();
  }
  static bool strip_back(std::string& s) {
    std::size_t end = s.size();
    while (end > 0) {
      std::size_t start = end - 1;  // back to the lead byte of the last character
      while (start > 0 && end - start < 4 && (static_cast<unsigned char>(s[start]) & 0xc0) == 0x80) --start;
      const std::size_t n = utf8_sequence_length(s, start);
      if (n != end - start || !python_space(code_point(s, start, n))) break;
      end = start;
    }
    s.resize(end);
    return s.empty();
  }
  RenderedChat out_;
};

// The ChatML system message a template writes when the conversation has none, e.g. Qwen2.5's
// '<|im_start|>system\nYou are Qwen, ...<|im_end|>\n': a string literal right after the system
// header (its newline a real one or Jinja's \n escape), up to <|im_end|>. Templates that build it
// from variables give none.
std::string chatml_default_system(std::string_view jinja) {
  constexpr std::string_view header = "<|im_start|>system";
  for (std::size_t at = jinja.find(header); at != std::string_view::npos; at = jinja.find(header, at + 1)) {
    std::size_t begin = at + header.size();
    if (jinja.substr(begin).starts_with("\\n")) begin += 2;
    else if (jinja.substr(begin).starts_with("\n")) begin += 1;
    else continue;
    const std::size_t end = jinja.find("<|im_end|>", begin);
    if (end == std::string_view::npos) break;
    const std::string_view literal = jinja.substr(begin, end - begin);
    if (literal.empty() || literal.find_first_of("'\"{}\\\n") != std::string_view::npos) continue;
    return std::string(literal);
  }
  return {};
}

// Llama 3.2's template dates its system turn with today's date where the renderer offers
// strftime_now (Hugging Face's and llama.cpp's do); Llama 3.1's has a fixed default.
std::string knowledge_date(std::string_view jinja) {
  if (!contains(jinja, "strftime_now")) return "26 Jul 2024";
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%d %b %Y", &utc);
  return buffer;
}

void check_roles(std::span<const ChatMessage> messages) {
  if (messages.empty()) fail("chat: the conversation has no messages");
  for (const ChatMessage& m : messages)
    if (m.role != "system" && m.role != "user" && m.role != "assistant")
      fail("chat: role '{}' is not one cpullm's templates know (system, user, assistant)", printable(m.role));
}

// Llama 2's and Mistral's rule: an optional system message, then user and assistant taking
// turns from the user, the last one the user's (whose question the model answers).
std::span<const ChatMessage> alternating_turns(std::span<const ChatMessage> messages, bool system_allowed,
                                               std::string_view format) {
  const bool system = messages.front().role == "system";
  if (system && !system_allowed) fail("chat: the {} template takes no system message", format);
  std::span<const ChatMessage> turns = messages.subspan(system ? 1 : 0);
  for (std::size_t i = 0; i < turns.size(); ++i)
    if (turns[i].role != (i % 2 == 0 ? "user" : "assistant"))
      fail("chat: the {} template needs an optional system message, then user and assistant turns alternating, "
           "starting with the user; message {} is '{}'",
           format, i + (system ? 1 : 0), turns[i].role);
  if (turns.empty() || turns.back().role != "user")
    fail("chat: the {} template needs the conversation to end with a user message", format);
  return turns;
}

void render_llama2(ChatWriter& w, std::span<const ChatMessage> messages, std::string_view bos, std::string_view eos) {
  const std::span<const ChatMessage> turns = alternating_turns(messages, true, "llama2");
  const ChatMessage* system = messages.front().role == "system" ? &messages.front() : nullptr;
  for (std::size_t i = 0; i < turns.size(); ++i) {
    std::vector<Piece> content;
    if (i == 0 && system) content = {{"<<SYS>>\n", false}, {system->content, true}, {"\n<</SYS>>\n\n", false}};
    content.push_back({turns[i].content, true});
    if (turns[i].role == "user") {
      w.text(bos);
      w.text("[INST] ");
      w.pieces(std::move(content), true);
      w.text(" [/INST]");
    } else {
      w.text(" ");
      w.pieces(std::move(content), true);
      w.text(" ");
      w.text(eos);
    }
  }
}

void render_llama3(ChatWriter& w, const ChatTemplate& chat, std::span<const ChatMessage> messages,
                   std::string_view bos) {
  w.text(bos);
  if (chat.format == ChatFormat::llama3_1) {
    const bool system = messages.front().role == "system";
    w.text("<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: ");
    w.text(chat.knowledge_date);
    w.text("\n\n");
    if (system) w.content(messages.front().content, true);
    w.text("<|eot_id|>");
    messages = messages.subspan(system ? 1 : 0);
  }
  for (const ChatMessage& m : messages) {
    w.text("<|start_header_id|>" + m.role + "<|end_header_id|>\n\n");
    w.content(m.content, true);
    w.text("<|eot_id|>");
  }
  w.text("<|start_header_id|>assistant<|end_header_id|>\n\n");
}

void render_mistral(ChatWriter& w, ChatFormat format, std::span<const ChatMessage> messages, std::string_view bos,
                    std::string_view eos) {
  const std::string_view name = chat_format_name(format);
  const std::span<const ChatMessage> turns = alternating_turns(messages, format != ChatFormat::mistral_v0, name);
  const ChatMessage* system = messages.front().role == "system" ? &messages.front() : nullptr;
  // v1: " [INST] " and " [/INST]"; v0 and v3: "[INST] " with " [/INST]" or "[/INST]".
  const std::string_view open = format == ChatFormat::mistral_v1 ? " [INST] " : "[INST] ";
  const std::string_view close = format == ChatFormat::mistral_v3 ? "[/INST]" : " [/INST]";
  // The message the system text goes before: the first user message (v1), the last (v3).
  const std::size_t system_turn = format == ChatFormat::mistral_v3 ? turns.size() - 1 : 0;
  w.text(bos);
  for (std::size_t i = 0; i < turns.size(); ++i) {
    if (turns[i].role == "user") {
      w.text(open);
      if (system && i == system_turn) {
        w.content(system->content, false);
        w.text("\n\n");
      }
      w.content(turns[i].content, false);
      w.text(close);
    } else {
      if (format != ChatFormat::mistral_v0) w.text(" ");
      w.content(turns[i].content, format == ChatFormat::mistral_v3);
      w.text(eos);
    }
  }
}

void render_chatml(ChatWriter& w, const ChatTemplate& chat, std::span<const ChatMessage> messages) {
  if (!chat.default_system.empty() && messages.front().role != "system")
    w.text("<|im_start|>system\n" + chat.default_system + "<|im_end|>\n");
  for (const ChatMessage& m : messages) {
    w.text("<|im_start|>" + m.role + "\n");
    w.content(m.content, false);
    w.text("<|im_end|>\n");
  }
  w.text("<|im_start|>assistant\n");
}

}  // namespace

std::span<const std::string_view> chat_format_names() { return kNames; }

std::string_view chat_format_name(ChatFormat format) { return kNames[static_cast<std::size_t>(format)]; }

ChatTemplate chat_template_named(std::string_view name) {
  for (std::size_t i = 0; i < kNames.size(); ++i)
    if (kNames[i] == name) {
      ChatTemplate chat{static_cast<ChatFormat>(i), {}, {}};
      if (chat.format == ChatFormat::llama3_1) chat.knowledge_date = knowledge_date("");
      return chat;
    }
  fail("--chat-template: '{}' is neither a chat format ({}) nor a file", printable(name), fmt::join(kNames, ", "));
}

// Each family's templates by text that only they contain; variants cpullm cannot render
// faithfully (Mistral's v3-Tekken and v7, Llama 2 derivatives with their own default system
// message) are refused rather than rendered as a neighbour.
ChatTemplate recognise_chat_template(std::string_view jinja, std::string_view origin) {
  ChatTemplate chat{ChatFormat::chatml, {}, {}};
  if (contains(jinja, "<|im_start|>") && contains(jinja, "<|im_end|>")) {
    chat.default_system = chatml_default_system(jinja);
    return chat;
  }
  if (contains(jinja, "<|start_header_id|>") && contains(jinja, "<|eot_id|>")) {
    chat.format = ChatFormat::llama3;
    if (contains(jinja, "Cutting Knowledge Date: December 2023")) {
      chat.format = ChatFormat::llama3_1;
      chat.knowledge_date = knowledge_date(jinja);
    }
    return chat;
  }
  if (contains(jinja, "[INST]") && !contains(jinja, "[SYSTEM_PROMPT]")) {
    if (contains(jinja, "<<SYS>>") && contains(jinja, "bos_token + '[INST] ' + content.strip() + ' [/INST]'")) {
      chat.format = ChatFormat::llama2;
      return chat;
    }
    if (contains(jinja, "[AVAILABLE_TOOLS]") && contains(jinja, "\"[INST] \" + message[\"content\"] + \"[/INST]\"")) {
      chat.format = ChatFormat::mistral_v3;
      return chat;
    }
    if (contains(jinja, "' [INST] ' + system_message")) {
      chat.format = ChatFormat::mistral_v1;
      return chat;
    }
    if (!contains(jinja, "<<SYS>>") && contains(jinja, "'[INST] ' + message['content'] + ' [/INST]'") &&
        contains(jinja, "message['content'] + eos_token")) {
      chat.format = ChatFormat::mistral_v0;
      return chat;
    }
  }
  fail("{}: the chat template is not one cpullm recognises (it renders {}, and runs no Jinja); choose a format "
       "with --chat-template NAME",
       origin, fmt::join(kNames, ", "));
}

ChatTemplate chat_template_of(const GgufFile& file) {
  if (!file.find("tokenizer.chat_template"))
    fail_file(file.path(), "the file has no tokenizer.chat_template; choose a format with --chat-template NAME ({})",
              fmt::join(kNames, ", "));
  return recognise_chat_template(file.require_string("tokenizer.chat_template"),
                                 fmt::format("{}: tokenizer.chat_template", file.path()));
}

RenderedChat render_chat(const ChatTemplate& chat, std::span<const ChatMessage> messages, std::string_view bos,
                         std::string_view eos) {
  check_roles(messages);
  ChatWriter w;
  switch (chat.format) {
    case ChatFormat::llama2: render_llama2(w, messages, bos, eos); break;
    case ChatFormat::llama3:
    case ChatFormat::llama3_1: render_llama3(w, chat, messages, bos); break;
    case ChatFormat::mistral_v0:
    case ChatFormat::mistral_v1:
    case ChatFormat::mistral_v3: render_mistral(w, chat.format, messages, bos, eos); break;
    case ChatFormat::chatml: render_chatml(w, chat, messages); break;
  }
  return w.take();
}

ChatPrompt encode_conversation(const ChatTemplate& chat, std::span<const ChatMessage> messages, const Tokenizer& tokenizer) {
  auto piece = [&](int32_t id) { return id >= 0 ? tokenizer.piece(id) : std::string(); };
  RenderedChat rendered = render_chat(chat, messages, piece(tokenizer.bos()), piece(tokenizer.eos()));
  std::vector<int32_t> tokens = tokenizer.encode_chat(rendered.text, rendered.literal);
  return {std::move(rendered.text), std::move(tokens)};
}

}  // namespace cpullm
