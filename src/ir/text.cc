// Copyright ingot authors. Apache-2.0.
#include "ir/text.h"

#include <cctype>
#include <cstdlib>
#include <sstream>

namespace ingot::ir {

namespace {

std::string type_text(const Value& v) {
  if (!v.has_type()) return "";
  return std::string(": ") + data_type_name(v.dtype()) + v.shape().to_string();
}

std::string float_text(double f) {
  std::ostringstream os;
  os.precision(9);
  os << f;
  return os.str();
}

std::string quote(const std::string& s) {
  std::string q = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') q += '\\';
    q += c;
  }
  return q + "\"";
}

void print_graph(const Graph& g, size_t max_init, const std::string& indent, std::ostream& os);

std::string attr_text(const Attribute& a, size_t max_init, const std::string& indent) {
  std::ostringstream os;
  auto list = [&](const auto& v, auto fmt) {
    os << "[";
    for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << fmt(v[i]);
    os << "]";
  };
  switch (a.type) {
    case AttrType::kInt: os << a.i; break;
    case AttrType::kFloat: os << float_text(a.f); break;
    case AttrType::kString: os << quote(a.s); break;
    case AttrType::kInts: list(a.ints, [](int64_t v) { return std::to_string(v); }); break;
    case AttrType::kFloats: list(a.floats, [](float v) { return float_text(v); }); break;
    case AttrType::kStrings: list(a.strings, quote); break;
    case AttrType::kTensor: os << "tensor " << a.t.to_string(max_init); break;
    case AttrType::kTensors: os << "<" << a.tensors.size() << " tensors>"; break;
    case AttrType::kGraph: {
      std::ostringstream g;
      print_graph(*a.g, max_init, indent + "  ", g);
      os << g.str().substr(indent.size() + 2);
      break;
    }
    case AttrType::kGraphs: os << "<" << a.graphs.size() << " graphs>"; break;
    default: os << "?"; break;
  }
  return os.str();
}

void print_graph(const Graph& g, size_t max_init, const std::string& indent, std::ostream& os) {
  os << indent << "graph " << g.name() << " {\n";
  std::string in = indent + "  ";
  if (!g.parent())
    for (const auto& [d, v] : g.opset_imports()) os << in << "opset " << quote(d) << " " << v << "\n";
  for (const Value* v : g.inputs()) {
    if (v->initializer()) continue;
    os << in << "input %" << v->name() << type_text(*v) << "\n";
  }
  for (const Value* v : g.initializers()) {
    const Tensor& t = *v->initializer();
    os << in << "init %" << v->name() << type_text(*v) << " = ";
    if (t.dtype() == DataType::kString || static_cast<size_t>(t.numel()) > max_init) {
      os << "<" << t.numel() << " values>";
    } else {
      os << "[";
      for (int64_t i = 0; i < t.numel(); ++i)
        os << (i ? ", " : "") << (is_float(t.dtype()) ? float_text(t.get_f64(i)) : std::to_string(t.get_i64(i)));
      os << "]";
    }
    bool is_input = false;
    for (const Value* i : g.inputs()) is_input |= i == v;
    os << (is_input ? " (input)" : "") << "\n";
  }
  for (const auto& n : g.nodes()) {
    os << in;
    for (size_t i = 0; i < n->outputs().size(); ++i) {
      const Value* o = n->outputs()[i];
      os << (i ? ", " : "") << (o ? "%" + o->name() + type_text(*o) : "_");
    }
    os << " = " << (n->domain().empty() ? "" : n->domain() + "::") << n->op_type();
    if (!n->attrs().all().empty()) {
      os << " {";
      bool first = true;
      for (const auto& [k, a] : n->attrs().all()) {
        os << (first ? "" : ", ") << k << "=" << attr_text(a, max_init, in);
        first = false;
      }
      os << "}";
    }
    os << "(";
    for (size_t i = 0; i < n->inputs().size(); ++i) {
      const Value* v = n->inputs()[i];
      os << (i ? ", " : "") << (v ? "%" + v->name() : "_");
    }
    os << ")";
    if (!n->name().empty()) os << " @" << n->name();
    os << "\n";
  }
  for (const Value* v : g.outputs()) os << in << "output %" << v->name() << "\n";
  os << indent << "}\n";
}

// A small cursor-based scanner over one line.
class Scanner {
 public:
  Scanner(const std::string& s, int line) : s_(s), line_(line) {}
  void skip() {
    while (p_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[p_]))) ++p_;
  }
  bool done() {
    skip();
    return p_ >= s_.size();
  }
  bool eat(char c) {
    skip();
    if (p_ < s_.size() && s_[p_] == c) {
      ++p_;
      return true;
    }
    return false;
  }
  bool eat_word(const std::string& w) {
    skip();
    if (s_.compare(p_, w.size(), w) == 0 && (p_ + w.size() == s_.size() || !ident_char(s_[p_ + w.size()]))) {
      p_ += w.size();
      return true;
    }
    return false;
  }
  static bool ident_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '/' || c == ':' || c == '-';
  }
  std::string ident() {
    skip();
    size_t b = p_;
    while (p_ < s_.size() && ident_char(s_[p_]) && !(s_[p_] == ':' && p_ + 1 < s_.size() && s_[p_ + 1] != ':' && (p_ == 0 || s_[p_ - 1] != ':'))) ++p_;
    return s_.substr(b, p_ - b);
  }
  std::string name_token() {  // value names: anything up to a delimiter
    skip();
    size_t b = p_;
    while (p_ < s_.size() && !std::isspace(static_cast<unsigned char>(s_[p_])) && s_[p_] != ',' && s_[p_] != ')' &&
           s_[p_] != ':' && s_[p_] != '=')
      ++p_;
    return s_.substr(b, p_ - b);
  }
  Result<std::string> string_lit() {
    skip();
    if (!eat('"')) return err("expected a string");
    std::string out;
    while (p_ < s_.size() && s_[p_] != '"') {
      if (s_[p_] == '\\' && p_ + 1 < s_.size()) ++p_;
      out += s_[p_++];
    }
    if (!eat('"')) return err("unterminated string");
    return out;
  }
  std::string number_token() {
    skip();
    size_t b = p_;
    while (p_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[p_])) || s_[p_] == '.' || s_[p_] == '-' || s_[p_] == '+')) ++p_;
    return s_.substr(b, p_ - b);
  }
  char peek() {
    skip();
    return p_ < s_.size() ? s_[p_] : '\0';
  }
  Status err(const std::string& what) const {
    return invalid_argument("IR text line ", line_, ": ", what, " at column ", p_ + 1, ": ", s_);
  }

 private:
  const std::string& s_;
  int line_;
  size_t p_ = 0;
};

// "f32[batch,3]" after the ':'.
Result<std::pair<DataType, Shape>> parse_type(Scanner& sc) {
  std::string tn = sc.ident();
  DataType dt = parse_data_type(tn);
  if (dt == DataType::kUndefined) return sc.err("unknown dtype '" + tn + "'");
  if (!sc.eat('[')) return sc.err("expected '['");
  if (sc.eat('*')) {
    if (!sc.eat(']')) return sc.err("expected ']'");
    return std::make_pair(dt, Shape::unknown_rank());
  }
  std::vector<Dim> dims;
  while (!sc.eat(']')) {
    if (!dims.empty() && !sc.eat(',')) return sc.err("expected ',' in shape");
    std::string d = sc.number_token();
    if (d.empty()) d = sc.ident();
    if (d == "?") dims.push_back(Dim::unknown());
    else if (!d.empty() && std::isdigit(static_cast<unsigned char>(d[0]))) dims.emplace_back(std::strtoll(d.c_str(), nullptr, 10));
    else if (!d.empty()) dims.push_back(Dim::symbol(d));
    else if (sc.eat('?')) dims.push_back(Dim::unknown());
    else return sc.err("bad dim");
  }
  return std::make_pair(dt, Shape(std::move(dims)));
}

Result<Attribute> parse_attr_value(Scanner& sc) {
  Attribute a;
  char c = sc.peek();
  if (c == '"') {
    a.type = AttrType::kString;
    INGOT_ASSIGN_OR_RETURN(a.s, sc.string_lit());
    return a;
  }
  if (c == '[') {
    sc.eat('[');
    if (sc.peek() == '"') {
      a.type = AttrType::kStrings;
      while (!sc.eat(']')) {
        if (!a.strings.empty() && !sc.eat(',')) return sc.err("expected ','");
        INGOT_ASSIGN_OR_RETURN(std::string s, sc.string_lit());
        a.strings.push_back(s);
      }
      return a;
    }
    std::vector<std::string> toks;
    while (!sc.eat(']')) {
      if (!toks.empty() && !sc.eat(',')) return sc.err("expected ','");
      toks.push_back(sc.number_token());
      if (toks.back().empty()) return sc.err("expected a number");
    }
    bool is_float = false;
    for (const auto& t : toks) is_float |= t.find_first_of(".eEn") != std::string::npos;
    a.type = is_float ? AttrType::kFloats : AttrType::kInts;
    for (const auto& t : toks) {
      if (is_float) a.floats.push_back(std::strtof(t.c_str(), nullptr));
      else a.ints.push_back(std::strtoll(t.c_str(), nullptr, 10));
    }
    return a;
  }
  std::string t = sc.number_token();
  if (t.empty()) return sc.err("expected an attribute value");
  if (t.find_first_of(".eEn") != std::string::npos) {
    a.type = AttrType::kFloat;
    a.f = std::strtof(t.c_str(), nullptr);
  } else {
    a.type = AttrType::kInt;
    a.i = std::strtoll(t.c_str(), nullptr, 10);
  }
  return a;
}

}  // namespace

std::string to_text(const Graph& g, size_t max_init_values) {
  std::ostringstream os;
  print_graph(g, max_init_values, "", os);
  return os.str();
}

Result<std::unique_ptr<Graph>> parse_text(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  int ln = 0;
  std::unique_ptr<Graph> g;
  std::vector<std::string> output_names;
  bool closed = false;
  auto value_named = [&](const std::string& n) -> Value* {
    Value* v = g->find_value(n);
    return v ? v : g->add_value(n);
  };
  while (std::getline(in, line)) {
    ++ln;
    auto hash = line.find("//");
    if (hash != std::string::npos) line = line.substr(0, hash);
    Scanner sc(line, ln);
    if (sc.done()) continue;
    if (!g) {
      if (!sc.eat_word("graph")) return sc.err("expected 'graph NAME {'");
      std::string name = sc.ident();
      if (!sc.eat('{')) return sc.err("expected '{'");
      g = std::make_unique<Graph>(name.empty() ? "main" : name);
      continue;
    }
    if (closed) return sc.err("text after the closing '}'");
    if (sc.eat('}')) {
      closed = true;
      continue;
    }
    if (sc.eat_word("opset")) {
      INGOT_ASSIGN_OR_RETURN(std::string d, sc.string_lit());
      std::string v = sc.number_token();
      g->set_opset_import(d, std::strtoll(v.c_str(), nullptr, 10));
      continue;
    }
    if (sc.eat_word("input") || sc.eat_word("init")) {
      bool init = line.find("init") < line.find('%');
      if (!sc.eat('%')) return sc.err("expected '%name'");
      std::string name = sc.name_token();
      if (!sc.eat(':')) return sc.err("expected ': dtype[shape]'");
      INGOT_ASSIGN_OR_RETURN(auto type, parse_type(sc));
      if (!init) {
        g->add_input(name, type.first, type.second);
        continue;
      }
      if (!sc.eat('=') || !sc.eat('[')) return sc.err("expected '= [values]'");
      if (!type.second.is_concrete()) return sc.err("initializer shapes must be concrete");
      INGOT_ASSIGN_OR_RETURN(Tensor t, Tensor::zeros(type.first, type.second.concrete()));
      int64_t i = 0;
      while (!sc.eat(']')) {
        if (i && !sc.eat(',')) return sc.err("expected ','");
        std::string tok = sc.number_token();
        if (tok.empty()) return sc.err("expected a number");
        if (i >= t.numel()) return sc.err("too many values for the shape");
        if (is_float(t.dtype())) t.set_f64(i, std::strtod(tok.c_str(), nullptr));
        else t.set_i64(i, std::strtoll(tok.c_str(), nullptr, 10));
        ++i;
      }
      if (i != t.numel()) return sc.err("expected " + std::to_string(t.numel()) + " values, got " + std::to_string(i));
      Value* v = g->add_initializer(name, std::move(t));
      if (sc.eat('(')) {
        if (!sc.eat_word("input") || !sc.eat(')')) return sc.err("expected '(input)'");
        g->add_input_existing(v);
      }
      continue;
    }
    if (sc.eat_word("output")) {
      if (!sc.eat('%')) return sc.err("expected '%name'");
      output_names.push_back(sc.name_token());
      continue;
    }
    // Node line.
    std::vector<Value*> outs;
    do {
      if (sc.eat('_')) {
        outs.push_back(nullptr);
        continue;
      }
      if (!sc.eat('%')) return sc.err("expected '%output'");
      std::string name = sc.name_token();
      if (g->find_value(name) && g->find_value(name)->producer()) return sc.err("'" + name + "' is produced twice");
      Value* v = value_named(name);
      if (sc.eat(':')) {
        INGOT_ASSIGN_OR_RETURN(auto type, parse_type(sc));
        v->set_dtype(type.first);
        v->set_shape(type.second);
      }
      outs.push_back(v);
    } while (sc.eat(','));
    if (!sc.eat('=')) return sc.err("expected '='");
    std::string op = sc.ident();
    std::string domain;
    auto dc = op.rfind("::");
    if (dc != std::string::npos) {
      domain = op.substr(0, dc);
      op = op.substr(dc + 2);
    }
    if (op.empty()) return sc.err("expected an op type");
    Attributes attrs;
    if (sc.eat('{')) {
      while (!sc.eat('}')) {
        if (!attrs.all().empty() && !sc.eat(',')) return sc.err("expected ','");
        std::string k = sc.ident();
        if (k.empty() || !sc.eat('=')) return sc.err("expected name=value");
        INGOT_ASSIGN_OR_RETURN(Attribute a, parse_attr_value(sc));
        attrs.set(k, std::move(a));
      }
    }
    if (!sc.eat('(')) return sc.err("expected '(' before the inputs");
    std::vector<Value*> ins;
    while (!sc.eat(')')) {
      if (!ins.empty() && !sc.eat(',')) return sc.err("expected ','");
      if (sc.eat('_')) {
        ins.push_back(nullptr);
        continue;
      }
      if (!sc.eat('%')) return sc.err("expected '%input'");
      ins.push_back(value_named(sc.name_token()));
    }
    std::string node_name;
    if (sc.eat('@')) node_name = sc.name_token();
    if (!sc.done()) return sc.err("unexpected text");
    g->add_node(op, ins, outs, std::move(attrs), node_name, domain);
  }
  if (!g) return invalid_argument("IR text: no 'graph' block");
  if (!closed) return invalid_argument("IR text: missing the closing '}'");
  for (const auto& n : output_names) {
    Value* v = g->find_value(n);
    if (!v) return invalid_argument("IR text: output '%", n, "' is not defined");
    g->add_output(v);
  }
  for (const auto& n : g->nodes())
    for (const Value* v : n->inputs())
      if (v && !v->producer() && !v->initializer()) {
        bool is_input = false;
        for (const Value* i : g->inputs()) is_input |= i == v;
        if (!is_input) return invalid_argument("IR text: '%", v->name(), "' is used but never defined");
      }
  INGOT_RETURN_IF_ERROR(g->topological_sort());
  return g;
}

}  // namespace ingot::ir
