// Copyright ingot authors. Apache-2.0.
#include "core/utf8.h"

namespace ingot {
namespace {

// For a lead byte: how many continuation bytes follow and the range of the first of them
// (Unicode Table 3-7, well-formed UTF-8 byte sequences); 0 continuations: not a lead byte.
struct Lead {
  int more = 0;
  unsigned char lo = 0x80, hi = 0xBF;
};

Lead lead(unsigned char c) {
  if (c >= 0xC2 && c <= 0xDF) return {1, 0x80, 0xBF};
  if (c == 0xE0) return {2, 0xA0, 0xBF};
  if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) return {2, 0x80, 0xBF};
  if (c == 0xED) return {2, 0x80, 0x9F};  // no surrogates
  if (c == 0xF0) return {3, 0x90, 0xBF};
  if (c >= 0xF1 && c <= 0xF3) return {3, 0x80, 0xBF};
  if (c == 0xF4) return {3, 0x80, 0x8F};  // at most U+10FFFF
  return {};
}

// The well-formed bytes from s[i] on that a character starting there can use: 1 + more when the
// character is complete, else the length of its longest valid prefix (a maximal subpart).
size_t valid_prefix(std::string_view s, size_t i, const Lead& l) {
  size_t k = 1;
  for (int m = 0; m < l.more; ++m, ++k) {
    if (i + k >= s.size()) return k;
    const unsigned char c = static_cast<unsigned char>(s[i + k]);
    const unsigned char lo = m == 0 ? l.lo : 0x80, hi = m == 0 ? l.hi : 0xBF;
    if (c < lo || c > hi) return k;
  }
  return k;
}

}  // namespace

std::string utf8_sanitize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
      ++i;
      continue;
    }
    const Lead l = lead(c);
    const size_t k = l.more > 0 ? valid_prefix(s, i, l) : 1;
    if (l.more > 0 && k == static_cast<size_t>(l.more) + 1)
      out.append(s.substr(i, k));
    else
      out.append("\xEF\xBF\xBD");
    i += k;
  }
  return out;
}

size_t utf8_incomplete_tail(std::string_view s) {
  const size_t n = s.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const size_t i = n - back;
    const Lead l = lead(static_cast<unsigned char>(s[i]));
    if (l.more == 0) {
      if ((static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) continue;  // a continuation: look further back
      return 0;
    }
    // A lead byte: incomplete when all that follows is a valid prefix shorter than the character.
    return valid_prefix(s, i, l) == back && back < static_cast<size_t>(l.more) + 1 ? back : 0;
  }
  return 0;
}

}  // namespace ingot
