// Copyright ingot authors. Apache-2.0.
//
// Lexer and recursive-descent parser of the Jinja subset (jinja.h). Whitespace handling is
// jinja2's with trim_blocks and lstrip_blocks on and keep_trailing_newline off, as transformers
// and vLLM configure it: newlines are normalized to \n and one trailing newline dropped; a block
// or comment tag alone on its line (only spaces and tabs before it) loses that indentation, and the
// newline right after a block or comment tag is dropped; `{%-` / `-%}` (and the {{ and {# forms)
// strip all whitespace on that side, `{%+` / `+%}` keep it. Operator precedence is jinja2's.
#include <algorithm>
#include <cerrno>
#include <cstring>

#include "llm/jinja_ast.h"

namespace ingot::llm::jinja::ast {
namespace {

enum class Tok { kText, kVarBegin, kVarEnd, kBlockBegin, kBlockEnd, kName, kInt, kFloat, kString, kOp, kEof };

struct Token {
  Tok type;
  std::string text;  // text, name, operator, or the decoded string literal
  Value number;
  int line;
};

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

void append_utf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    *out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    *out += static_cast<char>(0xC0 | (cp >> 6));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    *out += static_cast<char>(0xE0 | (cp >> 12));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    *out += static_cast<char>(0xF0 | (cp >> 18));
    *out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

class Lexer {
 public:
  explicit Lexer(const std::string& source) {
    // Newlines normalized, one trailing newline dropped (keep_trailing_newline=False).
    src_.reserve(source.size());
    for (size_t i = 0; i < source.size(); ++i) {
      if (source[i] == '\r') {
        src_ += '\n';
        if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
      } else {
        src_ += source[i];
      }
    }
    if (!src_.empty() && src_.back() == '\n') src_.pop_back();
  }

  Result<std::vector<Token>> run() {
    bool line_starting = true;  // the last tag's end (with what it trimmed) ended a line
    while (pos_ < src_.size()) {
      size_t at = pos_;
      while ((at = src_.find('{', at)) != std::string::npos) {
        if (at + 1 < src_.size() && std::strchr("{%#", src_[at + 1]) && src_[at + 1] != '\0') break;
        ++at;
      }
      std::string text = src_.substr(pos_, at == std::string::npos ? std::string::npos : at - pos_);
      if (at == std::string::npos) {
        emit_text(text);
        break;
      }
      const char kind = src_[at + 1];
      const char sign = at + 2 < src_.size() && (src_[at + 2] == '-' || src_[at + 2] == '+') ? src_[at + 2] : 0;
      const int text_lines = count_lines(text);
      if (sign == '-') {
        size_t end = text.size();
        while (end > 0 && is_space(text[end - 1])) --end;
        text.resize(end);
      } else if (sign != '+' && kind != '{') {
        const size_t line_start = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
        if (line_start > 0 || line_starting) {
          bool blank = line_start < text.size();
          for (size_t i = line_start; i < text.size(); ++i) blank = blank && is_space(text[i]);
          if (blank) text.resize(line_start);
        }
      }
      emit_text(text);
      line_ += text_lines - count_lines(text);
      pos_ = at + 2 + (sign ? 1 : 0);
      const int tag_line = line_;
      if (kind == '#') {
        const size_t end = src_.find("#}", pos_);
        if (end == std::string::npos) return invalid_model("line ", tag_line, ": unclosed comment ({# without #})");
        const char end_sign = end > pos_ && (src_[end - 1] == '-' || src_[end - 1] == '+') ? src_[end - 1] : 0;
        line_ += count_lines(src_.substr(pos_, end - pos_));
        pos_ = end + 2;
        line_starting = trim_after(end_sign, true);
        continue;
      }
      tokens_.push_back({kind == '{' ? Tok::kVarBegin : Tok::kBlockBegin, "", Value(), tag_line});
      INGOT_RETURN_IF_ERROR(lex_tag(kind == '{', tag_line, &line_starting));
    }
    tokens_.push_back({Tok::kEof, "", Value(), line_});
    return std::move(tokens_);
  }

 private:
  static int count_lines(const std::string& s) {
    int n = 0;
    for (char c : s) n += c == '\n';
    return n;
  }

  void emit_text(const std::string& text) {
    if (!text.empty()) tokens_.push_back({Tok::kText, text, Value(), line_});
    line_ += count_lines(text);
  }

  // After a tag's end at pos_: `-` strips all whitespace, a block or comment drops one newline
  // (trim_blocks) unless `+`. Returns whether what was consumed ended a line.
  bool trim_after(char end_sign, bool is_block) {
    const size_t from = pos_;
    if (end_sign == '-') {
      while (pos_ < src_.size() && is_space(src_[pos_])) ++pos_;
    } else if (end_sign != '+' && is_block && pos_ < src_.size() && src_[pos_] == '\n') {
      ++pos_;
    }
    line_ += count_lines(src_.substr(from, pos_ - from));
    if (pos_ > from) return src_[pos_ - 1] == '\n';
    return false;
  }

  Status lex_tag(bool is_var, int tag_line, bool* line_starting) {
    const char* close = is_var ? "}}" : "%}";
    int brackets = 0;
    while (true) {
      while (pos_ < src_.size() && is_space(src_[pos_])) line_ += src_[pos_++] == '\n';
      if (pos_ >= src_.size())
        return invalid_model("line ", tag_line, ": unclosed tag (", is_var ? "{{ without }}" : "{% without %}", ")");
      const char c = src_[pos_];
      if (brackets == 0) {
        for (char sign : {'-', '+', '\0'}) {
          const size_t at = pos_ + (sign ? 1 : 0);
          if ((sign == 0 || c == sign) && src_.compare(at, 2, close) == 0) {
            tokens_.push_back({is_var ? Tok::kVarEnd : Tok::kBlockEnd, "", Value(), line_});
            pos_ = at + 2;
            *line_starting = trim_after(sign, !is_var);
            return Status();
          }
        }
      }
      if (is_name_start(c)) {
        const size_t start = pos_;
        while (pos_ < src_.size() && (is_name_start(src_[pos_]) || is_digit(src_[pos_]))) ++pos_;
        tokens_.push_back({Tok::kName, src_.substr(start, pos_ - start), Value(), line_});
      } else if (is_digit(c)) {
        INGOT_RETURN_IF_ERROR(lex_number());
      } else if (c == '\'' || c == '"') {
        INGOT_RETURN_IF_ERROR(lex_string());
      } else {
        static const char* kOps[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<",
                                     ">",  "=",  "(",  ")",  "[",  "]",  "{", "}", ",", ".", ":", "|"};
        const char* op = nullptr;
        for (const char* o : kOps) {
          if (src_.compare(pos_, std::strlen(o), o) == 0) {
            op = o;
            break;
          }
        }
        if (!op) return invalid_model("line ", line_, ": unexpected character '", std::string(1, c), "'");
        if (std::strchr("([{", op[0]) && op[1] == '\0') ++brackets;
        if (std::strchr(")]}", op[0]) && op[1] == '\0' && brackets > 0) --brackets;
        tokens_.push_back({Tok::kOp, op, Value(), line_});
        pos_ += std::strlen(op);
      }
    }
  }

  Status lex_number() {
    std::string digits;
    bool is_float = false;
    auto take_digits = [&] {
      while (pos_ < src_.size() &&
             (is_digit(src_[pos_]) || (src_[pos_] == '_' && pos_ + 1 < src_.size() && is_digit(src_[pos_ + 1])))) {
        if (src_[pos_] != '_') digits += src_[pos_];
        ++pos_;
      }
    };
    take_digits();
    if (pos_ + 1 < src_.size() && src_[pos_] == '.' && is_digit(src_[pos_ + 1])) {
      is_float = true;
      digits += src_[pos_++];
      take_digits();
    }
    if (pos_ < src_.size() && (src_[pos_] == 'e' || src_[pos_] == 'E')) {
      size_t p = pos_ + 1;
      if (p < src_.size() && (src_[p] == '+' || src_[p] == '-')) ++p;
      if (p < src_.size() && is_digit(src_[p])) {
        is_float = true;
        digits += 'e';
        digits += src_.substr(pos_ + 1, p - pos_ - 1);
        pos_ = p;
        take_digits();
      }
    }
    Token t{is_float ? Tok::kFloat : Tok::kInt, digits, Value(), line_};
    if (is_float) {
      t.number = Value(std::strtod(digits.c_str(), nullptr));
    } else {
      errno = 0;
      const long long v = std::strtoll(digits.c_str(), nullptr, 10);
      if (errno == ERANGE) return invalid_model("line ", line_, ": integer literal ", digits, " is out of range");
      t.number = Value(static_cast<int64_t>(v));
    }
    tokens_.push_back(std::move(t));
    return Status();
  }

  // A string literal with Python's escapes (jinja2 decodes them with unicode-escape).
  Status lex_string() {
    const char quote = src_[pos_++];
    const int start_line = line_;
    std::string out;
    while (true) {
      if (pos_ >= src_.size()) return invalid_model("line ", start_line, ": unterminated string literal");
      const char c = src_[pos_++];
      if (c == quote) break;
      if (c == '\n') ++line_;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= src_.size()) return invalid_model("line ", start_line, ": unterminated string literal");
      const char e = src_[pos_++];
      switch (e) {
        case '\n':
          ++line_;
          break;
        case '\\':
          out += '\\';
          break;
        case '\'':
          out += '\'';
          break;
        case '"':
          out += '"';
          break;
        case 'a':
          out += '\a';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'v':
          out += '\v';
          break;
        case 'x':
        case 'u':
        case 'U': {
          const size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          uint32_t cp = 0;
          for (size_t k = 0; k < n; ++k) {
            const char h = pos_ + k < src_.size() ? src_[pos_ + k] : '\0';
            const int d = is_digit(h)              ? h - '0'
                          : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                          : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                                   : -1;
            if (d < 0) return invalid_model("line ", line_, ": truncated \\", std::string(1, e), " escape in a string");
            cp = cp * 16 + static_cast<uint32_t>(d);
          }
          if (cp > 0x10FFFF) return invalid_model("line ", line_, ": escape \\U beyond U+10FFFF in a string");
          pos_ += n;
          append_utf8(cp, &out);
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            uint32_t cp = static_cast<uint32_t>(e - '0');
            for (int k = 0; k < 2 && pos_ < src_.size() && src_[pos_] >= '0' && src_[pos_] <= '7'; ++k)
              cp = cp * 8 + static_cast<uint32_t>(src_[pos_++] - '0');
            append_utf8(cp, &out);
          } else {
            out += '\\';  // Python keeps an unknown escape as it is
            out += e;
          }
      }
    }
    tokens_.push_back({Tok::kString, out, Value(), start_line});
    return Status();
  }

  std::string src_;
  size_t pos_ = 0;
  int line_ = 1;
  std::vector<Token> tokens_;
};

class Parser {
 public:
  Parser(std::vector<Token> tokens, int max_depth) : toks_(std::move(tokens)), max_depth_(max_depth) {}

  Result<Body> parse_template() {
    Body body;
    std::string end;
    INGOT_RETURN_IF_ERROR(parse_body({}, &body, &end));
    return body;
  }

 private:
  const Token& peek(size_t ahead = 0) const { return toks_[std::min(at_ + ahead, toks_.size() - 1)]; }
  const Token& next() { return toks_[std::min(at_++, toks_.size() - 1)]; }
  bool is_op(const char* op, size_t ahead = 0) const { return peek(ahead).type == Tok::kOp && peek(ahead).text == op; }
  bool is_name(const char* name, size_t ahead = 0) const {
    return peek(ahead).type == Tok::kName && peek(ahead).text == name;
  }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    ++at_;
    return true;
  }
  bool skip_name(const char* name) {
    if (!is_name(name)) return false;
    ++at_;
    return true;
  }
  static std::string describe(const Token& t) {
    switch (t.type) {
      case Tok::kEof:
        return "end of template";
      case Tok::kText:
        return "text";
      case Tok::kVarBegin:
        return "'{{'";
      case Tok::kVarEnd:
        return "'}}'";
      case Tok::kBlockBegin:
        return "'{%'";
      case Tok::kBlockEnd:
        return "'%}'";
      case Tok::kString:
        return "string literal";
      default:
        return "'" + t.text + "'";
    }
  }
  Status error(const std::string& what) const { return invalid_model("line ", peek().line, ": ", what); }
  Status expect_op(const char* op) {
    if (skip_op(op)) return Status();
    return error(std::string("expected '") + op + "', got " + describe(peek()));
  }
  Status expect(Tok type, const char* what) {
    if (peek().type == type) {
      ++at_;
      return Status();
    }
    return error(std::string("expected ") + what + ", got " + describe(peek()));
  }
  Result<std::string> expect_name() {
    if (peek().type != Tok::kName) return error("expected a name, got " + describe(peek()));
    return next().text;
  }

  // Statements up to one of `ends` (a block tag whose name is consumed into *end) or the end.
  Status parse_body(const std::vector<const char*>& ends, Body* body, std::string* end) {
    if (++depth_ > max_depth_) return error("statements nested too deeply");
    while (true) {
      const Token& t = peek();
      if (t.type == Tok::kEof) {
        --depth_;
        if (ends.empty()) return Status();
        std::string names;
        for (const char* e : ends) names += std::string(names.empty() ? "" : " or ") + "'" + e + "'";
        return error("unexpected end of template: expected " + names);
      }
      auto node = std::make_unique<Node>();
      node->line = t.line;
      if (t.type == Tok::kText) {
        node->kind = Node::Kind::kText;
        node->text = next().text;
      } else if (t.type == Tok::kVarBegin) {
        ++at_;
        node->kind = Node::Kind::kOutput;
        INGOT_ASSIGN_OR_RETURN(node->expr, parse_expr());
        INGOT_RETURN_IF_ERROR(expect(Tok::kVarEnd, "'}}'"));
      } else if (t.type == Tok::kBlockBegin) {
        ++at_;
        INGOT_ASSIGN_OR_RETURN(std::string tag, expect_name());
        for (const char* e : ends) {
          if (tag == e) {
            *end = tag;
            --depth_;
            return Status();
          }
        }
        INGOT_ASSIGN_OR_RETURN(bool made, parse_statement(tag, node.get(), body));
        if (!made) continue;
      } else {
        return error("unexpected " + describe(t));
      }
      body->push_back(std::move(node));
    }
  }

  // The statement tagged `tag` (its name consumed) into *node; for {% generation %}, whose body
  // renders in place, the body's nodes go to *body and false comes back.
  Result<bool> parse_statement(const std::string& tag, Node* node, Body* body);

  Result<ExprPtr> parse_expr(bool with_cond = true);
  Result<ExprPtr> parse_or();
  Result<ExprPtr> parse_and();
  Result<ExprPtr> parse_not();
  Result<ExprPtr> parse_compare();
  Result<ExprPtr> parse_math1();
  Result<ExprPtr> parse_concat();
  Result<ExprPtr> parse_math2();
  Result<ExprPtr> parse_pow();
  Result<ExprPtr> parse_unary(bool with_filter = true);
  Result<ExprPtr> parse_primary();
  Result<ExprPtr> parse_postfix(ExprPtr e);
  Result<ExprPtr> parse_filters_and_tests(ExprPtr e);
  Status parse_call_args(Expr* call);

  Result<ExprPtr> make(Expr::Kind kind, int line, std::string name, std::vector<ExprPtr> args) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    e->name = std::move(name);
    e->args = std::move(args);
    return finish(std::move(e));
  }
  Result<ExprPtr> finish(ExprPtr e) {
    int d = 0;
    for (const ExprPtr& a : e->args)
      if (a) d = std::max(d, a->depth);
    for (const auto& kw : e->kwargs) d = std::max(d, kw.second->depth);
    e->depth = d + 1;
    if (e->depth > max_depth_) return invalid_model("line ", e->line, ": expression nested too deeply");
    return e;
  }
  Result<ExprPtr> binary(const char* op, ExprPtr a, ExprPtr b) {
    const int line = a->line;
    std::vector<ExprPtr> args;
    args.push_back(std::move(a));
    args.push_back(std::move(b));
    return make(Expr::Kind::kBinary, line, op, std::move(args));
  }

  std::vector<Token> toks_;
  size_t at_ = 0;
  int max_depth_;
  int depth_ = 0;
};

Result<bool> Parser::parse_statement(const std::string& tag, Node* node, Body* body) {
  std::string end;
  if (tag == "if") {
    node->kind = Node::Kind::kIf;
    while (true) {
      INGOT_ASSIGN_OR_RETURN(ExprPtr cond, parse_expr());
      INGOT_RETURN_IF_ERROR(expect(Tok::kBlockEnd, "'%}'"));
      Body branch;
      INGOT_RETURN_IF_ERROR(parse_body({"elif", "else", "endif"}, &branch, &end));
      node->branches.emplace_back(std::move(cond), std::move(branch));
      if (end != "elif") break;
    }
    if (end == "else") {
      INGOT_RETURN_IF_ERROR(expect(Tok::kBlockEnd, "'%}'"));
      INGOT_RETURN_IF_ERROR(parse_body({"endif"}, &node->else_body, &end));
    }
  } else if (tag == "for") {
    node->kind = Node::Kind::kFor;
    const bool paren = skip_op("(");
    do {
      INGOT_ASSIGN_OR_RETURN(std::string target, expect_name());
      node->targets.push_back(target);
    } while (skip_op(","));
    if (paren) INGOT_RETURN_IF_ERROR(expect_op(")"));
    if (!skip_name("in")) return error("expected 'in' in a for loop, got " + describe(peek()));
    INGOT_ASSIGN_OR_RETURN(node->expr, parse_expr(/*with_cond=*/false));
    if (skip_name("if")) {
      INGOT_ASSIGN_OR_RETURN(node->cond, parse_expr());
    }
    if (is_name("recursive")) return error("recursive for loops are not supported");
    INGOT_RETURN_IF_ERROR(expect(Tok::kBlockEnd, "'%}'"));
    INGOT_RETURN_IF_ERROR(parse_body({"else", "endfor"}, &node->body, &end));
    if (end == "else") {
      INGOT_RETURN_IF_ERROR(expect(Tok::kBlockEnd, "'%}'"));
      INGOT_RETURN_IF_ERROR(parse_body({"endfor"}, &node->else_body, &end));
    }
  } else if (tag == "set") {
    node->kind = Node::Kind::kSet;
    INGOT_ASSIGN_OR_RETURN(std::string target, expect_name());
    node->targets.push_back(target);
    if (skip_op(".")) {
      INGOT_ASSIGN_OR_RETURN(node->attr, expect_name());
    } else {
      while (skip_op(",")) {
        INGOT_ASSIGN_OR_RETURN(std::string more, expect_name());
        node->targets.push_back(more);
      }
    }
    if (peek().type == Tok::kBlockEnd && node->targets.size() == 1 && node->attr.empty()) {
      ++at_;
      node->kind = Node::Kind::kSetBlock;
      INGOT_RETURN_IF_ERROR(parse_body({"endset"}, &node->body, &end));
    } else {
      INGOT_RETURN_IF_ERROR(expect_op("="));
      INGOT_ASSIGN_OR_RETURN(node->expr, parse_expr());
    }
  } else if (tag == "macro") {
    node->kind = Node::Kind::kMacro;
    INGOT_ASSIGN_OR_RETURN(node->text, expect_name());
    INGOT_RETURN_IF_ERROR(expect_op("("));
    while (!skip_op(")")) {
      if (!node->params.empty()) INGOT_RETURN_IF_ERROR(expect_op(","));
      if (skip_op(")")) break;
      INGOT_ASSIGN_OR_RETURN(std::string param, expect_name());
      ExprPtr def;
      if (skip_op("=")) {
        INGOT_ASSIGN_OR_RETURN(def, parse_expr());
      }
      node->params.emplace_back(param, std::move(def));
    }
    INGOT_RETURN_IF_ERROR(expect(Tok::kBlockEnd, "'%}'"));
    INGOT_RETURN_IF_ERROR(parse_body({"endmacro"}, &node->body, &end));
  } else if (tag == "break" || tag == "continue") {
    node->kind = tag == "break" ? Node::Kind::kBreak : Node::Kind::kContinue;
  } else if (tag == "generation") {
    // transformers' AssistantTracker marks the assistant's text; the text renders as it is.
    INGOT_RETURN_IF_ERROR(expect(Tok::kBlockEnd, "'%}'"));
    INGOT_RETURN_IF_ERROR(parse_body({"endgeneration"}, body, &end));
    INGOT_RETURN_IF_ERROR(expect(Tok::kBlockEnd, "'%}'"));
    return false;
  } else if (tag == "endif" || tag == "endfor" || tag == "elif" || tag == "else" || tag == "endmacro" ||
             tag == "endset" || tag == "endgeneration") {
    return error("unexpected '" + tag + "' with no block open to end");
  } else {
    return error("unknown or unsupported tag '" + tag + "'");
  }
  INGOT_RETURN_IF_ERROR(expect(Tok::kBlockEnd, "'%}'"));
  return true;
}

Result<ExprPtr> Parser::parse_expr(bool with_cond) {
  if (++depth_ > max_depth_) return error("expression nested too deeply");
  INGOT_ASSIGN_OR_RETURN(ExprPtr e, parse_or());
  while (with_cond && is_name("if")) {
    const int line = next().line;
    std::vector<ExprPtr> args(3);
    args[1] = std::move(e);
    INGOT_ASSIGN_OR_RETURN(args[0], parse_or());
    if (skip_name("else")) {
      INGOT_ASSIGN_OR_RETURN(args[2], parse_expr());
    }
    INGOT_ASSIGN_OR_RETURN(e, make(Expr::Kind::kCond, line, "", std::move(args)));
  }
  --depth_;
  return e;
}

Result<ExprPtr> Parser::parse_or() {
  INGOT_ASSIGN_OR_RETURN(ExprPtr e, parse_and());
  while (skip_name("or")) {
    INGOT_ASSIGN_OR_RETURN(ExprPtr r, parse_and());
    const int line = e->line;
    std::vector<ExprPtr> args;
    args.push_back(std::move(e));
    args.push_back(std::move(r));
    INGOT_ASSIGN_OR_RETURN(e, make(Expr::Kind::kOr, line, "", std::move(args)));
  }
  return e;
}

Result<ExprPtr> Parser::parse_and() {
  INGOT_ASSIGN_OR_RETURN(ExprPtr e, parse_not());
  while (skip_name("and")) {
    INGOT_ASSIGN_OR_RETURN(ExprPtr r, parse_not());
    const int line = e->line;
    std::vector<ExprPtr> args;
    args.push_back(std::move(e));
    args.push_back(std::move(r));
    INGOT_ASSIGN_OR_RETURN(e, make(Expr::Kind::kAnd, line, "", std::move(args)));
  }
  return e;
}

Result<ExprPtr> Parser::parse_not() {
  if (is_name("not")) {
    const int line = next().line;
    if (++depth_ > max_depth_) return error("expression nested too deeply");
    INGOT_ASSIGN_OR_RETURN(ExprPtr operand, parse_not());
    --depth_;
    std::vector<ExprPtr> args;
    args.push_back(std::move(operand));
    return make(Expr::Kind::kUnary, line, "not", std::move(args));
  }
  return parse_compare();
}

// Comparison chains (a < b < c) are refused: no chat template needs them.
Result<ExprPtr> Parser::parse_compare() {
  INGOT_ASSIGN_OR_RETURN(ExprPtr e, parse_math1());
  bool compared = false;
  while (true) {
    std::string op;
    if (is_op("==") || is_op("!=") || is_op("<") || is_op("<=") || is_op(">") || is_op(">=")) {
      op = next().text;
    } else if (skip_name("in")) {
      op = "in";
    } else if (is_name("not") && is_name("in", 1)) {
      at_ += 2;
      op = "not in";
    } else {
      return e;
    }
    if (compared) return error("chained comparisons (a < b < c) are not supported");
    compared = true;
    INGOT_ASSIGN_OR_RETURN(ExprPtr r, parse_math1());
    INGOT_ASSIGN_OR_RETURN(e, binary(op.c_str(), std::move(e), std::move(r)));
  }
}

Result<ExprPtr> Parser::parse_math1() {
  INGOT_ASSIGN_OR_RETURN(ExprPtr e, parse_concat());
  while (is_op("+") || is_op("-")) {
    const std::string op = next().text;
    INGOT_ASSIGN_OR_RETURN(ExprPtr r, parse_concat());
    INGOT_ASSIGN_OR_RETURN(e, binary(op.c_str(), std::move(e), std::move(r)));
  }
  return e;
}

Result<ExprPtr> Parser::parse_concat() {
  INGOT_ASSIGN_OR_RETURN(ExprPtr e, parse_math2());
  while (skip_op("~")) {
    INGOT_ASSIGN_OR_RETURN(ExprPtr r, parse_math2());
    INGOT_ASSIGN_OR_RETURN(e, binary("~", std::move(e), std::move(r)));
  }
  return e;
}

Result<ExprPtr> Parser::parse_math2() {
  INGOT_ASSIGN_OR_RETURN(ExprPtr e, parse_pow());
  while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
    const std::string op = next().text;
    INGOT_ASSIGN_OR_RETURN(ExprPtr r, parse_pow());
    INGOT_ASSIGN_OR_RETURN(e, binary(op.c_str(), std::move(e), std::move(r)));
  }
  return e;
}

Result<ExprPtr> Parser::parse_pow() {
  INGOT_ASSIGN_OR_RETURN(ExprPtr e, parse_unary());
  while (skip_op("**")) {
    INGOT_ASSIGN_OR_RETURN(ExprPtr r, parse_unary());
    INGOT_ASSIGN_OR_RETURN(e, binary("**", std::move(e), std::move(r)));
  }
  return e;
}

Result<ExprPtr> Parser::parse_unary(bool with_filter) {
  if (++depth_ > max_depth_) return error("expression nested too deeply");
  ExprPtr e;
  if (is_op("-") || is_op("+")) {
    const Token& t = next();
    std::vector<ExprPtr> args(1);
    INGOT_ASSIGN_OR_RETURN(args[0], parse_unary(false));
    INGOT_ASSIGN_OR_RETURN(e, make(Expr::Kind::kUnary, t.line, t.text, std::move(args)));
  } else {
    INGOT_ASSIGN_OR_RETURN(e, parse_primary());
  }
  INGOT_ASSIGN_OR_RETURN(e, parse_postfix(std::move(e)));
  if (with_filter) {
    INGOT_ASSIGN_OR_RETURN(e, parse_filters_and_tests(std::move(e)));
  }
  --depth_;
  return e;
}

Result<ExprPtr> Parser::parse_primary() {
  const Token& t = peek();
  auto literal = [&](Value v) {
    auto e = std::make_unique<Expr>();
    e->kind = Expr::Kind::kLiteral;
    e->line = t.line;
    e->value = std::move(v);
    return e;
  };
  switch (t.type) {
    case Tok::kName: {
      const std::string name = next().text;
      if (name == "true" || name == "True") return literal(Value(true));
      if (name == "false" || name == "False") return literal(Value(false));
      if (name == "none" || name == "None") return literal(Value::none());
      auto e = std::make_unique<Expr>();
      e->kind = Expr::Kind::kName;
      e->line = t.line;
      e->name = name;
      return e;
    }
    case Tok::kString: {
      std::string s;
      while (peek().type == Tok::kString) s += next().text;  // adjacent literals concatenate
      return literal(Value(s));
    }
    case Tok::kInt:
    case Tok::kFloat:
      return literal(next().number);
    case Tok::kOp: {
      const int line = t.line;
      if (skip_op("(")) {
        if (skip_op(")")) return make(Expr::Kind::kList, line, "", {});  // () is an empty tuple
        INGOT_ASSIGN_OR_RETURN(ExprPtr e, parse_expr());
        if (!is_op(",")) {
          INGOT_RETURN_IF_ERROR(expect_op(")"));
          return e;
        }
        std::vector<ExprPtr> items;
        items.push_back(std::move(e));
        while (skip_op(",")) {
          if (is_op(")")) break;
          INGOT_ASSIGN_OR_RETURN(ExprPtr item, parse_expr());
          items.push_back(std::move(item));
        }
        INGOT_RETURN_IF_ERROR(expect_op(")"));
        return make(Expr::Kind::kList, line, "tuple", std::move(items));
      }
      if (skip_op("[")) {
        std::vector<ExprPtr> items;
        while (!skip_op("]")) {
          if (!items.empty()) INGOT_RETURN_IF_ERROR(expect_op(","));
          if (skip_op("]")) break;
          INGOT_ASSIGN_OR_RETURN(ExprPtr item, parse_expr());
          items.push_back(std::move(item));
        }
        return make(Expr::Kind::kList, line, "", std::move(items));
      }
      if (skip_op("{")) {
        std::vector<ExprPtr> items;
        while (!skip_op("}")) {
          if (!items.empty()) INGOT_RETURN_IF_ERROR(expect_op(","));
          if (skip_op("}")) break;
          INGOT_ASSIGN_OR_RETURN(ExprPtr key, parse_expr());
          INGOT_RETURN_IF_ERROR(expect_op(":"));
          INGOT_ASSIGN_OR_RETURN(ExprPtr value, parse_expr());
          items.push_back(std::move(key));
          items.push_back(std::move(value));
        }
        return make(Expr::Kind::kDict, line, "", std::move(items));
      }
      break;
    }
    default:
      break;
  }
  return error("unexpected " + describe(t) + " in an expression");
}

Result<ExprPtr> Parser::parse_postfix(ExprPtr e) {
  while (true) {
    const int line = peek().line;
    if (skip_op(".")) {
      std::vector<ExprPtr> args;
      args.push_back(std::move(e));
      if (peek().type == Tok::kInt) {  // foo.0 is foo[0]
        auto index = std::make_unique<Expr>();
        index->kind = Expr::Kind::kLiteral;
        index->line = line;
        index->value = next().number;
        args.push_back(std::move(index));
        INGOT_ASSIGN_OR_RETURN(e, make(Expr::Kind::kItem, line, "", std::move(args)));
      } else {
        INGOT_ASSIGN_OR_RETURN(std::string attr, expect_name());
        INGOT_ASSIGN_OR_RETURN(e, make(Expr::Kind::kAttr, line, attr, std::move(args)));
      }
    } else if (skip_op("[")) {
      std::vector<ExprPtr> args;
      args.push_back(std::move(e));
      ExprPtr first;
      if (!is_op(":")) {
        INGOT_ASSIGN_OR_RETURN(first, parse_expr());
      }
      if (skip_op(":")) {
        args.push_back(std::move(first));
        ExprPtr stop, step;
        if (!is_op("]") && !is_op(":")) {
          INGOT_ASSIGN_OR_RETURN(stop, parse_expr());
        }
        if (skip_op(":") && !is_op("]")) {
          INGOT_ASSIGN_OR_RETURN(step, parse_expr());
        }
        args.push_back(std::move(stop));
        args.push_back(std::move(step));
        INGOT_RETURN_IF_ERROR(expect_op("]"));
        INGOT_ASSIGN_OR_RETURN(e, make(Expr::Kind::kSlice, line, "", std::move(args)));
      } else {
        args.push_back(std::move(first));
        INGOT_RETURN_IF_ERROR(expect_op("]"));
        INGOT_ASSIGN_OR_RETURN(e, make(Expr::Kind::kItem, line, "", std::move(args)));
      }
    } else if (is_op("(")) {
      auto call = std::make_unique<Expr>();
      call->kind = Expr::Kind::kCall;
      call->line = line;
      call->args.push_back(std::move(e));
      INGOT_RETURN_IF_ERROR(parse_call_args(call.get()));
      INGOT_ASSIGN_OR_RETURN(e, finish(std::move(call)));
    } else {
      return e;
    }
  }
}

Status Parser::parse_call_args(Expr* call) {
  INGOT_RETURN_IF_ERROR(expect_op("("));
  bool first = true;
  while (!skip_op(")")) {
    if (!first) INGOT_RETURN_IF_ERROR(expect_op(","));
    first = false;
    if (skip_op(")")) break;
    if (peek().type == Tok::kName && is_op("=", 1)) {
      std::string key = next().text;
      ++at_;
      INGOT_ASSIGN_OR_RETURN(ExprPtr value, parse_expr());
      call->kwargs.emplace_back(std::move(key), std::move(value));
    } else {
      if (!call->kwargs.empty()) return error("positional argument after a keyword argument");
      INGOT_ASSIGN_OR_RETURN(ExprPtr value, parse_expr());
      call->args.push_back(std::move(value));
    }
  }
  return Status();
}

Result<ExprPtr> Parser::parse_filters_and_tests(ExprPtr e) {
  while (true) {
    const int line = peek().line;
    if (skip_op("|")) {
      auto f = std::make_unique<Expr>();
      f->kind = Expr::Kind::kFilter;
      f->line = line;
      INGOT_ASSIGN_OR_RETURN(f->name, expect_name());
      f->args.push_back(std::move(e));
      if (is_op("(")) INGOT_RETURN_IF_ERROR(parse_call_args(f.get()));
      INGOT_ASSIGN_OR_RETURN(e, finish(std::move(f)));
    } else if (skip_name("is")) {
      auto t = std::make_unique<Expr>();
      t->kind = Expr::Kind::kTest;
      t->line = line;
      t->negate = skip_name("not");
      // Test names may be keywords (`is none`, `is true`) or operators' names (`is eq`).
      INGOT_ASSIGN_OR_RETURN(t->name, expect_name());
      t->args.push_back(std::move(e));
      if (is_op("(")) {
        INGOT_RETURN_IF_ERROR(parse_call_args(t.get()));
      } else if ((peek().type == Tok::kName && !is_name("else") && !is_name("or") && !is_name("and") &&
                  !is_name("if") && !is_name("is") && !is_name("not") && !is_name("in")) ||
                 peek().type == Tok::kString || peek().type == Tok::kInt || peek().type == Tok::kFloat || is_op("[") ||
                 is_op("{")) {
        // One argument without parentheses: `is divisibleby 3`.
        INGOT_ASSIGN_OR_RETURN(ExprPtr arg, parse_primary());
        INGOT_ASSIGN_OR_RETURN(arg, parse_postfix(std::move(arg)));
        t->args.push_back(std::move(arg));
      }
      INGOT_ASSIGN_OR_RETURN(e, finish(std::move(t)));
    } else {
      return e;
    }
  }
}

}  // namespace

Result<Body> parse(const std::string& source, int max_depth) {
  INGOT_ASSIGN_OR_RETURN(std::vector<Token> tokens, Lexer(source).run());
  return Parser(std::move(tokens), max_depth).parse_template();
}

}  // namespace ingot::llm::jinja::ast
