// Copyright ingot authors. Apache-2.0.
//
// The safetensors reader (src/llm/safetensors.*): model folders written by Hugging Face's
// `safetensors` package, one file and sharded with an index (GgufCases.Safetensors*: data from
// tests/llm/make_gguf_cases.py, INGOT_GGUF_CASES), and hostile files made by hand (Safetensors.*).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "llm/safetensors.h"
#include "unit/llm_cases.h"

namespace ingot::llm {
namespace {

using testing::cases_dir;
using testing::read_f32;

TEST(GgufCases, SafetensorsFoldersMatchTheSafetensorsPackage) {
  if (cases_dir().empty()) GTEST_SKIP() << "INGOT_GGUF_CASES not set (ctest sets it to make_gguf_cases.py's output)";
  for (const char* folder : {"st_single", "st_sharded"}) {
    SCOPED_TRACE(folder);
    auto m = SafetensorsModel::open(cases_dir() + "/" + folder);
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    ASSERT_EQ((*m)->tensors().size(), 8u);
    for (const auto& [name, t] : (*m)->tensors()) {
      auto got = to_floats(*t);
      ASSERT_TRUE(got.ok()) << name << ": " << got.status().to_string();
      const std::vector<float> want = read_f32(cases_dir() + "/st." + name + ".f32");
      ASSERT_EQ(got->size(), want.size()) << name;
      for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ((*got)[i], want[i]) << name << " element " << i;
    }
    const SafeTensor* up = (*m)->find("model.layers.0.mlp.up_proj.weight");
    ASSERT_NE(up, nullptr);
    EXPECT_EQ(up->dtype_name, "F16");
    EXPECT_EQ(up->shape, (std::vector<int64_t>{3, 5}));
  }
  auto single = SafetensorsFile::open(cases_dir() + "/st_single/model.safetensors");
  ASSERT_TRUE(single.ok());
  EXPECT_EQ((*single)->metadata().at("note"), "ingot");
}

std::string file_with_header(const std::string& header, size_t data_bytes) {
  std::string b(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(&b[0], &n, 8);
  return b + header + std::string(data_bytes, '\1');
}

TEST(Safetensors, MalformedFilesAreClearErrors) {
  auto parse = [](const std::string& b) {
    auto f = SafetensorsFile::parse(reinterpret_cast<const uint8_t*>(b.data()), b.size(), "t.safetensors");
    return f.ok() ? Status::Ok() : f.status();
  };
  auto expect_error = [&](const std::string& b, const std::string& needle) {
    Status s = parse(b);
    EXPECT_FALSE(s.ok()) << needle;
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
  };
  const std::string ok = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  EXPECT_TRUE(parse(file_with_header(ok, 8)).ok());
  expect_error("abc", "no header length");
  std::string huge(8, '\xff');
  expect_error(huge + "{}", "does not fit");
  expect_error(file_with_header("[1,2]", 0), "not a JSON object");
  expect_error(file_with_header("{\"a\":", 0), "not a JSON object");
  expect_error(file_with_header(ok, 4), "outside");
  expect_error(file_with_header(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8), "holds 8 bytes");
  expect_error(file_with_header(R"({"a":{"dtype":"Q9","shape":[2],"data_offsets":[0,8]}})", 8), "dtype 'Q9'");
  expect_error(file_with_header(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8), "bad dim");
  expect_error(file_with_header(R"({"a":{"dtype":"F32","shape":[2]}})", 8), "data_offsets");
  expect_error(file_with_header(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12), "overlap");
  EXPECT_EQ(SafetensorsModel::open("/no/such/folder").status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace ingot::llm
