// Copyright ingot authors. Apache-2.0.
//
// SentencePiece-style BPE (src/llm/sentencepiece.*) on tiny vocabularies whose ids are worked out
// by hand below (and were checked against Hugging Face `tokenizers` and llama.cpp when written),
// and every option the readers do not run refused as kUnsupported, named. The corpus-scale
// comparison against both libraries is tests/llm/test_tokenizers_oracle.py.
#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "llm/gguf.h"
#include "llm/tokenizer.h"

namespace ingot::llm {
namespace {

using Ids = std::vector<int32_t>;

// Llama 2's layout in small: <unk> <s> </s>, two byte tokens (é is C3 A9), pieces; merges by rank
// "▁ a" < "a b" < "▁a b". Llama 2's normalizer (Prepend "▁", Replace " " -> "▁"), no
// pre-tokenizer, Llama 2's decoder chain.
const char* kLlama2 = R"({"version": "1.0",
 "added_tokens": [
  {"id": 0, "content": "<unk>", "special": true, "normalized": false,
   "single_word": false, "lstrip": false, "rstrip": false},
  {"id": 1, "content": "<s>", "special": true, "normalized": false,
   "single_word": false, "lstrip": false, "rstrip": false},
  {"id": 2, "content": "</s>", "special": true, "normalized": false,
   "single_word": false, "lstrip": false, "rstrip": false}],
 "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"},
   {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
 "pre_tokenizer": null,
 "decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
   {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
 "model": {"type": "BPE", "dropout": null, "unk_token": "<unk>", "continuing_subword_prefix": null,
   "end_of_word_suffix": null, "fuse_unk": true, "byte_fallback": true, "ignore_merges": false,
   "vocab": {"<unk>": 0, "<s>": 1, "</s>": 2, "<0xC3>": 3, "<0xA9>": 4, "\u2581": 5, "a": 6, "b": 7,
             "\u2581a": 8, "ab": 9, "\u2581ab": 10},
   "merges": ["\u2581 a", "a b", "\u2581a b"]}})";

std::string with(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

TEST(TokenizerSpm, Llama2TokenizerJson) {
  auto t = BpeTokenizer::from_tokenizer_json(kLlama2, "<s>", "</s>");
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  const BpeTokenizer& tok = **t;
  // "ab ab" -> "▁ab▁ab": "▁ a" twice (leftmost first), then "▁a b" twice.
  EXPECT_EQ(tok.encode("ab ab").value(), (Ids{10, 10}));
  // "▁é": é is no token, so its bytes' tokens.
  EXPECT_EQ(tok.encode("\xc3\xa9").value(), (Ids{5, 3, 4}));
  // The normalizer prepends "▁" to every stretch between special tokens.
  EXPECT_EQ(tok.encode("<s>ab").value(), (Ids{1, 10}));
  EXPECT_EQ(tok.encode(" ab").value(), (Ids{5, 10}));
  // x has no token and no byte token: <unk>, consecutive ones fused (fuse_unk).
  EXPECT_EQ(tok.encode("xx y").value(), (Ids{5, 0, 5, 0}));
  EXPECT_EQ(tok.encode("").value(), Ids{});
  // Decoder: "▁" -> " ", byte runs to their bytes (or U+FFFD each when not UTF-8), fused, one
  // leading space stripped.
  EXPECT_EQ(tok.decode({1, 10, 5, 3, 4}).value(), "<s> ab \xc3\xa9");
  EXPECT_EQ(tok.decode({10, 3}).value(), "ab\xef\xbf\xbd");
  // Streaming pieces keep their spaces and raw bytes.
  EXPECT_EQ(tok.piece(10).value(), " ab");
  EXPECT_EQ(tok.piece(3).value(), "\xc3");
  EXPECT_EQ(tok.piece(1).value(), "<s>");
  EXPECT_FALSE(tok.piece(11).ok());
  EXPECT_FALSE(tok.decode({11}).ok());
  EXPECT_EQ(tok.bos_id(), 1);
  EXPECT_EQ(tok.eos_id(), 2);
  EXPECT_TRUE(tok.add_bos());
}

TEST(TokenizerSpm, MetaspacePrependFirst) {
  // Mistral's newer spelling: no normalizer, Metaspace(prepend_scheme first, split false) and
  // its decoder. "first": only a stretch at the very start of the input gets the "▁".
  nlohmann::json j = nlohmann::json::parse(kLlama2);
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = {
      {"type", "Metaspace"}, {"replacement", "\xe2\x96\x81"}, {"prepend_scheme", "first"}, {"split", false}};
  j["decoder"] = j["pre_tokenizer"];
  auto t = BpeTokenizer::from_tokenizer_json(j.dump());
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ((*t)->encode("ab ab").value(), (Ids{10, 10}));
  EXPECT_EQ((*t)->encode("<s>ab").value(), (Ids{1, 9}));
  EXPECT_EQ((*t)->encode("<s> ab").value(), (Ids{1, 10}));
  EXPECT_EQ((*t)->encode(" ab").value(), (Ids{10}));  // already starts with "▁": none added
  // Metaspace's decoder drops every "▁" of the first token and has no byte fallback.
  EXPECT_EQ((*t)->decode({5, 5, 10, 3}).value(), "  ab<0xC3>");
}

TEST(TokenizerSpm, UnsupportedOptionsAreNamed) {
  struct Case {
    const char* from;
    const char* to;
    const char* named;
  };
  const Case cases[] = {
      {R"({"type": "Prepend", "prepend": "\u2581"})", R"({"type": "NFKC"})", "normalizer 'NFKC'"},
      {R"("pattern": {"String": " "}, "content": "\u2581"})", R"("pattern": {"Regex": " +"}, "content": "\u2581"})",
       "Regex"},
      {R"("pre_tokenizer": null)", R"("pre_tokenizer": {"type": "Whitespace"})", "pre-tokenizer 'Whitespace'"},
      {R"("pre_tokenizer": null)",
       R"("pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Metaspace"}, {"type": "Digits"}]})",
       "pre-tokenizer 'Digits'"},
      {R"("pre_tokenizer": null)", R"("pre_tokenizer": {"type": "Metaspace", "prepend_scheme": "sometimes"})",
       "prepend_scheme 'sometimes'"},
      {R"("dropout": null)", R"("dropout": 0.1)", "dropout"},
      {R"("continuing_subword_prefix": null)", R"("continuing_subword_prefix": "##")",
       "continuing_subword_prefix '##'"},
      {R"("end_of_word_suffix": null)", R"("end_of_word_suffix": "</w>")", "end_of_word_suffix '</w>'"},
      {R"({"type": "Fuse"})", R"({"type": "WordPiece"})", "decoder 'WordPiece'"},
      {R"({"type": "Fuse"})", R"({"type": "ByteLevel"})", "decoder 'ByteLevel'"},
      {R"({"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "})",
       R"({"type": "Replace", "pattern": {"Regex": "\u2581"}, "content": " "})", "decoder Replace"},
      // An added token `tokenizers` would match in the normalized text ("▁<s>" after Prepend).
      {R"("content": "<s>", "special": true, "normalized": false)",
       R"("content": "<s>", "special": true, "normalized": true)", "added token '<s>' is normalized"},
      {R"("lstrip": false, "rstrip": false}],)", R"("lstrip": true, "rstrip": false}],)",
       "added token '</s>' has lstrip"},
      // byte_fallback under a byte-level pre-tokenizer.
      {R"("pre_tokenizer": null)", R"("pre_tokenizer": {"type": "ByteLevel"})", "byte_fallback under a ByteLevel"},
      {R"("type": "BPE")", R"("type": "Unigram")", "model type 'Unigram'"},
  };
  for (const Case& c : cases) {
    auto r = BpeTokenizer::from_tokenizer_json(with(kLlama2, c.from, c.to));
    ASSERT_FALSE(r.ok()) << c.named;
    EXPECT_EQ(r.status().code(), StatusCode::kUnsupported) << r.status().to_string();
    EXPECT_NE(r.status().message().find(c.named), std::string::npos) << r.status().to_string();
  }
  // Malformed files are kInvalidModel: a merge of tokens outside the vocabulary, an unknown
  // unk_token, a field of the wrong type.
  for (const auto& [from, to] : {std::pair{R"("\u2581a b"])", R"("\u2581a x"])"},
                                 std::pair{R"("unk_token": "<unk>")", R"("unk_token": "<nope>")"},
                                 std::pair{R"("fuse_unk": true)", R"("fuse_unk": "yes")"},
                                 std::pair{R"("prepend": "\u2581")", R"("prepend": 7)"}}) {
    auto r = BpeTokenizer::from_tokenizer_json(with(kLlama2, from, to));
    ASSERT_FALSE(r.ok()) << to;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidModel) << r.status().to_string();
  }
}

// ---- GGUF "llama" vocabularies, written by hand ------------------------------------------------

// A GGUF v3 file of metadata only (no tensors).
struct GgufWriter {
  uint64_t kv = 0;
  std::string body;  // the key/value pairs, after the header
  template <class T>
  void raw(T v) {
    body.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  void key(const std::string& k, uint32_t type) {
    raw<uint64_t>(k.size());
    body += k;
    raw<uint32_t>(type);
    ++kv;
  }
  void string(const std::string& k, const std::string& v) {
    key(k, 8);
    raw<uint64_t>(v.size());
    body += v;
  }
  void strings(const std::string& k, const std::vector<std::string>& v) {
    key(k, 9);
    raw<uint32_t>(8);
    raw<uint64_t>(v.size());
    for (const std::string& s : v) {
      raw<uint64_t>(s.size());
      body += s;
    }
  }
  void floats(const std::string& k, const std::vector<float>& v) {
    key(k, 9);
    raw<uint32_t>(6);
    raw<uint64_t>(v.size());
    for (float f : v) raw(f);
  }
  void ints(const std::string& k, const std::vector<int32_t>& v) {
    key(k, 9);
    raw<uint32_t>(5);
    raw<uint64_t>(v.size());
    for (int32_t i : v) raw(i);
  }
  void boolean(const std::string& k, bool v) {
    key(k, 7);
    raw<uint8_t>(v ? 1 : 0);
  }
  std::string file() const {
    std::string out = "GGUF";
    const uint32_t version = 3;
    const uint64_t tensors = 0;
    out.append(reinterpret_cast<const char*>(&version), sizeof(version));
    out.append(reinterpret_cast<const char*>(&tensors), sizeof(tensors));
    out.append(reinterpret_cast<const char*>(&kv), sizeof(kv));
    return out + body;
  }
};

// Tokens (types: 2 unknown, 3 control, 6 byte, 1 normal, 4 user-defined) and scores; "aa" and "ab"
// outscore "▁a", and "▁ab" is no token.
GgufWriter llama_vocab(const std::string& model = "llama") {
  GgufWriter w;
  w.string("tokenizer.ggml.model", model);
  w.strings("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "<0xC3>", "<0xA9>", "\xe2\x96\x81", "a", "b",
                                      "\xe2\x96\x81"
                                      "a",
                                      "ab", "aa", "<|u|>"});
  w.floats("tokenizer.ggml.scores", {0, 0, 0, 0, 0, -1, -1, -1, -5, -1, -2, 0});
  w.ints("tokenizer.ggml.token_type", {2, 3, 3, 6, 6, 1, 1, 1, 1, 1, 1, 4});
  return w;
}

Result<std::unique_ptr<BpeTokenizer>> read(const std::string& bytes, std::unique_ptr<GgufFile>* keep) {
  auto f = GgufFile::parse(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "vocab.gguf");
  if (!f.ok()) return f.status();
  *keep = std::move(*f);
  return BpeTokenizer::from_gguf(**keep);
}

TEST(TokenizerSpm, GgufLlamaVocabularyMergesByScore) {
  const std::string bytes = llama_vocab().file();
  std::unique_ptr<GgufFile> file;
  auto t = read(bytes, &file);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  const BpeTokenizer& tok = **t;
  // "▁aaa": "aa" (-2) beats "▁a" (-5); of its two places the leftmost merges first.
  EXPECT_EQ(tok.encode("aaa").value(), (Ids{5, 10, 6}));
  // "▁ab▁ab": "ab" twice; "▁ab" is no token, so "▁" stays alone.
  EXPECT_EQ(tok.encode("ab ab").value(), (Ids{5, 9, 5, 9}));
  // A user-defined token is matched first; the text after it gets its own space prefix; é to bytes.
  EXPECT_EQ(tok.encode("<|u|>\xc3\xa9").value(), (Ids{11, 5, 3, 4}));
  // llama_detokenize: the first piece's leading space dropped, control tokens shown.
  EXPECT_EQ(tok.decode({1, 5, 9, 3, 4}).value(), "<s> ab\xc3\xa9");
  EXPECT_EQ(tok.decode({5, 9}).value(), "ab");
  EXPECT_EQ(tok.piece(5).value(), " ");
  EXPECT_EQ(tok.piece(4).value(), "\xa9");
  // llama.cpp's defaults: <s> = 1, </s> = 2, BOS added.
  EXPECT_EQ(tok.bos_id(), 1);
  EXPECT_EQ(tok.eos_id(), 2);
  EXPECT_TRUE(tok.add_bos());

  GgufWriter no_prefix = llama_vocab();
  no_prefix.boolean("tokenizer.ggml.add_space_prefix", false);
  const std::string bytes2 = no_prefix.file();
  std::unique_ptr<GgufFile> file2;
  auto u = read(bytes2, &file2);
  ASSERT_TRUE(u.ok()) << u.status().to_string();
  EXPECT_EQ((*u)->encode("ab ab").value(), (Ids{9, 5, 9}));
  EXPECT_EQ((*u)->decode({5, 9}).value(), " ab");
}

TEST(TokenizerSpm, GgufRefusals) {
  std::unique_ptr<GgufFile> file;
  const std::string bert = llama_vocab("bert").file();
  auto r = read(bert, &file);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(r.status().message().find("'bert'"), std::string::npos) << r.status().to_string();
  GgufWriter short_scores;
  short_scores.string("tokenizer.ggml.model", "llama");
  short_scores.strings("tokenizer.ggml.tokens", {"<unk>", "a"});
  short_scores.floats("tokenizer.ggml.scores", {0});
  const std::string bytes = short_scores.file();
  std::unique_ptr<GgufFile> file2;
  auto s = read(bytes, &file2);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidModel) << s.status().to_string();
}

}  // namespace
}  // namespace ingot::llm
