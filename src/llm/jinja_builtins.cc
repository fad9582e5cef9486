// Copyright ingot authors. Apache-2.0.
#include "llm/jinja_builtins.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <set>

namespace ingot::llm::jinja {
namespace {

// jinja2 3.1's built-in filter and test names; the ones ingot lacks fail when reached.
const std::set<std::string> kJinja2Filters = {
    "abs",    "attr",       "batch",       "capitalize", "center",   "count",
    "d",      "default",    "dictsort",    "e",          "escape",   "filesizeformat",
    "first",  "float",      "forceescape", "format",     "groupby",  "indent",
    "int",    "items",      "join",        "last",       "length",   "list",
    "lower",  "map",        "max",         "min",        "pprint",   "random",
    "reject", "rejectattr", "replace",     "reverse",    "round",    "safe",
    "select", "selectattr", "slice",       "sort",       "string",   "striptags",
    "sum",    "title",      "tojson",      "trim",       "truncate", "unique",
    "upper",  "urlencode",  "urlize",      "wordcount",  "wordwrap", "xmlattr"};
const std::set<std::string> kJinja2Tests = {
    "boolean", "callable",  "defined", "divisibleby", "eq",     "equalto", "escaped",  "even",     "false",  "filter",
    "float",   "ge",        "gt",      "greaterthan", "in",     "integer", "iterable", "le",       "lower",  "lessthan",
    "lt",      "mapping",   "ne",      "none",        "number", "odd",     "sameas",   "sequence", "string", "test",
    "true",    "undefined", "upper",   "==",          "!=",     "<",       "<=",       ">",        ">="};

const Value* arg(const List& args, const KwArgs& kwargs, size_t i, const char* name) {
  if (i < args.size()) return &args[i];
  for (const auto& [k, v] : kwargs)
    if (k == name) return &v;
  return nullptr;
}

Status too_many(const char* what, const List& args, size_t most) {
  if (args.size() > most) return invalid_argument(what, " takes at most ", most, " argument(s), got ", args.size());
  return Status();
}

// Python's str.isspace() for one code point.
bool is_py_space(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

uint32_t code_point_at(const std::string& s, size_t from, size_t to) {
  const auto c = static_cast<unsigned char>(s[from]);
  if (to - from == 1) return c;
  uint32_t cp = c & (to - from == 2 ? 0x1F : to - from == 3 ? 0x0F : 0x07);
  for (size_t i = from + 1; i < to; ++i) cp = (cp << 6) | (static_cast<unsigned char>(s[i]) & 0x3F);
  return cp;
}

// The code points of `s` as strings.
std::vector<std::string> chars_of(const std::string& s) {
  const std::vector<size_t> at = code_point_offsets(s);
  std::vector<std::string> out;
  for (size_t i = 0; i + 1 < at.size(); ++i) out.push_back(s.substr(at[i], at[i + 1] - at[i]));
  return out;
}

// str.strip / lstrip / rstrip: Python whitespace, or the code points of `chars`.
std::string strip(const std::string& s, const Value* chars, bool left, bool right) {
  const std::vector<size_t> at = code_point_offsets(s);
  std::vector<std::string> set;
  const bool by_chars = chars && chars->is_string();
  if (by_chars) set = chars_of(chars->str());
  auto strippable = [&](size_t i) {
    if (!by_chars) return is_py_space(code_point_at(s, at[i], at[i + 1]));
    return std::find(set.begin(), set.end(), s.substr(at[i], at[i + 1] - at[i])) != set.end();
  };
  size_t b = 0, e = at.size() - 1;
  if (left)
    while (b < e && strippable(b)) ++b;
  if (right)
    while (e > b && strippable(e - 1)) --e;
  return s.substr(at[b], at[e] - at[b]);
}

char ascii_upper(char c) { return c >= 'a' && c <= 'z' ? static_cast<char>(c - 32) : c; }
char ascii_lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; }
bool ascii_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

std::string upper(std::string s) {
  for (char& c : s) c = ascii_upper(c);
  return s;
}
std::string lower(std::string s) {
  for (char& c : s) c = ascii_lower(c);
  return s;
}
std::string capitalize(std::string s) {
  for (size_t i = 0; i < s.size(); ++i) s[i] = i == 0 ? ascii_upper(s[i]) : ascii_lower(s[i]);
  return s;
}
// Python's str.title(): a letter after a non-letter is upper, after a letter lower.
std::string py_title(std::string s) {
  bool prev_cased = false;
  for (char& c : s) {
    if (ascii_alpha(c)) {
      c = prev_cased ? ascii_lower(c) : ascii_upper(c);
      prev_cased = true;
    } else {
      prev_cased = false;
    }
  }
  return s;
}
// jinja2's title filter: words start after runs of whitespace, '-', '(', '{', '[' and '<'.
std::string jinja_title(std::string s) {
  bool word_start = true;
  for (char& c : s) {
    const bool sep = c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v' || c == '-' ||
                     c == '(' || c == '{' || c == '[' || c == '<';
    if (sep) {
      word_start = true;
      continue;
    }
    c = word_start ? ascii_upper(c) : ascii_lower(c);
    word_start = false;
  }
  return s;
}

Result<std::string> replace(Budget& budget, const std::string& s, const std::string& from, const std::string& to,
                            int64_t count) {
  std::string out;
  if (from.empty()) {  // Python inserts `to` around every character
    const std::vector<std::string> cs = chars_of(s);
    int64_t done = 0;
    for (const std::string& c : cs) {
      if (count < 0 || done++ < count) out += to;
      out += c;
      INGOT_RETURN_IF_ERROR(budget.charge(0));
    }
    if (count < 0 || done < count) out += to;
  } else {
    size_t at = 0;
    int64_t done = 0;
    for (size_t hit; (count < 0 || done < count) && (hit = s.find(from, at)) != std::string::npos; ++done) {
      out.append(s, at, hit - at);
      out += to;
      at = hit + from.size();
      if (out.size() > budget.limits.max_output_bytes) break;
    }
    out.append(s, at, std::string::npos);
  }
  INGOT_RETURN_IF_ERROR(budget.charge(out.size()));
  return out;
}

// Python's str.split(sep=None, maxsplit=-1).
List split(const std::string& s, const Value* sep, int64_t maxsplit) {
  List out;
  if (sep && sep->is_string()) {
    size_t at = 0;
    for (size_t hit; maxsplit != 0 && (hit = s.find(sep->str(), at)) != std::string::npos; --maxsplit) {
      out.emplace_back(s.substr(at, hit - at));
      at = hit + sep->str().size();
    }
    out.emplace_back(s.substr(at));
    return out;
  }
  const std::vector<size_t> at = code_point_offsets(s);
  size_t i = 0;
  const size_t n = at.size() - 1;
  auto space = [&](size_t k) { return is_py_space(code_point_at(s, at[k], at[k + 1])); };
  while (true) {
    while (i < n && space(i)) ++i;
    if (i == n) break;
    if (maxsplit == 0) {
      size_t e = n;
      while (e > i && space(e - 1)) --e;
      out.emplace_back(s.substr(at[i], at[e] - at[i]));
      break;
    }
    const size_t start = i;
    while (i < n && !space(i)) ++i;
    out.emplace_back(s.substr(at[start], at[i] - at[start]));
    --maxsplit;
  }
  return out;
}

Result<bool> affix_test(const Value& s, const Value* affix, bool prefix) {
  if (!affix) return invalid_argument(prefix ? "startswith" : "endswith", " takes one argument");
  std::vector<std::string> options;
  if (affix->is_string()) {
    options.push_back(affix->str());
  } else if (affix->is_list()) {
    for (const Value& v : affix->list()) {
      if (!v.is_string()) return invalid_argument("startswith/endswith: tuple items must be strings");
      options.push_back(v.str());
    }
  } else {
    return invalid_argument(prefix ? "startswith" : "endswith", " first arg must be str or a tuple of str, not ",
                            affix->type_name());
  }
  for (const std::string& o : options) {
    const std::string& t = s.str();
    if (o.size() <= t.size() && t.compare(prefix ? 0 : t.size() - o.size(), o.size(), o) == 0) return true;
  }
  return false;
}

Result<int64_t> int_arg(const Value* v, const char* what, int64_t fallback) {
  if (!v || v->is_none()) return fallback;
  if (!v->is_int() && !v->is_bool()) return invalid_argument(what, " must be an integer, not ", v->type_name());
  return v->as_int();
}

// A string's method `name` bound to it, or undefined.
Value string_method(Budget& budget, const Value& self, const std::string& name) {
  static const std::set<std::string> kMethods = {"strip", "lstrip", "rstrip",  "startswith", "endswith", "split",
                                                 "upper", "lower",  "title",   "capitalize", "replace",  "find",
                                                 "count", "join",   "isdigit", "isspace",    "isalpha",  "splitlines"};
  if (!kMethods.count(name)) return Value::undefined("'str object' has no attribute '" + name + "'");
  Budget* b = &budget;
  return Value::callable("str." + name, [self, name, b](const List& a, const KwArgs& kw) -> Result<Value> {
    const std::string& s = self.str();
    if (name == "strip" || name == "lstrip" || name == "rstrip") {
      INGOT_RETURN_IF_ERROR(too_many(name.c_str(), a, 1));
      const Value* chars = arg(a, kw, 0, "chars");
      if (chars && !chars->is_string() && !chars->is_none()) return invalid_argument(name, " arg must be None or str");
      return Value(strip(s, chars, name != "rstrip", name != "lstrip"));
    }
    if (name == "startswith" || name == "endswith") {
      INGOT_ASSIGN_OR_RETURN(bool r, affix_test(self, arg(a, kw, 0, "prefix"), name == "startswith"));
      return Value(r);
    }
    if (name == "split") {
      const Value* sep = arg(a, kw, 0, "sep");
      if (sep && sep->is_string() && sep->str().empty()) return invalid_argument("split: empty separator");
      INGOT_ASSIGN_OR_RETURN(int64_t maxsplit, int_arg(arg(a, kw, 1, "maxsplit"), "maxsplit", -1));
      return Value(split(s, sep, maxsplit));
    }
    if (name == "splitlines") {
      List out;
      size_t at = 0;
      while (at < s.size()) {
        size_t e = s.find_first_of("\r\n", at);
        if (e == std::string::npos) e = s.size();
        out.emplace_back(s.substr(at, e - at));
        at = e + (s.compare(e, 2, "\r\n") == 0 ? 2 : 1);
      }
      return Value(out);
    }
    if (name == "upper") return Value(upper(s));
    if (name == "lower") return Value(lower(s));
    if (name == "title") return Value(py_title(s));
    if (name == "capitalize") return Value(capitalize(s));
    if (name == "replace") {
      const Value* from = arg(a, kw, 0, "old");
      const Value* to = arg(a, kw, 1, "new");
      if (!from || !to || !from->is_string() || !to->is_string()) return invalid_argument("replace takes two strings");
      INGOT_ASSIGN_OR_RETURN(int64_t count, int_arg(arg(a, kw, 2, "count"), "count", -1));
      INGOT_ASSIGN_OR_RETURN(std::string r, replace(*b, s, from->str(), to->str(), count));
      return Value(std::move(r));
    }
    if (name == "find" || name == "count") {
      const Value* sub = arg(a, kw, 0, "sub");
      if (!sub || !sub->is_string()) return invalid_argument(name, " takes a string");
      if (name == "find") {
        const size_t at = s.find(sub->str());
        if (at == std::string::npos) return Value(int64_t{-1});
        return Value(static_cast<int64_t>(code_point_offsets(s.substr(0, at)).size() - 1));
      }
      if (sub->str().empty()) return Value(static_cast<int64_t>(code_point_offsets(s).size()));
      int64_t n = 0;
      for (size_t at = s.find(sub->str()); at != std::string::npos; at = s.find(sub->str(), at + sub->str().size()))
        ++n;
      return Value(n);
    }
    if (name == "join") {
      const Value* items = arg(a, kw, 0, "iterable");
      if (!items) return invalid_argument("join takes one argument");
      INGOT_ASSIGN_OR_RETURN(List list, iterate(*items));
      std::string out;
      for (size_t i = 0; i < list.size(); ++i) {
        if (!list[i].is_string())
          return invalid_argument("sequence item ", i, ": expected str instance, ", list[i].type_name(), " found");
        if (i) out += s;
        out += list[i].str();
        if (out.size() > b->limits.max_output_bytes) break;
      }
      INGOT_RETURN_IF_ERROR(b->charge(out.size()));
      return Value(std::move(out));
    }
    // isdigit, isspace, isalpha (ASCII letters and digits; whitespace as Python has it).
    if (s.empty()) return Value(false);
    const std::vector<size_t> at = code_point_offsets(s);
    for (size_t i = 0; i + 1 < at.size(); ++i) {
      const uint32_t cp = code_point_at(s, at[i], at[i + 1]);
      const bool ok = name == "isdigit"   ? (cp >= '0' && cp <= '9')
                      : name == "isspace" ? is_py_space(cp)
                                          : (cp < 0x80 && ascii_alpha(static_cast<char>(cp)));
      if (!ok) return Value(false);
    }
    return Value(true);
  });
}

Value dict_method(const Value& self, const std::string& name) {
  return Value::callable("dict." + name, [self, name](const List& a, const KwArgs& kw) -> Result<Value> {
    if (name == "get") {
      const Value* key = arg(a, kw, 0, "key");
      if (!key) return invalid_argument("get expected at least 1 argument, got 0");
      const Value* fallback = arg(a, kw, 1, "default");
      const Value* v = key->is_string() ? self.find(key->str()) : nullptr;
      return v ? *v : fallback ? *fallback : Value::none();
    }
    List out;
    for (const auto& [k, v] : self.dict()) {
      if (name == "keys") {
        out.emplace_back(k);
      } else if (name == "values") {
        out.push_back(v);
      } else {
        out.emplace_back(List{Value(k), v});
      }
    }
    return Value(std::move(out));
  });
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// jinja2's attribute getter of map/selectattr: dotted parts, each an item lookup.
Result<Value> attribute_of(const Value& item, const std::string& path) {
  Value v = item;
  size_t at = 0;
  while (true) {
    const size_t dot = path.find('.', at);
    const std::string part = path.substr(at, dot == std::string::npos ? std::string::npos : dot - at);
    const bool numeric =
        !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    INGOT_ASSIGN_OR_RETURN(v,
                           get_item(v, numeric ? Value(static_cast<int64_t>(std::atoll(part.c_str()))) : Value(part)));
    if (dot == std::string::npos) return v;
    at = dot + 1;
  }
}

Result<int64_t> length_of(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return int64_t{0};
    case Value::Kind::kString:
      return static_cast<int64_t>(code_point_offsets(v.str()).size() - 1);
    case Value::Kind::kList:
      return static_cast<int64_t>(v.list().size());
    case Value::Kind::kDict:
      return static_cast<int64_t>(v.dict().size());
    default:
      return invalid_argument("object of type '", v.type_name(), "' has no len()");
  }
}

// Python's int() of a string (surrounding whitespace and '_' between digits allowed), or nullopt.
bool parse_int(const std::string& text, int64_t* out) {
  const std::string s = strip(text, nullptr, true, true);
  size_t i = 0;
  bool negative = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) negative = s[i++] == '-';
  if (i == s.size()) return false;
  std::string digits;
  for (; i < s.size(); ++i) {
    if (s[i] >= '0' && s[i] <= '9') {
      digits += s[i];
    } else if (s[i] != '_' || digits.empty() || i + 1 == s.size()) {
      return false;
    }
  }
  errno = 0;
  const long long v = std::strtoll(digits.c_str(), nullptr, 10);
  if (errno == ERANGE) return false;
  *out = negative ? -v : v;
  return true;
}

bool parse_float(const std::string& text, double* out) {
  const std::string s = strip(text, nullptr, true, true);
  if (s.empty()) return false;
  char* end = nullptr;
  *out = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size();
}

}  // namespace

Status Budget::charge(size_t bytes) {
  string_work += bytes;
  if (bytes > limits.max_output_bytes)
    return make_status(StatusCode::kOutOfRange, "a string of ", bytes, " bytes passes the limit of ",
                       limits.max_output_bytes);
  if (string_work > limits.max_string_work)
    return make_status(StatusCode::kOutOfRange, "the template built more than ", limits.max_string_work,
                       " bytes of strings");
  return Status();
}

bool is_jinja2_filter(const std::string& name) { return kJinja2Filters.count(name) > 0; }
bool is_jinja2_test(const std::string& name) { return kJinja2Tests.count(name) > 0; }

Result<Value> get_attr(Budget& budget, const Value& obj, const std::string& name) {
  switch (obj.kind()) {
    case Value::Kind::kUndefined:
      return invalid_argument(obj.str());
    case Value::Kind::kDict: {
      if (name == "get" || name == "items" || name == "keys" || name == "values") return dict_method(obj, name);
      if (const Value* v = obj.find(name)) return *v;
      return Value::undefined("'dict object' has no attribute '" + name + "'");
    }
    case Value::Kind::kNamespace: {
      if (const Value* v = obj.find(name)) return *v;
      return Value::undefined("'Namespace object' has no attribute '" + name + "'");
    }
    case Value::Kind::kString:
      return string_method(budget, obj, name);
    default:
      return Value::undefined("'" + std::string(obj.type_name()) + " object' has no attribute '" + name + "'");
  }
}

Result<Value> get_item(const Value& obj, const Value& key) {
  switch (obj.kind()) {
    case Value::Kind::kUndefined:
      return invalid_argument(obj.str());
    case Value::Kind::kDict:
    case Value::Kind::kNamespace: {
      const Value* v = key.is_string() ? obj.find(key.str()) : nullptr;
      if (v) return *v;
      return Value::undefined("'dict object' has no attribute " + key.repr());
    }
    case Value::Kind::kList:
    case Value::Kind::kString: {
      if (!key.is_int() && !key.is_bool())
        return Value::undefined("'" + std::string(obj.type_name()) + " object' has no attribute " + key.repr());
      std::vector<size_t> at;
      const int64_t n = obj.is_list() ? static_cast<int64_t>(obj.list().size())
                                      : static_cast<int64_t>((at = code_point_offsets(obj.str())).size() - 1);
      int64_t i = key.as_int();
      if (i < 0) i += n;
      if (i < 0 || i >= n)
        return Value::undefined(std::string(obj.type_name()) + " object has no element " +
                                std::to_string(key.as_int()));
      if (obj.is_list()) return obj.list()[static_cast<size_t>(i)];
      return Value(
          obj.str().substr(at[static_cast<size_t>(i)], at[static_cast<size_t>(i) + 1] - at[static_cast<size_t>(i)]));
    }
    default:
      return Value::undefined("'" + std::string(obj.type_name()) + " object' has no attribute " + key.repr());
  }
}

Result<Value> get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  if (obj.is_undefined()) return invalid_argument(obj.str());
  if (!obj.is_list() && !obj.is_string())
    return Value::undefined("'" + std::string(obj.type_name()) + "' object is not subscriptable");
  auto bound = [](const Value& v, const char* what) -> Result<std::optional<int64_t>> {
    if (v.is_none() || v.is_undefined()) return std::optional<int64_t>();
    if (!v.is_int() && !v.is_bool())
      return invalid_argument("slice ", what, " must be an integer, not ", v.type_name());
    return std::optional<int64_t>(v.as_int());
  };
  INGOT_ASSIGN_OR_RETURN(std::optional<int64_t> b, bound(start, "start"));
  INGOT_ASSIGN_OR_RETURN(std::optional<int64_t> e, bound(stop, "stop"));
  INGOT_ASSIGN_OR_RETURN(std::optional<int64_t> s, bound(step, "step"));
  const int64_t st = s.value_or(1);
  if (st == 0) return invalid_argument("slice step cannot be zero");
  std::vector<size_t> at;
  const int64_t n = obj.is_list() ? static_cast<int64_t>(obj.list().size())
                                  : static_cast<int64_t>((at = code_point_offsets(obj.str())).size() - 1);
  auto adjust = [&](std::optional<int64_t> v, int64_t fallback) {
    if (!v) return fallback;
    int64_t x = *v;
    if (x < 0) {
      x += n;
      if (x < 0) x = st < 0 ? -1 : 0;
    } else if (x >= n) {
      x = st < 0 ? n - 1 : n;
    }
    return x;
  };
  const int64_t from = adjust(b, st < 0 ? n - 1 : 0);
  const int64_t to = adjust(e, st < 0 ? -1 : n);
  List items;
  std::string text;
  for (int64_t i = from; st > 0 ? i < to : i > to; i += st) {
    const size_t k = static_cast<size_t>(i);
    if (obj.is_list()) {
      items.push_back(obj.list()[k]);
    } else {
      text.append(obj.str(), at[k], at[k + 1] - at[k]);
    }
  }
  return obj.is_list() ? Value(std::move(items)) : Value(std::move(text));
}

Result<List> iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return List();
    case Value::Kind::kList:
      return v.list();
    case Value::Kind::kDict: {
      List keys;
      for (const auto& kv : v.dict()) keys.emplace_back(kv.first);
      return keys;
    }
    case Value::Kind::kString: {
      List chars;
      for (std::string& c : chars_of(v.str())) chars.emplace_back(std::move(c));
      return chars;
    }
    default:
      return invalid_argument("'", v.type_name(), "' object is not iterable");
  }
}

Result<bool> apply_test(const std::string& name, const Value& v, const List& args) {
  const Value* a = args.empty() ? nullptr : &args[0];
  auto need_arg = [&]() -> Status {
    if (!a) return invalid_argument("test '", name, "' takes an argument");
    return Status();
  };
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.as_bool();
  if (name == "false") return v.is_bool() && !v.as_bool();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "number") return v.is_number();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict();
  if (name == "iterable" || name == "sequence") return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
  if (name == "callable") return v.is_callable();
  if (name == "escaped") return false;
  if (name == "lower" || name == "upper") {
    const std::string s = v.to_string();
    bool cased = false;
    for (char c : s) {
      if (!ascii_alpha(c)) continue;
      cased = true;
      if ((name == "lower") != (c >= 'a' && c <= 'z')) return false;
    }
    return cased;
  }
  if (name == "odd" || name == "even" || name == "divisibleby") {
    if (v.is_undefined()) return invalid_argument(v.str());
    int64_t d = 2;
    if (name == "divisibleby") {
      INGOT_RETURN_IF_ERROR(need_arg());
      if (!a->is_int() && !a->is_bool()) return invalid_argument("divisibleby needs an integer");
      d = a->as_int();
      if (d == 0) return invalid_argument("divisibleby 0: integer modulo by zero");
    }
    if (!v.is_int() && !v.is_bool()) return invalid_argument("test '", name, "' needs an integer, got ", v.type_name());
    const int64_t r = ((v.as_int() % d) + d) % d;
    return name == "odd" ? r == 1 : r == 0;
  }
  if (name == "eq" || name == "equalto" || name == "==" || name == "ne" || name == "!=" || name == "sameas") {
    INGOT_RETURN_IF_ERROR(need_arg());
    if (name == "sameas") return v.kind() == a->kind() && equals(v, *a) && !v.is_list() && !v.is_dict();
    return equals(v, *a) == (name == "eq" || name == "equalto" || name == "==");
  }
  if (name == "lt" || name == "lessthan" || name == "<" || name == "le" || name == "<=" || name == "gt" ||
      name == "greaterthan" || name == ">" || name == "ge" || name == ">=") {
    INGOT_RETURN_IF_ERROR(need_arg());
    INGOT_ASSIGN_OR_RETURN(int c, compare(v, *a));
    if (name == "lt" || name == "lessthan" || name == "<") return c < 0;
    if (name == "le" || name == "<=") return c <= 0;
    if (name == "gt" || name == "greaterthan" || name == ">") return c > 0;
    return c >= 0;
  }
  if (name == "in") {
    INGOT_RETURN_IF_ERROR(need_arg());
    if (a->is_string()) {
      if (!v.is_string()) return invalid_argument("'in <string>' requires string as left operand");
      return a->str().find(v.str()) != std::string::npos;
    }
    INGOT_ASSIGN_OR_RETURN(List items, iterate(*a));
    for (const Value& x : items)
      if (equals(x, v)) return true;
    return false;
  }
  if (name == "filter") return v.is_string() && is_jinja2_filter(v.str());
  if (name == "test") return v.is_string() && is_jinja2_test(v.str());
  return unsupported("test '", name, "' is not supported");
}

Result<Value> apply_filter(Budget& budget, const std::string& name, const Value& in, const List& args,
                           const KwArgs& kwargs) {
  auto a = [&](size_t i, const char* key) { return arg(args, kwargs, i, key); };
  if (name == "default" || name == "d") {
    const Value* fallback = a(0, "default_value");
    const Value* boolean = a(1, "boolean");
    const bool use = in.is_undefined() || (boolean && boolean->truthy() && !in.truthy());
    return use ? (fallback ? *fallback : Value(std::string())) : in;
  }
  if (name == "length" || name == "count") {
    INGOT_ASSIGN_OR_RETURN(int64_t n, length_of(in));
    return Value(n);
  }
  if (name == "string") return Value(in.to_string());
  if (name == "safe") return in;
  if (name == "e" || name == "escape") return Value(html_escape(in.to_string()));
  if (name == "upper") return Value(upper(in.to_string()));
  if (name == "lower") return Value(lower(in.to_string()));
  if (name == "capitalize") return Value(capitalize(in.to_string()));
  if (name == "title") return Value(jinja_title(in.to_string()));
  if (name == "trim") return Value(strip(in.to_string(), a(0, "chars"), true, true));
  if (name == "tojson") {
    const Value* ensure_ascii = a(0, "ensure_ascii");
    const Value* separators = a(2, "separators");
    const Value* sort_keys = a(3, "sort_keys");
    if ((ensure_ascii && ensure_ascii->truthy()) || (separators && !separators->is_none()) ||
        (sort_keys && sort_keys->truthy()))
      return unsupported("tojson: only the indent argument is supported");
    const Value* indent = a(1, "indent");
    int64_t width = -1;
    if (indent && !indent->is_none()) {
      if (!indent->is_int()) return unsupported("tojson: indent must be an integer");
      width = std::clamp<int64_t>(indent->as_int(), 0, 64);
    }
    INGOT_ASSIGN_OR_RETURN(std::string json, in.to_json(static_cast<int>(width)));
    INGOT_RETURN_IF_ERROR(budget.charge(json.size()));
    return Value(std::move(json));
  }
  if (name == "first" || name == "last") {
    if (in.is_string() || in.is_list() || in.is_dict() || in.is_undefined()) {
      INGOT_ASSIGN_OR_RETURN(List items, iterate(in));
      if (items.empty()) return Value::undefined("No " + name + " item, sequence was empty.");
      return name == "first" ? items.front() : items.back();
    }
    return invalid_argument("'", in.type_name(), "' object is not iterable");
  }
  if (name == "list") {
    INGOT_ASSIGN_OR_RETURN(List items, iterate(in));
    return Value(std::move(items));
  }
  if (name == "reverse") {
    if (in.is_string()) return get_slice(in, Value::none(), Value::none(), Value(int64_t{-1}));
    INGOT_ASSIGN_OR_RETURN(List items, iterate(in));
    std::reverse(items.begin(), items.end());
    return Value(std::move(items));
  }
  if (name == "items") {
    if (in.is_undefined()) return Value(List());
    if (!in.is_dict()) return invalid_argument("items: expected a mapping, got ", in.type_name());
    List out;
    for (const auto& [k, v] : in.dict()) out.emplace_back(List{Value(k), v});
    return Value(std::move(out));
  }
  if (name == "join") {
    const Value* sep = a(0, "d");
    const Value* attribute = a(1, "attribute");
    INGOT_ASSIGN_OR_RETURN(List items, iterate(in));
    std::string out;
    const std::string s = sep ? sep->to_string() : "";
    for (size_t i = 0; i < items.size(); ++i) {
      Value item = items[i];
      if (attribute && !attribute->is_none()) {
        INGOT_ASSIGN_OR_RETURN(item, attribute_of(item, attribute->to_string()));
      }
      if (i) out += s;
      out += item.to_string();
      if (out.size() > budget.limits.max_output_bytes) break;
    }
    INGOT_RETURN_IF_ERROR(budget.charge(out.size()));
    return Value(std::move(out));
  }
  if (name == "replace") {
    const Value* from = a(0, "old");
    const Value* to = a(1, "new");
    if (!from || !to) return invalid_argument("replace takes the old and the new text");
    INGOT_ASSIGN_OR_RETURN(int64_t count, int_arg(a(2, "count"), "count", -1));
    INGOT_ASSIGN_OR_RETURN(std::string r, replace(budget, in.to_string(), from->to_string(), to->to_string(), count));
    return Value(std::move(r));
  }
  if (name == "indent") {
    const Value* width = a(0, "width");
    const bool first = a(1, "first") && a(1, "first")->truthy();
    const bool blank = a(2, "blank") && a(2, "blank")->truthy();
    std::string pad = "    ";
    if (width && width->is_string()) {
      pad = width->str();
    } else if (width) {
      INGOT_ASSIGN_OR_RETURN(int64_t w, int_arg(width, "indent width", 4));
      pad = std::string(static_cast<size_t>(std::clamp<int64_t>(w, 0, 1024)), ' ');
    }
    // jinja2: s + "\n" split into lines, rejoined with newline + indentation (empty lines kept
    // bare unless blank).
    List lines;
    {
      Value text(in.to_string() + "\n");
      Value method = string_method(budget, text, "splitlines");
      INGOT_ASSIGN_OR_RETURN(Value v, method.function()({}, {}));
      lines = v.list();
    }
    std::string out;
    for (size_t i = 0; i < lines.size(); ++i) {
      const std::string& line = lines[i].str();
      if (i) out += "\n";
      if (i && (blank || !line.empty())) out += pad;
      out += line;
      if (out.size() > budget.limits.max_output_bytes) break;
    }
    if (first) out = pad + out;
    INGOT_RETURN_IF_ERROR(budget.charge(out.size()));
    return Value(std::move(out));
  }
  if (name == "int") {
    const Value* fallback = a(0, "default");
    const Value def = fallback ? *fallback : Value(int64_t{0});
    if (in.is_int() || in.is_bool()) return Value(in.as_int());
    if (in.is_float()) {
      const double d = in.as_double();
      if (!std::isfinite(d) || std::fabs(d) >= 9.2e18) return def;
      return Value(static_cast<int64_t>(d));
    }
    if (in.is_string()) {
      int64_t i;
      double d;
      if (parse_int(in.str(), &i)) return Value(i);
      if (parse_float(in.str(), &d) && std::isfinite(d) && std::fabs(d) < 9.2e18) return Value(static_cast<int64_t>(d));
    }
    return def;
  }
  if (name == "float") {
    const Value* fallback = a(0, "default");
    if (in.is_number()) return Value(in.as_double());
    double d;
    if (in.is_string() && parse_float(in.str(), &d)) return Value(d);
    return fallback ? *fallback : Value(0.0);
  }
  if (name == "abs") {
    if (in.is_int() || in.is_bool()) {
      if (in.as_int() == INT64_MIN) return make_status(StatusCode::kOutOfRange, "abs: integer overflow");
      return Value(in.as_int() < 0 ? -in.as_int() : in.as_int());
    }
    if (in.is_float()) return Value(std::fabs(in.as_double()));
    return invalid_argument("bad operand type for abs(): '", in.type_name(), "'");
  }
  if (name == "attr") {
    const Value* n = a(0, "name");
    if (!n || !n->is_string()) return invalid_argument("attr takes a name");
    if (in.is_undefined()) return Value::undefined(in.str());
    return get_attr(budget, in, n->str());
  }
  if (name == "map" || name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") {
    INGOT_ASSIGN_OR_RETURN(List items, iterate(in));
    List out;
    if (name == "map") {
      const Value* attribute = nullptr;
      const Value* fallback = nullptr;
      for (const auto& [k, v] : kwargs) {
        if (k == "attribute") attribute = &v;
        if (k == "default") fallback = &v;
      }
      for (const Value& item : items) {
        if (attribute) {
          INGOT_ASSIGN_OR_RETURN(Value v, attribute_of(item, attribute->to_string()));
          out.push_back(v.is_undefined() && fallback ? *fallback : v);
        } else {
          if (args.empty() || !args[0].is_string()) return invalid_argument("map needs a filter name or attribute=");
          const List rest(args.begin() + 1, args.end());
          INGOT_ASSIGN_OR_RETURN(Value v, apply_filter(budget, args[0].str(), item, rest, {}));
          out.push_back(v);
        }
      }
      return Value(std::move(out));
    }
    const bool by_attr = name == "selectattr" || name == "rejectattr";
    const bool keep = name == "select" || name == "selectattr";
    size_t at = 0;
    std::string attribute;
    if (by_attr) {
      if (args.empty() || !args[0].is_string()) return invalid_argument(name, " needs an attribute name");
      attribute = args[0].str();
      at = 1;
    }
    const std::string test = args.size() > at ? args[at].to_string() : "";
    if (!test.empty() && !is_jinja2_test(test)) return invalid_argument("no test named '", test, "'");
    const List test_args(args.begin() + std::min(args.size(), at + 1), args.end());
    for (const Value& item : items) {
      Value v = item;
      if (by_attr) {
        INGOT_ASSIGN_OR_RETURN(v, attribute_of(item, attribute));
      }
      bool pass = v.truthy();
      if (!test.empty()) {
        INGOT_ASSIGN_OR_RETURN(pass, apply_test(test, v, test_args));
      }
      if (pass == keep) out.push_back(item);
    }
    return Value(std::move(out));
  }
  if (!is_jinja2_filter(name)) return invalid_argument("no filter named '", name, "'");
  return unsupported("filter '", name, "' is not supported");
}

Dict globals(Budget& budget) {
  Budget* b = &budget;
  Dict g;
  g.emplace_back("range", Value::callable("range", [b](const List& a, const KwArgs&) -> Result<Value> {
                   if (a.empty() || a.size() > 3)
                     return invalid_argument("range expected 1 to 3 arguments, got ", a.size());
                   for (const Value& v : a)
                     if (!v.is_int() && !v.is_bool())
                       return invalid_argument("range: '", v.type_name(), "' is not an integer");
                   const int64_t start = a.size() == 1 ? 0 : a[0].as_int();
                   const int64_t stop = a.size() == 1 ? a[0].as_int() : a[1].as_int();
                   const int64_t step = a.size() == 3 ? a[2].as_int() : 1;
                   if (step == 0) return invalid_argument("range() arg 3 must not be zero");
                   const double count =
                       std::ceil((static_cast<double>(stop) - static_cast<double>(start)) / static_cast<double>(step));
                   if (count > static_cast<double>(b->limits.max_loop_iterations))
                     return make_status(StatusCode::kOutOfRange, "range of ", count, " items passes the limit of ",
                                        b->limits.max_loop_iterations);
                   List out;
                   for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) out.emplace_back(i);
                   return Value(std::move(out));
                 }));
  g.emplace_back("namespace", Value::callable("namespace", [](const List& a, const KwArgs& kw) -> Result<Value> {
                   Dict attrs;
                   auto put = [&](const std::string& k, const Value& v) {
                     for (auto& kv : attrs) {
                       if (kv.first == k) {
                         kv.second = v;
                         return;
                       }
                     }
                     attrs.emplace_back(k, v);
                   };
                   for (const Value& v : a) {
                     if (!v.is_dict()) return invalid_argument("namespace() takes mappings and keyword arguments");
                     for (const auto& [k, x] : v.dict()) put(k, x);
                   }
                   for (const auto& [k, v] : kw) put(k, v);
                   return Value::make_namespace(std::move(attrs));
                 }));
  g.emplace_back("dict", Value::callable("dict", [](const List& a, const KwArgs& kw) -> Result<Value> {
                   if (!a.empty()) return unsupported("dict() takes keyword arguments only here");
                   Dict d;
                   for (const auto& [k, v] : kw) {
                     bool found = false;
                     for (auto& kv : d) {
                       if (kv.first == k) {
                         kv.second = v;
                         found = true;
                       }
                     }
                     if (!found) d.emplace_back(k, v);
                   }
                   return Value(std::move(d));
                 }));
  return g;
}

}  // namespace ingot::llm::jinja
