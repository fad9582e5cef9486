// Copyright ingot authors. Apache-2.0.
#pragma once

#include <string>
#include <vector>

namespace ingot::tools {

/// Whether `ingot serve` was given a GGUF model (the OpenAI-compatible LLM server).
bool is_llm_serve(const std::vector<std::string>& args);
int serve_llm_command(const std::vector<std::string>& args);

}  // namespace ingot::tools
