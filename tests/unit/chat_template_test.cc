// Copyright ingot authors. Apache-2.0.
//
// Chat templates: which ChatML templates add a default system turn, and the prompt text rendered.
// The expected prompts follow the templates' Jinja by hand; the real SmolLM2 GGUF's template is
// also checked against llama-cpp-python's Jinja rendering (tests/llm/test_llama_cpp_oracle.py).
#include "llm/chat_template.h"

#include <gtest/gtest.h>

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

TEST(ChatTemplate, SmolLM2AddsItsDefaultSystemTurnToAChatWithoutOne) {
  auto f = chat_format_of(kSmolLM2);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  ASSERT_TRUE(f->default_system.has_value());
  EXPECT_EQ(*f->default_system, "You are a helpful AI assistant named SmolLM, trained by Hugging Face");
  auto text = render_chat(*f, {{"user", "Hi"}});
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text,
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  // A chat that opens with its own system turn keeps it, and gets no default.
  text = render_chat(*f, {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello."}, {"user", "Bye"}});
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text,
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplate, EscapedLiteralInTheElseBranch) {
  auto f = chat_format_of(kEscapedWithElse);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  ASSERT_TRUE(f->default_system.has_value());
  EXPECT_EQ(*f->default_system, "You are a test assistant.\tBe brief.");
}

TEST(ChatTemplate, PlainChatMLAndNoTemplateAddNothing) {
  for (const char* t : {kPlainChatML, ""}) {
    auto f = chat_format_of(t);
    ASSERT_TRUE(f.ok()) << f.status().to_string();
    EXPECT_FALSE(f->default_system.has_value()) << t;
    auto text = render_chat(*f, {{"user", "Hi"}});
    ASSERT_TRUE(text.ok());
    EXPECT_EQ(*text, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  }
}

TEST(ChatTemplate, OtherFamiliesAreRefusedByName) {
  auto f = chat_format_of(kLlama3Like);
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(f.status().to_string().find("not ChatML"), std::string::npos);
  EXPECT_NE(f.status().to_string().find("{{ bos_token }}"), std::string::npos) << "names the template";
}

TEST(ChatTemplate, BadChatsAreInvalidArguments) {
  ChatFormat f;
  EXPECT_EQ(render_chat(f, {}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(render_chat(f, {{"tool", "x"}}).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ingot::llm
