// Copyright ingot authors. Apache-2.0.
#include "llm/chat_template.h"

namespace ingot::llm {
namespace {

constexpr const char* kStart = "<|im_start|>";
constexpr const char* kEnd = "<|im_end|>";

// A ChatML template's default system text: the literal after "<|im_start|>system" and a newline
// (a newline character, or the two characters \n of a Jinja string escape) up to "<|im_end|>",
// with no quote or brace in it (so not the branch that writes messages[0]['content']), in a
// template that tests whether the chat opens with a system turn.
std::optional<std::string> default_system_of(const std::string& t) {
  if (t.find("'system'") == std::string::npos && t.find("\"system\"") == std::string::npos) return std::nullopt;
  const std::string head = std::string(kStart) + "system";
  for (size_t at = t.find(head); at != std::string::npos; at = t.find(head, at + 1)) {
    size_t p = at + head.size();
    if (t.compare(p, 1, "\n") == 0) {
      p += 1;
    } else if (t.compare(p, 2, "\\n") == 0) {
      p += 2;
    } else {
      continue;
    }
    const size_t end = t.find(kEnd, p);
    if (end == std::string::npos) continue;
    std::string text = t.substr(p, end - p);
    if (text.empty() || text.find_first_of("'\"{}") != std::string::npos) continue;
    // Jinja string escapes the literal may hold.
    std::string out;
    for (size_t i = 0; i < text.size(); ++i) {
      if (text[i] == '\\' && i + 1 < text.size()) {
        const char c = text[++i];
        out += c == 'n' ? '\n' : c == 't' ? '\t' : c;
      } else {
        out += text[i];
      }
    }
    return out;
  }
  return std::nullopt;
}

}  // namespace

Result<ChatFormat> chat_format_of(const std::string& tmpl) {
  ChatFormat f;
  if (tmpl.empty()) return f;
  if (tmpl.find(kStart) == std::string::npos || tmpl.find(kEnd) == std::string::npos)
    return unsupported("the model's chat template is not ChatML (it starts '", tmpl.substr(0, 60),
                       "'), and ingot does not run Jinja chat templates yet");
  f.default_system = default_system_of(tmpl);
  return f;
}

Result<std::string> render_chat(const ChatFormat& f, const std::vector<ChatTurn>& turns) {
  if (turns.empty()) return invalid_argument("a chat needs at least one message");
  std::string text;
  if (f.default_system && turns.front().role != "system")
    text += std::string(kStart) + "system\n" + *f.default_system + kEnd + "\n";
  for (const ChatTurn& m : turns) {
    if (m.role != "system" && m.role != "user" && m.role != "assistant")
      return invalid_argument("message role '", m.role, "': expected system, user or assistant");
    text += kStart + m.role + "\n" + m.content + kEnd + "\n";
  }
  return text + kStart + "assistant\n";
}

}  // namespace ingot::llm
