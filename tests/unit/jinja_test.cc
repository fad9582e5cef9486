// Copyright ingot authors. Apache-2.0.
//
// The Jinja interpreter (src/llm/jinja.h), feature by feature. Every expected string is worked out
// by hand from jinja2's documented semantics with transformers' settings (trim_blocks,
// lstrip_blocks, no trailing newline kept); tests/llm/test_chat_templates.py checks whole chat
// templates against jinja2 itself. Malformed and hostile templates must give an error Status.
#include "llm/jinja.h"

#include <gtest/gtest.h>

namespace ingot::llm::jinja {
namespace {

Dict chat_context() {
  List messages = {Value(Dict{{"role", Value("system")}, {"content", Value("S")}}),
                   Value(Dict{{"role", Value("user")}, {"content", Value("Hi")}}),
                   Value(Dict{{"role", Value("assistant")}, {"content", Value("Yo")}})};
  return {{"messages", Value(std::move(messages))}, {"flag", Value(true)}, {"n", Value(int64_t{3})}};
}

// The rendered text, or "ERROR <code>: <message>".
std::string render(const std::string& source, const Dict& context = chat_context()) {
  auto t = Template::parse(source);
  if (!t.ok()) return std::string("ERROR ") + status_code_name(t.status().code()) + ": " + t.status().message();
  auto r = t->render(context);
  if (!r.ok()) return std::string("ERROR ") + status_code_name(r.status().code()) + ": " + r.status().message();
  return *r;
}

Status error_of(const std::string& source, const Dict& context = chat_context()) {
  auto t = Template::parse(source);
  if (!t.ok()) return t.status();
  auto r = t->render(context);
  return r.ok() ? Status() : r.status();
}

TEST(Jinja, TrimAndLstripBlocks) {
  // The newline after a block tag goes; indentation before a block tag alone on its line goes.
  EXPECT_EQ(render("{% if true %}\n  x\n  {% endif %}\n  y"), "  x\n  y");
  EXPECT_EQ(render("  {% if true %}a{% endif %}\nb\n"), "ab");  // and one trailing newline is dropped
  // Expressions are neither lstripped nor trimmed.
  EXPECT_EQ(render("  {{ 'x' }}\nz"), "  x\nz");
  // Comments are, like blocks.
  EXPECT_EQ(render("a\n  {# note #}\nz"), "a\nz");
  // Text before the tag on its line keeps the spaces.
  EXPECT_EQ(render("a  {% if true %}b{% endif %}"), "a  b");
}

TEST(Jinja, ExplicitWhitespaceControl) {
  EXPECT_EQ(render("a \n {%- if true -%} \n b \n {%- endif -%} \n c"), "abc");
  EXPECT_EQ(render("a\n  {{- 'x' -}}  \n  b"), "axb");
  EXPECT_EQ(render("a\n  {%+ if true %}b{% endif %}"), "a\n  b");
  EXPECT_EQ(render("{% if true +%}\nb{% endif %}"), "\nb");
  EXPECT_EQ(render("a {#- c -#} b"), "ab");
}

TEST(Jinja, LiteralsAndPrinting) {
  EXPECT_EQ(render("{{ 'a\\n\\'b' }}|{{ \"t\\tq\\\"\" }}|{{ 'x' 'y' }}"), "a\n'b|t\tq\"|xy");
  EXPECT_EQ(render("{{ '\\u00e9\\x41' }}"),
            "\xc3\xa9"
            "A");
  EXPECT_EQ(render("{{ [1, 'a', none, true, False] }}"), "[1, 'a', None, True, False]");
  EXPECT_EQ(render("{{ {'k': 'v', 'n': [1.5]} }}"), "{'k': 'v', 'n': [1.5]}");
  EXPECT_EQ(render("{{ none }}|{{ None }}|{{ true }}"), "None|None|True");
  EXPECT_EQ(render("{{ 1e16 }} {{ 0.0001 }} {{ 1.5e-5 }} {{ 2.0 }} {{ 0.1 + 0.2 }}"),
            "1e+16 0.0001 1.5e-05 2.0 0.30000000000000004");
}

TEST(Jinja, Arithmetic) {
  EXPECT_EQ(render("{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 2 ** 10 }} {{ -2 ** 2 }}"), "7 9 1024 4");
  EXPECT_EQ(render("{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 7 / 2 }} {{ 4 / 2 }}"),
            "3 -4 2 -2 3.5 2.0");
  EXPECT_EQ(render("{{ 1 + 1.5 }} {{ true + 1 }} {{ 'ab' * 3 }} {{ [0] * 2 }}"), "2.5 2 ababab [0, 0]");
  EXPECT_EQ(render("{{ 'a' ~ 1 ~ none ~ missing }}|{{ 'a' + 'b' }}|{{ [1] + [2] }}"), "a1None|ab|[1, 2]");
  // ~ binds tighter than +.
  EXPECT_EQ(error_of("{{ 1 + 2 ~ 3 }}").message(), "line 1: unsupported operand type(s) for +: 'int' and 'str'");
}

TEST(Jinja, LogicAndComparisons) {
  EXPECT_EQ(render("{{ 1 == 1.0 }} {{ 'a' != 'b' }} {{ 2 < 3 }} {{ 'b' >= 'a' }} {{ [1, 2] < [1, 3] }}"),
            "True True True True True");
  EXPECT_EQ(render("{{ 'b' in 'abc' }} {{ 2 not in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 'x' in missing }}"),
            "True False True False");
  EXPECT_EQ(render("{{ none or 'x' }} {{ 0 and 'x' }} {{ 1 and 'y' }} {{ not 0 }} {{ not 1 == 1 }}"),
            "x 0 y True False");
  EXPECT_EQ(render("{{ 'y' if flag else 'n' }}{{ 'y' if not flag else 'n' }}[{{ 'y' if false }}]"), "yn[]");
}

TEST(Jinja, AttributesSubscriptsAndSlices) {
  EXPECT_EQ(render("{{ messages[1].role }} {{ messages[1]['content'] }} {{ messages[-1].content }}"), "user Hi Yo");
  EXPECT_EQ(render("{{ messages[1:]|length }} {{ (messages[::-1]|first).role }} {{ messages[5] is defined }}"),
            "2 assistant False");
  EXPECT_EQ(render("{{ [1, 2, 3][1:] }} {{ [1, 2, 3][::-1] }} {{ [1, 2, 3, 4][1:3] }} {{ [1, 2, 3][:-1] }}"),
            "[2, 3] [3, 2, 1] [2, 3] [1, 2]");
  EXPECT_EQ(render("{{ 'h\xc3\xa9llo'[1] }} {{ 'abc'[-1] }} {{ 'abc'[::-1] }} {{ 'h\xc3\xa9llo'|length }}"),
            "\xc3\xa9 c cba 5");
  EXPECT_EQ(render("[{{ {}.x }}][{{ messages[0].missing }}][{{ none.x }}][{{ [1][5] }}]"), "[][][][]");
}

TEST(Jinja, IfElifElse) {
  const char* t =
      "{% for v in [1, 2, 3] %}{% if v == 1 %}one{% elif v == 2 %}two{% else %}many{% endif %},{% endfor %}";
  EXPECT_EQ(render(t), "one,two,many,");
}

TEST(Jinja, ForLoops) {
  EXPECT_EQ(render("{% for x in ['a', 'b', 'c'] %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}"
                   "{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}"),
            "1032TrueFalse3;2121FalseFalse3;3210FalseTrue3;");
  // The loop's `if` filters before counting.
  EXPECT_EQ(render("{% for x in [1, 2, 3, 4] if x is even %}{{ x }}/{{ loop.length }} {% endfor %}"), "2/2 4/2 ");
  EXPECT_EQ(render("{% for x in [] %}a{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for x in [1] if x > 5 %}a{% else %}none kept{% endfor %}"), "none kept");
  EXPECT_EQ(render("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }},{% endfor %}"), "a=1,b=2,");
  EXPECT_EQ(render("{% for k in {'a': 1, 'b': 2} %}{{ k }}{% endfor %}{% for c in 'xy' %}{{ c }}.{% endfor %}"),
            "abx.y.");
  EXPECT_EQ(render("{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}"
                   "{% endif %}{{ x }}{% endfor %}"),
            "013");
  EXPECT_EQ(
      render("{% for x in range(1, 10, 3) %}{{ x }}{% endfor %}{% for x in range(3, 0, -1) %}{{ x }}{% endfor %}"),
      "147321");
  EXPECT_EQ(render("{% for x in [1, 2, 3] %}{{ loop.previtem is defined }}{{ loop.nextitem }}{{ loop.cycle('a', 'b') "
                   "}} {% endfor %}"),
            "False2a True3b Truea ");
  EXPECT_EQ(render("{% for x in missing %}a{% endfor %}"), "");
}

TEST(Jinja, SetScopesAndNamespaces) {
  // A set inside a loop body lasts for that iteration only.
  EXPECT_EQ(render("{% set x = 1 %}{% for i in [1, 2] %}{{ x }}{% set x = i * 10 %}{{ x }};{% endfor %}{{ x }}"),
            "110;120;1");
  // An if shares its scope.
  EXPECT_EQ(render("{% if true %}{% set y = 'in' %}{% endif %}{{ y }}"), "in");
  EXPECT_EQ(render("{% set ns = namespace(n=0, seen=false) %}{% for i in [1, 2, 3] %}{% set ns.n = ns.n + i %}"
                   "{% set ns.seen = true %}{% endfor %}{{ ns.n }} {{ ns.seen }}"),
            "6 True");
  EXPECT_EQ(render("{% set a, b = [1, 2] %}{{ b }}{{ a }}"), "21");
  EXPECT_EQ(render("{% set x %}a{{ 1 + 1 }}{% endset %}[{{ x }}]"), "[a2]");
  EXPECT_EQ(render("{% set x = 5 %}{{ x }}{% set x = 'five' %}{{ x }}"), "5five");
}

TEST(Jinja, Macros) {
  EXPECT_EQ(render("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}"
                   "{{ greet('A') }} {{ greet('B', punct='?') }} {{ greet(name='C') }}"),
            "Hi A! Hi B? Hi C!");
  EXPECT_EQ(
      render("{% macro count(n) %}{% if n > 0 %}{{ n }}{{ count(n - 1) }}{% endif %}{% endmacro %}{{ count(3) }}"),
      "321");
}

TEST(Jinja, Tests) {
  EXPECT_EQ(render("{{ x is defined }}{{ x is undefined }}{{ none is none }}{{ 'a' is string }}{{ 1 is number }}"
                   "{{ 1.5 is number }}{{ 'a' is number }}"),
            "FalseTrueTrueTrueTrueTrueFalse");
  EXPECT_EQ(
      render("{{ {} is mapping }}{{ [] is mapping }}{{ [] is iterable }}{{ 'a' is sequence }}{{ 3 is iterable }}"),
      "TrueFalseTrueTrueFalse");
  EXPECT_EQ(render("{{ 3 is odd }}{{ 3 is even }}{{ 9 is divisibleby 3 }}{{ 1 is not string }}{{ true is boolean }}"
                   "{{ 1 is integer }}{{ 1.0 is float }}{{ 2 is eq 2 }}{{ 'b' is in 'abc' }}"),
            "TrueFalseTrueTrueTrueTrueTrueTrueTrue");
  EXPECT_EQ(render("{{ messages[0].tool_calls is defined }}{{ messages[0].content is string }}"), "FalseTrue");
}

TEST(Jinja, Filters) {
  EXPECT_EQ(render("[{{ '  a b \\n'|trim }}][{{ 'xxaxx'|trim('x') }}]{{ 'ab'|upper }}{{ 'AB'|lower }}"),
            "[a b][a]ABab");
  EXPECT_EQ(render("{{ 'hello WORLD'|capitalize }}|{{ 'hello-world foo(bar)'|title }}"),
            "Hello world|Hello-World Foo(Bar)");
  EXPECT_EQ(render("{{ [1, 2]|length }}{{ 'abc'|count }}{{ {'a': 1}|length }}{{ missing|length }}"), "2310");
  EXPECT_EQ(render("{{ [1, 2, 3]|first }}{{ [1, 2, 3]|last }}{{ 'xyz'|first }}[{{ []|first }}]"), "13x[]");
  EXPECT_EQ(render("{{ missing|default('d') }} {{ none|default('d') }} {{ ''|default('d', true) }} {{ 'v'|d('d') }}"),
            "d None d v");
  EXPECT_EQ(render("{{ ['a', 'b']|join(', ') }}|{{ [1, 2]|join }}|{{ messages|join('-', attribute='role') }}"),
            "a, b|12|system-user-assistant");
  EXPECT_EQ(render("{{ 'aXbX'|replace('X', '-') }} {{ 'aaa'|replace('a', 'b', 2) }}"), "a-b- bba");
  EXPECT_EQ(render("{% for k, v in {'a': 1, 'b': 2}|items %}{{ k }}{{ v }}{% endfor %}{{ 'ab'|list }}"),
            "a1b2['a', 'b']");
  EXPECT_EQ(render("{{ '42'|int + 1 }} {{ 'x'|int }} {{ 3.7|int }} {{ ' 7 '|int }} {{ '2.5'|int }} {{ 'x'|int(9) }}"),
            "43 0 3 7 2 9");
  EXPECT_EQ(render("{{ 1|string ~ 'a' }} {{ none|string }} {{ [3, 1]|reverse|list }} {{ -3|abs }}"),
            "1a None [1, 3] 3");
  EXPECT_EQ(render("[{{ 'a\\nb'|indent(2) }}][{{ 'a\\nb'|indent(2, true) }}][{{ 'a\\n\\nb'|indent(2) }}]"
                   "[{{ 'a\\n\\nb'|indent(2, blank=true) }}][{{ 'a\\nb'|indent }}]"),
            "[a\n  b][  a\n  b][a\n\n  b][a\n  \n  b][a\n    b]");
  EXPECT_EQ(render("{{ messages|selectattr('role', 'equalto', 'user')|list|length }}"
                   "{{ messages|rejectattr('role', 'equalto', 'user')|map(attribute='content')|join }}"
                   "{{ [0, 1, 2]|select|list }}{{ [1, 2, 3]|select('odd')|list }}{{ ['a', 'b']|map('upper')|join }}"),
            "1SYo[1, 2][1, 3]AB");
}

TEST(Jinja, ToJson) {
  // transformers' tojson: json.dumps with ensure_ascii=False, keys in their order, Python's separators.
  EXPECT_EQ(render("{{ {'b': [1, 2.5, none, true], 'a': 'x\"\\n\\u00e9'}|tojson }}"),
            "{\"b\": [1, 2.5, null, true], \"a\": \"x\\\"\\n\xc3\xa9\"}");
  EXPECT_EQ(render("{{ {'a': [1], 'e': {}}|tojson(indent=2) }}"), "{\n  \"a\": [\n    1\n  ],\n  \"e\": {}\n}");
  EXPECT_EQ(render("{{ 'a'|tojson }}{{ 3|tojson }}{{ []|tojson }}"), "\"a\"3[]");
  EXPECT_EQ(error_of("{{ missing|tojson }}").code(), StatusCode::kInvalidArgument);
}

TEST(Jinja, StringAndDictMethods) {
  EXPECT_EQ(render("{{ '  x  '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ '  x  '.lstrip() }}|{{ '  x  '.rstrip() }}|"),
            "x|a|x  |  x|");
  EXPECT_EQ(render("{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith(('x', 'c')) }}{{ 'abc'.startswith('b') }}"),
            "TrueTrueFalse");
  EXPECT_EQ(render("{{ ' a b  c '.split() }}|{{ 'a,b,,c'.split(',') }}|{{ 'a b c'.split(' ', 1) }}"),
            "['a', 'b', 'c']|['a', 'b', '', 'c']|['a', 'b c']");
  EXPECT_EQ(
      render("{{ 'aB'.upper() }}{{ 'aB'.lower() }} {{ \"they're bill's\".title() }} {{ 'x-y'.replace('-', '+') }}"),
      "ABab They'Re Bill'S x+y");
  EXPECT_EQ(render("{% set d = {'a': 1, 'b': 2} %}{{ d.get('a') }} {{ d.get('z', 'no') }} {{ d.get('z') }} "
                   "{{ d.keys()|list }} {{ d.values()|list }} {{ d['a'] }} {{ d.a }}"),
            "1 no None ['a', 'b'] [1, 2] 1 1");
  EXPECT_EQ(render("{{ ', '.join(['a', 'b']) }}"), "a, b");
}

TEST(Jinja, UndefinedBehavesLikeJinja2Default) {
  EXPECT_EQ(render("[{{ missing }}][{{ missing is defined }}][{{ not missing }}][{{ missing|upper }}]"),
            "[][False][True][]");
  EXPECT_EQ(error_of("{{ missing.attr }}").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(error_of("{{ missing['k'] }}").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(error_of("{{ missing + 1 }}").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(error_of("{{ missing() }}").code(), StatusCode::kInvalidArgument);
  EXPECT_NE(error_of("{{ missing.attr }}").message().find("'missing' is undefined"), std::string::npos);
  // A missing key is undefined, so its attribute is an error.
  EXPECT_EQ(error_of("{{ messages[0].nope.deeper }}").code(), StatusCode::kInvalidArgument);
}

TEST(Jinja, RaiseExceptionCallable) {
  Dict ctx = chat_context();
  ctx.emplace_back("raise_exception",
                   Value::callable("raise_exception", [](const List& a, const KwArgs&) -> Result<Value> {
                     return invalid_argument(a.at(0).to_string());
                   }));
  Status s =
      error_of("ok\n{% if messages|length > 1 %}{{ raise_exception('too many: ' ~ messages|length) }}{% endif %}", ctx);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "line 2: too many: 3");
}

TEST(Jinja, SyntaxErrorsNameTheLine) {
  struct Case {
    const char* source;
    const char* says;
  };
  for (const Case& c :
       {Case{"{% if true %}a", "expected 'elif' or 'else' or 'endif'"}, Case{"a\n{% for x in y %}", "line 2"},
        Case{"{{ 'a' }", "unclosed tag"}, Case{"{% if true %", "unclosed tag"}, Case{"{# no end", "unclosed comment"},
        Case{"x\n\n{{ 1 + }}", "line 3"}, Case{"{{ 'abc }}", "unterminated string"},
        Case{"{{ x|nosuchfilter }}", "no filter named 'nosuchfilter'"},
        Case{"{{ x is nosuchtest }}", "no test named 'nosuchtest'"}, Case{"{% endif %}", "unexpected 'endif'"},
        Case{"{% frobnicate %}", "unknown or unsupported tag 'frobnicate'"}, Case{"{{ a b }}", "expected '}}'"},
        Case{"{{ 1 < 2 < 3 }}", "chained comparisons"}, Case{"{{ $ }}", "unexpected character"}}) {
    Status s = error_of(c.source);
    EXPECT_EQ(s.code(), StatusCode::kInvalidModel) << c.source << ": " << s.to_string();
    EXPECT_NE(s.message().find(c.says), std::string::npos) << c.source << ": " << s.message();
  }
}

TEST(Jinja, RuntimeErrorsNameTheLine) {
  Status s = error_of("a\nb\n{{ 1 + 'x' }}");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message().rfind("line 3: ", 0), 0u) << s.message();
  EXPECT_EQ(error_of("{{ 1 / 0 }}").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(error_of("{{ 1 // 0 }}").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(error_of("{{ 'a' < 1 }}").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(error_of("{% for x in 5 %}{% endfor %}").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(error_of("{{ 'x'.strip(1) }}").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(error_of("{{ [1, 2]|round }}").code(), StatusCode::kUnsupported);  // a jinja2 filter ingot lacks
  EXPECT_EQ(error_of("{% set x = 1 %}{% set x.a = 2 %}").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(error_of("{{ 9223372036854775807 + 1 }}").code(), StatusCode::kOutOfRange);
}

TEST(Jinja, HostileTemplatesHitLimits) {
  // Nesting: parentheses, lists, blocks, and a long operator chain.
  EXPECT_EQ(error_of("{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}").code(),
            StatusCode::kInvalidModel);
  EXPECT_EQ(error_of("{{ " + std::string(100000, '[') + " }}").code(), StatusCode::kInvalidModel);
  std::string blocks;
  for (int i = 0; i < 5000; ++i) blocks += "{% if true %}";
  EXPECT_EQ(error_of(blocks).code(), StatusCode::kInvalidModel);
  std::string chain = "{{ 1";
  for (int i = 0; i < 100000; ++i) chain += " + 1";
  EXPECT_EQ(error_of(chain + " }}").code(), StatusCode::kInvalidModel);
  std::string nots = "{{ ";
  for (int i = 0; i < 100000; ++i) nots += "not ";
  EXPECT_EQ(error_of(nots + "1 }}").code(), StatusCode::kInvalidModel);
  // Work: huge ranges and loops, unbounded recursion, exponential strings, deep values.
  EXPECT_EQ(error_of("{% for i in range(1000000000) %}{% endfor %}").code(), StatusCode::kOutOfRange);
  EXPECT_EQ(error_of("{% for i in range(2000) %}{% for j in range(2000) %}{% endfor %}{% endfor %}").code(),
            StatusCode::kOutOfRange);
  EXPECT_EQ(error_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}").code(), StatusCode::kOutOfRange);
  EXPECT_EQ(error_of("{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}")
                .code(),
            StatusCode::kOutOfRange);
  EXPECT_EQ(error_of("{{ 'x' * 1000000000000 }}").code(), StatusCode::kOutOfRange);
  EXPECT_EQ(
      error_of(
          "{% for i in range(100000) %}{{ 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx' * 100 }}{% endfor %}")
          .code(),
      StatusCode::kOutOfRange);
  EXPECT_EQ(
      error_of("{% set ns = namespace(l=[]) %}{% for i in range(100000) %}{% set ns.l = [ns.l] %}{% endfor %}").code(),
      StatusCode::kOutOfRange);
  EXPECT_EQ(error_of("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}").code(), StatusCode::kUnsupported);
  EXPECT_EQ(error_of("{% break %}").code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ingot::llm::jinja
