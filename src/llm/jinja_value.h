// Copyright ingot authors. Apache-2.0.
//
// The values a Jinja chat template computes with (jinja.h): undefined, none, bool, int64, double,
// string (UTF-8), list, dict (string keys, insertion order), namespace (the one mutable object,
// `namespace(...)` with `{% set ns.x = ... %}`) and callable (globals such as raise_exception, bound
// string and dict methods, macros). Lists and dicts are immutable once built and shared on copy,
// as they are in jinja2's ImmutableSandboxedEnvironment that transformers renders with.
// Printing, truth, equality and ordering follow Python's str(), bool(), == and <.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"

namespace ingot::llm::jinja {

class Value;
using List = std::vector<Value>;
using Dict = std::vector<std::pair<std::string, Value>>;  // insertion order; keys unique
using KwArgs = std::vector<std::pair<std::string, Value>>;
/// A callable: positional and keyword arguments in, a value or an error out.
using Function = std::function<Result<Value>(const List& args, const KwArgs& kwargs)>;

class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kNamespace, kCallable };

  /// Undefined; `hint` says what was missing ("'x' is undefined"), for the error of a use that fails.
  Value() = default;
  static Value undefined(std::string hint = "value is undefined");
  static Value none();
  Value(bool b);
  Value(int v) : Value(static_cast<int64_t>(v)) {}
  Value(int64_t v);
  Value(double v);
  Value(std::string s);
  Value(const char* s) : Value(std::string(s)) {}
  Value(List l);
  Value(Dict d);
  static Value make_namespace(Dict d);
  static Value callable(std::string name, Function f);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  /// int, float or bool (Python's numbers.Number, which bool is).
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat || kind_ == Kind::kBool; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_namespace() const { return kind_ == Kind::kNamespace; }
  bool is_callable() const { return kind_ == Kind::kCallable; }

  bool as_bool() const { return b_; }
  int64_t as_int() const { return kind_ == Kind::kBool ? (b_ ? 1 : 0) : i_; }
  /// int, bool or float as a double.
  double as_double() const { return kind_ == Kind::kFloat ? f_ : static_cast<double>(as_int()); }
  /// The string, or the undefined value's hint, or a callable's name.
  const std::string& str() const { return s_; }
  const List& list() const { return *list_; }
  const Dict& dict() const { return *dict_; }
  /// A namespace's attributes, writable.
  Dict& namespace_attrs() const { return *dict_; }
  const Function& function() const { return *fn_; }

  /// How deeply lists and dicts nest in this value (0 for a scalar), and whether a namespace is
  /// in it: a namespace may not take such values (no cycles, no unbounded nesting across loops).
  int depth() const { return depth_; }
  bool holds_namespace() const { return holds_namespace_; }

  /// The value at `key` of a dict or namespace, or nullptr.
  const Value* find(const std::string& key) const;

  /// Python's bool().
  bool truthy() const;
  /// Python's str(): strings as they are, undefined as "", lists and dicts as their repr.
  std::string to_string() const;
  /// Python's repr() (strings quoted).
  std::string repr() const;
  /// Python's json.dumps(v, ensure_ascii=False, indent=indent) (indent < 0: none), as transformers'
  /// tojson filter gives it; an error for undefined and callables.
  Result<std::string> to_json(int indent = -1) const;
  /// The type's name as Python says it ("str", "int", "list", "dict", "NoneType", "Undefined").
  const char* type_name() const;

 private:
  Kind kind_ = Kind::kUndefined;
  bool b_ = false;
  int64_t i_ = 0;
  double f_ = 0;
  int depth_ = 0;
  bool holds_namespace_ = false;
  std::string s_ = "value is undefined";
  std::shared_ptr<const List> list_;
  std::shared_ptr<Dict> dict_;
  std::shared_ptr<const Function> fn_;
};

/// Python's ==.
bool equals(const Value& a, const Value& b);
/// Python's <, <=, >, >= as -1/0/1 of `a` against `b`: numbers, strings (by code point) and lists;
/// an error for other pairs.
Result<int> compare(const Value& a, const Value& b);

/// The UTF-8 code points of `s` as byte offsets: offsets[i] is where code point i starts, and
/// offsets.back() == s.size(). Invalid bytes count as one code point each.
std::vector<size_t> code_point_offsets(const std::string& s);

}  // namespace ingot::llm::jinja
