// Copyright ingot authors. Apache-2.0.
//
// The interpreter: statements write into a string, expressions evaluate to Values. Scopes follow
// jinja2's: a for loop's body gets a fresh scope each iteration (so `set` inside it does not
// outlive the iteration; namespace() is how templates carry state out), a macro's body one under
// the template's top level; if-blocks share their enclosing scope.
#include "llm/jinja.h"

#include <cmath>
#include <unordered_map>

#include "llm/jinja_ast.h"
#include "llm/jinja_builtins.h"

namespace ingot::llm::jinja {
namespace {

using ast::Body;
using ast::Expr;
using ast::ExprPtr;
using ast::Node;

Status at_line(int line, const Status& s) {
  if (s.ok() || s.message().rfind("line ", 0) == 0) return s;
  return Status(s.code(), "line " + std::to_string(line) + ": " + s.message());
}

// Every filter and test named in the template must be one jinja2 knows (jinja2 refuses the
// template otherwise, at compile time).
Status check_names(const Expr& e) {
  if (e.kind == Expr::Kind::kFilter && !is_jinja2_filter(e.name))
    return invalid_model("line ", e.line, ": no filter named '", e.name, "'");
  if (e.kind == Expr::Kind::kTest && !is_jinja2_test(e.name))
    return invalid_model("line ", e.line, ": no test named '", e.name, "'");
  for (const auto& a : e.args)
    if (a) INGOT_RETURN_IF_ERROR(check_names(*a));
  for (const auto& kw : e.kwargs) INGOT_RETURN_IF_ERROR(check_names(*kw.second));
  return Status();
}

Status check_names(const Body& body) {
  for (const auto& n : body) {
    for (const ExprPtr* e : {&n->expr, &n->cond})
      if (*e) INGOT_RETURN_IF_ERROR(check_names(**e));
    for (const auto& [cond, branch] : n->branches) {
      INGOT_RETURN_IF_ERROR(check_names(*cond));
      INGOT_RETURN_IF_ERROR(check_names(branch));
    }
    for (const auto& p : n->params)
      if (p.second) INGOT_RETURN_IF_ERROR(check_names(*p.second));
    INGOT_RETURN_IF_ERROR(check_names(n->body));
    INGOT_RETURN_IF_ERROR(check_names(n->else_body));
  }
  return Status();
}

struct Scope {
  explicit Scope(Scope* p) : parent(p) {}
  Scope* parent;
  std::unordered_map<std::string, Value> vars;
  Value* find(const std::string& name) {
    for (Scope* s = this; s; s = s->parent) {
      auto it = s->vars.find(name);
      if (it != s->vars.end()) return &it->second;
    }
    return nullptr;
  }
};

// Values carried across loop iterations (namespace attributes) nest no deeper than this, so that
// printing, comparing and freeing them cannot exhaust the stack.
constexpr int kMaxNamespaceNesting = 256;

enum class Flow { kNormal, kBreak, kContinue };

Status type_error(const char* op, const Value& a, const Value& b) {
  if (a.is_undefined()) return invalid_argument(a.str());
  if (b.is_undefined()) return invalid_argument(b.str());
  return invalid_argument("unsupported operand type(s) for ", op, ": '", a.type_name(), "' and '", b.type_name(), "'");
}

Status overflow_error() { return make_status(StatusCode::kOutOfRange, "integer overflow"); }

class Renderer {
 public:
  Renderer(const Limits& limits, const Dict& context) : budget_(limits), root_(nullptr) {
    for (auto& [k, v] : globals(budget_)) globals_[k] = v;
    for (const auto& [k, v] : context) root_.vars[k] = v;
  }

  Result<std::string> run(const Body& body) {
    std::string out;
    INGOT_ASSIGN_OR_RETURN(Flow f, exec(body, &root_, &out));
    if (f != Flow::kNormal) return invalid_argument("break or continue outside a for loop");
    return out;
  }

 private:
  Result<Flow> exec(const Body& body, Scope* scope, std::string* out) {
    for (const auto& n : body) {
      auto f = exec_node(*n, scope, out);
      if (!f.ok()) return at_line(n->line, f.status());
      if (*f != Flow::kNormal) return *f;
    }
    return Flow::kNormal;
  }

  Status emit(const std::string& text, std::string* out) {
    if (out->size() + text.size() > budget_.limits.max_output_bytes)
      return make_status(StatusCode::kOutOfRange, "the output passes the limit of ", budget_.limits.max_output_bytes,
                         " bytes");
    *out += text;
    return Status();
  }

  Result<Flow> exec_node(const Node& n, Scope* scope, std::string* out) {
    switch (n.kind) {
      case Node::Kind::kText:
        INGOT_RETURN_IF_ERROR(emit(n.text, out));
        return Flow::kNormal;
      case Node::Kind::kOutput: {
        INGOT_ASSIGN_OR_RETURN(Value v, eval(*n.expr, scope));
        INGOT_RETURN_IF_ERROR(emit(v.to_string(), out));
        return Flow::kNormal;
      }
      case Node::Kind::kIf: {
        for (const auto& [cond, branch] : n.branches) {
          INGOT_ASSIGN_OR_RETURN(Value c, eval(*cond, scope));
          if (c.truthy()) return exec(branch, scope, out);
        }
        return exec(n.else_body, scope, out);
      }
      case Node::Kind::kFor:
        return exec_for(n, scope, out);
      case Node::Kind::kSet: {
        INGOT_ASSIGN_OR_RETURN(Value v, eval(*n.expr, scope));
        return assign(n, std::move(v), scope);
      }
      case Node::Kind::kSetBlock: {
        std::string text;
        INGOT_ASSIGN_OR_RETURN(Flow f, exec(n.body, scope, &text));
        if (f != Flow::kNormal) return invalid_argument("break or continue inside a set block");
        return assign(n, Value(std::move(text)), scope);
      }
      case Node::Kind::kMacro:
        scope->vars[n.text] = make_macro(n);
        return Flow::kNormal;
      case Node::Kind::kBreak:
        return Flow::kBreak;
      case Node::Kind::kContinue:
        return Flow::kContinue;
    }
    return Flow::kNormal;
  }

  Result<Flow> assign(const Node& n, Value v, Scope* scope) {
    if (!n.attr.empty()) {
      Value* ns = scope->find(n.targets[0]);
      if (!ns || !ns->is_namespace())
        return invalid_argument("cannot assign attribute on non-namespace object '", n.targets[0], "'");
      if (v.holds_namespace()) return unsupported("a namespace attribute cannot hold a namespace");
      if (v.depth() > kMaxNamespaceNesting)
        return make_status(StatusCode::kOutOfRange, "a value nested ", v.depth(),
                           " lists or dicts deep passes the limit of ", kMaxNamespaceNesting);
      Dict& attrs = ns->namespace_attrs();
      for (auto& kv : attrs) {
        if (kv.first == n.attr) {
          kv.second = std::move(v);
          return Flow::kNormal;
        }
      }
      attrs.emplace_back(n.attr, std::move(v));
      return Flow::kNormal;
    }
    if (n.targets.size() == 1) {
      scope->vars[n.targets[0]] = std::move(v);
      return Flow::kNormal;
    }
    INGOT_ASSIGN_OR_RETURN(List items, iterate(v));
    if (items.size() != n.targets.size())
      return invalid_argument("cannot unpack ", items.size(), " values into ", n.targets.size(), " names");
    for (size_t i = 0; i < items.size(); ++i) scope->vars[n.targets[i]] = items[i];
    return Flow::kNormal;
  }

  Status bind_targets(const Node& n, const Value& item, Scope* scope) {
    if (n.targets.size() == 1) {
      scope->vars[n.targets[0]] = item;
      return Status();
    }
    INGOT_ASSIGN_OR_RETURN(List parts, iterate(item));
    if (parts.size() != n.targets.size())
      return invalid_argument("cannot unpack ", parts.size(), " values into ", n.targets.size(), " loop variables");
    for (size_t i = 0; i < parts.size(); ++i) scope->vars[n.targets[i]] = parts[i];
    return Status();
  }

  Result<Flow> exec_for(const Node& n, Scope* scope, std::string* out) {
    INGOT_ASSIGN_OR_RETURN(Value seq, eval(*n.expr, scope));
    INGOT_ASSIGN_OR_RETURN(List items, iterate(seq));
    if (n.cond) {  // the loop's `if` filters first, so loop.length counts what is visited
      List kept;
      for (const Value& item : items) {
        INGOT_RETURN_IF_ERROR(count_iteration());
        Scope s(scope);
        INGOT_RETURN_IF_ERROR(bind_targets(n, item, &s));
        INGOT_ASSIGN_OR_RETURN(Value c, eval(*n.cond, &s));
        if (c.truthy()) kept.push_back(item);
      }
      items = std::move(kept);
    }
    if (items.empty()) return exec(n.else_body, scope, out);
    const int64_t length = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < length; ++i) {
      INGOT_RETURN_IF_ERROR(count_iteration());
      Scope s(scope);
      INGOT_RETURN_IF_ERROR(bind_targets(n, items[static_cast<size_t>(i)], &s));
      Dict loop = {
          {"index", Value(i + 1)},
          {"index0", Value(i)},
          {"revindex", Value(length - i)},
          {"revindex0", Value(length - i - 1)},
          {"first", Value(i == 0)},
          {"last", Value(i == length - 1)},
          {"length", Value(length)},
          {"depth", Value(int64_t{1})},
          {"depth0", Value(int64_t{0})},
          {"previtem", i > 0 ? items[static_cast<size_t>(i - 1)] : Value::undefined("there is no previous item")},
          {"nextitem", i + 1 < length ? items[static_cast<size_t>(i + 1)] : Value::undefined("there is no next item")},
          {"cycle", Value::callable("loop.cycle", [i](const List& a, const KwArgs&) -> Result<Value> {
             if (a.empty()) return invalid_argument("no items for cycling given");
             return a[static_cast<size_t>(i) % a.size()];
           })}};
      s.vars["loop"] = Value(std::move(loop));
      INGOT_ASSIGN_OR_RETURN(Flow f, exec(n.body, &s, out));
      if (f == Flow::kBreak) break;
    }
    return Flow::kNormal;
  }

  Status count_iteration() {
    if (++budget_.loop_iterations > budget_.limits.max_loop_iterations)
      return make_status(StatusCode::kOutOfRange, "the template ran more than ", budget_.limits.max_loop_iterations,
                         " loop iterations");
    return Status();
  }

  Value make_macro(const Node& n) {
    const Node* node = &n;
    return Value::callable(n.text, [this, node](const List& args, const KwArgs& kwargs) -> Result<Value> {
      if (call_depth_ >= budget_.limits.max_call_depth)
        return make_status(StatusCode::kOutOfRange, "line ", node->line, ": macro '", node->text, "' nested more than ",
                           budget_.limits.max_call_depth, " calls deep");
      if (args.size() > node->params.size())
        return invalid_argument("line ", node->line, ": macro '", node->text, "' takes ", node->params.size(),
                                " arguments, got ", args.size());
      Scope s(&root_);
      for (size_t i = 0; i < node->params.size(); ++i) {
        const auto& [name, def] = node->params[i];
        if (i < args.size()) {
          s.vars[name] = args[i];
          continue;
        }
        const Value* given = nullptr;
        for (const auto& [k, v] : kwargs)
          if (k == name) given = &v;
        if (given) {
          s.vars[name] = *given;
        } else if (def) {
          INGOT_ASSIGN_OR_RETURN(s.vars[name], eval(*def, &s));
        } else {
          s.vars[name] = Value::undefined("parameter '" + name + "' was not provided");
        }
      }
      for (const auto& [k, v] : kwargs) {
        bool known = false;
        for (const auto& p : node->params) known = known || p.first == k;
        if (!known)
          return invalid_argument("line ", node->line, ": macro '", node->text, "' takes no keyword argument '", k,
                                  "'");
      }
      ++call_depth_;
      std::string text;
      auto f = exec(node->body, &s, &text);
      --call_depth_;
      if (!f.ok()) return f.status();
      return Value(std::move(text));
    });
  }

  Result<Value> lookup(const std::string& name, Scope* scope) {
    if (Value* v = scope->find(name)) return *v;
    auto it = globals_.find(name);
    if (it != globals_.end()) return it->second;
    return Value::undefined("'" + name + "' is undefined");
  }

  Result<Value> eval(const Expr& e, Scope* scope) {
    auto r = eval_inner(e, scope);
    if (!r.ok()) return at_line(e.line, r.status());
    return r;
  }

  Result<Value> eval_inner(const Expr& e, Scope* scope) {
    switch (e.kind) {
      case Expr::Kind::kLiteral:
        return e.value;
      case Expr::Kind::kName:
        return lookup(e.name, scope);
      case Expr::Kind::kList: {
        List items;
        for (const auto& a : e.args) {
          INGOT_ASSIGN_OR_RETURN(Value v, eval(*a, scope));
          items.push_back(std::move(v));
        }
        return Value(std::move(items));
      }
      case Expr::Kind::kDict: {
        Dict d;
        for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
          INGOT_ASSIGN_OR_RETURN(Value k, eval(*e.args[i], scope));
          INGOT_ASSIGN_OR_RETURN(Value v, eval(*e.args[i + 1], scope));
          if (!k.is_string()) return unsupported("dict keys other than strings are not supported");
          bool replaced = false;
          for (auto& kv : d) {
            if (kv.first == k.str()) {
              kv.second = v;
              replaced = true;
            }
          }
          if (!replaced) d.emplace_back(k.str(), std::move(v));
        }
        return Value(std::move(d));
      }
      case Expr::Kind::kAttr: {
        INGOT_ASSIGN_OR_RETURN(Value obj, eval(*e.args[0], scope));
        return get_attr(budget_, obj, e.name);
      }
      case Expr::Kind::kItem: {
        INGOT_ASSIGN_OR_RETURN(Value obj, eval(*e.args[0], scope));
        INGOT_ASSIGN_OR_RETURN(Value key, eval(*e.args[1], scope));
        return get_item(obj, key);
      }
      case Expr::Kind::kSlice: {
        INGOT_ASSIGN_OR_RETURN(Value obj, eval(*e.args[0], scope));
        Value parts[3];
        for (int i = 0; i < 3; ++i)
          if (e.args[static_cast<size_t>(i) + 1]) {
            INGOT_ASSIGN_OR_RETURN(parts[i], eval(*e.args[static_cast<size_t>(i) + 1], scope));
          }
        return get_slice(obj, parts[0], parts[1], parts[2]);
      }
      case Expr::Kind::kCall: {
        INGOT_ASSIGN_OR_RETURN(Value callee, eval(*e.args[0], scope));
        List args;
        KwArgs kwargs;
        INGOT_RETURN_IF_ERROR(eval_args(e, scope, &args, &kwargs));
        if (callee.is_undefined()) return invalid_argument(callee.str());
        if (!callee.is_callable()) return invalid_argument("'", callee.type_name(), "' object is not callable");
        return callee.function()(args, kwargs);
      }
      case Expr::Kind::kFilter: {
        INGOT_ASSIGN_OR_RETURN(Value in, eval(*e.args[0], scope));
        List args;
        KwArgs kwargs;
        INGOT_RETURN_IF_ERROR(eval_args(e, scope, &args, &kwargs));
        return apply_filter(budget_, e.name, in, args, kwargs);
      }
      case Expr::Kind::kTest: {
        INGOT_ASSIGN_OR_RETURN(Value v, eval(*e.args[0], scope));
        List args;
        KwArgs kwargs;
        INGOT_RETURN_IF_ERROR(eval_args(e, scope, &args, &kwargs));
        INGOT_ASSIGN_OR_RETURN(bool r, apply_test(e.name, v, args));
        return Value(r != e.negate);
      }
      case Expr::Kind::kUnary: {
        INGOT_ASSIGN_OR_RETURN(Value v, eval(*e.args[0], scope));
        if (e.name == "not") return Value(!v.truthy());
        if (v.is_undefined()) return invalid_argument(v.str());
        if (!v.is_number()) return invalid_argument("bad operand type for unary ", e.name, ": '", v.type_name(), "'");
        if (e.name == "+") return v.is_bool() ? Value(v.as_int()) : v;
        if (v.is_float()) return Value(-v.as_double());
        int64_t r = 0;
        if (__builtin_sub_overflow(int64_t{0}, v.as_int(), &r)) return overflow_error();
        return Value(r);
      }
      case Expr::Kind::kAnd: {
        INGOT_ASSIGN_OR_RETURN(Value a, eval(*e.args[0], scope));
        if (!a.truthy()) return a;
        return eval(*e.args[1], scope);
      }
      case Expr::Kind::kOr: {
        INGOT_ASSIGN_OR_RETURN(Value a, eval(*e.args[0], scope));
        if (a.truthy()) return a;
        return eval(*e.args[1], scope);
      }
      case Expr::Kind::kCond: {
        INGOT_ASSIGN_OR_RETURN(Value c, eval(*e.args[0], scope));
        if (c.truthy()) return eval(*e.args[1], scope);
        if (e.args[2]) return eval(*e.args[2], scope);
        return Value::undefined("the inline if's condition was false and it has no else");
      }
      case Expr::Kind::kBinary: {
        INGOT_ASSIGN_OR_RETURN(Value a, eval(*e.args[0], scope));
        INGOT_ASSIGN_OR_RETURN(Value b, eval(*e.args[1], scope));
        return binary(e.name, a, b);
      }
    }
    return internal_error("unknown expression kind");
  }

  Status eval_args(const Expr& e, Scope* scope, List* args, KwArgs* kwargs) {
    for (size_t i = 1; i < e.args.size(); ++i) {
      INGOT_ASSIGN_OR_RETURN(Value v, eval(*e.args[i], scope));
      args->push_back(std::move(v));
    }
    for (const auto& [k, x] : e.kwargs) {
      INGOT_ASSIGN_OR_RETURN(Value v, eval(*x, scope));
      kwargs->emplace_back(k, std::move(v));
    }
    return Status();
  }

  Result<Value> repeat(const Value& seq, int64_t n) {
    if (n < 0) n = 0;
    const size_t unit = seq.is_string() ? seq.str().size() : seq.list().size();
    if (unit && static_cast<uint64_t>(n) > budget_.limits.max_output_bytes / unit)
      return make_status(StatusCode::kOutOfRange, "repeating a ", seq.type_name(), " ", n,
                         " times passes the output limit");
    if (seq.is_string()) {
      std::string s;
      for (int64_t i = 0; i < n; ++i) s += seq.str();
      INGOT_RETURN_IF_ERROR(budget_.charge(s.size()));
      return Value(std::move(s));
    }
    List l;
    for (int64_t i = 0; i < n; ++i) l.insert(l.end(), seq.list().begin(), seq.list().end());
    return Value(std::move(l));
  }

  Result<Value> binary(const std::string& op, const Value& a, const Value& b) {
    if (op == "==") return Value(equals(a, b));
    if (op == "!=") return Value(!equals(a, b));
    if (op == "<" || op == "<=" || op == ">" || op == ">=") {
      INGOT_ASSIGN_OR_RETURN(int c, compare(a, b));
      return Value(op == "<" ? c < 0 : op == "<=" ? c <= 0 : op == ">" ? c > 0 : c >= 0);
    }
    if (op == "in" || op == "not in") {
      if (b.is_none() || b.is_number() || b.is_callable() || b.is_namespace())
        return invalid_argument("argument of type '", b.type_name(), "' is not iterable");
      INGOT_ASSIGN_OR_RETURN(bool r, apply_test("in", a, {b}));
      return Value(r == (op == "in"));
    }
    if (op == "~") {
      std::string s = a.to_string() + b.to_string();
      INGOT_RETURN_IF_ERROR(budget_.charge(s.size()));
      return Value(std::move(s));
    }
    const char* o = op.c_str();
    if (op == "+") {
      if (a.is_string() && b.is_string()) {
        std::string s = a.str() + b.str();
        INGOT_RETURN_IF_ERROR(budget_.charge(s.size()));
        return Value(std::move(s));
      }
      if (a.is_list() && b.is_list()) {
        List l = a.list();
        l.insert(l.end(), b.list().begin(), b.list().end());
        return Value(std::move(l));
      }
    }
    if (op == "*") {
      if ((a.is_string() || a.is_list()) && (b.is_int() || b.is_bool())) return repeat(a, b.as_int());
      if ((b.is_string() || b.is_list()) && (a.is_int() || a.is_bool())) return repeat(b, a.as_int());
    }
    if (!a.is_number() || !b.is_number()) {
      if (op == "%" && a.is_string()) return unsupported("printf-style '%' formatting of strings is not supported");
      return type_error(o, a, b);
    }
    const bool real = a.is_float() || b.is_float() || op == "/";
    if (real) {
      const double x = a.as_double(), y = b.as_double();
      if (op == "+") return Value(x + y);
      if (op == "-") return Value(x - y);
      if (op == "*") return Value(x * y);
      if (op == "**") return Value(std::pow(x, y));
      if (y == 0) return invalid_argument("division by zero");
      if (op == "/") return Value(x / y);
      if (op == "//") return Value(std::floor(x / y));
      double m = std::fmod(x, y);
      if (m != 0 && ((m < 0) != (y < 0))) m += y;
      return Value(m);
    }
    const int64_t x = a.as_int(), y = b.as_int();
    int64_t r = 0;
    if (op == "+" || op == "-" || op == "*") {
      const bool overflow = op == "+"   ? __builtin_add_overflow(x, y, &r)
                            : op == "-" ? __builtin_sub_overflow(x, y, &r)
                                        : __builtin_mul_overflow(x, y, &r);
      if (overflow) return overflow_error();
      return Value(r);
    }
    if (op == "**") {
      if (y < 0) return Value(std::pow(static_cast<double>(x), static_cast<double>(y)));
      r = 1;
      for (int64_t i = 0; i < y; ++i) {
        if (__builtin_mul_overflow(r, x, &r)) return overflow_error();
        if (r == 0 || r == 1) break;
      }
      if (r == 1 && x == -1 && y % 2 == 1) r = -1;
      return Value(r);
    }
    if (y == 0) return invalid_argument("integer division or modulo by zero");
    if (x == INT64_MIN && y == -1) return overflow_error();
    int64_t q = x / y, m = x % y;
    if (m != 0 && ((m < 0) != (y < 0))) {
      q -= 1;
      m += y;
    }
    return Value(op == "//" ? q : m);
  }

  Budget budget_;
  Scope root_;
  std::unordered_map<std::string, Value> globals_;
  int call_depth_ = 0;
};

}  // namespace

Result<Template> Template::parse(const std::string& source, const Limits& limits) {
  INGOT_ASSIGN_OR_RETURN(Body body, ast::parse(source, limits.max_nesting));
  INGOT_RETURN_IF_ERROR(check_names(body));
  Template t;
  t.body_ = std::make_shared<const Body>(std::move(body));
  t.limits_ = limits;
  return t;
}

Result<std::string> Template::render(const Dict& context) const {
  if (!body_) return invalid_argument("render: the template was not parsed");
  Renderer r(limits_, context);
  return r.run(*body_);
}

}  // namespace ingot::llm::jinja
