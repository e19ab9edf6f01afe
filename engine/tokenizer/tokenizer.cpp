#include "engine/tokenizer/tokenizer.hpp"

#include <fmt/format.h>

#include <cctype>
#include <queue>

#include "engine/format/gguf.hpp"
#include "engine/util/error.hpp"

namespace cpullm {
namespace {

constexpr std::string_view kSpaceMarker = "\xe2\x96\x81";  // U+2581, SentencePiece's space

// Length of the UTF-8 sequence a lead byte starts (1 for stray or invalid bytes).
std::size_t utf8_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead & 0xe0) == 0xc0) return 2;
  if ((lead & 0xf0) == 0xe0) return 3;
  if ((lead & 0xf8) == 0xf0) return 4;
  return 1;
}

// Whether `byte` may follow `lead` as the next byte of a UTF-8 sequence (RFC 3629): a
// continuation byte, in the narrower range four leads allow, which keeps out overlong forms
// (E0, F0), UTF-16 surrogates (ED) and code points past U+10FFFF (F4).
bool continues(unsigned char lead, std::size_t position, unsigned char byte) {
  if ((byte & 0xc0) != 0x80) return false;
  if (position != 1) return true;
  switch (lead) {
    case 0xe0: return byte >= 0xa0;
    case 0xed: return byte <= 0x9f;
    case 0xf0: return byte >= 0x90;
    case 0xf4: return byte <= 0x8f;
    default: return true;
  }
}

// A symbol is a run of bytes of the text, linked to its neighbours; merging joins two.
struct Symbol {
  int prev, next;
  const char* text;
  std::size_t length;
};

struct Bigram {
  int left, right;
  float score;
  std::size_t length;  // of the merged text, to detect stale entries
  bool operator<(const Bigram& other) const {  // priority_queue pops the largest
    return score < other.score || (score == other.score && left > other.left);
  }
};

}  // namespace

Tokenizer Tokenizer::from_gguf(const GgufFile& file) {
  std::string_view model = file.require_string("tokenizer.ggml.model");
  if (model != "llama")
    fail_file(file.path(), "tokenizer.ggml.model is '{}' (cpullm supports the SentencePiece 'llama' tokenizer)", model);
  const GgufValue& tokens = file.require_array("tokenizer.ggml.tokens", GgufValueType::STRING);
  const GgufValue* scores = file.find("tokenizer.ggml.scores");
  const GgufValue* types = file.find("tokenizer.ggml.token_type");
  if (tokens.count == 0 || tokens.count > (1u << 24))
    fail_file(file.path(), "tokenizer.ggml.tokens has {} pieces", tokens.count);
  if (scores && (!scores->is_array_of(GgufValueType::F32) || scores->count != tokens.count))
    fail_file(file.path(), "tokenizer.ggml.scores must be {} f32 values", tokens.count);
  if (types && (!types->is_array_of(GgufValueType::I32) || types->count != tokens.count))
    fail_file(file.path(), "tokenizer.ggml.token_type must be {} i32 values", tokens.count);

  Tokenizer t;
  const std::size_t n = tokens.count;
  t.pieces_.reserve(n);
  for (const GgufValue& piece : tokens.items) t.pieces_.emplace_back(piece.string);
  t.scores_.resize(n, 0.0f);
  t.types_.resize(n, TokenType::Normal);
  std::fill(std::begin(t.byte_tokens_), std::end(t.byte_tokens_), -1);
  for (std::size_t i = 0; i < n; ++i) {
    if (scores) t.scores_[i] = static_cast<float>(scores->number_at(i));
    if (types) t.types_[i] = static_cast<TokenType>(types->integer_at(i));
    const std::string& p = t.pieces_[i];
    bool looks_like_byte = p.size() == 6 && p.starts_with("<0x") && p.back() == '>' &&
                           std::isxdigit(static_cast<unsigned char>(p[3])) && std::isxdigit(static_cast<unsigned char>(p[4]));
    const int byte = looks_like_byte ? std::stoi(p.substr(3, 2), nullptr, 16) : 0;  // 0..255 by construction
    if (!types && looks_like_byte) t.types_[i] = TokenType::Byte;
    if (t.types_[i] == TokenType::Byte) {
      if (!looks_like_byte) fail_file(file.path(), "byte token {} is '{}', not <0xXX>", i, p);
      t.byte_tokens_[byte] = static_cast<int32_t>(i);
    }
  }
  // Later duplicates win, as in llama.cpp.
  for (std::size_t i = 0; i < n; ++i) t.piece_to_id_[t.pieces_[i]] = static_cast<int32_t>(i);

  auto special = [&](std::string_view key, int32_t fallback) {
    uint64_t id = file.uint_or(key, static_cast<uint64_t>(fallback));
    if (id >= n) fail_file(file.path(), "{} is {}, outside the {} pieces", key, id, n);
    return static_cast<int32_t>(id);
  };
  t.bos_ = special("tokenizer.ggml.bos_token_id", 1);
  t.eos_ = special("tokenizer.ggml.eos_token_id", 2);
  t.unk_ = special("tokenizer.ggml.unknown_token_id", 0);
  t.add_space_prefix_ = file.bool_or("tokenizer.ggml.add_space_prefix", true);
  if (t.types_[t.bos_] == TokenType::Normal) t.types_[t.bos_] = TokenType::Control;
  if (t.types_[t.eos_] == TokenType::Normal) t.types_[t.eos_] = TokenType::Control;
  return t;
}

std::vector<int32_t> Tokenizer::encode(std::string_view raw_text, bool add_bos) const {
  std::vector<int32_t> out;
  if (add_bos) out.push_back(bos_);
  if (raw_text.empty()) return out;

  std::string text;
  if (add_space_prefix_) text += kSpaceMarker;
  for (char ch : raw_text) {
    if (ch == ' ') text += kSpaceMarker;
    else text += ch;
  }

  std::vector<Symbol> symbols;
  for (std::size_t offset = 0; offset < text.size();) {
    std::size_t length = std::min(utf8_length(static_cast<unsigned char>(text[offset])), text.size() - offset);
    int index = static_cast<int>(symbols.size());
    symbols.push_back({index - 1, index + 1, text.data() + offset, length});
    offset += length;
  }
  symbols.back().next = -1;

  std::priority_queue<Bigram> queue;
  auto try_pair = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    std::string_view merged(symbols[left].text, symbols[left].length + symbols[right].length);
    auto it = piece_to_id_.find(merged);
    if (it != piece_to_id_.end()) queue.push({left, right, scores_[it->second], merged.size()});
  };
  for (std::size_t i = 1; i < symbols.size(); ++i) try_pair(static_cast<int>(i) - 1, static_cast<int>(i));

  while (!queue.empty()) {
    Bigram top = queue.top();
    queue.pop();
    Symbol& left = symbols[top.left];
    Symbol& right = symbols[top.right];
    // Skip pairs one of whose symbols has been merged into something else since.
    if (left.length == 0 || right.length == 0 || left.length + right.length != top.length) continue;
    left.length += right.length;
    right.length = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.left;
    try_pair(left.prev, top.left);
    try_pair(top.left, left.next);
  }

  for (int i = 0; i != -1; i = symbols[i].next) {
    std::string_view piece(symbols[i].text, symbols[i].length);
    auto it = piece_to_id_.find(piece);
    if (it != piece_to_id_.end()) {
      out.push_back(it->second);
      continue;
    }
    for (unsigned char byte : piece) out.push_back(byte_tokens_[byte] >= 0 ? byte_tokens_[byte] : unk_);
  }
  return out;
}

std::string Tokenizer::token_bytes(int32_t token) const {
  if (token < 0 || token >= vocab_size()) fail("token id {} is outside the vocabulary", token);
  switch (types_[token]) {
    case TokenType::Control: case TokenType::Unused: return {};
    case TokenType::Byte: return std::string(1, static_cast<char>(std::stoi(pieces_[token].substr(3, 2), nullptr, 16)));
    default: break;
  }
  std::string text;
  const std::string& piece = pieces_[token];
  for (std::size_t i = 0; i < piece.size();) {
    if (std::string_view(piece).substr(i, kSpaceMarker.size()) == kSpaceMarker) {
      text += ' ';
      i += kSpaceMarker.size();
    } else {
      text += piece[i++];
    }
  }
  return text;
}

std::string TextDecoder::push(int32_t previous, int32_t token) {
  std::string bytes = tokenizer_.token_bytes(token);
  if (previous == tokenizer_.bos() && !bytes.empty() && bytes[0] == ' ') bytes.erase(0, 1);
  pending_ += bytes;
  return take_valid(false);
}

std::string TextDecoder::finish() { return take_valid(true); }

std::string TextDecoder::take_valid(bool final) {
  static constexpr std::string_view kReplacement = "\xef\xbf\xbd";  // U+FFFD
  std::string out;
  std::size_t i = 0;
  while (i < pending_.size()) {
    auto lead = static_cast<unsigned char>(pending_[i]);
    std::size_t length = utf8_length(lead);
    bool valid_lead = lead < 0x80 || (lead >= 0xc2 && lead <= 0xf4);
    if (!valid_lead) {
      out += kReplacement;
      ++i;
      continue;
    }
    std::size_t have = 1;
    while (have < length && i + have < pending_.size() &&
           continues(lead, have, static_cast<unsigned char>(pending_[i + have])))
      ++have;
    if (have == length) {
      out.append(pending_, i, length);
      i += length;
    } else if (i + have == pending_.size() && !final) {
      break;  // the rest of this character may come with the next token
    } else {
      out += kReplacement;  // a broken sequence: replace its lead, re-read what follows
      ++i;
    }
  }
  pending_.erase(0, i);
  return out;
}

}  // namespace cpullm
