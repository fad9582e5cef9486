// Copyright ingot authors. Apache-2.0.
//
// Reference kernels: StringNormalizer, StringConcat, StringSplit, RegexFullMatch,
// TfIdfVectorizer, and ai.onnx.ml LabelEncoder, Binarizer, ArrayFeatureExtractor.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <regex>
#include <set>

#include "backend/cpu/kernel_util.h"
#include "backend/cpu/kernels/all_kernels.h"

namespace ingot::cpu {

void register_misc_string_kernels(KernelRegistry& r);

namespace {

// ASCII case mapping (bytes >= 0x80, i.e. UTF-8 sequences, are left as they are).
std::string change_case(std::string s, bool upper) {
  for (char& ch : s) {
    unsigned char u = static_cast<unsigned char>(ch);
    if (u < 0x80) ch = static_cast<char>(upper ? std::toupper(u) : std::tolower(u));
  }
  return s;
}

Status need_strings(const KernelContext& k, size_t i) {
  if (k.input(i)->dtype() != DataType::kString) return k.error("input ", i, " must be a string tensor");
  return Status::Ok();
}

Status run_string_normalizer(KernelContext& k) {
  INGOT_RETURN_IF_ERROR(need_strings(k, 0));
  const Tensor& x = *k.input(0);
  if (x.rank() != 1 && !(x.rank() == 2 && x.dim(0) == 1))
    return k.error("input must be [C] or [1, C], got ", shape_to_string(x.shape()));
  std::string action = k.attrs().get_string("case_change_action", "NONE");
  bool sensitive = k.attrs().get_int("is_case_sensitive", 0) != 0;
  std::set<std::string> stops;
  for (const std::string& w : k.attrs().get_strings("stopwords")) stops.insert(sensitive ? w : change_case(w, false));
  std::vector<std::string> out;
  for (const std::string& s : x.strings()) {
    if (stops.count(sensitive ? s : change_case(s, false))) continue;
    if (action == "LOWER") out.push_back(change_case(s, false));
    else if (action == "UPPER") out.push_back(change_case(s, true));
    else out.push_back(s);
  }
  if (out.empty()) out.push_back("");
  int64_t n = static_cast<int64_t>(out.size());
  Shape64 shape = x.rank() == 1 ? Shape64{n} : Shape64{1, n};
  k.output(0) = Tensor::from_strings(shape, std::move(out));
  return Status::Ok();
}

Status run_string_concat(KernelContext& k) {
  INGOT_RETURN_IF_ERROR(need_strings(k, 0));
  INGOT_RETURN_IF_ERROR(need_strings(k, 1));
  const Tensor& a = *k.input(0);
  const Tensor& b = *k.input(1);
  auto shape = ir::broadcast_shapes(a.shape(), b.shape());
  if (!shape.ok()) return k.error(shape.status().message());
  BroadcastIndexer ia(*shape, a.shape()), ib(*shape, b.shape());
  std::vector<std::string> out(shape_numel(*shape));
  for (int64_t i = 0; i < static_cast<int64_t>(out.size()); ++i) out[i] = a.strings()[ia(i)] + b.strings()[ib(i)];
  k.output(0) = Tensor::from_strings(*shape, std::move(out));
  return Status::Ok();
}

// Python str.split semantics: no delimiter splits on whitespace runs (dropping empty
// pieces); a delimiter splits exactly. maxsplit < 0 means no limit.
std::vector<std::string> split(const std::string& s, const std::string& delim, int64_t maxsplit) {
  std::vector<std::string> parts;
  if (delim.empty()) {
    size_t i = 0, n = s.size();
    auto ws = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
    while (true) {
      while (i < n && ws(s[i])) ++i;
      if (i >= n) break;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
        size_t e = n;
        while (e > i && ws(s[e - 1])) --e;
        parts.push_back(s.substr(i, e - i));
        break;
      }
      size_t j = i;
      while (j < n && !ws(s[j])) ++j;
      parts.push_back(s.substr(i, j - i));
      i = j;
    }
    return parts;
  }
  size_t start = 0;
  while (true) {
    size_t p = s.find(delim, start);
    if (p == std::string::npos || (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit)) {
      parts.push_back(s.substr(start));
      break;
    }
    parts.push_back(s.substr(start, p - start));
    start = p + delim.size();
  }
  return parts;
}

Status run_string_split(KernelContext& k) {
  INGOT_RETURN_IF_ERROR(need_strings(k, 0));
  const Tensor& x = *k.input(0);
  std::string delim = k.attrs().get_string("delimiter", "");
  int64_t maxsplit = k.attrs().has("maxsplit") ? k.attrs().get_int("maxsplit", -1) : -1;
  std::vector<std::vector<std::string>> parts;
  size_t width = 0;
  for (const std::string& s : x.strings()) {
    parts.push_back(split(s, delim, maxsplit));
    width = std::max(width, parts.back().size());
  }
  Shape64 shape = x.shape();
  shape.push_back(static_cast<int64_t>(width));
  std::vector<std::string> out(shape_numel(shape));
  for (size_t i = 0; i < parts.size(); ++i)
    for (size_t j = 0; j < parts[i].size(); ++j) out[i * width + j] = parts[i][j];
  k.output(0) = Tensor::from_strings(shape, std::move(out));
  if (k.has_output(1)) {
    INGOT_ASSIGN_OR_RETURN(Tensor * z, k.allocate_output(1, DataType::kInt64, x.shape()));
    for (size_t i = 0; i < parts.size(); ++i) z->set_i64(static_cast<int64_t>(i), static_cast<int64_t>(parts[i].size()));
  }
  return Status::Ok();
}

Status run_regex(KernelContext& k) {
  INGOT_RETURN_IF_ERROR(need_strings(k, 0));
  const Tensor& x = *k.input(0);
  std::string pattern = k.attrs().get_string("pattern", "");
  std::regex re;
  try {
    re = std::regex(pattern, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    return k.error("invalid pattern '", pattern, "': ", e.what());
  }
  INGOT_ASSIGN_OR_RETURN(Tensor * y, k.allocate_output(0, DataType::kBool, x.shape()));
  for (int64_t i = 0; i < x.numel(); ++i) y->set_i64(i, std::regex_match(x.strings()[i], re) ? 1 : 0);
  return Status::Ok();
}

Status run_tfidf(KernelContext& k) {
  const Tensor& x = *k.input(0);
  const ir::Attributes& a = k.attrs();
  int64_t min_n = a.get_int("min_gram_length", 1), max_n = a.get_int("max_gram_length", 1);
  int64_t max_skip = a.get_int("max_skip_count", 0);
  std::string mode = a.get_string("mode", "TF");
  std::vector<int64_t> counts = a.get_ints("ngram_counts"), indexes = a.get_ints("ngram_indexes");
  std::vector<float> weights = a.get_floats("weights");
  bool strings = x.dtype() == DataType::kString;
  std::vector<std::string> pool = a.get_strings("pool_strings");
  if (!strings) {
    pool.clear();
    for (int64_t v : a.get_ints("pool_int64s")) pool.push_back(std::to_string(v));
  }
  if (indexes.empty() || min_n < 1 || max_n < min_n) return k.error("bad gram lengths or ngram_indexes");
  int64_t out_size = *std::max_element(indexes.begin(), indexes.end()) + 1;
  // n-gram (as its items) -> output column. Ids run over the whole pool in order.
  std::map<std::vector<std::string>, int64_t> grams;
  int64_t id = 0;
  int64_t total = static_cast<int64_t>(pool.size());
  for (size_t i = 0; i < counts.size(); ++i) {
    int64_t n = static_cast<int64_t>(i) + 1;
    int64_t begin = counts[i], end = i + 1 < counts.size() ? counts[i + 1] : total;
    if (begin < 0 || end > total || begin > end) return k.error("ngram_counts do not fit the pool");
    for (int64_t p = begin; p + n <= end; p += n, ++id) {
      if (n < min_n || n > max_n) continue;
      if (id >= static_cast<int64_t>(indexes.size())) return k.error("ngram_indexes is shorter than the pool");
      grams[std::vector<std::string>(pool.begin() + p, pool.begin() + p + n)] = indexes[id];
    }
  }
  if (x.rank() > 2) return k.error("input must be [C] or [N, C]");
  int64_t rows = x.rank() == 2 ? x.dim(0) : 1;
  int64_t cols = x.rank() == 0 ? 1 : x.dim(x.rank() - 1);
  Shape64 oshape = x.rank() == 2 ? Shape64{rows, out_size} : Shape64{out_size};
  INGOT_ASSIGN_OR_RETURN(Tensor * y, k.allocate_output(0, DataType::kFloat32, oshape));
  auto item = [&](int64_t i) { return strings ? x.strings()[i] : std::to_string(x.get_i64(i)); };
  std::vector<double> freq(rows * out_size, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t d = 1; d <= max_skip + 1; ++d) {
      int64_t lo = d == 1 ? min_n : std::max<int64_t>(min_n, 2);  // unigrams counted once
      for (int64_t s = 0; s < cols; ++s) {
        std::vector<std::string> g;
        for (int64_t n = 1; n <= max_n; ++n) {
          int64_t pos = s + (n - 1) * d;
          if (pos >= cols) break;
          g.push_back(item(r * cols + pos));
          if (n < lo) continue;
          auto it = grams.find(g);
          if (it != grams.end()) freq[r * out_size + it->second] += 1;
        }
      }
      if (max_n == 1) break;
    }
  }
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < out_size; ++j) {
      double f = freq[r * out_size + j];
      double w = j < static_cast<int64_t>(weights.size()) ? weights[j] : 1.0;
      double v = mode == "TF" ? f : mode == "IDF" ? (f > 0 ? w : 0.0) : w * f;
      y->set_f64(r * out_size + j, v);
    }
  return Status::Ok();
}

// LabelEncoder: keys and values as tensors (attribute lists are converted).
Status run_label_encoder(KernelContext& k) {
  const Tensor& x = *k.input(0);
  const ir::Attributes& a = k.attrs();
  Tensor keys, values, def;
  auto floats = [](const std::vector<float>& v) {
    return Tensor::from_vector<float>(DataType::kFloat32, {static_cast<int64_t>(v.size())}, v);
  };
  auto ints = [](const std::vector<int64_t>& v) {
    return Tensor::from_vector<int64_t>(DataType::kInt64, {static_cast<int64_t>(v.size())}, v);
  };
  auto strs = [](const std::vector<std::string>& v) {
    return Tensor::from_strings({static_cast<int64_t>(v.size())}, v);
  };
  if (a.has("classes_strings")) {  // opset 1: string <-> index
    std::vector<std::string> cls = a.get_strings("classes_strings");
    std::vector<int64_t> idx(cls.size());
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int64_t>(i);
    if (x.dtype() == DataType::kString) keys = strs(cls), values = ints(idx);
    else keys = ints(idx), values = strs(cls);
  } else {
    if (a.has("keys_tensor")) keys = *a.get_tensor("keys_tensor");
    else if (a.has("keys_floats")) keys = floats(a.get_floats("keys_floats"));
    else if (a.has("keys_int64s")) keys = ints(a.get_ints("keys_int64s"));
    else if (a.has("keys_strings")) keys = strs(a.get_strings("keys_strings"));
    if (a.has("values_tensor")) values = *a.get_tensor("values_tensor");
    else if (a.has("values_floats")) values = floats(a.get_floats("values_floats"));
    else if (a.has("values_int64s")) values = ints(a.get_ints("values_int64s"));
    else if (a.has("values_strings")) values = strs(a.get_strings("values_strings"));
  }
  if (!keys.defined() || !values.defined()) return k.error("keys and values are required");
  if (keys.numel() != values.numel())
    return k.error(keys.numel(), " keys but ", values.numel(), " values");
  if ((keys.dtype() == DataType::kString) != (x.dtype() == DataType::kString))
    return k.error("input dtype ", data_type_name(x.dtype()), " does not match the keys' ", data_type_name(keys.dtype()));
  DataType vt = values.dtype();
  bool vstr = vt == DataType::kString;
  // Default value.
  std::string def_s = "_Unused";
  double def_d = is_float(vt) ? -0.0 : -1.0;
  if (const Tensor* t = a.get_tensor("default_tensor")) {
    if (t->numel() < 1 || t->dtype() != vt) return k.error("default_tensor must be one value of the values' dtype");
    if (vstr) def_s = t->strings()[0];
    else def_d = t->get_f64(0);
  } else if (vstr) {
    def_s = a.get_string("default_string", "_Unused");
  } else if (vt == DataType::kInt64) {
    def_d = static_cast<double>(a.get_int("default_int64", -1));
  } else if (is_float(vt)) {
    def_d = a.get_float("default_float", -0.0f);
  }
  INGOT_ASSIGN_OR_RETURN(Tensor * y, k.allocate_output(0, vt, x.shape()));
  bool kstr = keys.dtype() == DataType::kString;
  bool kfloat = is_float(keys.dtype());
  std::map<std::string, int64_t> smap;
  std::map<double, int64_t> dmap;
  int64_t nan_key = -1;
  for (int64_t i = keys.numel() - 1; i >= 0; --i) {  // first occurrence wins
    if (kstr) smap[keys.strings()[i]] = i;
    else if (kfloat && std::isnan(keys.get_f64(i))) nan_key = i;
    else dmap[kfloat ? keys.get_f64(i) : static_cast<double>(keys.get_i64(i))] = i;
  }
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t hit = -1;
    if (kstr) {
      auto it = smap.find(x.strings()[i]);
      if (it != smap.end()) hit = it->second;
    } else {
      double v = kfloat ? x.get_f64(i) : static_cast<double>(x.get_i64(i));
      if (kfloat && std::isnan(v)) hit = nan_key;
      else {
        auto it = dmap.find(v);
        if (it != dmap.end()) hit = it->second;
      }
    }
    if (vstr) y->mutable_strings()[i] = hit >= 0 ? values.strings()[hit] : def_s;
    else if (is_float(vt)) y->set_f64(i, hit >= 0 ? values.get_f64(hit) : def_d);
    else y->set_i64(i, hit >= 0 ? values.get_i64(hit) : static_cast<int64_t>(def_d));
  }
  return Status::Ok();
}

Status run_binarizer(KernelContext& k) {
  const Tensor& x = *k.input(0);
  double thr = k.attrs().get_float("threshold", 0.0f);
  INGOT_ASSIGN_OR_RETURN(Tensor * y, k.allocate_output(0, x.dtype(), x.shape()));
  for (int64_t i = 0; i < x.numel(); ++i) {
    double v = x.get_f64(i);
    y->set_f64(i, std::isnan(v) ? v : (v > thr ? 1.0 : 0.0));
  }
  return Status::Ok();
}

Status run_array_feature_extractor(KernelContext& k) {
  const Tensor& x = *k.input(0);
  const Tensor& idx = *k.input(1);
  if (x.rank() < 1) return k.error("X must have rank >= 1");
  std::vector<int64_t> ids = idx.to_i64_vector();
  int64_t last = x.dim(x.rank() - 1);
  for (int64_t v : ids)
    if (v < 0 || v >= last) return k.error("index ", v, " out of range for a last dim of ", last);
  int64_t n = static_cast<int64_t>(ids.size());
  Shape64 shape = x.rank() == 1 ? Shape64{1, n} : x.shape();
  shape.back() = n;
  INGOT_ASSIGN_OR_RETURN(Tensor * y, k.allocate_output(0, x.dtype(), shape));
  int64_t rows = x.numel() / std::max<int64_t>(last, 1);
  if (last == 0) rows = shape_numel(shape) / std::max<int64_t>(n, 1);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j) {
      int64_t src = r * last + ids[j], dst = r * n + j;
      if (x.dtype() == DataType::kString) y->mutable_strings()[dst] = x.strings()[src];
      else if (is_float(x.dtype())) y->set_f64(dst, x.get_f64(src));
      else y->set_i64(dst, x.get_i64(src));
    }
  return Status::Ok();
}

}  // namespace

void register_misc_string_kernels(KernelRegistry& r) {
  r.add("StringNormalizer", run_string_normalizer);
  r.add("StringConcat", run_string_concat);
  r.add("StringSplit", run_string_split);
  r.add("RegexFullMatch", run_regex);
  r.add("TfIdfVectorizer", run_tfidf);
  const std::string ml = "ai.onnx.ml";
  r.add("LabelEncoder", run_label_encoder, ml);
  r.add("Binarizer", run_binarizer, ml);
  r.add("ArrayFeatureExtractor", run_array_feature_extractor, ml);
}

}  // namespace ingot::cpu
