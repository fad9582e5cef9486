// Copyright ingot authors. Apache-2.0.
#include "llm/tokenizer.h"

#include "llm/sentencepiece.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <climits>
#include <unordered_set>

namespace ingot::llm {

namespace {

// GPT-2's pre-tokenizer (Hugging Face ByteLevel with use_regex).
constexpr const char* kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

void append_utf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

/// Length in bytes of the UTF-8 character starting with `c` (1 for invalid lead bytes).
size_t utf8_len(unsigned char c) {
  if (c >= 0xF0) return 4;
  if (c >= 0xE0) return 3;
  if (c >= 0xC0) return 2;
  return 1;
}

pcre2_code* compile(const std::string& pattern, std::string* error) {
  int code = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* re = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.c_str()), pattern.size(),
                                 PCRE2_UTF | PCRE2_UCP, &code, &offset, nullptr);
  if (!re) {
    PCRE2_UCHAR buf[256];
    pcre2_get_error_message(code, buf, sizeof(buf));
    *error = std::string(reinterpret_cast<char*>(buf)) + " at offset " + std::to_string(offset);
  }
  return re;
}

}  // namespace

BpeTokenizer::~BpeTokenizer() {
  if (regex_) pcre2_code_free(static_cast<pcre2_code*>(regex_));
  if (digit_) pcre2_code_free(static_cast<pcre2_code*>(digit_));
}

Status BpeTokenizer::compile_regex(const std::string& pattern) {
  std::string error;
  pcre2_code* re = compile(pattern, &error);
  if (!re) return internal_error("tokenizer: cannot compile the pre-tokenizer regex: ", error);
  regex_ = re;
  return Status::Ok();
}

Result<std::unique_ptr<BpeTokenizer>> BpeTokenizer::from_gguf(const GgufFile& file) {
  INGOT_ASSIGN_OR_RETURN(std::string model, file.get_string("tokenizer.ggml.model"));
  if (model != "gpt2" && model != "llama")
    return unsupported("tokenizer.ggml.model '", model,
                       "': ingot reads byte-level BPE ('gpt2') and SentencePiece BPE ('llama') tokenizers so far");
  const GgufValue* tokens = file.find("tokenizer.ggml.tokens");
  if (!tokens || tokens->strings.empty()) return invalid_model("GGUF has no tokenizer.ggml.tokens");
  std::unique_ptr<BpeTokenizer> t(new BpeTokenizer());
  t->tokens_ = tokens->strings;
  for (size_t i = 0; i < t->tokens_.size(); ++i) t->ids_.emplace(t->tokens_[i], static_cast<int32_t>(i));
  const GgufValue* types = file.find("tokenizer.ggml.token_type");
  if (model == "llama") {
    INGOT_RETURN_IF_ERROR(t->read_llama_vocab(file));
  } else {
    const GgufValue* merges = file.find("tokenizer.ggml.merges");
    if (!merges) return invalid_model("GGUF has no tokenizer.ggml.merges");
    std::string pre = "default";
    if (const GgufValue* p = file.find("tokenizer.ggml.pre")) pre = p->s;
    if (pre == "smollm") {
      t->split_digits_ = true;
    } else if (pre != "gpt2" && pre != "default") {
      return unsupported("tokenizer.ggml.pre '", pre, "': ingot has the 'gpt2', 'default' and 'smollm' pre-tokenizers");
    }
    INGOT_RETURN_IF_ERROR(t->compile_regex(kGpt2Regex));
    if (t->split_digits_) {
      std::string error;
      t->digit_ = compile(R"(\p{N})", &error);
      if (!t->digit_) return internal_error("tokenizer: cannot compile the digit regex: ", error);
    }
    for (size_t i = 0; i < merges->strings.size(); ++i)
      t->merge_rank_.emplace(merges->strings[i], static_cast<int32_t>(i));
    t->init_byte_map();
  }
  // Special tokens, matched in the text first: control and user-defined ones, and for llama.cpp's
  // SentencePiece vocabularies the unknown token too (llama.cpp's cache_special_tokens).
  if (types) {
    for (size_t i = 0; i < types->ints.size() && i < t->tokens_.size(); ++i) {
      const int64_t ty = types->ints[i];
      if ((ty == 3 || ty == 4 || (ty == 2 && t->spm_)) && !t->tokens_[i].empty()) t->specials_.push_back(t->tokens_[i]);
    }
  }
  t->index_specials();
  auto id_of = [&](const char* key, int32_t fallback) -> int32_t {
    auto r = file.get_int(key);
    const int64_t id = r.ok() ? *r : fallback;
    return id >= 0 && id < static_cast<int64_t>(t->tokens_.size()) ? static_cast<int32_t>(id) : -1;
  };
  // llama.cpp's defaults where the keys are missing: none for "gpt2", <s> = 1 and </s> = 2 for "llama".
  t->bos_ = id_of("tokenizer.ggml.bos_token_id", t->spm_ ? 1 : -1);
  t->eos_ = id_of("tokenizer.ggml.eos_token_id", t->spm_ ? 2 : -1);
  auto add_bos = file.get_int("tokenizer.ggml.add_bos_token");  // a GGUF bool
  t->add_bos_ = t->bos_ >= 0 && (!add_bos.ok() || *add_bos != 0);
  return t;
}

// A GGUF "llama" vocabulary: llama.cpp's SPM tokenizer (merges by score; tokenizer.ggml.merges,
// where present, are not used by it either).
Status BpeTokenizer::read_llama_vocab(const GgufFile& file) {
  const size_t n = tokens_.size();
  std::vector<float> scores;
  if (const GgufValue* s = file.find("tokenizer.ggml.scores")) {
    if (s->floats.size() != n)
      return invalid_model("GGUF tokenizer.ggml.scores has ", s->floats.size(), " entries for ", n, " tokens");
    scores.assign(s->floats.begin(), s->floats.end());  // float32 in the file: exact
  }
  std::vector<int32_t> types;
  if (const GgufValue* ty = file.find("tokenizer.ggml.token_type")) {
    if (ty->ints.size() != n)
      return invalid_model("GGUF tokenizer.ggml.token_type has ", ty->ints.size(), " entries for ", n, " tokens");
    types.assign(ty->ints.begin(), ty->ints.end());
  }
  auto prefix = file.get_int("tokenizer.ggml.add_space_prefix");  // a GGUF bool, true by default
  const bool add_space_prefix = !prefix.ok() || *prefix != 0;
  spm_ = SentencePieceModel::from_llama_vocab(tokens_, std::move(scores), std::move(types), add_space_prefix);
  return Status::Ok();
}

void BpeTokenizer::init_byte_map() {
  // GPT-2's byte -> printable character map: the printable Latin-1 bytes stand for themselves,
  // the other 68 bytes take the code points from 256 on, in byte order.
  uint32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    append_utf8(printable ? static_cast<uint32_t>(b) : next++, &byte_char_[b]);
    char_byte_[byte_char_[b]] = static_cast<uint8_t>(b);
  }
}

Result<std::unique_ptr<BpeTokenizer>> BpeTokenizer::from_tokenizer_json(const std::string& text,
                                                                        const std::string& bos_token,
                                                                        const std::string& eos_token) {
  // A field of the wrong JSON type (json::value and get throw on those) is a malformed file, not
  // a crash (found by fuzz_tokenizer: {"model": {"type": ["a b"]}}).
  try {
    return read_tokenizer_json(text, bos_token, eos_token);
  } catch (const nlohmann::json::exception& e) {
    return invalid_model("tokenizer.json: a field of the wrong type (", e.what(), ")");
  }
}

namespace {

/// Whether a tokenizer.json pre-tokenizer has a ByteLevel step (byte-level BPE) or not
/// (SentencePiece-style: none, or Metaspace).
bool has_byte_level(const nlohmann::json& pre) {
  if (!pre.is_object()) return false;
  if (pre.value("type", "") == "ByteLevel") return true;
  if (pre.value("type", "") != "Sequence" || !pre.contains("pretokenizers") || !pre["pretokenizers"].is_array())
    return false;
  for (const nlohmann::json& p : pre["pretokenizers"])
    if (has_byte_level(p)) return true;
  return false;
}

}  // namespace

Result<std::unique_ptr<BpeTokenizer>> BpeTokenizer::read_tokenizer_json(const std::string& text,
                                                                        const std::string& bos_token,
                                                                        const std::string& eos_token) {
  using nlohmann::json;
  const json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return invalid_model("tokenizer.json is not a JSON object");
  if (!j.contains("model") || !j["model"].is_object()) return invalid_model("tokenizer.json has no 'model'");
  const json& m = j["model"];
  const std::string type = m.value("type", "");
  if (type != "BPE") return unsupported("tokenizer.json model type '", type, "': ingot reads BPE models so far");
  const bool byte_fallback = m.value("byte_fallback", false);
  const bool byte_level = j.contains("pre_tokenizer") && has_byte_level(j["pre_tokenizer"]);
  const bool normalizer = j.contains("normalizer") && !j["normalizer"].is_null();
  std::unique_ptr<BpeTokenizer> t(new BpeTokenizer());
  // Vocabulary, then the added tokens (matched in the text before anything else runs).
  if (!m.contains("vocab") || !m["vocab"].is_object()) return invalid_model("tokenizer.json has no model.vocab");
  auto place = [&](const std::string& tok, int64_t id) -> Status {
    if (id < 0 || id > (int64_t{1} << 24)) return invalid_model("tokenizer.json: token id ", id, " out of range");
    if (static_cast<size_t>(id) >= t->tokens_.size()) t->tokens_.resize(static_cast<size_t>(id) + 1);
    t->tokens_[static_cast<size_t>(id)] = tok;
    t->ids_[tok] = static_cast<int32_t>(id);
    return Status::Ok();
  };
  for (auto it = m["vocab"].begin(); it != m["vocab"].end(); ++it) {
    if (!it.value().is_number_integer()) return invalid_model("tokenizer.json: vocab entry '", it.key(), "' has no id");
    INGOT_RETURN_IF_ERROR(place(it.key(), it.value().get<int64_t>()));
  }
  if (j.contains("added_tokens") && j["added_tokens"].is_array())
    for (const json& a : j["added_tokens"]) {
      if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() || !a.contains("content") ||
          !a["content"].is_string())
        return invalid_model("tokenizer.json: an added token without id or content");
      const std::string c = a["content"].get<std::string>();
      if (!byte_level) {
        // `tokenizers` matches a normalized added token in the normalized text, against its
        // content normalized too (Llama 2's Prepend makes "<x>" "▁<x>"): not run. Without a
        // normalizer it is matched in the raw text, after the others (encode).
        if (normalizer && a.value("normalized", false))
          return unsupported("tokenizer.json: added token '", c, "' is normalized (matched after the normalizer)");
        for (const char* k : {"lstrip", "rstrip", "single_word"})
          if (a.value(k, false)) return unsupported("tokenizer.json: added token '", c, "' has ", k);
      }
      INGOT_RETURN_IF_ERROR(place(c, a["id"].get<int64_t>()));
      if (!c.empty()) (a.value("normalized", false) ? t->normalized_specials_ : t->specials_).push_back(c);
    }
  t->index_specials();
  auto id_of = [&](const std::string& tok) -> int32_t {
    auto it = t->ids_.find(tok);
    return tok.empty() || it == t->ids_.end() ? -1 : it->second;
  };
  t->bos_ = id_of(bos_token);
  t->eos_ = id_of(eos_token);
  t->add_bos_ = t->bos_ >= 0;
  if (!byte_level) {  // SentencePiece-style: no ByteLevel step
    INGOT_ASSIGN_OR_RETURN(t->spm_, SentencePieceModel::from_tokenizer_json(j));
    return t;
  }
  if (byte_fallback) return unsupported("tokenizer.json: byte_fallback under a ByteLevel pre-tokenizer");
  if (normalizer)
    return unsupported("tokenizer.json normalizer '", j["normalizer"].value("type", "?"),
                       "' on a byte-level BPE is not run");
  if (m.contains("dropout") && !m["dropout"].is_null() && m["dropout"].get<double>() != 0.0)
    return unsupported("tokenizer.json: BPE dropout (a random tokenization)");
  for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (m.contains(k) && !m[k].is_null() && !m[k].get<std::string>().empty())
      return unsupported("tokenizer.json: BPE ", k, " '", m[k].get<std::string>(), "'");
  t->ignore_merges_ = m.value("ignore_merges", false);
  // The pre-tokenizer: ByteLevel with its regex (GPT-2's), or a Sequence of Digits (each digit
  // alone), Split (the model's own regex, its matches isolated) and ByteLevel without a regex.
  std::string pattern;
  bool seen_byte_level = false;
  auto one = [&](const json& p) -> Status {
    const std::string pt = p.value("type", "");
    if (pt == "ByteLevel") {
      if (p.value("add_prefix_space", false)) return unsupported("tokenizer.json: ByteLevel add_prefix_space");
      seen_byte_level = true;
      if (p.value("use_regex", true)) {
        if (!pattern.empty()) return unsupported("tokenizer.json: a Split regex and ByteLevel's own");
        pattern = kGpt2Regex;
      }
      return Status::Ok();
    }
    if (pt == "Digits") {
      if (!p.value("individual_digits", false)) return unsupported("tokenizer.json: Digits without individual_digits");
      if (seen_byte_level || !pattern.empty()) return unsupported("tokenizer.json: Digits after another pre-tokenizer");
      t->split_digits_ = true;
      return Status::Ok();
    }
    if (pt == "Split") {
      if (!p.contains("pattern") || !p["pattern"].is_object() || !p["pattern"].contains("Regex") ||
          !p["pattern"]["Regex"].is_string() || p.value("behavior", "") != "Isolated" || p.value("invert", false))
        return unsupported("tokenizer.json: a Split other than an isolated regex");
      if (!pattern.empty()) return unsupported("tokenizer.json: two pre-tokenizer regexes");
      pattern = p["pattern"]["Regex"].get<std::string>();
      return Status::Ok();
    }
    return unsupported("tokenizer.json pre-tokenizer '", pt, "'");
  };
  const json& pre = j["pre_tokenizer"];
  if (pre.value("type", "") == "Sequence") {
    if (!pre.contains("pretokenizers") || !pre["pretokenizers"].is_array())
      return invalid_model("tokenizer.json: a Sequence pre-tokenizer without pretokenizers");
    for (const json& p : pre["pretokenizers"]) INGOT_RETURN_IF_ERROR(one(p));
  } else {
    INGOT_RETURN_IF_ERROR(one(pre));
  }
  if (pattern.empty()) return unsupported("tokenizer.json: ingot reads byte-level BPE with a regex pre-tokenizer");
  INGOT_RETURN_IF_ERROR(t->compile_regex(pattern));
  if (t->split_digits_) {
    std::string error;
    t->digit_ = compile(R"(\p{N})", &error);
    if (!t->digit_) return internal_error("tokenizer: cannot compile the digit regex: ", error);
  }
  if (!m.contains("merges") || !m["merges"].is_array()) return invalid_model("tokenizer.json has no model.merges");
  int32_t rank = 0;
  for (const json& mg : m["merges"]) {
    std::string key;
    if (mg.is_string()) key = mg.get<std::string>();
    else if (mg.is_array() && mg.size() == 2 && mg[0].is_string() && mg[1].is_string())
      key = mg[0].get<std::string>() + " " + mg[1].get<std::string>();
    else return invalid_model("tokenizer.json: a merge that is neither \"a b\" nor [a, b]");
    t->merge_rank_.emplace(key, rank++);
  }
  t->init_byte_map();
  return t;
}

void BpeTokenizer::bpe(const std::string& piece, std::vector<int32_t>* out) const {
  {
    std::lock_guard<std::mutex> lock(cache_mu_);
    auto it = cache_.find(piece);
    if (it != cache_.end()) {
      out->insert(out->end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<std::string> sym;
  for (unsigned char c : piece) sym.push_back(byte_char_[c]);
  if (ignore_merges_) {  // Llama 3's tokenizer.json: a piece that is a token is taken whole
    std::string whole;
    for (const std::string& c : sym) whole += c;
    auto it = ids_.find(whole);
    if (it != ids_.end()) {
      out->push_back(it->second);
      return;
    }
  }
  while (sym.size() > 1) {
    int32_t best = INT32_MAX;
    size_t at = 0;
    for (size_t i = 0; i + 1 < sym.size(); ++i) {
      auto it = merge_rank_.find(sym[i] + " " + sym[i + 1]);
      if (it != merge_rank_.end() && it->second < best) best = it->second, at = i;
    }
    if (best == INT32_MAX) break;
    sym[at] += sym[at + 1];
    sym.erase(sym.begin() + static_cast<std::ptrdiff_t>(at) + 1);
  }
  std::vector<int32_t> ids;
  for (const std::string& s : sym) {
    auto it = ids_.find(s);
    if (it != ids_.end()) {
      ids.push_back(it->second);
      continue;
    }
    for (size_t k = 0; k < s.size(); k += utf8_len(static_cast<unsigned char>(s[k]))) {  // byte fallback
      auto b = ids_.find(s.substr(k, utf8_len(static_cast<unsigned char>(s[k]))));
      if (b != ids_.end()) ids.push_back(b->second);
    }
  }
  out->insert(out->end(), ids.begin(), ids.end());
  std::lock_guard<std::mutex> lock(cache_mu_);
  if (cache_.size() < 100000) cache_.emplace(piece, std::move(ids));
}

void BpeTokenizer::encode_plain(const std::string& text, std::vector<int32_t>* out) const {
  auto* re = static_cast<pcre2_code*>(regex_);
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(re, nullptr);
  auto split = [&](const std::string& seg) {
    PCRE2_SIZE pos = 0;
    while (pos < seg.size()) {
      int rc = pcre2_match(re, reinterpret_cast<PCRE2_SPTR>(seg.data()), seg.size(), pos, 0, md, nullptr);
      if (rc < 0) {  // nothing matches here (invalid UTF-8 among others): the rest as one piece
        bpe(seg.substr(pos), out);
        return;
      }
      PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
      if (ov[0] > pos) bpe(seg.substr(pos, ov[0] - pos), out);
      if (ov[1] == ov[0]) {  // an empty match: step one character
        const size_t n = utf8_len(static_cast<unsigned char>(seg[ov[0]]));
        bpe(seg.substr(ov[0], n), out);
        pos = ov[0] + n;
        continue;
      }
      bpe(seg.substr(ov[0], ov[1] - ov[0]), out);
      pos = ov[1];
    }
  };
  if (!split_digits_) {
    split(text);
  } else {
    // Hugging Face's Digits(individual_digits) before ByteLevel: each ASCII or Unicode digit alone.
    auto* digit = static_cast<pcre2_code*>(digit_);
    pcre2_match_data* dm = pcre2_match_data_create_from_pattern(digit, nullptr);
    PCRE2_SIZE pos = 0;
    while (pos < text.size()) {
      int rc = pcre2_match(digit, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), pos, 0, dm, nullptr);
      if (rc < 0) {
        split(text.substr(pos));
        break;
      }
      PCRE2_SIZE* ov = pcre2_get_ovector_pointer(dm);
      if (ov[0] > pos) split(text.substr(pos, ov[0] - pos));
      bpe(text.substr(ov[0], ov[1] - ov[0]), out);
      pos = ov[1];
    }
    pcre2_match_data_free(dm);
  }
  pcre2_match_data_free(md);
}

void BpeTokenizer::encode_segment(const std::string& text, bool at_start, std::vector<int32_t>* out) const {
  if (spm_) {
    spm_->encode(text, at_start, out);
  } else {
    encode_plain(text, out);
  }
}

namespace {

/// Calls on_text(stretch, offset in the input) for the text between matches of `specials` (sorted
/// longest first, so the leftmost match is the longest there) and on_special(token) for each match.
template <class OnText, class OnSpecial>
void split_on(const std::string& text, size_t offset, const std::vector<std::string>& specials, OnText on_text,
              OnSpecial on_special) {
  size_t start = 0, i = 0;
  while (i < text.size() && !specials.empty()) {
    const std::string* hit = nullptr;
    for (const std::string& s : specials)
      if (text.compare(i, s.size(), s) == 0) {
        hit = &s;
        break;
      }
    if (!hit) {
      ++i;
      continue;
    }
    if (i > start) on_text(text.substr(start, i - start), offset + start);
    on_special(*hit);
    i += hit->size();
    start = i;
  }
  if (start < text.size()) on_text(start == 0 ? text : text.substr(start), offset + start);
}

}  // namespace

Result<std::vector<int32_t>> BpeTokenizer::encode(const std::string& text) const {
  // As `tokenizers` does: the added tokens that are not normalized are matched in the input
  // first, then the normalized ones in the stretches left between them.
  std::vector<int32_t> out;
  auto special = [&](const std::string& s) { out.push_back(ids_.at(s)); };
  auto plain = [&](const std::string& piece, size_t at) { encode_segment(piece, at == 0, &out); };
  auto stretch = [&](const std::string& text_between, size_t at) {
    split_on(text_between, at, normalized_specials_, plain, special);
  };
  split_on(text, 0, specials_, stretch, special);
  return out;
}

void BpeTokenizer::index_specials() {
  auto longest_first = [](const std::string& a, const std::string& b) { return a.size() > b.size(); };
  std::stable_sort(specials_.begin(), specials_.end(), longest_first);
  std::stable_sort(normalized_specials_.begin(), normalized_specials_.end(), longest_first);
  std::unordered_set<std::string> set(specials_.begin(), specials_.end());
  set.insert(normalized_specials_.begin(), normalized_specials_.end());
  special_id_.assign(tokens_.size(), false);
  for (size_t i = 0; i < tokens_.size(); ++i) special_id_[i] = set.count(tokens_[i]) > 0;
}

Result<std::string> BpeTokenizer::piece(int32_t id) const {
  if (id < 0 || id >= vocab_size())
    return invalid_argument("piece: token id ", id, " outside the vocabulary of ", vocab_size());
  if (spm_) return spm_->piece(id, tokens_[static_cast<size_t>(id)]);
  return decode({id});
}

Result<std::string> BpeTokenizer::decode(const std::vector<int32_t>& ids) const {
  for (int32_t id : ids)
    if (id < 0 || id >= vocab_size())
      return invalid_argument("decode: token id ", id, " outside the vocabulary of ", vocab_size());
  if (spm_) return spm_->decode(ids, tokens_);
  std::string out;
  for (int32_t id : ids) {
    const std::string& t = tokens_[static_cast<size_t>(id)];
    if (special_id_[static_cast<size_t>(id)]) {
      out += t;
      continue;
    }
    for (size_t k = 0; k < t.size();) {
      const size_t n = utf8_len(static_cast<unsigned char>(t[k]));
      auto it = char_byte_.find(t.substr(k, n));
      if (it != char_byte_.end()) out.push_back(static_cast<char>(it->second));
      else out += t.substr(k, n);
      k += n;
    }
  }
  return out;
}

}  // namespace ingot::llm
