// Copyright ingot authors. Apache-2.0.
//
// Chat templates rendered by the Jinja interpreter: the expected prompts follow the templates'
// Jinja by hand. Many real templates are checked against jinja2 itself in
// tests/llm/test_chat_templates.py, and the real SmolLM2 GGUF's against llama-cpp-python's
// rendering (tests/llm/test_llama_cpp_oracle.py).
#include "llm/chat_template.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace ingot::llm {
namespace {

// SmolLM2-135M-Instruct's template as its GGUF holds it (newlines as characters).
const char* kSmolLM2 =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ "
    "'<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}"
    "{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

// Qwen2-style: the system branch first (its literal runs into messages[0]['content']), the default in
// the else branch, newlines as Jinja escapes (as tokenizer_config.json's JSON decodes them).
const char* kEscapedWithElse =
    "{%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\\n' + messages[0]['content'] + "
    "'<|im_end|>\\n' }}{%- else %}{{- '<|im_start|>system\\nYou are a test assistant.\\tBe brief.<|im_end|>\\n' }}"
    "{%- endif %}{%- for message in messages %}{%- if not (message.role == 'system' and loop.first) %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}{%- endif %}"
    "{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";

const char* kPlainChatML =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + "
    "'\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

const char* kLlama3Like =
    "{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + "
    "'<|end_header_id|>\\n\\n' + message['content'] + '<|eot_id|>' }}{% endfor %}";

const ChatTemplateTokens kTokens{"<|begin_of_text|>", "<|eot_id|>"};

std::string render(const char* tmpl, const std::vector<ChatTurn>& turns) {
  auto text = render_chat_template(tmpl, turns, kTokens);
  EXPECT_TRUE(text.ok()) << text.status().to_string();
  return text.ok() ? *text : "";
}

TEST(ChatTemplate, SmolLM2AddsItsDefaultSystemTurnToAChatWithoutOne) {
  EXPECT_EQ(render(kSmolLM2, {{"user", "Hi"}}),
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  // A chat that opens with its own system turn keeps it, and gets no default.
  EXPECT_EQ(render(kSmolLM2, {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello."}, {"user", "Bye"}}),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplate, EscapedLiteralInTheElseBranch) {
  EXPECT_EQ(render(kEscapedWithElse, {{"user", "Hi"}}),
            "<|im_start|>system\nYou are a test assistant.\tBe brief.<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(render(kEscapedWithElse, {{"system", "S"}, {"user", "Hi"}}),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplate, PlainChatMLAndNoTemplateAddNothing) {
  for (const char* t : {kPlainChatML, ""})
    EXPECT_EQ(render(t, {{"user", "Hi"}}), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n") << t;
}

// Refused by name before ingot ran Jinja; now rendered, with the model's BOS text.
TEST(ChatTemplate, OtherFamiliesRender) {
  EXPECT_EQ(render(kLlama3Like, {{"system", "S"}, {"user", "Hi"}}),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nS<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>");
}

TEST(ChatTemplate, RaisedErrorsAndBadTemplatesAreStatuses) {
  const char* alternate =
      "{% for m in messages %}{% if (m['role'] == 'user') != (loop.index0 % 2 == 0) %}"
      "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
      "{% endif %}{{ m['content'] }}{% endfor %}";
  auto r = render_chat_template(alternate, {{"user", "a"}, {"user", "b"}}, kTokens);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("Conversation roles must alternate"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("line 1"), std::string::npos) << r.status().message();
  auto bad = ChatTemplate::parse("{% for m in messages %}{{ m.content }}");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidModel);
  EXPECT_NE(bad.status().message().find("endfor"), std::string::npos) << bad.status().message();
}

// strftime_now (Llama 3.x templates write today's date with it): any length of result, the same
// text as std::strftime for a short format; an empty format gives ""; a result over the cap is an
// error that names the function, not an empty string (a fixed 256-byte buffer gave "" for 256+).
TEST(ChatTemplate, StrftimeNowFormatsAnyLength) {
  const std::vector<ChatTurn> chat = {{"user", "hi"}};
  auto year = render_chat_template("{{ strftime_now('%Y') }}", chat, kTokens);
  ASSERT_TRUE(year.ok()) << year.status().to_string();
  ASSERT_EQ(year->size(), 4u) << *year;
  EXPECT_TRUE(std::all_of(year->begin(), year->end(), [](char c) { return c >= '0' && c <= '9'; })) << *year;
  // 300 copies of "%Y-": 1500 characters, each copy the year and a dash.
  std::string fmt, want;
  for (int i = 0; i < 300; ++i) fmt += "%Y-", want += *year + "-";
  auto longer = render_chat_template("{{ strftime_now('" + fmt + "') }}", chat, kTokens);
  ASSERT_TRUE(longer.ok()) << longer.status().to_string();
  EXPECT_EQ(*longer, want);
  auto empty = render_chat_template("[{{ strftime_now('') }}]", chat, kTokens);
  ASSERT_TRUE(empty.ok()) << empty.status().to_string();
  EXPECT_EQ(*empty, "[]");
  // 100000 copies of "%c" (a date and time each, ~24 characters): past the 1 MiB cap.
  std::string huge;
  for (int i = 0; i < 100000; ++i) huge += "%c";
  auto over = render_chat_template("{{ strftime_now('" + huge + "') }}", chat, kTokens);
  ASSERT_FALSE(over.ok());
  EXPECT_NE(over.status().message().find("strftime_now"), std::string::npos) << over.status().message();
  auto wrong = render_chat_template("{{ strftime_now(3) }}", chat, kTokens);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("strftime_now"), std::string::npos) << wrong.status().message();
}

TEST(ChatTemplate, BadChatsAreInvalidArguments) {
  EXPECT_EQ(render_chat_template("", {}, kTokens).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(render_chat_template("", {{"tool", "x"}}, kTokens).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ingot::llm
