// Copyright ingot authors. Apache-2.0.
#include "llm/chat_template.h"

#include <algorithm>
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
                                const std::string& fmt = args[0].str();
                                if (fmt.empty()) return jinja::Value(std::string());
                                const std::time_t now = std::time(nullptr);
                                std::tm local{};
                                localtime_r(&now, &local);
                                // strftime returns 0 when the result does not fit (or is empty): grow
                                // the buffer up to a cap, then say so rather than give "".
                                constexpr size_t kMaxBytes = size_t{1} << 20;
                                std::string buf;
                                for (size_t size = std::max<size_t>(256, 2 * fmt.size()); size <= kMaxBytes;
                                     size *= 2) {
                                  buf.resize(size);
                                  const size_t n = std::strftime(buf.data(), buf.size(), fmt.c_str(), &local);
                                  if (n > 0) return jinja::Value(buf.substr(0, n));
                                }
                                return invalid_argument("strftime_now: the format '", fmt.substr(0, 40),
                                                        fmt.size() > 40 ? "...'" : "'",
                                                        " gives an empty result or one over ", kMaxBytes, " bytes");
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
