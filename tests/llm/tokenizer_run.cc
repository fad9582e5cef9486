// Copyright ingot authors. Apache-2.0.
//
// Runs ingot's BpeTokenizer for tests/llm/test_tokenizers_oracle.py: reads a JSON object
// {tokenizer_json | gguf: path, bos_token, eos_token, texts: [hex], decode: [[ids]], pieces: bool}
// from the file named by argv[1] and writes to stdout {ok, encode: [[ids]], decode: [hex],
// pieces: [hex per id]} or {ok: false, code, error}. Texts travel as hex of their UTF-8 bytes so
// that any bytes survive the trip.
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "llm/gguf.h"
#include "llm/tokenizer.h"

namespace {

std::string hex(const std::string& s) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) out += {digits[c >> 4], digits[c & 15]};
  return out;
}

std::string unhex(const std::string& h) {
  std::string out;
  for (size_t i = 0; i + 1 < h.size(); i += 2) out.push_back(static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16)));
  return out;
}

nlohmann::json failure(const ingot::Status& s) {
  return {{"ok", false}, {"code", ingot::status_code_name(s.code())}, {"error", s.to_string()}};
}

}  // namespace

int main(int argc, char** argv) {
  using ingot::llm::BpeTokenizer;
  if (argc != 2) {
    std::cerr << "usage: tokenizer_run REQUEST.json\n";
    return 2;
  }
  std::ifstream in(argv[1]);
  if (!in) {
    std::cerr << "cannot read " << argv[1] << "\n";
    return 2;
  }
  const nlohmann::json req = nlohmann::json::parse(in);
  std::unique_ptr<ingot::llm::GgufFile> file;  // outlives the tokenizer read from it
  ingot::Result<std::unique_ptr<BpeTokenizer>> tok = ingot::invalid_argument("no tokenizer named");
  if (req.contains("gguf")) {
    auto f = ingot::llm::GgufFile::open(req["gguf"].get<std::string>());
    if (!f.ok()) {
      std::cout << failure(f.status()).dump() << "\n";
      return 0;
    }
    file = std::move(*f);
    tok = BpeTokenizer::from_gguf(*file);
  } else {
    std::ifstream j(req.at("tokenizer_json").get<std::string>());
    std::stringstream text;
    text << j.rdbuf();
    tok = BpeTokenizer::from_tokenizer_json(text.str(), req.value("bos_token", ""), req.value("eos_token", ""));
  }
  if (!tok.ok()) {
    std::cout << failure(tok.status()).dump() << "\n";
    return 0;
  }
  const BpeTokenizer& t = **tok;
  nlohmann::json out = {{"ok", true},
                        {"vocab_size", t.vocab_size()},
                        {"bos_id", t.bos_id()},
                        {"eos_id", t.eos_id()},
                        {"add_bos", t.add_bos()}};
  nlohmann::json enc = nlohmann::json::array(), dec = nlohmann::json::array();
  for (const nlohmann::json& h : req.value("texts", nlohmann::json::array())) {
    auto ids = t.encode(unhex(h.get<std::string>()));
    if (!ids.ok()) {
      std::cout << failure(ids.status()).dump() << "\n";
      return 0;
    }
    enc.push_back(*ids);
  }
  for (const nlohmann::json& ids : req.value("decode", nlohmann::json::array())) {
    auto text = t.decode(ids.get<std::vector<int32_t>>());
    if (!text.ok()) {
      std::cout << failure(text.status()).dump() << "\n";
      return 0;
    }
    dec.push_back(hex(*text));
  }
  out["encode"] = enc;
  out["decode"] = dec;
  if (req.value("pieces", false)) {
    nlohmann::json pieces = nlohmann::json::array();
    for (int32_t id = 0; id < t.vocab_size(); ++id) pieces.push_back(hex(t.piece(id).value()));
    out["pieces"] = pieces;
  }
  std::cout << out.dump() << "\n";
  return 0;
}
