// Copyright ingot authors. Apache-2.0.
#include "llm/tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <climits>

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
  if (model != "gpt2")
    return unsupported("tokenizer.ggml.model '", model, "': ingot reads byte-level BPE ('gpt2') tokenizers so far");
  const GgufValue* tokens = file.find("tokenizer.ggml.tokens");
  const GgufValue* merges = file.find("tokenizer.ggml.merges");
  if (!tokens || tokens->strings.empty()) return invalid_model("GGUF has no tokenizer.ggml.tokens");
  if (!merges) return invalid_model("GGUF has no tokenizer.ggml.merges");
  std::string pre = "default";
  if (const GgufValue* p = file.find("tokenizer.ggml.pre")) pre = p->s;
  std::unique_ptr<BpeTokenizer> t(new BpeTokenizer());
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
  t->tokens_ = tokens->strings;
  for (size_t i = 0; i < t->tokens_.size(); ++i) t->ids_.emplace(t->tokens_[i], static_cast<int32_t>(i));
  for (size_t i = 0; i < merges->strings.size(); ++i) t->merge_rank_.emplace(merges->strings[i], static_cast<int32_t>(i));
  if (const GgufValue* types = file.find("tokenizer.ggml.token_type")) {
    for (size_t i = 0; i < types->ints.size() && i < t->tokens_.size(); ++i)
      if ((types->ints[i] == 3 || types->ints[i] == 4) && !t->tokens_[i].empty())  // control, user-defined
        t->specials_.push_back(t->tokens_[i]);
  }
  std::sort(t->specials_.begin(), t->specials_.end(),
            [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  auto id_of = [&](const char* key) -> int32_t {
    auto r = file.get_int(key);
    return r.ok() && *r >= 0 && *r < static_cast<int64_t>(t->tokens_.size()) ? static_cast<int32_t>(*r) : -1;
  };
  t->bos_ = id_of("tokenizer.ggml.bos_token_id");
  t->eos_ = id_of("tokenizer.ggml.eos_token_id");
  // GPT-2's byte -> printable character map: the printable Latin-1 bytes stand for themselves,
  // the other 68 bytes take the code points from 256 on, in byte order.
  uint32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    append_utf8(printable ? static_cast<uint32_t>(b) : next++, &t->byte_char_[b]);
    t->char_byte_[t->byte_char_[b]] = static_cast<uint8_t>(b);
  }
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

Result<std::vector<int32_t>> BpeTokenizer::encode(const std::string& text) const {
  std::vector<int32_t> out;
  size_t start = 0, i = 0;
  while (i < text.size()) {
    const std::string* hit = nullptr;
    for (const std::string& s : specials_)
      if (text.compare(i, s.size(), s) == 0) {
        hit = &s;
        break;
      }
    if (!hit) {
      ++i;
      continue;
    }
    if (i > start) encode_plain(text.substr(start, i - start), &out);
    out.push_back(ids_.at(*hit));
    i += hit->size();
    start = i;
  }
  if (start < text.size()) encode_plain(text.substr(start), &out);
  return out;
}

Result<std::string> BpeTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  for (int32_t id : ids) {
    if (id < 0 || id >= vocab_size()) return invalid_argument("decode: token id ", id, " outside the vocabulary of ", vocab_size());
    const std::string& t = tokens_[static_cast<size_t>(id)];
    if (std::find(specials_.begin(), specials_.end(), t) != specials_.end()) {
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
