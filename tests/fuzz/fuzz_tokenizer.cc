// Copyright ingot authors. Apache-2.0.
//
// libFuzzer target for the tokenizer.json reader (src/llm/tokenizer.*): any bytes must load or give
// an error, never a crash; a tokenizer that loads encodes and decodes a fixed text (special tokens,
// digits, non-ASCII and invalid UTF-8 included) without one. Seeds: two small tokenizer.json files
// (a ByteLevel one and a Digits/Split/ByteLevel Sequence, scripts/test.sh).
#include <cstddef>
#include <cstdint>
#include <string>

#include "llm/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ingot::llm;
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto t = BpeTokenizer::from_tokenizer_json(text, "<s>", "</s>");
  if (!t.ok()) return 0;
  static const std::string probe = "<s>Hello, w\xC3\xB6rld 12345 \xF0\x9F\x98\x80 ab\xFF\xFE  \n\t</s>x";
  auto ids = (*t)->encode(probe);
  if (ids.ok()) {
    auto back = (*t)->decode(*ids);
    (void)back;
  }
  return 0;
}
