// Copyright ingot authors. Apache-2.0.
//
// The LLM readers' test data: the folder tests/llm/make_gguf_cases.py writes (ctest passes it as
// INGOT_GGUF_CASES) and its raw little-endian float32 files of expected values.
#pragma once

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace ingot::llm::testing {

inline std::string cases_dir() {
  const char* d = std::getenv("INGOT_GGUF_CASES");
  return d ? d : "";
}

inline std::vector<float> read_f32(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<float> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), v.size() * 4);
  return v;
}

}  // namespace ingot::llm::testing
