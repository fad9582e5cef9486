// Copyright ingot authors. Apache-2.0.
//
// libFuzzer target for the chat-template interpreter (src/llm/jinja*, chat_template.*): a model
// file's `chat_template` is untrusted text, so any bytes must parse or give an error, and a template
// that parses must render a fixed chat (system, user, assistant, user; unicode and a quote) or give
// an error, never a crash, a hang past the interpreter's limits or unbounded memory. Seeds: the 13
// real templates of tests/llm/test_chat_templates.py (scripts/test.sh writes them).
#include <cstddef>
#include <cstdint>
#include <string>

#include "llm/chat_template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ingot::llm;
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto t = ChatTemplate::parse(text);
  if (!t.ok()) return 0;
  static const std::vector<ChatTurn> chat = {{"system", "Be brief."},
                                             {"user", "Hi \xC3\xB6 \"there\""},
                                             {"assistant", "Hello.</think>"},
                                             {"user", "Bye"}};
  const ChatTemplateTokens tokens{"<s>", "</s>"};
  auto out = t->render(chat, tokens, true);
  (void)out;
  return 0;
}
