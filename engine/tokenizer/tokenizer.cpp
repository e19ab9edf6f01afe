#include "engine/tokenizer/tokenizer.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "engine/format/gguf.hpp"
#include "engine/tokenizer/spm.hpp"
#include "engine/util/error.hpp"
#include "engine/util/text.hpp"

namespace cpullm {
namespace {

// Tokens that end a turn, by their text, which llama.cpp also stops at: files seldom list them
// as EOT. Llama 3's, ChatML's (Qwen), GPT-2's end of text, Phi-3's, Gemma's, CodeLlama's.
constexpr std::string_view kEndOfGenerationPieces[] = {
    "<|eot_id|>", "<|eom_id|>", "<|end_of_text|>", "<|im_end|>", "<|endoftext|>", "<|end|>", "<end_of_turn>", "<EOT>",
};

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

// A metadata string that may be absent ("" then); an Error naming the file if it is no string.
std::string_view string_or_empty(const GgufFile& file, std::string_view key) {
  return file.find(key) ? file.require_string(key) : std::string_view();
}

}  // namespace

Tokenizer Tokenizer::from_gguf(const GgufFile& file) {
  const std::string& path = file.path();
  Tokenizer t;
  const std::string_view model = file.require_string("tokenizer.ggml.model");
  if (model == "llama") t.model_ = TokenizerModel::spm;
  else if (model == "gpt2") t.model_ = TokenizerModel::bpe;
  else fail_file(path, "tokenizer.ggml.model is '{}' (cpullm knows 'llama', SentencePiece, and 'gpt2', byte-level BPE)", model);
  const bool spm = t.model_ == TokenizerModel::spm;

  const GgufValue& tokens = file.require_array("tokenizer.ggml.tokens", GgufValueType::STRING);
  const GgufValue* scores = file.find("tokenizer.ggml.scores");
  const GgufValue* types = file.find("tokenizer.ggml.token_type");
  if (tokens.count == 0 || tokens.count > (1u << 24))
    fail_file(path, "tokenizer.ggml.tokens has {} pieces", tokens.count);
  if (scores && (!scores->is_array_of(GgufValueType::F32) || scores->count != tokens.count))
    fail_file(path, "tokenizer.ggml.scores must be {} f32 values", tokens.count);
  if (types && (!types->is_array_of(GgufValueType::I32) || types->count != tokens.count))
    fail_file(path, "tokenizer.ggml.token_type must be {} i32 values", tokens.count);

  Vocabulary& v = t.vocab_;
  const std::size_t n = tokens.count;
  v.pieces.reserve(n);
  for (const GgufValue& piece : tokens.items) v.pieces.emplace_back(piece.string);
  v.scores.resize(n, 0.0f);
  v.types.resize(n, TokenType::Normal);
  v.byte_tokens.fill(-1);
  for (std::size_t i = 0; i < n; ++i) {
    if (scores) v.scores[i] = static_cast<float>(scores->number_at(i));
    if (types) v.types[i] = static_cast<TokenType>(types->integer_at(i));
    const std::string& p = v.pieces[i];
    bool looks_like_byte = p.size() == 6 && p.starts_with("<0x") && p.back() == '>' &&
                           std::isxdigit(static_cast<unsigned char>(p[3])) && std::isxdigit(static_cast<unsigned char>(p[4]));
    const int byte = looks_like_byte ? std::stoi(p.substr(3, 2), nullptr, 16) : 0;  // 0..255 by construction
    if (spm && !types && looks_like_byte) v.types[i] = TokenType::Byte;
    if (v.types[i] == TokenType::Byte) {
      if (!looks_like_byte) fail_file(path, "byte token {} is '{}', not <0xXX>", i, p);
      if (spm) v.byte_tokens[byte] = static_cast<int32_t>(i);
    }
  }
  // Later duplicates win, as in llama.cpp's SentencePiece.
  v.piece_to_id.reserve(n);
  for (std::size_t i = 0; i < n; ++i) v.piece_to_id[v.pieces[i]] = static_cast<int32_t>(i);
  if (!spm) {
    v.byte_tokens = bpe_byte_tokens(v, path);
    t.merges_ = read_bpe_merges(file, v);
    t.pre_ = PreTokenizer::named(string_or_empty(file, "tokenizer.ggml.pre"), path);
  }

  // The ids the file names; SentencePiece files have LLaMA's as defaults, BPE files none (-1).
  auto special = [&](std::string_view key, int32_t fallback) {
    if (!file.find(key) && fallback < 0) return fallback;
    const uint64_t id = file.uint_or(key, static_cast<uint64_t>(fallback));
    if (id >= n) fail_file(path, "{} is {}, outside the {} pieces", key, id, n);
    return static_cast<int32_t>(id);
  };
  t.bos_ = special("tokenizer.ggml.bos_token_id", spm ? 1 : -1);
  v.unk = special("tokenizer.ggml.unknown_token_id", spm ? 0 : -1);
  t.add_bos_ = file.bool_or("tokenizer.ggml.add_bos_token", spm || t.pre_->adds_bos());
  if (t.add_bos_ && t.bos_ < 0)
    fail_file(path, "tokenizer.ggml.add_bos_token is true, but the file has no tokenizer.ggml.bos_token_id");
  t.add_space_prefix_ = spm && file.bool_or("tokenizer.ggml.add_space_prefix", true);

  t.eos_ = special("tokenizer.ggml.eos_token_id", spm ? 2 : -1);
  for (int32_t id : {t.eos_, special("tokenizer.ggml.eot_token_id", -1),
                     special("tokenizer.ggml.eom_token_id", -1)})
    if (id >= 0) t.end_of_generation_.push_back(id);
  for (std::string_view piece : kEndOfGenerationPieces) {
    const auto it = v.piece_to_id.find(piece);
    if (it != v.piece_to_id.end()) t.end_of_generation_.push_back(it->second);
  }
  std::sort(t.end_of_generation_.begin(), t.end_of_generation_.end());
  t.end_of_generation_.erase(std::unique(t.end_of_generation_.begin(), t.end_of_generation_.end()),
                             t.end_of_generation_.end());
  // Files that mark these tokens as normal text would have them printed and never matched.
  if (t.bos_ >= 0 && v.types[t.bos_] == TokenType::Normal) v.types[t.bos_] = TokenType::Control;
  for (int32_t id : t.end_of_generation_)
    if (v.types[id] == TokenType::Normal) v.types[id] = TokenType::Control;

  for (std::size_t i = 0; i < n; ++i) {
    const TokenType type = v.types[i];
    const bool special_type = type == TokenType::Control || type == TokenType::UserDefined || type == TokenType::Unknown;
    if (special_type && !v.pieces[i].empty())
      t.specials_[static_cast<unsigned char>(v.pieces[i][0])].push_back(static_cast<int32_t>(i));
  }
  for (std::vector<int32_t>& bucket : t.specials_)
    std::stable_sort(bucket.begin(), bucket.end(),
                     [&](int32_t a, int32_t b) { return v.pieces[a].size() > v.pieces[b].size(); });
  return t;
}

bool Tokenizer::ends_generation(int32_t token) const {
  return std::binary_search(end_of_generation_.begin(), end_of_generation_.end(), token);
}

// Leftmost first, and at one place the longest, as Hugging Face's tokenizers match added tokens.
std::vector<Tokenizer::Fragment> Tokenizer::split_specials(std::string_view text, bool parse_special,
                                                          std::span<const TextRange> literal) const {
  // Whether bytes [begin, end) touch a literal range, where only user-defined tokens are matched.
  auto in_literal = [&](std::size_t begin, std::size_t end) {
    return std::any_of(literal.begin(), literal.end(), [&](const TextRange& r) { return begin < r.end && r.begin < end; });
  };
  std::vector<Fragment> fragments;
  std::size_t plain = 0;  // where the text not yet in a fragment starts
  for (std::size_t i = 0; i < text.size();) {
    int32_t found = -1;
    for (int32_t id : specials_[static_cast<unsigned char>(text[i])]) {
      const bool user_defined = vocab_.types[id] == TokenType::UserDefined;
      if (!parse_special && !user_defined) continue;
      if (!text.substr(i).starts_with(vocab_.pieces[id])) continue;
      if (user_defined || !in_literal(i, i + vocab_.pieces[id].size())) {
        found = id;
        break;
      }
    }
    if (found < 0) {
      ++i;
      continue;
    }
    if (i > plain) fragments.push_back({text.substr(plain, i - plain), -1});
    fragments.push_back({{}, found});
    i += vocab_.pieces[found].size();
    plain = i;
  }
  if (plain < text.size()) fragments.push_back({text.substr(plain), -1});
  return fragments;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  return encode_fragments(text, add_special, parse_special, {});
}

std::vector<int32_t> Tokenizer::encode_chat(std::string_view text, std::span<const TextRange> literal) const {
  return encode_fragments(text, false, true, literal);
}

std::vector<int32_t> Tokenizer::encode_fragments(std::string_view text, bool add_special, bool parse_special,
                                                 std::span<const TextRange> literal) const {
  if (model_ == TokenizerModel::bpe) {
    for (std::size_t i = 0; i < text.size();) {
      const std::size_t length = utf8_sequence_length(text, i);
      if (length == 0)
        fail("the text is not valid UTF-8 (byte 0x{:02X} at offset {}), which byte-level BPE needs",
             static_cast<unsigned char>(text[i]), i);
      i += length;
    }
  }
  std::vector<int32_t> out;
  if (add_special && add_bos_) out.push_back(bos_);
  bool after_special = true;  // the start of the text counts as following one
  for (const Fragment& fragment : split_specials(text, parse_special, literal)) {
    if (fragment.token >= 0) out.push_back(fragment.token);
    else encode_plain(fragment.text, after_special, out);
    after_special = fragment.token >= 0;
  }
  return out;
}

// SentencePiece puts its space before text that starts the prompt or follows a special token.
void Tokenizer::encode_plain(std::string_view text, bool after_special, std::vector<int32_t>& out) const {
  if (model_ == TokenizerModel::spm) return spm_encode(text, add_space_prefix_ && after_special, vocab_, out);
  for (std::string_view word : pre_->split(text)) {
    if (pre_->ignore_merges()) {
      const auto it = vocab_.piece_to_id.find(to_byte_alphabet(word));
      if (it != vocab_.piece_to_id.end()) {
        out.push_back(it->second);
        continue;
      }
    }
    bpe_merge_word(word, vocab_, merges_, out);
  }
}

std::string Tokenizer::token_bytes(int32_t token) const {
  if (token < 0 || token >= vocab_size()) fail("token id {} is outside the vocabulary", token);
  const std::string& piece = vocab_.pieces[token];
  switch (vocab_.types[token]) {
    case TokenType::Control: case TokenType::Unused: return {};
    case TokenType::Byte: return std::string(1, static_cast<char>(std::stoi(piece.substr(3, 2), nullptr, 16)));
    case TokenType::UserDefined: return piece;
    default: return model_ == TokenizerModel::spm ? spm_piece_text(piece) : from_byte_alphabet(piece);
  }
}

std::string TextDecoder::push(int32_t previous, int32_t token) {
  std::string bytes = tokenizer_.token_bytes(token);
  if (tokenizer_.adds_space_prefix() && previous == tokenizer_.bos() && !bytes.empty() && bytes[0] == ' ')
    bytes.erase(0, 1);
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
    std::size_t length = utf8_lead_length(lead);
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
