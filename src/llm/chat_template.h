// Copyright ingot authors. Apache-2.0.
//
// Chat prompts as a model's own chat template (GGUF `tokenizer.chat_template`, tokenizer_config.json's
// `chat_template`, a Jinja program) renders them, run by ingot's Jinja interpreter (jinja.h) with
// the variables transformers' apply_chat_template and vLLM give it: `messages` (a list of
// {role, content}), `add_generation_prompt`, `bos_token`, `eos_token`, and the functions
// `raise_exception(message)` and `strftime_now(format)`; `tools` and `documents` stay undefined.
// A model without a template gets plain ChatML (`<|im_start|>role\n...<|im_end|>\n`).
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "llm/jinja.h"

namespace ingot::llm {

struct ChatTurn {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

/// The special tokens' text a template may write (`{{ bos_token }}`); "" when the model has none.
struct ChatTemplateTokens {
  std::string bos_token;
  std::string eos_token;
};

class ChatTemplate {
 public:
  /// Parses `source` once (empty: plain ChatML); kInvalidModel naming the line for a template
  /// ingot cannot parse.
  static Result<ChatTemplate> parse(const std::string& source);

  /// The prompt for `turns`, with the assistant's turn opened when `add_generation_prompt`:
  /// kInvalidArgument for an empty chat, a role other than system, user and assistant, or an error
  /// the template raises (raise_exception's message, e.g. roles that do not alternate) or meets;
  /// each template error names its line.
  Result<std::string> render(const std::vector<ChatTurn>& turns, const ChatTemplateTokens& tokens,
                             bool add_generation_prompt = true) const;

 private:
  jinja::Template template_;
};

/// ChatTemplate::parse(tmpl) then render(turns, tokens), with the generation prompt.
Result<std::string> render_chat_template(const std::string& tmpl, const std::vector<ChatTurn>& turns,
                                         const ChatTemplateTokens& tokens);

}  // namespace ingot::llm
