// Copyright ingot authors. Apache-2.0.
// UTF-8 repair for text that leaves ingot: the expected strings follow Unicode's "substitution of
// maximal subparts" (chapter 3, U+FFFD substitution), which Python's
// bytes.decode("utf-8", errors="replace") also implements.
#include "core/utf8.h"

#include <gtest/gtest.h>

#include <string>

namespace ingot {
namespace {

const std::string R = "\xEF\xBF\xBD";  // U+FFFD

TEST(Utf8, ValidTextIsUnchanged) {
  const std::string ok = "plain ASCII, h\xC3\xA9llo, \xE2\x82\xAC 20, \xF0\x9F\x98\x80, \xF4\x8F\xBF\xBF (U+10FFFF)";
  EXPECT_EQ(utf8_sanitize(ok), ok);
  EXPECT_EQ(utf8_sanitize(""), "");
  EXPECT_EQ(utf8_sanitize(std::string("a\0b", 3)), std::string("a\0b", 3));
}

TEST(Utf8, EachMaximalSubpartBecomesOneReplacement) {
  EXPECT_EQ(utf8_sanitize("\x80"), R);                          // a lone continuation byte
  EXPECT_EQ(utf8_sanitize("\xE0\x80"), R + R);                  // E0 needs A0..BF next
  EXPECT_EQ(utf8_sanitize("\xF0\x9F\x98" "a"), R + "a");        // a 4-byte character cut short
  EXPECT_EQ(utf8_sanitize("\xED\xA0\x80"), R + R + R);          // a surrogate
  EXPECT_EQ(utf8_sanitize("\xC0\xAF"), R + R);                  // an overlong '/'
  EXPECT_EQ(utf8_sanitize("\xF4\x90\x80\x80"), R + R + R + R);  // above U+10FFFF
  EXPECT_EQ(utf8_sanitize("a\xC3"), "a" + R);                   // cut at the end
  EXPECT_EQ(utf8_sanitize("\xE2\x82\xAC\xE2\x82"), "\xE2\x82\xAC" + R);
  EXPECT_EQ(utf8_sanitize("\xFE\xFF"), R + R);                  // never in UTF-8
  EXPECT_EQ(utf8_sanitize("\xE1\x80\xE2\xF0\x91\x92\xF1\xBF" "A"), R + R + R + R + "A");
  EXPECT_EQ(utf8_sanitize("w\xC3w"), "w" + R + "w");  // what a byte-level model's random tokens make
}

TEST(Utf8, IncompleteTailIsWhatMoreBytesCouldFinish) {
  EXPECT_EQ(utf8_incomplete_tail("ab"), 0u);
  EXPECT_EQ(utf8_incomplete_tail(""), 0u);
  EXPECT_EQ(utf8_incomplete_tail("ab\xC3"), 1u);
  EXPECT_EQ(utf8_incomplete_tail("ab\xF0\x9F"), 2u);
  EXPECT_EQ(utf8_incomplete_tail("ab\xF0\x9F\x98"), 3u);
  EXPECT_EQ(utf8_incomplete_tail("ab\xF0\x9F\x98\x80"), 0u);  // complete
  EXPECT_EQ(utf8_incomplete_tail("ab\xE0\x80"), 0u);          // ill-formed already: nothing can finish it
  EXPECT_EQ(utf8_incomplete_tail("ab\x80"), 0u);              // a stray continuation
  EXPECT_EQ(utf8_incomplete_tail("\xC3\xA9"), 0u);
}

}  // namespace
}  // namespace ingot
