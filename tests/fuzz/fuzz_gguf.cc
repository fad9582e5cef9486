// Copyright ingot authors. Apache-2.0.
//
// libFuzzer target for the GGUF reader (src/llm/gguf.*): any bytes must parse or give an error,
// never a crash or a read past the end; every tensor a parse accepts is dequantized (where its
// type is one ingot reads) to touch all of its bytes. Seeds: the files tests/llm/make_gguf_cases.py
// writes and a cut of the real SmolLM2 GGUF's header (scripts/test.sh).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "llm/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ingot::llm;
  std::vector<uint8_t> copy(data, data + size);  // exact-size buffer: ASan sees any overread
  auto f = GgufFile::parse(copy.data(), copy.size());
  if (!f.ok()) return 0;
  for (const GgufTensor& t : (*f)->tensors()) {
    if (t.numel() > (1 << 20)) continue;
    auto v = dequantize(t);
    (void)v;
  }
  return 0;
}
