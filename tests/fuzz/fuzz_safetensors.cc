// Copyright ingot authors. Apache-2.0.
//
// libFuzzer target for the safetensors reader (src/llm/safetensors.*): any bytes must parse or
// give an error, never a crash or a read past the end; every tensor a parse accepts is converted
// to floats to touch all of its bytes. Seeds: the files tests/llm/make_gguf_cases.py writes.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "llm/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ingot::llm;
  std::vector<uint8_t> copy(data, data + size);  // exact-size buffer: ASan sees any overread
  auto f = SafetensorsFile::parse(copy.data(), copy.size());
  if (!f.ok()) return 0;
  for (const auto& [name, t] : (*f)->tensors()) {
    if (t.nbytes > (1u << 22)) continue;
    auto v = to_floats(t);
    (void)v;
  }
  return 0;
}
