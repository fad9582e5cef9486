// Copyright ingot authors. Apache-2.0.
//
// UTF-8 for text that leaves ingot (streamed LLM output, JSON): a byte-level tokenizer's tokens
// are bytes, and a model may emit any sequence of them, so decoded text is not always valid UTF-8.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ingot {

/// `s` with every ill-formed part replaced by U+FFFD, one per maximal subpart (Unicode's
/// "substitution of maximal subparts", as Python's bytes.decode(errors="replace")); valid text
/// comes back unchanged.
std::string utf8_sanitize(std::string_view s);

/// How many bytes at the end of `s` begin a character that more bytes could still complete (0 to
/// 3): what a stream holds back until the next token.
size_t utf8_incomplete_tail(std::string_view s);

}  // namespace ingot
