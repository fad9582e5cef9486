// Copyright ingot authors. Apache-2.0.
//
// BPE tokenizers from a Hugging Face tokenizer.json or from a GGUF file's tokenizer metadata, in
// two families:
//   - byte-level BPE (GPT-2's scheme: SmolLM, Llama 3, Qwen2, GPT-2): tokenizer.ggml.tokens /
//     merges / token_type and the pre-tokenizer named by tokenizer.ggml.pre. Text is split on the
//     special (control and user-defined) tokens first, then pre-tokenized with the model's regular
//     expression (PCRE2, Unicode classes), each piece mapped byte by byte to GPT-2's printable
//     characters and merged by merge rank, as Hugging Face `tokenizers` does; decode maps back to
//     the bytes.
//   - SentencePiece-style BPE (Llama 2, Mistral, TinyLlama): spaces spelled "▁", no regex split,
//     <0xXX> byte tokens for characters the vocabulary lacks; see llm/sentencepiece.h.
// Both are tested against `tokenizers` on a corpus, the GGUF "llama" vocabulary against llama.cpp.
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

class SentencePieceModel;

class BpeTokenizer {
 public:
  /// From tokenizer.ggml.model == "gpt2" metadata; pre-tokenizers "gpt2"/"default" (GPT-2's
  /// regex) and "smollm" (each digit alone, then GPT-2's regex). Or from "llama" metadata
  /// (SentencePiece BPE, as llama.cpp tokenizes it): tokens, scores, token_type,
  /// add_space_prefix (default true); BOS/EOS default to ids 1/2 as in llama.cpp. Other models and
  /// pre-tokenizers are kUnsupported, named.
  static Result<std::unique_ptr<BpeTokenizer>> from_gguf(const GgufFile& file);
  /// From a Hugging Face tokenizer.json holding a byte-level BPE: model.vocab / merges (either
  /// spelling), added_tokens (matched in the text first), ignore_merges, and a pre-tokenizer of
  /// ByteLevel (GPT-2's regex) or a Sequence of Digits (individual), Split (an isolated regex:
  /// Llama 3, Qwen2) and ByteLevel. Without a ByteLevel pre-tokenizer, a SentencePiece-style BPE
  /// (byte_fallback, Llama 2's normalizer or a Metaspace pre-tokenizer: SentencePieceModel says
  /// which options it runs). BOS/EOS are named by their text (tokenizer_config.json's bos_token /
  /// eos_token; "" for none). What is not run (a normalizer on a byte-level BPE, byte_fallback
  /// under ByteLevel, added tokens matched after normalization) is kUnsupported, named.
  static Result<std::unique_ptr<BpeTokenizer>> from_tokenizer_json(const std::string& json_text,
                                                                   const std::string& bos_token = "",
                                                                   const std::string& eos_token = "");
  ~BpeTokenizer();

  /// Token ids of `text` (no BOS/EOS added; special tokens written in the text are matched).
  Result<std::vector<int32_t>> encode(const std::string& text) const;
  /// The text of `ids` (special tokens as their text); an error for an id outside the vocabulary.
  /// A SentencePiece-style BPE runs its decoder, which drops the "▁" its encode prepended, so
  /// the text of a list is not the concatenation of its tokens' texts there: see piece().
  Result<std::string> decode(const std::vector<int32_t>& ids) const;
  /// The bytes token `id` adds to a text streamed token by token: decode({id}) for byte-level BPE;
  /// for SentencePiece-style BPE llama.cpp's token_to_piece ("▁" a space, <0xXX> its byte, no
  /// leading space removed). An error for an id outside the vocabulary.
  Result<std::string> piece(int32_t id) const;

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
  /// One stretch of text between special tokens; `at_start`: it begins the input.
  void encode_segment(const std::string& text, bool at_start, std::vector<int32_t>* out) const;
  Status read_llama_vocab(const GgufFile& file);

  std::vector<std::string> tokens_;
  std::unordered_map<std::string, int32_t> ids_;
  std::unordered_map<std::string, int32_t> merge_rank_;  // "left right" -> rank
  std::vector<std::string> specials_;                    // longest first
  std::vector<std::string> normalized_specials_;         // tokenizer.json's normalized added tokens, longest first
  std::vector<bool> special_id_;                         // per id: its text is a special token's
  void index_specials();                                 // sorts both lists, fills special_id_
  bool split_digits_ = false;
  bool ignore_merges_ = false;  ///< a pre-token piece that is in the vocabulary is taken whole
  int32_t bos_ = -1, eos_ = -1;
  bool add_bos_ = false;
  void* regex_ = nullptr;  // pcre2_code_8*: the pre-tokenizer
  void* digit_ = nullptr;  // pcre2_code_8*: one digit (split_digits_)
  std::string byte_char_[256];
  std::unordered_map<std::string, uint8_t> char_byte_;
  /// Set for a SentencePiece-style BPE: it merges and decodes in place of merge_rank_, regex_, byte_char_.
  std::unique_ptr<SentencePieceModel> spm_;
  mutable std::mutex cache_mu_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

}  // namespace ingot::llm
