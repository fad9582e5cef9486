// Copyright ingot authors. Apache-2.0.
//
// SentencePiece-style BPE (Llama 2, Mistral, TinyLlama, Gemma's tokenizer.json): the model half of
// BpeTokenizer for vocabularies that spell a space "▁" (U+2581) and fall back to <0xXX> byte
// tokens for characters they lack. Unlike byte-level BPE there is no regex pre-split: each stretch
// of text between special tokens is rewritten (spaces to "▁", a "▁" prepended) and merged whole.
// Two merge rules exist, and each reader keeps its own source's:
//   - Hugging Face tokenizer.json (`tokenizers`' BPE with byte_fallback): the adjacent pair of
//     lowest merge rank first, leftmost among equals; the decoder is the file's own chain.
//   - GGUF tokenizer.ggml.model "llama" (llama.cpp's SPM tokenizer): the adjacent pair whose
//     concatenation is a vocabulary token of highest score first; decode is llama_detokenize's.
// What either reader does not run (a normalizer other than Prepend/Replace, a pre-tokenizer other
// than Metaspace, dropout, subword prefixes, a decoder step it lacks) is kUnsupported, named.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/status.h"

namespace ingot::llm {

class SentencePieceModel {
 public:
  /// From a tokenizer.json whose model is a BPE under no ByteLevel pre-tokenizer: model.vocab,
  /// merges (either spelling; each pair and its concatenation must be in model.vocab),
  /// byte_fallback, unk_token, fuse_unk, ignore_merges; normalizer Prepend / Replace (string
  /// patterns) or a Sequence of them (Llama 2's); pre-tokenizer none or Metaspace (prepend_scheme
  /// first / always / never, split); decoder a Sequence of Replace, ByteFallback, Fuse, Strip and
  /// Metaspace steps, or none (tokens joined by spaces, as `tokenizers` does).
  static Result<std::unique_ptr<SentencePieceModel>> from_tokenizer_json(const nlohmann::json& tokenizer);
  /// From a GGUF "llama" vocabulary, as llama.cpp reads it: `scores` and `types` (GGUF
  /// token_type: 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte) per token, and
  /// tokenizer.ggml.add_space_prefix.
  static std::unique_ptr<SentencePieceModel> from_llama_vocab(const std::vector<std::string>& tokens,
                                                              std::vector<float> scores, std::vector<int32_t> types,
                                                              bool add_space_prefix);
  ~SentencePieceModel();

  /// Appends the ids of `segment`, a stretch of text between special tokens (never empty);
  /// `at_start`: it begins the input (Metaspace's prepend_scheme "first" prepends only there).
  void encode(const std::string& segment, bool at_start, std::vector<int32_t>* out) const;
  /// The text of `ids` (each a valid index into `tokens`, the vocabulary's strings), special
  /// tokens included: `tokenizers`' decode(ids, skip_special_tokens=False), or llama.cpp's
  /// llama_detokenize(remove_special=false, unparse_special=true) for a GGUF vocabulary.
  std::string decode(const std::vector<int32_t>& ids, const std::vector<std::string>& tokens) const;
  /// The bytes one token adds to a text streamed token by token (llama.cpp's token_to_piece with
  /// special tokens shown): "▁" as a space, a byte token as its byte, nothing stripped.
  std::string piece(int32_t id, const std::string& token) const;

 private:
  SentencePieceModel() = default;
  /// A normalizer step: Prepend (`prepend` set: `to` before a non-empty text) or Replace (`from` -> `to`).
  struct Rewrite {
    bool prepend = false;
    std::string from, to;
  };
  /// A decoder step over the list of token strings (`tokenizers`' decode_chain).
  struct DecodeStep {
    enum class Kind { kReplace, kByteFallback, kFuse, kStrip, kMetaspace } kind;
    std::string from, to;        ///< Replace; Strip's character in `from`; Metaspace's replacement in `from`
    size_t start = 0, stop = 0;  ///< Strip: at most this many characters from each end
    bool drop_first = false;     ///< Metaspace: the first token's replacements vanish (prepend_scheme not never)
  };
  void merge_by_rank(const std::string& piece, std::vector<int32_t>* out) const;
  void merge_by_score(const std::string& text, std::vector<int32_t>* out) const;
  void append_bytes(const std::string& text, std::vector<int32_t>* out) const;

  std::unordered_map<std::string, int32_t> vocab_;  ///< the model's tokens (tokenizer.json: not the added ones)
  std::array<int32_t, 256> byte_id_;                ///< each byte's <0xXX> token, or -1
  // The text side: normalizer rewrites, then the Metaspace pre-tokenizer.
  std::vector<Rewrite> normalizer_;
  bool metaspace_ = false;
  std::string replacement_;  ///< Metaspace's stand-in for a space
  enum class Prepend { kNever, kFirst, kAlways } prepend_ = Prepend::kNever;
  bool split_ = false;  ///< Metaspace split: each "▁" starts a new piece
  // tokenizer.json's BPE: merges by rank over ids.
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges_;  ///< (left, right) -> (rank, merged id)
  bool byte_fallback_ = false, fuse_unk_ = false, ignore_merges_ = false;
  int32_t unk_ = -1;
  bool has_decoder_ = false;
  std::vector<DecodeStep> decoder_;
  // GGUF "llama": merges by score, decode by token type.
  bool by_score_ = false;
  bool add_space_prefix_ = true;
  std::vector<float> scores_;
  std::vector<int32_t> types_;
};

}  // namespace ingot::llm
