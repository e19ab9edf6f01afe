#include "engine/tokenizer/spm.hpp"

#include <algorithm>
#include <queue>
#include <string>

#include "engine/util/text.hpp"

namespace cpullm {
namespace {

constexpr std::string_view kSpaceMarker = "\xe2\x96\x81";  // U+2581, SentencePiece's space

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

void spm_encode(std::string_view raw_text, bool space_prefix, const Vocabulary& vocab, std::vector<int32_t>& out) {
  std::string text;
  if (space_prefix) text += kSpaceMarker;
  for (char ch : raw_text) {
    if (ch == ' ') text += kSpaceMarker;
    else text += ch;
  }

  std::vector<Symbol> symbols;
  for (std::size_t offset = 0; offset < text.size();) {
    std::size_t length = std::min(utf8_lead_length(static_cast<unsigned char>(text[offset])), text.size() - offset);
    int index = static_cast<int>(symbols.size());
    symbols.push_back({index - 1, index + 1, text.data() + offset, length});
    offset += length;
  }
  symbols.back().next = -1;

  std::priority_queue<Bigram> queue;
  auto try_pair = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    std::string_view merged(symbols[left].text, symbols[left].length + symbols[right].length);
    auto it = vocab.piece_to_id.find(merged);
    if (it != vocab.piece_to_id.end()) queue.push({left, right, vocab.scores[it->second], merged.size()});
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
    auto it = vocab.piece_to_id.find(piece);
    if (it != vocab.piece_to_id.end()) {
      out.push_back(it->second);
      continue;
    }
    for (unsigned char byte : piece) out.push_back(vocab.byte_tokens[byte] >= 0 ? vocab.byte_tokens[byte] : vocab.unk);
  }
}

std::string spm_piece_text(std::string_view piece) {
  std::string text;
  for (std::size_t i = 0; i < piece.size();) {
    if (piece.substr(i, kSpaceMarker.size()) == kSpaceMarker) {
      text += ' ';
      i += kSpaceMarker.size();
    } else {
      text += piece[i++];
    }
  }
  return text;
}

}  // namespace cpullm
