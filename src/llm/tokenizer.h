// Copyright ingot authors. Apache-2.0.
//
// Byte-level BPE (GPT-2's scheme, used by SmolLM, Llama 3, Qwen2, GPT-2) from a Hugging Face
// tokenizer.json or from a GGUF file's tokenizer metadata: tokenizer.ggml.tokens / merges / token_type and the pre-tokenizer named by
// tokenizer.ggml.pre. Text is split on the special (control and user-defined) tokens first, then
// pre-tokenized with the model's regular expression (PCRE2, Unicode classes), each piece mapped
// byte by byte to GPT-2's printable characters and merged by merge rank, as Hugging Face
// `tokenizers` does; decode maps back to the bytes. Tested against `tokenizers` on a corpus.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "llm/gguf.h"

namespace ingot::llm {

class BpeTokenizer {
 public:
  /// From tokenizer.ggml.model == "gpt2" metadata; pre-tokenizers "gpt2"/"default" (GPT-2's
  /// regex) and "smollm" (each digit alone, then GPT-2's regex). Others are kUnsupported, named.
  static Result<std::unique_ptr<BpeTokenizer>> from_gguf(const GgufFile& file);
  /// From a Hugging Face tokenizer.json holding a byte-level BPE: model.vocab / merges (either
  /// spelling), added_tokens (matched in the text first), ignore_merges, and a pre-tokenizer of
  /// ByteLevel (GPT-2's regex) or a Sequence of Digits (individual), Split (an isolated regex:
  /// Llama 3, Qwen2) and ByteLevel. BOS/EOS are named by their text (tokenizer_config.json's
  /// bos_token / eos_token; "" for none). Normalizers and SentencePiece-style BPE (byte_fallback)
  /// are kUnsupported, named.
  static Result<std::unique_ptr<BpeTokenizer>> from_tokenizer_json(const std::string& json_text,
                                                                   const std::string& bos_token = "",
                                                                   const std::string& eos_token = "");
  ~BpeTokenizer();

  /// Token ids of `text` (no BOS/EOS added; special tokens written in the text are matched).
  Result<std::vector<int32_t>> encode(const std::string& text) const;
  /// The text of `ids` (special tokens as their text); an error for an id outside the vocabulary.
  Result<std::string> decode(const std::vector<int32_t>& ids) const;

  int32_t vocab_size() const { return static_cast<int32_t>(tokens_.size()); }
  int32_t bos_id() const { return bos_; }
  /// Whether a plain prompt starts with BOS: GGUF's tokenizer.ggml.add_bos_token where given (as
  /// llama.cpp reads it; SmolLM2 says false), else whenever a BOS id is known.
  bool add_bos() const { return add_bos_; }
  int32_t eos_id() const { return eos_; }
  const std::string& token(int32_t id) const { return tokens_[static_cast<size_t>(id)]; }

 private:
  BpeTokenizer() = default;
  Status compile_regex(const std::string& pattern);
  void init_byte_map();
  static Result<std::unique_ptr<BpeTokenizer>> read_tokenizer_json(const std::string& json_text,
                                                                   const std::string& bos_token,
                                                                   const std::string& eos_token);
  void bpe(const std::string& piece, std::vector<int32_t>* out) const;
  void encode_plain(const std::string& text, std::vector<int32_t>* out) const;

  std::vector<std::string> tokens_;
  std::unordered_map<std::string, int32_t> ids_;
  std::unordered_map<std::string, int32_t> merge_rank_;  // "left right" -> rank
  std::vector<std::string> specials_;                    // longest first
  std::vector<bool> special_id_;                         // per id: its text is a special token's
  void index_specials();                                 // sorts specials_, fills special_id_
  bool split_digits_ = false;
  bool ignore_merges_ = false;  ///< a pre-token piece that is in the vocabulary is taken whole
  int32_t bos_ = -1, eos_ = -1;
  bool add_bos_ = false;
  void* regex_ = nullptr;  // pcre2_code_8*: the pre-tokenizer
  void* digit_ = nullptr;  // pcre2_code_8*: one digit (split_digits_)
  std::string byte_char_[256];
  std::unordered_map<std::string, uint8_t> char_byte_;
  mutable std::mutex cache_mu_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

}  // namespace ingot::llm
