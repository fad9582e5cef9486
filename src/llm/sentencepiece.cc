// Copyright ingot authors. Apache-2.0.
#include "llm/sentencepiece.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <queue>

namespace ingot::llm {

namespace {

using nlohmann::json;

constexpr const char kSpace[] = "\xe2\x96\x81";  // "▁"

/// Length in bytes of the UTF-8 character starting with `c` (1 for invalid lead bytes), as both
/// `tokenizers` and llama.cpp count it.
size_t utf8_len(unsigned char c) {
  if (c >= 0xF0) return 4;
  if (c >= 0xE0) return 3;
  if (c >= 0xC0) return 2;
  return 1;
}

void replace_all(std::string* s, const std::string& from, const std::string& to) {
  if (from.empty()) return;
  std::string out;
  size_t pos = 0;
  for (size_t at; (at = s->find(from, pos)) != std::string::npos; pos = at + from.size()) {
    out.append(*s, pos, at - pos);
    out += to;
  }
  out.append(*s, pos, std::string::npos);
  *s = std::move(out);
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

/// "<0xAB>" -> 0xAB, else -1 (the byte tokens of both formats).
int byte_of(const std::string& t) {
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
  int v = 0;
  for (int k = 3; k < 5; ++k) {
    const char c = t[static_cast<size_t>(k)];
    const int d = c >= '0' && c <= '9'   ? c - '0'
                  : c >= 'A' && c <= 'F' ? c - 'A' + 10
                  : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                         : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

/// A field `tokenizers` reads as one character (Metaspace's replacement, Strip's content).
Result<std::string> one_char(const json& step, const char* key, const char* fallback) {
  const std::string c = step.value(key, fallback);
  if (c.empty() || utf8_len(static_cast<unsigned char>(c[0])) != c.size())
    return invalid_model("tokenizer.json: ", step.value("type", "?"), " ", key, " '", c, "' is not one character");
  return c;
}

/// A Replace's pattern: only {"String": ...} (a Regex pattern is not run).
Result<std::string> string_pattern(const json& step, const char* where) {
  if (!step.contains("pattern") || !step["pattern"].is_object() || !step["pattern"].contains("String"))
    return unsupported("tokenizer.json ", where, " Replace with a non-string (Regex) pattern");
  return step["pattern"]["String"].get<std::string>();
}

/// Flattens nested "Sequence"s of `key` (normalizers, pretokenizers, decoders) into `out`.
Status flatten(const json& node, const char* key, std::vector<json>* out) {
  if (node.is_null()) return Status::Ok();
  if (!node.is_object()) return invalid_model("tokenizer.json: a ", key, " entry that is not an object");
  if (node.value("type", "") != "Sequence") {
    out->push_back(node);
    return Status::Ok();
  }
  if (!node.contains(key) || !node[key].is_array()) return invalid_model("tokenizer.json: a Sequence without ", key);
  for (const json& n : node[key]) INGOT_RETURN_IF_ERROR(flatten(n, key, out));
  return Status::Ok();
}

/// Metaspace's prepend_scheme, and its older spelling add_prefix_space (true: always, false: never).
Result<std::string> prepend_scheme(const json& m) {
  if (m.contains("prepend_scheme") && !m["prepend_scheme"].is_null()) {
    const std::string s = m["prepend_scheme"].get<std::string>();
    if (s != "first" && s != "always" && s != "never")
      return unsupported("tokenizer.json Metaspace prepend_scheme '", s, "'");
    return s;
  }
  return std::string(m.value("add_prefix_space", true) ? "always" : "never");
}

}  // namespace

SentencePieceModel::~SentencePieceModel() = default;

Result<std::unique_ptr<SentencePieceModel>> SentencePieceModel::from_tokenizer_json(const json& j) {
  std::unique_ptr<SentencePieceModel> t(new SentencePieceModel());
  const json& m = j["model"];
  // The model's options; the ones that change the output and are not run are refused.
  if (m.contains("dropout") && !m["dropout"].is_null() && m["dropout"].get<double>() != 0.0)
    return unsupported("tokenizer.json: BPE dropout (a random tokenization)");
  for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (m.contains(k) && !m[k].is_null() && !m[k].get<std::string>().empty())
      return unsupported("tokenizer.json: BPE ", k, " '", m[k].get<std::string>(), "'");
  t->byte_fallback_ = m.value("byte_fallback", false);
  t->fuse_unk_ = m.value("fuse_unk", false);
  t->ignore_merges_ = m.value("ignore_merges", false);
  if (!m.contains("vocab") || !m["vocab"].is_object()) return invalid_model("tokenizer.json has no model.vocab");
  for (auto it = m["vocab"].begin(); it != m["vocab"].end(); ++it) {
    if (!it.value().is_number_integer()) return invalid_model("tokenizer.json: vocab entry '", it.key(), "' has no id");
    t->vocab_[it.key()] = it.value().get<int32_t>();
  }
  t->byte_id_.fill(-1);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    auto it = t->vocab_.find(name);
    if (it != t->vocab_.end()) t->byte_id_[static_cast<size_t>(b)] = it->second;
  }
  if (m.contains("unk_token") && !m["unk_token"].is_null()) {
    auto it = t->vocab_.find(m["unk_token"].get<std::string>());
    if (it == t->vocab_.end())
      return invalid_model("tokenizer.json: unk_token '", m["unk_token"].get<std::string>(), "' is not in model.vocab");
    t->unk_ = it->second;
  }
  // Merges: as `tokenizers` builds them, each pair and its concatenation must be tokens; a pair
  // listed twice keeps its last rank.
  if (!m.contains("merges") || !m["merges"].is_array()) return invalid_model("tokenizer.json has no model.merges");
  int32_t rank = 0;
  for (const json& mg : m["merges"]) {
    std::string a, b;
    if (mg.is_string()) {
      const std::string s = mg.get<std::string>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos) return invalid_model("tokenizer.json: merge '", s, "' is not \"a b\"");
      a = s.substr(0, sp), b = s.substr(sp + 1);
    } else if (mg.is_array() && mg.size() == 2 && mg[0].is_string() && mg[1].is_string()) {
      a = mg[0].get<std::string>(), b = mg[1].get<std::string>();
    } else {
      return invalid_model("tokenizer.json: a merge that is neither \"a b\" nor [a, b]");
    }
    auto ia = t->vocab_.find(a), ib = t->vocab_.find(b), iab = t->vocab_.find(a + b);
    if (ia == t->vocab_.end() || ib == t->vocab_.end() || iab == t->vocab_.end())
      return invalid_model("tokenizer.json: merge '", a, " ", b, "' names a token outside model.vocab");
    const uint64_t key =
        (static_cast<uint64_t>(static_cast<uint32_t>(ia->second)) << 32) | static_cast<uint32_t>(ib->second);
    t->merges_[key] = {rank++, iab->second};
  }
  // Normalizer: Prepend and Replace (string patterns), alone or in a Sequence.
  std::vector<json> steps;
  INGOT_RETURN_IF_ERROR(flatten(j.contains("normalizer") ? j["normalizer"] : json(), "normalizers", &steps));
  for (const json& n : steps) {
    const std::string type = n.value("type", "");
    if (type == "Prepend") {
      t->normalizer_.push_back({true, "", n.at("prepend").get<std::string>()});
    } else if (type == "Replace") {
      INGOT_ASSIGN_OR_RETURN(std::string from, string_pattern(n, "normalizer"));
      t->normalizer_.push_back({false, from, n.at("content").get<std::string>()});
    } else {
      return unsupported("tokenizer.json normalizer '", type, "' (a SentencePiece-style BPE runs Prepend and Replace)");
    }
  }
  // Pre-tokenizer: none, or one Metaspace.
  steps.clear();
  INGOT_RETURN_IF_ERROR(flatten(j.contains("pre_tokenizer") ? j["pre_tokenizer"] : json(), "pretokenizers", &steps));
  for (const json& p : steps) {
    const std::string type = p.value("type", "");
    if (type != "Metaspace" || t->metaspace_)
      return unsupported("tokenizer.json pre-tokenizer '", type,
                         "' in a SentencePiece-style BPE (it runs one Metaspace)");
    t->metaspace_ = true;
    INGOT_ASSIGN_OR_RETURN(t->replacement_, one_char(p, "replacement", kSpace));
    INGOT_ASSIGN_OR_RETURN(std::string scheme, prepend_scheme(p));
    t->prepend_ = scheme == "first" ? Prepend::kFirst : scheme == "always" ? Prepend::kAlways : Prepend::kNever;
    t->split_ = p.value("split", true);
  }
  // Decoder: the steps of Llama 2's chain and Metaspace's.
  steps.clear();
  t->has_decoder_ = j.contains("decoder") && !j["decoder"].is_null();
  INGOT_RETURN_IF_ERROR(flatten(j.contains("decoder") ? j["decoder"] : json(), "decoders", &steps));
  for (const json& d : steps) {
    const std::string type = d.value("type", "");
    DecodeStep s;
    if (type == "Replace") {
      s.kind = DecodeStep::Kind::kReplace;
      INGOT_ASSIGN_OR_RETURN(s.from, string_pattern(d, "decoder"));
      s.to = d.at("content").get<std::string>();
    } else if (type == "ByteFallback") {
      s.kind = DecodeStep::Kind::kByteFallback;
    } else if (type == "Fuse") {
      s.kind = DecodeStep::Kind::kFuse;
    } else if (type == "Strip") {
      s.kind = DecodeStep::Kind::kStrip;
      INGOT_ASSIGN_OR_RETURN(s.from, one_char(d, "content", ""));
      s.start = d.value("start", size_t{0});
      s.stop = d.value("stop", size_t{0});
    } else if (type == "Metaspace") {
      s.kind = DecodeStep::Kind::kMetaspace;
      INGOT_ASSIGN_OR_RETURN(s.from, one_char(d, "replacement", kSpace));
      INGOT_ASSIGN_OR_RETURN(std::string scheme, prepend_scheme(d));
      s.drop_first = scheme != "never";
    } else {
      return unsupported("tokenizer.json decoder '", type,
                         "' in a SentencePiece-style BPE (it runs Replace, ByteFallback, Fuse, Strip and Metaspace)");
    }
    t->decoder_.push_back(std::move(s));
  }
  return t;
}

std::unique_ptr<SentencePieceModel> SentencePieceModel::from_llama_vocab(const std::vector<std::string>& tokens,
                                                                         std::vector<float> scores,
                                                                         std::vector<int32_t> types,
                                                                         bool add_space_prefix) {
  std::unique_ptr<SentencePieceModel> t(new SentencePieceModel());
  t->by_score_ = true;
  t->add_space_prefix_ = add_space_prefix;
  // llama.cpp's token_to_id: every token, a repeated text naming its last id.
  for (size_t i = 0; i < tokens.size(); ++i) t->vocab_[tokens[i]] = static_cast<int32_t>(i);
  scores.resize(tokens.size(), 0.0f);  // llama.cpp: 0 where tokenizer.ggml.scores is missing
  types.resize(tokens.size(), 1);      // and a normal token where token_type is
  t->scores_ = std::move(scores);
  t->types_ = std::move(types);
  t->byte_id_.fill(-1);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    auto it = t->vocab_.find(name);
    if (it == t->vocab_.end()) it = t->vocab_.find(std::string(1, static_cast<char>(b)));  // llama.cpp's fallback
    if (it != t->vocab_.end()) t->byte_id_[static_cast<size_t>(b)] = it->second;
  }
  // llama.cpp: a space prefix on every stretch of text (each follows a special token or starts
  // the input), then spaces escaped to "▁".
  if (add_space_prefix) t->normalizer_.push_back({true, "", " "});
  t->normalizer_.push_back({false, " ", kSpace});
  for (size_t i = 0; i < t->types_.size(); ++i)
    if (t->types_[i] == 2) t->unk_ = static_cast<int32_t>(i);
  return t;
}

void SentencePieceModel::encode(const std::string& segment, bool at_start, std::vector<int32_t>* out) const {
  std::string text = segment;
  for (const Rewrite& r : normalizer_) {
    if (r.prepend) {
      if (!text.empty()) text = r.to + text;
    } else {
      replace_all(&text, r.from, r.to);
    }
  }
  if (by_score_) {
    merge_by_score(text, out);
    return;
  }
  if (!metaspace_) {
    merge_by_rank(text, out);
    return;
  }
  replace_all(&text, " ", replacement_);
  if ((prepend_ == Prepend::kAlways || (prepend_ == Prepend::kFirst && at_start)) && !starts_with(text, replacement_))
    text = replacement_ + text;
  if (!split_) {
    merge_by_rank(text, out);
    return;
  }
  // Split (MergedWithNext): every replacement starts a new piece.
  size_t begin = 0;
  for (size_t at = text.find(replacement_, 1); at != std::string::npos; at = text.find(replacement_, at + 1)) {
    merge_by_rank(text.substr(begin, at - begin), out);
    begin = at;
  }
  merge_by_rank(text.substr(begin), out);
}

void SentencePieceModel::merge_by_rank(const std::string& piece, std::vector<int32_t>* out) const {
  if (piece.empty()) return;
  if (ignore_merges_) {
    auto it = vocab_.find(piece);
    if (it != vocab_.end()) {
      out->push_back(it->second);
      return;
    }
  }
  // `tokenizers`' BPE::merge_word: each character its token, else its bytes' tokens (byte_fallback),
  // else the unknown token (consecutive ones fused with fuse_unk).
  std::vector<int32_t> sym;
  int32_t pending_unk = -1;
  for (size_t k = 0; k < piece.size();) {
    const size_t n = std::min(utf8_len(static_cast<unsigned char>(piece[k])), piece.size() - k);
    auto it = vocab_.find(piece.substr(k, n));
    if (it != vocab_.end()) {
      if (pending_unk >= 0) sym.push_back(pending_unk), pending_unk = -1;
      sym.push_back(it->second);
    } else {
      bool all_bytes = byte_fallback_;
      for (size_t b = k; all_bytes && b < k + n; ++b) all_bytes = byte_id_[static_cast<unsigned char>(piece[b])] >= 0;
      if (all_bytes) {
        for (size_t b = k; b < k + n; ++b) sym.push_back(byte_id_[static_cast<unsigned char>(piece[b])]);
      } else if (unk_ >= 0) {
        if (pending_unk >= 0 && !fuse_unk_) sym.push_back(pending_unk);
        pending_unk = unk_;
      }
    }
    k += n;
  }
  if (pending_unk >= 0) sym.push_back(pending_unk);
  // Word::merge_all: the pair of lowest rank, leftmost among equals, until none is left.
  struct Merge {
    int32_t rank, pos, merged;
    bool operator<(const Merge& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }  // a min-heap
  };
  std::priority_queue<Merge> queue;
  std::vector<int32_t> prev(sym.size()), next(sym.size());
  std::vector<bool> gone(sym.size(), false);
  auto lookup = [&](int32_t l, int32_t r) -> const std::pair<int32_t, int32_t>* {
    auto it = merges_.find((static_cast<uint64_t>(static_cast<uint32_t>(l)) << 32) | static_cast<uint32_t>(r));
    return it == merges_.end() ? nullptr : &it->second;
  };
  const int32_t count = static_cast<int32_t>(sym.size());
  for (int32_t i = 0; i < count; ++i) {
    prev[static_cast<size_t>(i)] = i - 1;
    next[static_cast<size_t>(i)] = i + 1 < count ? i + 1 : -1;
    if (i + 1 < count)
      if (auto* m = lookup(sym[static_cast<size_t>(i)], sym[static_cast<size_t>(i) + 1]))
        queue.push({m->first, i, m->second});
  }
  while (!queue.empty()) {
    const Merge top = queue.top();
    queue.pop();
    const size_t p = static_cast<size_t>(top.pos);
    if (gone[p] || next[p] < 0) continue;
    const size_t q = static_cast<size_t>(next[p]);
    const auto* m = lookup(sym[p], sym[q]);
    if (!m || m->second != top.merged) continue;  // a stale entry: the pair has changed since
    sym[p] = top.merged;
    gone[q] = true;
    next[p] = next[q];
    if (next[q] >= 0) prev[static_cast<size_t>(next[q])] = top.pos;
    if (prev[p] >= 0)
      if (auto* l = lookup(sym[static_cast<size_t>(prev[p])], sym[p])) queue.push({l->first, prev[p], l->second});
    if (next[p] >= 0)
      if (auto* r = lookup(sym[p], sym[static_cast<size_t>(next[p])])) queue.push({r->first, top.pos, r->second});
  }
  for (size_t i = 0; i < sym.size(); ++i)
    if (!gone[i]) out->push_back(sym[i]);
}

void SentencePieceModel::merge_by_score(const std::string& text, std::vector<int32_t>* out) const {
  // llama.cpp's llm_tokenizer_spm_session::tokenize: one symbol per UTF-8 character; repeatedly
  // merge the adjacent pair whose text is a token of highest score (leftmost among equals).
  struct Symbol {
    size_t start, n;
    int prev, next;
  };
  std::vector<Symbol> sym;
  for (size_t offs = 0; offs < text.size();) {
    const size_t n = std::min(utf8_len(static_cast<unsigned char>(text[offs])), text.size() - offs);
    const int index = static_cast<int>(sym.size());
    sym.push_back({offs, n, index - 1, offs + n == text.size() ? -1 : index + 1});
    offs += n;
  }
  struct Bigram {
    int left, right;
    float score;
    size_t size;
    bool operator<(const Bigram& o) const { return score < o.score || (score == o.score && left > o.left); }
  };
  std::priority_queue<Bigram> queue;
  auto try_add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = sym[static_cast<size_t>(left)];
    const size_t size = l.n + sym[static_cast<size_t>(right)].n;
    auto it = vocab_.find(text.substr(l.start, size));
    if (it == vocab_.end()) return;
    queue.push({left, right, scores_[static_cast<size_t>(it->second)], size});
  };
  for (int i = 1; i < static_cast<int>(sym.size()); ++i) try_add(i - 1, i);
  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Symbol& l = sym[static_cast<size_t>(b.left)];
    Symbol& r = sym[static_cast<size_t>(b.right)];
    if (l.n == 0 || r.n == 0 || l.n + r.n != b.size) continue;  // one side merged elsewhere since
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) sym[static_cast<size_t>(r.next)].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }
  // Every merged symbol is a token; a lone character that is not falls back to its bytes.
  for (int i = sym.empty() ? -1 : 0; i != -1; i = sym[static_cast<size_t>(i)].next) {
    const std::string s = text.substr(sym[static_cast<size_t>(i)].start, sym[static_cast<size_t>(i)].n);
    auto it = vocab_.find(s);
    if (it != vocab_.end())
      out->push_back(it->second);
    else
      append_bytes(s, out);
  }
}

void SentencePieceModel::append_bytes(const std::string& text, std::vector<int32_t>* out) const {
  for (unsigned char c : text) {
    const int32_t id = byte_id_[c];
    if (id >= 0)
      out->push_back(id);
    else if (unk_ >= 0)
      out->push_back(unk_);  // llama.cpp throws here: a vocabulary without the byte's token
  }
}

std::string SentencePieceModel::piece(int32_t id, const std::string& token) const {
  if (by_score_) {
    switch (types_[static_cast<size_t>(id)]) {
      case 1: {  // normal
        std::string s = token;
        replace_all(&s, kSpace, " ");
        return s;
      }
      case 2:
      case 3:
      case 4:  // unknown, control, user-defined: their text
        return token;
      case 6: {  // byte
        const int b = byte_of(token);
        return b >= 0 ? std::string(1, static_cast<char>(b)) : std::string();
      }
      default:  // unused, undefined: nothing
        return "";
    }
  }
  const int b = byte_fallback_ ? byte_of(token) : -1;
  if (b >= 0 && vocab_.count(token)) return std::string(1, static_cast<char>(b));
  std::string s = token;
  if (vocab_.count(token)) replace_all(&s, metaspace_ ? replacement_ : std::string(kSpace), " ");
  return s;
}

std::string SentencePieceModel::decode(const std::vector<int32_t>& ids, const std::vector<std::string>& tokens) const {
  if (by_score_) {
    // llama_detokenize: the pieces, the first one's leading space dropped (add_space_prefix).
    std::string out;
    for (size_t i = 0; i < ids.size(); ++i) {
      std::string p = piece(ids[i], tokens[static_cast<size_t>(ids[i])]);
      if (i == 0 && add_space_prefix_ && !p.empty() && p[0] == ' ') p.erase(0, 1);
      out += p;
    }
    return out;
  }
  std::vector<std::string> t;
  t.reserve(ids.size());
  for (int32_t id : ids) t.push_back(tokens[static_cast<size_t>(id)]);
  if (!has_decoder_) {  // `tokenizers` without a decoder: the tokens joined by spaces
    std::string out;
    for (size_t i = 0; i < t.size(); ++i) out += (i ? " " : "") + t[i];
    return out;
  }
  for (const DecodeStep& s : decoder_) {
    switch (s.kind) {
      case DecodeStep::Kind::kReplace:
        for (std::string& x : t) replace_all(&x, s.from, s.to);
        break;
      case DecodeStep::Kind::kByteFallback: {
        // Runs of byte tokens become their bytes if those are valid UTF-8, else one U+FFFD each.
        std::vector<std::string> next;
        std::string bytes;
        size_t run = 0;
        auto flush = [&] {
          if (run == 0) return;
          bool valid = true;
          for (size_t k = 0; k < bytes.size() && valid;) {
            const unsigned char c = static_cast<unsigned char>(bytes[k]);
            const size_t n = c < 0x80                  ? 1
                             : (c >= 0xC2 && c < 0xE0) ? 2
                             : (c >= 0xE0 && c < 0xF0) ? 3
                             : (c >= 0xF0 && c < 0xF5) ? 4
                                                       : 0;
            valid = n > 0 && k + n <= bytes.size();
            uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
            for (size_t q = 1; valid && q < n; ++q) {
              const unsigned char cc = static_cast<unsigned char>(bytes[k + q]);
              valid = (cc & 0xC0) == 0x80;
              cp = (cp << 6) | (cc & 0x3F);
            }
            // Overlong forms, surrogates and code points past U+10FFFF are not UTF-8.
            if (valid && ((n == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
                          (n == 4 && (cp < 0x10000 || cp > 0x10FFFF))))
              valid = false;
            k += n;
          }
          if (valid) {
            next.push_back(bytes);
          } else {
            for (size_t k = 0; k < run; ++k) next.push_back("\xef\xbf\xbd");
          }
          bytes.clear();
          run = 0;
        };
        for (std::string& x : t) {
          const int b = byte_of(x);
          if (b >= 0) {
            bytes.push_back(static_cast<char>(b));
            ++run;
            continue;
          }
          flush();
          next.push_back(std::move(x));
        }
        flush();
        t = std::move(next);
        break;
      }
      case DecodeStep::Kind::kFuse: {
        std::string all;
        for (const std::string& x : t) all += x;
        t.assign(1, all);
        break;
      }
      case DecodeStep::Kind::kStrip:
        for (std::string& x : t) {
          size_t cut = 0;
          for (size_t k = 0; k < s.start && x.compare(cut, s.from.size(), s.from) == 0 && !s.from.empty(); ++k)
            cut += s.from.size();
          x.erase(0, cut);
          for (size_t k = 0; k < s.stop && !s.from.empty() && x.size() >= s.from.size() &&
                             x.compare(x.size() - s.from.size(), s.from.size(), s.from) == 0;
               ++k)
            x.erase(x.size() - s.from.size());
        }
        break;
      case DecodeStep::Kind::kMetaspace:
        for (size_t i = 0; i < t.size(); ++i) replace_all(&t[i], s.from, i == 0 && s.drop_first ? "" : " ");
        break;
    }
  }
  std::string out;
  for (const std::string& x : t) out += x;
  return out;
}

}  // namespace ingot::llm
