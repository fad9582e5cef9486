// Copyright ingot authors. Apache-2.0.
//
// Renders chat-template cases for tests/llm/test_chat_templates.py: reads a JSON array of
// {template, messages: [{role, content}], bos_token, eos_token, add_generation_prompt} from the
// file named by argv[1] and writes a JSON array of {ok, text} / {ok: false, error} to stdout, each
// rendered through ingot::llm::ChatTemplate as LlmModel renders a chat.
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "llm/chat_template.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: chat_template_render CASES.json\n";
    return 2;
  }
  std::ifstream in(argv[1]);
  if (!in) {
    std::cerr << "cannot read " << argv[1] << "\n";
    return 2;
  }
  const nlohmann::json cases = nlohmann::json::parse(in);
  nlohmann::json out = nlohmann::json::array();
  for (const nlohmann::json& c : cases) {
    std::vector<ingot::llm::ChatTurn> turns;
    for (const nlohmann::json& m : c.at("messages"))
      turns.push_back({m.at("role").get<std::string>(), m.at("content").get<std::string>()});
    const ingot::llm::ChatTemplateTokens tokens{c.at("bos_token").get<std::string>(),
                                                c.at("eos_token").get<std::string>()};
    auto t = ingot::llm::ChatTemplate::parse(c.at("template").get<std::string>());
    ingot::Result<std::string> text = t.ok() ? t->render(turns, tokens, c.at("add_generation_prompt").get<bool>())
                                             : ingot::Result<std::string>(t.status());
    if (text.ok()) {
      out.push_back({{"ok", true}, {"text", *text}});
    } else {
      out.push_back({{"ok", false}, {"error", text.status().to_string()}});
    }
  }
  std::cout << out.dump() << "\n";
  return 0;
}
