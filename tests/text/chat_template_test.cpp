#include "text/chat_template.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

// CMake defines FOLIO_SOURCE_DIR for the test binary; a direct compile run from the
// repository root needs no flag.
#ifndef FOLIO_SOURCE_DIR
#define FOLIO_SOURCE_DIR "."
#endif
#include "../support/test_paths.h"

namespace folio {
namespace {

using nlohmann::ordered_json;

// Renders `source` with `context` and returns the output, or "ERROR: <message>".
std::string render(std::string_view source, const ordered_json& context = ordered_json::object()) {
  Expected<ChatTemplate> parsed = ChatTemplate::parse(source);
  if (!parsed) return "ERROR: " + parsed.error();
  Expected<std::string> out = parsed->render_context(context);
  if (!out) return "ERROR: " + out.error();
  return *out;
}

bool starts_with(const std::string& s, std::string_view prefix) {
  return s.rfind(prefix, 0) == 0;
}

// ---------------------------------------------------------------------------------------------
// Goldens: every template x conversation that transformers rendered must come out identical.

TEST(ChatTemplateGoldenTest, MatchesHuggingFaceByteForByte) {
  const std::filesystem::path dir = testing::source_dir() + "/tests/golden/chat";
  ASSERT_TRUE(std::filesystem::exists(dir)) << dir;
  int templates = 0, cases = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    const ordered_json golden = ordered_json::parse(testing::read_file(entry.path().string()));
    const std::string source = testing::read_file((dir / golden["template"].get<std::string>()).string());
    Expected<ChatTemplate> chat_template = ChatTemplate::parse(source);
    ASSERT_TRUE(chat_template) << entry.path() << ": " << chat_template.error();
    ++templates;
    for (const auto& c : golden["cases"]) {
      SCOPED_TRACE(entry.path().filename().string() + " / " + c["name"].get<std::string>());
      std::vector<ChatMessage> messages;
      for (const auto& m : c["messages"]) {
        messages.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
      }
      const nlohmann::json extra = nlohmann::json::parse(c["extra_context"].dump());
      Expected<std::string> out = chat_template->render(messages, c["add_generation_prompt"].get<bool>(), extra);
      if (c.contains("expected_error")) {
        ASSERT_FALSE(out) << "expected an error, rendered: " << *out;
        EXPECT_NE(out.error().find(c["expected_error"].get<std::string>()), std::string::npos) << out.error();
      } else {
        ASSERT_TRUE(out) << out.error();
        EXPECT_EQ(*out, c["expected"].get<std::string>());
      }
      ++cases;
    }
  }
  EXPECT_EQ(templates, 6);
  EXPECT_GE(cases, 84);
}

TEST(ChatTemplateTest, RenderPassesMessagesPromptFlagAndExtras) {
  Expected<ChatTemplate> t = ChatTemplate::parse(
      "{{ bos_token }}{% for m in messages %}[{{ m.role }}:{{ m['content'] }}]{% endfor %}"
      "{{ add_generation_prompt }}{{ tools is none }}{{ documents is none }}");
  ASSERT_TRUE(t) << t.error();
  const std::vector<ChatMessage> messages = {{"user", "hi"}, {"assistant", "yo"}};
  Expected<std::string> out = t->render(messages, true, {{"bos_token", "<s>"}});
  ASSERT_TRUE(out) << out.error();
  EXPECT_EQ(*out, "<s>[user:hi][assistant:yo]TrueTrueTrue");
}

// ---------------------------------------------------------------------------------------------
// Interpreter: expressions

TEST(JinjaTest, ArithmeticFollowsPython) {
  EXPECT_EQ(render("{{ 1 + 2 * 3 - 4 / 2 }}|{{ 10 // 4 }}|{{ -7 // 2 }}|{{ -7 % 3 }}|{{ 7 % -3 }}"), "5.0|2|-4|2|-2");
  EXPECT_EQ(render("{{ 2 ** 10 }}|{{ 2 ** -1 }}|{{ 2 ** 3 ** 2 }}|{{ -2 ** 2 }}"), "1024|0.5|64|4");
  EXPECT_EQ(render("{{ 0.1 + 0.2 }}|{{ 1e16 }}|{{ 1.0e-5 }}|{{ 100.0 }}|{{ 1e15 }}|{{ -0.0 }}"),
            "0.30000000000000004|1e+16|1e-05|100.0|1000000000000000.0|-0.0");
  EXPECT_EQ(render("{{ 'ab' * 3 }}|{{ [1] * 2 }}|{{ [1] + [2] }}|{{ true + 1 }}"), "ababab|[1, 1]|[1, 2]|2");
  EXPECT_TRUE(starts_with(render("{{ 9223372036854775807 + 1 }}"), "ERROR: "));
  EXPECT_TRUE(starts_with(render("{{ 1 / 0 }}"), "ERROR: "));
  EXPECT_TRUE(starts_with(render("{{ 'a' + 1 }}"), "ERROR: "));
}

TEST(JinjaTest, ComparisonsLogicAndConditionals) {
  EXPECT_EQ(render("{{ 3 > 2 > 1 }}{{ 1 == 1.0 }}{{ 'a' < 'b' }}{{ [1, 2] < [1, 3] }}"), "TrueTrueTrueTrue");
  EXPECT_EQ(render("{{ 'a' in 'cat' }}{{ 1 not in [1] }}{{ not 1 in [1] }}{{ 'k' in {'k': 1} }}"),
            "TrueFalseFalseTrue");
  EXPECT_EQ(render("{{ 0 or 'x' }}|{{ 1 and 0 }}|{{ none or [] }}|{{ 'y' if 0 else 'n' }}|{{ 'z' if 0 }}|"),
            "x|0|[]|n||");
  EXPECT_TRUE(starts_with(render("{{ 1 < 'a' }}"), "ERROR: "));
}

TEST(JinjaTest, StringsConcatenationAndSlicing) {
  EXPECT_EQ(render("{{ 'a' ~ 1 ~ none ~ undefined_name }}"), "a1None");
  EXPECT_EQ(render("{{ 'a\\tb\\x41\\u00e9\\n\\d' }}"), "a\tbA\xC3\xA9\n\\d");
  EXPECT_EQ(render("{{ 'abc'[::-1] }}|{{ 'h\xC3\xA9llo'[1:3] }}|{{ 'h\xC3\xA9llo'|length }}|"
                   "{{ 'abcdef'[-2:] }}|{{ [1,2,3,4,5][1:4:2] }}|{{ [1,2,3][5:] }}"),
            "cba|\xC3\xA9l|5|ef|[2, 4]|[]");
  EXPECT_EQ(render("{{ messages[1:]|length }}{{ messages[-1].role }}{{ messages.0.role }}",
                   {{"messages", {{{"role", "a"}}, {{"role", "b"}}}}}),
            "1ba");
}

TEST(JinjaTest, LongChainsAndNewlinesInsideStrings) {
  // Llama-3's and Gemma-2's templates carry raw newlines inside string literals.
  EXPECT_EQ(render("{{ 'a\n\nb' + 'c\r\nd' }}"), "a\n\nbc\nd");
  std::string chain = "{{ 'x'";
  for (int i = 0; i < 300; ++i) chain += " ~ 'x'";
  EXPECT_EQ(render(chain + " }}"), std::string(301, 'x'));
}

TEST(JinjaTest, ValuesPrintLikePython) {
  EXPECT_EQ(render("{{ [1, 'a', none, true, 1.5, {'k': 'v'}] }}"), "[1, 'a', None, True, 1.5, {'k': 'v'}]");
  EXPECT_EQ(render("{{ [\"it's\", 'a\"b', 'x\\ny'] }}"), "[\"it's\", 'a\"b', 'x\\ny']");
  EXPECT_EQ(render("{{ none }}|{{ true }}|{{ undefined_name }}|{{ 3|float }}"), "None|True||3.0");
}

TEST(JinjaTest, StringAndDictMethods) {
  EXPECT_EQ(render("{{ '  x  '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ ' a '.lstrip() }}|"
                   "{{ ' a '.rstrip() }}|{{ 'Hi'.upper() }}{{ 'Hi'.lower() }}"),
            "x|a|a | a|HIhi");
  EXPECT_EQ(render("{{ 'a,b,,c'.split(',') }}|{{ '  a  b '.split() }}|{{ 'a b c'.split(' ', 1) }}|"
                   "{{ 'a,b,c'.rsplit(',', 1) }}"),
            "['a', 'b', '', 'c']|['a', 'b']|['a', 'b c']|['a,b', 'c']");
  EXPECT_EQ(render("{{ 'abc'.startswith('a') }}{{ 'abc'.endswith(('x', 'c')) }}{{ 'abc'.find('c') }}"
                   "{{ '-'.join(['a', 'b']) }}{{ 'a-b'.replace('-', '+') }}"),
            "TrueTrue2a-ba+b");
  EXPECT_EQ(render("{{ \"they're here\".title() }}|{{ \"they're here\"|title }}"), "They'Re Here|They're Here");
  EXPECT_EQ(render("{% for k, v in {'b': 1, 'a': 2}.items() %}{{ k }}={{ v }};{% endfor %}"
                   "{{ {'a': 1}.get('b', 5) }}{{ {'a': 1}.get('a') }}{{ {'a': 1}.keys()|list }}"),
            "b=1;a=2;51['a']");
}

TEST(JinjaTest, Filters) {
  EXPECT_EQ(render("{{ '  x  '|trim }}|{{ 'ab'|upper }}|{{ 'AB'|lower }}|{{ 'hello'|capitalize }}|"
                   "{{ [1, 2]|length }}|{{ 'abc'|list }}|{{ [1, 2, 3]|first }}{{ [1, 2, 3]|last }}"),
            "x|AB|ab|Hello|2|['a', 'b', 'c']|13");
  EXPECT_EQ(render("{{ x|default('d') }}|{{ none|default('d') }}|{{ ''|default('e', true) }}|"
                   "{{ ['a', 'b']|join(', ') }}|{{ [3, 1, 2]|sort }}|{{ [1, 2, 3]|sum }}"),
            "d|None|e|a, b|[1, 2, 3]|6");
  EXPECT_EQ(render("{{ messages|selectattr('role', 'equalto', 'user')|map(attribute='c')|join }}"
                   "{{ messages|rejectattr('role', 'equalto', 'user')|list|length }}"
                   "{{ [1, 2, 3, 4]|select('even')|list }}{{ [1, 2]|map('string')|join('+') }}",
                   {{"messages",
                     {{{"role", "user"}, {"c", "A"}}, {{"role", "bot"}, {"c", "B"}}, {{"role", "user"}, {"c", "C"}}}}}),
            "AC1[2, 4]1+2");
  EXPECT_EQ(render("{{ -3|abs }}{{ 3.7|int }}{{ '12'|int + 1 }}{{ 2.5|round }}{{ 3.14159|round(2) }}"
                   "{{ none|string }}{{ [1, 1, 2]|unique|list }}{{ 'abc'|reverse }}"),
            "33132.03.14None[1, 2]cba");
}

TEST(JinjaTest, CaseMappingRoundingAndUndefinedInFilters) {
  EXPECT_EQ(render("{{ 'héllo wörld'|title }}|{{ 'héllo wörld'.title() }}|{{ 'ÉCOLE'|lower }}|"
                   "{{ 'straße'|upper }}|{{ 'мир'|upper }}|{{ 'ΑΒΓ'|lower }}"),
            "Héllo Wörld|Héllo Wörld|école|STRASSE|МИР|αβγ");
  EXPECT_EQ(render("{{ 2.675|round(2) }}|{{ 0.5|round }}|{{ 1.5|round }}|{{ 3.7|round(method='floor') }}"),
            "2.67|0.0|2.0|3.0");
  // Undefined is "" or empty for most filters, an error for the numeric ones (as in jinja2).
  EXPECT_EQ(render("{{ u|length }}|{{ u|trim }}|{{ u|join(',') }}|{{ u|list }}|{{ u|first }}|{{ "
                   "u|default('d') }}"),
            "0|||[]||d");
  EXPECT_EQ(render("{{ u|int }}"), "ERROR: template error at line 1: 'u' is undefined");
}

TEST(JinjaTest, ToJsonIsHuggingFacesJsonDumps) {
  EXPECT_EQ(render("{{ {'b': 1, 'a': [1, 2, {'c': none}], 'u': '\xC3\xA9\"\\n<>'}|tojson }}"),
            "{\"b\": 1, \"a\": [1, 2, {\"c\": null}], \"u\": \"\xC3\xA9\\\"\\n<>\"}");
  EXPECT_EQ(render("{{ [1, {'a': []}]|tojson(indent=2) }}"), "[\n  1,\n  {\n    \"a\": []\n  }\n]");
  EXPECT_EQ(render("{{ {'b': 1, 'a': 2.5}|tojson(sort_keys=true) }}{{ 'é'|tojson(ensure_ascii=true) }}"),
            "{\"a\": 2.5, \"b\": 1}\"\\u00e9\"");
  EXPECT_TRUE(starts_with(render("{{ undefined_name|tojson }}"), "ERROR: "));
}

TEST(JinjaTest, Tests) {
  EXPECT_EQ(render("{{ x is defined }}{{ x is not defined }}{{ none is none }}{{ 'a' is string }}"
                   "{{ 3 is odd }}{{ 4 is divisibleby 2 }}{{ 1 is number }}{{ {} is mapping }}"
                   "{{ 'a' is in 'cat' }}{{ 2 is equalto 2 }}"),
            "FalseTrueTrueTrueTrueTrueTrueTrueTrueTrue");
}

// ---------------------------------------------------------------------------------------------
// Interpreter: statements and scoping

TEST(JinjaTest, LoopsScopesAndNamespaces) {
  // A set inside a loop body lives for one iteration; namespace() carries state out.
  EXPECT_EQ(render("{% set x = 1 %}{% for i in range(2) %}{% set x = x + 1 %}{{ x }}{% endfor %}{{ x }}"), "221");
  EXPECT_EQ(render("{% for i in range(3) %}{% if i == 0 %}{% set y = 'a' %}{% endif %}[{{ y }}]{% "
                   "endfor %}"),
            "[a][][]");
  EXPECT_EQ(render("{% set ns = namespace(a=1) %}{% for i in range(3) %}{% set ns.a = ns.a + i %}"
                   "{% endfor %}{{ ns.a }}"),
            "4");
  EXPECT_EQ(render("{% if true %}{% set y = 5 %}{% endif %}{{ y }}"), "5");
  EXPECT_EQ(render("{% for x in [1, 2, 3, 4] if x is even %}{{ loop.index }}/{{ loop.length }}:{{ x }}"
                   "{{ ',' if not loop.last }}{% endfor %}"),
            "1/2:2,2/2:4");
  EXPECT_EQ(render("{% for x in 'ab' %}{{ loop.index0 }}{{ loop.revindex }}{{ loop.first }}"
                   "{{ loop.previtem }}{{ loop.nextitem }}{{ loop.cycle('o', 'e') }};{% endfor %}"),
            "02Truebo;11Falseae;");
  EXPECT_EQ(render("{% for x in [] %}a{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}"
                   "{% if i == 5 %}{% break %}{% endif %}{{ i }}{% endfor %}"),
            "0134");
  EXPECT_EQ(render("{% set a, b = 1, 2 %}{{ a }}{{ b }}{% for k, v in [[1, 2]] %}{{ k + v }}{% endfor %}"), "123");
}

TEST(JinjaTest, MacrosSetBlocksFilterBlocksRaw) {
  EXPECT_EQ(render("{% macro m(a, b='x') %}<{{ a }}{{ b }}>{% endmacro %}{{ m(1) }}{{ m(2, b='y') }}"), "<1x><2y>");
  EXPECT_EQ(render("{% set t %} in {{ 1 }} {% endset %}[{{ t }}]{% set u | trim %}  v  {% endset "
                   "%}[{{ u }}]"),
            "[ in 1 ][v]");
  EXPECT_EQ(render("{% filter upper %}hello {{ 'x' }}{% endfilter %}"), "HELLO X");
  EXPECT_EQ(render("{% raw %}{{ not rendered }}{% endraw %}"), "{{ not rendered }}");
  EXPECT_EQ(render("{% generation %}kept{% endgeneration %}"), "kept");
  EXPECT_EQ(render("{{ '{{' }}{{ {'a': {'b': 1}} }}"), "{{{'a': {'b': 1}}");
}

TEST(JinjaTest, WhitespaceControlMatchesTrimAndLstripBlocks) {
  // trim_blocks eats the newline after %}, lstrip_blocks the indentation before {%.
  EXPECT_EQ(render("  {% if true %}\n    hello\n  {% endif %}\n  {{ 'x' }}\n"), "    hello\n  x");
  EXPECT_EQ(render("a  {%- if true %} b {% endif -%}  \n c"), "a b c");
  EXPECT_EQ(render("a\n  {{- 'b' -}}  \n c"), "abc");
  EXPECT_EQ(render("x\n{# comment #}\ny {#- c -#} z"), "x\nyz");
  EXPECT_EQ(render("  {%+ if true %}p{% endif +%}\nq"), "  p\nq");
  EXPECT_EQ(render("x\n{# c +#}\ny"), "x\n\ny");                           // +#} keeps the newline
  EXPECT_EQ(render("x\n \xE3\x80\x80{% if true %}y{% endif %}"), "x\ny");  // U+3000 is whitespace
  EXPECT_EQ(render("{% raw %}\nr{% endraw %}\nz"), "\nrz");                // no trim after {% raw %}
  EXPECT_EQ(render("a\r\nb\rc\v\n"),
            "a\nb\nc\v");  // \r\n and \r normalized, one trailing \n dropped
  EXPECT_EQ(render("{% if true %}\n\n{% endif %}"), "\n");
}

// ---------------------------------------------------------------------------------------------
// Errors come back as Status, never as a crash.

TEST(JinjaTest, SyntaxErrorsNameLineAndColumn) {
  EXPECT_EQ(render("line one\n{{ 1 + }}"), "ERROR: template syntax error at line 2, column 8: unexpected '}}'");
  EXPECT_EQ(render("{% for a in [1] %}\n{{ a }}"),
            "ERROR: template syntax error at line 2, column 8: unexpected end of template, "
            "expected 'endfor'");
  EXPECT_EQ(render("ok\n  {{ 'unclosed }}"),
            "ERROR: template syntax error at line 2, column 6: string literal is not closed");
  EXPECT_TRUE(starts_with(render("{% frobnicate %}"), "ERROR: template syntax error at line 1"));
  EXPECT_TRUE(starts_with(render("{{ x | nofilter }}"), "ERROR: template error at line 1: no filter"));
  EXPECT_TRUE(starts_with(render("{% break %}"), "ERROR: template syntax error"));
  EXPECT_TRUE(starts_with(render("{{ (1 }}"), "ERROR: template syntax error"));
  EXPECT_TRUE(starts_with(render("{# open"), "ERROR: template syntax error"));
}

TEST(JinjaTest, RuntimeErrors) {
  EXPECT_EQ(render("\n{{ raise_exception('Roles must alternate') }}"),
            "ERROR: template error at line 2: Roles must alternate");
  EXPECT_EQ(render("{{ 'abc'.nomethod() }}"),
            "ERROR: template error at line 1: 'str object' has no attribute 'nomethod'");
  EXPECT_EQ(render("{{ missing.attribute }}"), "ERROR: template error at line 1: 'missing' is undefined");
  EXPECT_EQ(render("{{ [1].append(2) }}"),
            "ERROR: template error at line 1: access to attribute 'append' of 'list' object is unsafe.");
  EXPECT_TRUE(starts_with(render("{{ undefined_function() }}"), "ERROR: "));
  EXPECT_TRUE(starts_with(render("{% for x in 5 %}{% endfor %}"), "ERROR: "));
  EXPECT_TRUE(starts_with(render("{% set x = 1 %}{% set x.a = 2 %}"), "ERROR: "));
}

TEST(JinjaTest, LimitsStopRunawayTemplates) {
  // Unbounded macro recursion, loops, output and deep nesting all end in a Status.
  EXPECT_TRUE(starts_with(render("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"), "ERROR: template error"));
  EXPECT_TRUE(starts_with(render("{% for a in range(1000) %}{% for b in range(1000) %}"
                                 "{% for c in range(10) %}{% endfor %}{% endfor %}{% endfor %}"),
                          "ERROR: "));
  EXPECT_TRUE(starts_with(render("{{ 'x' * 1000000000 }}"), "ERROR: "));
  EXPECT_TRUE(starts_with(render("{{ range(100000000)|length }}"), "ERROR: "));
  const std::string deep = "{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}";
  EXPECT_TRUE(starts_with(render(deep), "ERROR: template syntax error"));
  std::string nested;
  for (int i = 0; i < 1000; ++i) nested += "{% if true %}";
  EXPECT_TRUE(starts_with(render(nested), "ERROR: template syntax error"));
}

TEST(JinjaTest, LimitsBoundValuesATemplateBuilds) {
  // Lists nested 100k deep would overflow the stack when printed or destroyed.
  EXPECT_EQ(render("{% set ns = namespace(x=[]) %}{% for i in range(100000) %}"
                   "{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x|length }}"),
            "ERROR: template error at line 1: value nested deeper than 256 levels");
  // Doubling a shared list 64 times would be 2^64 elements once printed or compared.
  EXPECT_TRUE(starts_with(render("{% set ns = namespace(x=[1]) %}{% for i in range(64) %}"
                                 "{% set ns.x = [ns.x, ns.x] %}{% endfor %}{{ ns.x == ns.x }}"),
                          "ERROR: template error at line 1: value has more than"));
  // Namespaces may not hold namespaces: no cycles through the one mutable value.
  EXPECT_TRUE(starts_with(render("{% set ns = namespace() %}{% set ns.me = ns %}"), "ERROR: "));
  EXPECT_TRUE(starts_with(render("{% set a = namespace() %}{% set b = namespace(a=[a]) %}"), "ERROR: "));
  // A list may repeat one big string many times without copying it.
  EXPECT_EQ(render("{% set s = 'x' * 1000000 %}{{ ([s] * 100000)|length }}"), "100000");
  // Context JSON nested too deeply is refused, not recursed into.
  ordered_json deep = ordered_json::array();
  for (int i = 0; i < 1000; ++i) deep = ordered_json::array({deep});
  EXPECT_TRUE(starts_with(render("{{ x|length }}", {{"x", deep}}), "ERROR: context JSON"));
}

}  // namespace
}  // namespace folio
