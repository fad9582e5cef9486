// Copyright ingot authors. Apache-2.0.
#pragma once

#include <string>
#include <vector>

namespace ingot::tools {

/// `ingot generate MODEL.gguf --prompt TEXT [options]`: text generation with the CPU decoder
/// (llm/cpu_decoder) through the scheduler and the paged KV cache. Returns 0 on success, 1 when
/// loading or running fails, 2 on usage errors.
int generate_command(const std::vector<std::string>& args);
void generate_help();

}  // namespace ingot::tools
