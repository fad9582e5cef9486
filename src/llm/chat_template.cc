// Copyright ingot authors. Apache-2.0.
#include "llm/chat_template.h"

#include <ctime>

namespace ingot::llm {
namespace {

// What a model without a template gets: ChatML with no default system turn.
constexpr const char* kChatML =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

}  // namespace

Result<ChatTemplate> ChatTemplate::parse(const std::string& source) {
  ChatTemplate t;
  auto parsed = jinja::Template::parse(source.empty() ? kChatML : source);
  if (!parsed.ok()) return Status(parsed.status().code(), "the model's chat template: " + parsed.status().message());
  t.template_ = std::move(parsed).value();
  return t;
}

Result<std::string> ChatTemplate::render(const std::vector<ChatTurn>& turns, const ChatTemplateTokens& tokens,
                                         bool add_generation_prompt) const {
  if (turns.empty()) return invalid_argument("a chat needs at least one message");
  jinja::List messages;
  for (const ChatTurn& m : turns) {
    if (m.role != "system" && m.role != "user" && m.role != "assistant")
      return invalid_argument("message role '", m.role, "': expected system, user or assistant");
    messages.emplace_back(jinja::Dict{{"role", jinja::Value(m.role)}, {"content", jinja::Value(m.content)}});
  }
  jinja::Dict context = {
      {"messages", jinja::Value(std::move(messages))},
      {"add_generation_prompt", jinja::Value(add_generation_prompt)},
      {"bos_token", jinja::Value(tokens.bos_token)},
      {"eos_token", jinja::Value(tokens.eos_token)},
      {"raise_exception",
       jinja::Value::callable("raise_exception",
                              [](const jinja::List& args, const jinja::KwArgs&) -> Result<jinja::Value> {
                                return invalid_argument(args.empty() ? "" : args[0].to_string());
                              })},
      // transformers' strftime_now: the local time now, formatted by strftime.
      {"strftime_now",
       jinja::Value::callable("strftime_now",
                              [](const jinja::List& args, const jinja::KwArgs&) -> Result<jinja::Value> {
                                if (args.size() != 1 || !args[0].is_string())
                                  return invalid_argument("strftime_now takes one format string");
                                const std::time_t now = std::time(nullptr);
                                std::tm local{};
                                localtime_r(&now, &local);
                                char buf[256];
                                const size_t n = std::strftime(buf, sizeof(buf), args[0].str().c_str(), &local);
                                return jinja::Value(std::string(buf, n));
                              })},
  };
  auto text = template_.render(context);
  if (!text.ok()) return Status(text.status().code(), "the model's chat template: " + text.status().message());
  return text;
}

Result<std::string> render_chat_template(const std::string& tmpl, const std::vector<ChatTurn>& turns,
                                         const ChatTemplateTokens& tokens) {
  INGOT_ASSIGN_OR_RETURN(ChatTemplate t, ChatTemplate::parse(tmpl));
  return t.render(turns, tokens);
}

}  // namespace ingot::llm
