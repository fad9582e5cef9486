// Copyright ingot authors. Apache-2.0.
//
// jinja.h's built-in filters, tests, methods of strings and dicts, attribute and item access, and
// globals (range, namespace, dict), as jinja2 and Python define them. Errors come back without a
// line; the interpreter adds it.
#pragma once

#include <string>

#include "llm/jinja.h"
#include "llm/jinja_value.h"

namespace ingot::llm::jinja {

/// What one render has spent against its Limits.
struct Budget {
  explicit Budget(const Limits& l) : limits(l) {}
  const Limits& limits;
  size_t string_work = 0;
  int64_t loop_iterations = 0;
  /// Counts a string of `bytes` just built: kOutOfRange past max_output_bytes or max_string_work.
  Status charge(size_t bytes);
};

/// Whether jinja2 has a filter / test of this name (an unknown one is a syntax error there).
bool is_jinja2_filter(const std::string& name);
bool is_jinja2_test(const std::string& name);

/// `in | name(args, kwargs)`; kUnsupported for a jinja2 filter ingot lacks.
Result<Value> apply_filter(Budget& budget, const std::string& name, const Value& in, const List& args,
                           const KwArgs& kwargs);
/// `value is name(args)`.
Result<bool> apply_test(const std::string& name, const Value& value, const List& args);

/// jinja2's `obj.name`: a dict's method (get, items, keys, values) or key, a namespace attribute,
/// a string's method bound to it; undefined (saying what is missing) otherwise; an error on undefined.
Result<Value> get_attr(Budget& budget, const Value& obj, const std::string& name);
/// jinja2's `obj[key]`: a dict key, a list or string index (negative from the end); undefined when
/// missing; an error on undefined.
Result<Value> get_item(const Value& obj, const Value& key);
/// `obj[start:stop:step]` of a list or string, each bound none or undefined for its default.
Result<Value> get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step);

/// The items a for loop visits: a list's items, a dict's keys, a string's characters, nothing for
/// undefined; an error for other values.
Result<List> iterate(const Value& v);

/// The globals range, namespace and dict.
Dict globals(Budget& budget);

}  // namespace ingot::llm::jinja
