// Copyright ingot authors. Apache-2.0.
//
// A Jinja interpreter for the subset of jinja2 that model chat templates use (GGUF
// `tokenizer.chat_template`, tokenizer_config.json's `chat_template`), rendering as jinja2 does
// when transformers' apply_chat_template or vLLM run it: trim_blocks and lstrip_blocks on, no
// autoescape, the loopcontrols extension ({% break %}, {% continue %}) and an immutable sandbox
// (lists and dicts cannot be changed; namespace() objects can, through {% set ns.x = ... %}).
//
// Supported: {{ }}, {% %}, {# #} with -/+ whitespace control; if/elif/else, for (unpacking,
// `if` filter, else, loop.index/index0/revindex/revindex0/first/last/length/previtem/nextitem/
// cycle), set (plain, tuple unpacking, namespace attribute, block form), macro with defaults and
// keyword arguments, break/continue, {% generation %} (renders its body); literals, arithmetic,
// comparisons, and/or/not, in/not in, ~, inline if, attributes, subscripts, slices, calls; the
// filters and tests listed in jinja.cc's tables; string methods (strip, split, startswith, ...)
// and dict methods (get, items, keys, values); globals range, namespace and dict.
// Not supported (an error Status when reached): {% raw %}, {% include/extends/import/block %},
// call blocks, recursive loops, chained comparisons, printf-style `%` on strings, str.format,
// Markup and autoescape. Case mapping (upper, lower, title, capitalize) maps ASCII letters only.
//
// Templates come from model files, so nothing in one can crash or exhaust the process: errors
// (syntax, unknown filter, type errors, undefined attributes where jinja2 raises) are Status
// values naming the template line, and Limits bound nesting, loop iterations, string work and
// output size.
#pragma once

#include <memory>
#include <string>

#include "llm/jinja_value.h"

namespace ingot::llm::jinja {

namespace ast {
struct Node;
}

/// Bounds on what one template may do.
struct Limits {
  int max_nesting = 200;                       ///< nesting of statements and of expressions when parsing
  int max_call_depth = 100;                    ///< macro calls in progress at once
  int64_t max_loop_iterations = 1000000;       ///< for-loop iterations in one render, and range() lengths
  size_t max_output_bytes = size_t{16} << 20;  ///< the rendered text, and any one string value
  size_t max_string_work = size_t{256} << 20;  ///< bytes of strings built in one render
};

class Template {
 public:
  /// Parses `source`: kInvalidModel naming the line for a syntax error, an unknown tag, or a filter
  /// or test that jinja2 does not have.
  static Result<Template> parse(const std::string& source, const Limits& limits = Limits());

  /// The text for `context` (top-level variables; the globals range, namespace and dict come on
  /// top unless the context names them): kInvalidArgument naming the line for an error the
  /// template raises or meets, kOutOfRange for a limit passed.
  Result<std::string> render(const Dict& context) const;

 private:
  std::shared_ptr<const std::vector<std::unique_ptr<ast::Node>>> body_;
  Limits limits_;
};

}  // namespace ingot::llm::jinja
