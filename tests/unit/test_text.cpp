// valid_utf8 and printable: what text from files becomes before JSON, a database or a terminal.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/util/text.hpp"

namespace cpullm {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

TEST(ValidUtf8, KeepsValidTextAndReplacesEachBadByte) {
  EXPECT_EQ(valid_utf8("plain ▁text é 𝄞"), "plain ▁text é 𝄞");
  EXPECT_EQ(valid_utf8("a\xFF" "b"), "a" + kFffd + "b");
  EXPECT_EQ(valid_utf8("\xC0\x80"), kFffd + kFffd);                   // overlong NUL
  EXPECT_EQ(valid_utf8("\xED\xA0\x80"), kFffd + kFffd + kFffd);       // a surrogate
  EXPECT_EQ(valid_utf8("\xF4\x90\x80\x80"), kFffd + kFffd + kFffd + kFffd);  // past U+10FFFF
  EXPECT_EQ(valid_utf8("end\xE2\x96"), "end" + kFffd + kFffd);        // cut short
  EXPECT_EQ(valid_utf8(std::string("nul\0in", 6)), std::string("nul\0in", 6));
}

TEST(ValidUtf8, AnyBytesMakeJsonThatDumps) {
  std::string every_byte;
  for (int b = 0; b < 256; ++b) every_byte += static_cast<char>(b);
  EXPECT_THROW(nlohmann::json(every_byte).dump(), nlohmann::json::type_error);
  const std::string dumped = nlohmann::json(valid_utf8(every_byte + every_byte)).dump();
  EXPECT_EQ(nlohmann::json::parse(dumped).get<std::string>(), valid_utf8(every_byte + every_byte));
}

TEST(Printable, EscapesControlCharactersAndKeepsTheRest) {
  EXPECT_EQ(printable("\x1b[2Jname\n\tx\\y\x7f"), "\\x1b[2Jname\\n\\tx\\\\y\\x7f");
  EXPECT_EQ(printable("\xC2\x9B" "31m é"), "\\u009b31m é");  // C1 CSI
  EXPECT_EQ(printable("bad\xFF"), "bad" + kFffd);
}

TEST(Printable, ErrorMessagesKeepTheirReadersEscapes) {
  // A config key with a NUL reaches the error line as \x00, written once, not \\x00.
  EXPECT_EQ(printable("'th\\x00reads'\x1b", false), "'th\\x00reads'\\x1b");
}

}  // namespace
}  // namespace cpullm
