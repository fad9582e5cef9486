// Copyright ingot authors. Apache-2.0.
//
// LlmModel's insides, shared by its calls (llm_api.cc) and the engine loop (llm_engine.cc).
#pragma once

#include <memory>

#include "ingot/llm.h"
#include "llm/cpu_decoder.h"
#include "llm/gguf.h"
#include "llm/tokenizer.h"

namespace ingot {

struct LlmModel::Impl {
  std::unique_ptr<llm::GgufFile> file;
  std::unique_ptr<llm::BpeTokenizer> tokenizer;
  std::unique_ptr<llm::LlamaCpuModel> model;
};

}  // namespace ingot
