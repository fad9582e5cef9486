// Copyright ingot authors. Apache-2.0.
//
// Chat prompts in the form a model's own chat template (GGUF `tokenizer.chat_template`, a Jinja
// program) gives them. ingot does not run Jinja yet: it recognizes a template family by its
// markers, as llama.cpp did before it ran templates, and renders that family's form. ChatML
// (`<|im_start|>role\n...<|im_end|>\n`, SmolLM2, Qwen2) is the one family so far, with the default
// system turn many ChatML templates add when the chat does not start with one (SmolLM2: "You are a
// helpful AI assistant named SmolLM, ..."): without it the prompt differs from what
// transformers, llama.cpp and vLLM give the model. Other templates are refused by name.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace ingot::llm {

struct ChatTurn {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

/// What a recognized template renders: ChatML, and the system turn it adds to a chat that does
/// not open with one (none when the template adds nothing).
struct ChatFormat {
  std::optional<std::string> default_system;
};

/// The format of `tmpl` (empty: plain ChatML, no default system turn); kUnsupported naming the
/// template's start for one that is not ChatML.
Result<ChatFormat> chat_format_of(const std::string& tmpl);

/// The chat in `f`'s form, ending with the assistant's turn opened (add_generation_prompt);
/// kInvalidArgument for an empty chat or a role other than system, user and assistant.
Result<std::string> render_chat(const ChatFormat& f, const std::vector<ChatTurn>& turns);

}  // namespace ingot::llm
