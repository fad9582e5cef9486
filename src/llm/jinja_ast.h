// Copyright ingot authors. Apache-2.0.
//
// The parsed form of a Jinja template (jinja.h's insides): expressions and statements, each with
// the source line it came from. jinja_parse.cc builds it, jinja.cc runs it.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "llm/jinja_value.h"

namespace ingot::llm::jinja::ast {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,  // value
    kName,     // name
    kList,     // args: the items
    kDict,     // args: key, value, key, value, ...
    kAttr,     // args[0].name
    kItem,     // args[0][args[1]]
    kSlice,    // args[0][args[1]:args[2]:args[3]], absent parts null
    kCall,     // args[0](args[1..], kwargs)
    kFilter,   // args[0] | name(args[1..], kwargs)
    kTest,     // args[0] is [not: negate] name(args[1..])
    kUnary,    // name ("-", "+", "not") args[0]
    kBinary,   // args[0] name args[1]: + - * / // % ** ~ == != < <= > >= in "not in"
    kAnd,
    kOr,
    kCond,  // args[1] if args[0] else args[2] (null: undefined)
  };
  Kind kind;
  int line = 0;
  int depth = 1;  // height of the tree below, bounded by the parser
  Value value;
  std::string name;
  bool negate = false;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
};

struct Node;
using Body = std::vector<std::unique_ptr<Node>>;

struct Node {
  enum class Kind {
    kText,      // text
    kOutput,    // {{ expr }}
    kIf,        // branches: (cond, body)..., else_body
    kFor,       // for targets in expr [if cond]: body, else_body
    kSet,       // set targets = expr (targets: one name, several to unpack, or ns + attr)
    kSetBlock,  // set targets[0] %}body{% endset
    kMacro,     // macro name(params with defaults): body
    kBreak,
    kContinue,
  };
  Kind kind;
  int line = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr cond;
  std::vector<std::string> targets;
  std::string attr;  // kSet on a namespace attribute: targets[0].attr
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body;
  Body else_body;
  std::vector<std::pair<std::string, ExprPtr>> params;  // kMacro: name, default (or null)
};

/// The statements of `source`, or a syntax error naming its line (kInvalidModel). `max_depth`
/// bounds the nesting of statements and expressions.
Result<Body> parse(const std::string& source, int max_depth);

}  // namespace ingot::llm::jinja::ast
