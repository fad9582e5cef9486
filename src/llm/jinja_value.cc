// Copyright ingot authors. Apache-2.0.
#include "llm/jinja_value.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace ingot::llm::jinja {
namespace {

// Python's repr(float): the shortest digits that read back the same, positional for exponents in
// [-4, 16), else d.ddde+XX.
std::string float_repr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[64];
  int precision = 1;
  for (; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*e", precision - 1, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  // buf is [-]d.ddde[+-]XX: the digits and the decimal exponent.
  std::string s = buf;
  const bool negative = s[0] == '-';
  if (negative) s.erase(0, 1);
  const size_t e = s.find('e');
  const int exponent = std::atoi(s.c_str() + e + 1);
  std::string digits = s.substr(0, 1) + (e > 2 ? s.substr(2, e - 2) : "");
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out;
  if (exponent >= -4 && exponent < 16) {
    if (exponent < 0) {
      out = "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
    } else if (static_cast<int>(digits.size()) <= exponent + 1) {
      out = digits + std::string(static_cast<size_t>(exponent + 1) - digits.size(), '0') + ".0";
    } else {
      out =
          digits.substr(0, static_cast<size_t>(exponent + 1)) + "." + digits.substr(static_cast<size_t>(exponent + 1));
    }
  } else {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char exp[16];
    std::snprintf(exp, sizeof(exp), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    out += exp;
  }
  return negative ? "-" + out : out;
}

// Python's repr(str): single quotes unless the text holds ' and no ".
std::string string_repr(const std::string& s) {
  const char q = s.find('\'') != std::string::npos && s.find('"') == std::string::npos ? '"' : '\'';
  std::string out(1, q);
  for (unsigned char c : s) {
    if (c == q || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + q;
}

void json_string(const std::string& s, std::string* out) {
  *out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\r':
        *out += "\\r";
        break;
      case '\t':
        *out += "\\t";
        break;
      case '\b':
        *out += "\\b";
        break;
      case '\f':
        *out += "\\f";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          *out += buf;
        } else {
          *out += static_cast<char>(c);
        }
    }
  }
  *out += '"';
}

Status json_of(const Value& v, int indent, int level, std::string* out) {
  const std::string newline = indent < 0 ? "" : "\n" + std::string(static_cast<size_t>(indent * (level + 1)), ' ');
  const std::string close = indent < 0 ? "" : "\n" + std::string(static_cast<size_t>(indent * level), ' ');
  const char* item_sep = indent < 0 ? ", " : ",";
  switch (v.kind()) {
    case Value::Kind::kNone:
      *out += "null";
      return Status();
    case Value::Kind::kBool:
      *out += v.as_bool() ? "true" : "false";
      return Status();
    case Value::Kind::kInt:
      *out += std::to_string(v.as_int());
      return Status();
    case Value::Kind::kFloat: {
      const double d = v.as_double();
      *out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d < 0 ? "-Infinity" : "Infinity") : float_repr(d);
      return Status();
    }
    case Value::Kind::kString:
      json_string(v.str(), out);
      return Status();
    case Value::Kind::kList: {
      if (v.list().empty()) {
        *out += "[]";
        return Status();
      }
      *out += '[';
      for (size_t i = 0; i < v.list().size(); ++i) {
        if (i) *out += item_sep;
        *out += newline;
        INGOT_RETURN_IF_ERROR(json_of(v.list()[i], indent, level + 1, out));
      }
      *out += close + "]";
      return Status();
    }
    case Value::Kind::kDict: {
      if (v.dict().empty()) {
        *out += "{}";
        return Status();
      }
      *out += '{';
      bool first = true;
      for (const auto& [k, x] : v.dict()) {
        if (!first) *out += item_sep;
        first = false;
        *out += newline;
        json_string(k, out);
        *out += ": ";
        INGOT_RETURN_IF_ERROR(json_of(x, indent, level + 1, out));
      }
      *out += close + "}";
      return Status();
    }
    default:
      return invalid_argument("tojson: object of type ", v.type_name(), " is not JSON serializable");
  }
}

}  // namespace

Value Value::undefined(std::string hint) {
  Value v;
  v.s_ = std::move(hint);
  return v;
}
Value Value::none() {
  Value v;
  v.kind_ = Kind::kNone;
  v.s_.clear();
  return v;
}
Value::Value(bool b) : kind_(Kind::kBool), b_(b), s_() {}
Value::Value(int64_t v) : kind_(Kind::kInt), i_(v), s_() {}
Value::Value(double v) : kind_(Kind::kFloat), f_(v), s_() {}
Value::Value(std::string s) : kind_(Kind::kString), s_(std::move(s)) {}
Value::Value(List l) : kind_(Kind::kList), s_(), list_(std::make_shared<const List>(std::move(l))) {
  for (const Value& v : *list_) {
    depth_ = std::max(depth_, v.depth_);
    holds_namespace_ = holds_namespace_ || v.holds_namespace_;
  }
  ++depth_;
}
Value::Value(Dict d) : kind_(Kind::kDict), s_(), dict_(std::make_shared<Dict>(std::move(d))) {
  for (const auto& kv : *dict_) {
    depth_ = std::max(depth_, kv.second.depth_);
    holds_namespace_ = holds_namespace_ || kv.second.holds_namespace_;
  }
  ++depth_;
}
Value Value::make_namespace(Dict d) {
  Value v(std::move(d));
  v.kind_ = Kind::kNamespace;
  v.holds_namespace_ = true;
  return v;
}
Value Value::callable(std::string name, Function f) {
  Value v;
  v.kind_ = Kind::kCallable;
  v.s_ = std::move(name);
  v.fn_ = std::make_shared<const Function>(std::move(f));
  return v;
}

const Value* Value::find(const std::string& key) const {
  if (kind_ != Kind::kDict && kind_ != Kind::kNamespace) return nullptr;
  for (const auto& [k, v] : *dict_)
    if (k == key) return &v;
  return nullptr;
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return b_;
    case Kind::kInt:
      return i_ != 0;
    case Kind::kFloat:
      return f_ != 0;
    case Kind::kString:
      return !s_.empty();
    case Kind::kList:
      return !list_->empty();
    case Kind::kDict:
      return !dict_->empty();
    default:
      return true;
  }
}

std::string Value::to_string() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "";
    case Kind::kString:
      return s_;
    default:
      return repr();
  }
}

std::string Value::repr() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "";
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return b_ ? "True" : "False";
    case Kind::kInt:
      return std::to_string(i_);
    case Kind::kFloat:
      return float_repr(f_);
    case Kind::kString:
      return string_repr(s_);
    case Kind::kList: {
      std::string out = "[";
      for (size_t i = 0; i < list_->size(); ++i) out += (i ? ", " : "") + (*list_)[i].repr();
      return out + "]";
    }
    case Kind::kDict:
    case Kind::kNamespace: {
      std::string out = kind_ == Kind::kNamespace ? "<Namespace {" : "{";
      bool first = true;
      for (const auto& [k, v] : *dict_) {
        out += (first ? "" : ", ") + string_repr(k) + ": " + v.repr();
        first = false;
      }
      return out + (kind_ == Kind::kNamespace ? "}>" : "}");
    }
    case Kind::kCallable:
      return "<function " + s_ + ">";
  }
  return "";
}

Result<std::string> Value::to_json(int indent) const {
  std::string out;
  INGOT_RETURN_IF_ERROR(json_of(*this, indent, 0, &out));
  return out;
}

const char* Value::type_name() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "NoneType";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "str";
    case Kind::kList:
      return "list";
    case Kind::kDict:
      return "dict";
    case Kind::kNamespace:
      return "Namespace";
    case Kind::kCallable:
      return "function";
  }
  return "?";
}

bool equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return true;
    case Value::Kind::kString:
      return a.str() == b.str();
    case Value::Kind::kList: {
      if (a.list().size() != b.list().size()) return false;
      for (size_t i = 0; i < a.list().size(); ++i)
        if (!equals(a.list()[i], b.list()[i])) return false;
      return true;
    }
    case Value::Kind::kDict: {
      if (a.dict().size() != b.dict().size()) return false;
      for (const auto& [k, v] : a.dict()) {
        const Value* o = b.find(k);
        if (!o || !equals(v, *o)) return false;
      }
      return true;
    }
    default:
      return &a.namespace_attrs() == &b.namespace_attrs();
  }
}

Result<int> compare(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) {
      const double x = a.as_double(), y = b.as_double();
      return x < y ? -1 : x > y ? 1 : 0;
    }
    return a.as_int() < b.as_int() ? -1 : a.as_int() > b.as_int() ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) {
    const int c = a.str().compare(b.str());  // UTF-8 byte order is code point order
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if (a.is_list() && b.is_list()) {
    for (size_t i = 0; i < a.list().size() && i < b.list().size(); ++i) {
      if (equals(a.list()[i], b.list()[i])) continue;
      return compare(a.list()[i], b.list()[i]);
    }
    return a.list().size() < b.list().size() ? -1 : a.list().size() > b.list().size() ? 1 : 0;
  }
  if (a.is_undefined() || b.is_undefined()) return invalid_argument(a.is_undefined() ? a.str() : b.str());
  return invalid_argument("cannot order ", a.type_name(), " and ", b.type_name());
}

std::vector<size_t> code_point_offsets(const std::string& s) {
  std::vector<size_t> at;
  at.reserve(s.size() + 1);
  for (size_t i = 0; i < s.size();) {
    at.push_back(i);
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    if (i + n > s.size()) n = 1;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) n = 1;
    i += n;
  }
  at.push_back(s.size());
  return at;
}

}  // namespace ingot::llm::jinja
