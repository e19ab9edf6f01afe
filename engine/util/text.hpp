// Text taken from files and paths (GGUF metadata, tensor names, token pieces, file names) can
// hold any bytes. Before it reaches JSON (which must be UTF-8: nlohmann::json throws otherwise),
// a database or a terminal, it goes through one of these.
#pragma once
#include <string>
#include <string_view>

namespace cpullm {

// The length of the UTF-8 sequence a lead byte announces, by its high bits alone (1 for a byte
// that leads none): how tokenizers cut text into characters, valid or not.
std::size_t utf8_lead_length(unsigned char lead);

// The length (1 to 4) of the valid UTF-8 sequence that starts at text[i], or 0 where none does.
std::size_t utf8_sequence_length(std::string_view text, std::size_t i);

// `text` with every byte that is not part of a valid UTF-8 sequence (overlong forms, surrogates
// and code points past U+10FFFF included) replaced by U+FFFD.
std::string valid_utf8(std::string_view text);

// valid_utf8(text) with control characters (C0, DEL, C1) written as \n, \t, \r or \xNN, so a
// printed string cannot move the cursor or send terminal escape sequences. Backslashes are
// doubled too, so the escapes are unambiguous, except with `double_backslashes` false: error
// messages, whose readers (the config file's, for one) already wrote a NUL as \x00.
std::string printable(std::string_view text, bool double_backslashes = true);

}  // namespace cpullm
