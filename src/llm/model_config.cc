// Copyright ingot authors. Apache-2.0.
#include "llm/model_config.h"

#include <cctype>

#include <nlohmann/json.hpp>

namespace ingot::llm {

namespace {

Status check(const LlamaConfig& c, const std::string& what) {
  auto positive = [&](int64_t v, const char* name) -> Status {
    if (v <= 0) return invalid_model(what, ": ", name, " must be positive, got ", v);
    return Status::Ok();
  };
  INGOT_RETURN_IF_ERROR(positive(c.vocab_size, "vocab_size"));
  INGOT_RETURN_IF_ERROR(positive(c.hidden_size, "hidden_size"));
  INGOT_RETURN_IF_ERROR(positive(c.intermediate_size, "intermediate_size"));
  INGOT_RETURN_IF_ERROR(positive(c.num_layers, "num_hidden_layers"));
  INGOT_RETURN_IF_ERROR(positive(c.num_heads, "num_attention_heads"));
  INGOT_RETURN_IF_ERROR(positive(c.num_kv_heads, "num_key_value_heads"));
  INGOT_RETURN_IF_ERROR(positive(c.head_dim, "head_dim"));
  if (c.num_heads % c.num_kv_heads != 0)
    return invalid_model(what, ": num_attention_heads ", c.num_heads, " is not a multiple of num_key_value_heads ",
                         c.num_kv_heads);
  if (c.head_dim % 2 != 0) return invalid_model(what, ": head_dim ", c.head_dim, " is odd (rotary pairs)");
  if (c.rms_norm_eps <= 0) return invalid_model(what, ": rms_norm_eps must be positive");
  if (c.rope_theta <= 0) return invalid_model(what, ": rope_theta must be positive");
  return Status::Ok();
}

}  // namespace

Result<LlamaConfig> llama_config_from_json(const std::string& json_text, const std::string& what) {
  nlohmann::json j = nlohmann::json::parse(json_text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return invalid_model(what, ": not a JSON object");
  LlamaConfig c;
  auto get_int = [&](const char* key, int64_t* out, bool required) -> Status {
    if (!j.contains(key) || j[key].is_null()) {
      if (required) return invalid_model(what, ": missing '", key, "'");
      return Status::Ok();
    }
    if (!j[key].is_number_integer()) return invalid_model(what, ": '", key, "' is not an integer");
    *out = j[key].get<int64_t>();
    return Status::Ok();
  };
  auto get_num = [&](const nlohmann::json& o, const char* key, double* out) -> Status {
    if (!o.contains(key) || o[key].is_null()) return Status::Ok();
    if (!o[key].is_number()) return invalid_model(what, ": '", key, "' is not a number");
    *out = o[key].get<double>();
    return Status::Ok();
  };
  c.architecture = j.value("model_type", std::string("llama"));
  if (c.architecture != "llama" && c.architecture != "qwen2" && c.architecture != "mistral")
    return unsupported(what, ": model_type '", c.architecture, "' (ingot runs llama, qwen2 and mistral decoders)");
  INGOT_RETURN_IF_ERROR(get_int("vocab_size", &c.vocab_size, true));
  INGOT_RETURN_IF_ERROR(get_int("hidden_size", &c.hidden_size, true));
  INGOT_RETURN_IF_ERROR(get_int("intermediate_size", &c.intermediate_size, true));
  INGOT_RETURN_IF_ERROR(get_int("num_hidden_layers", &c.num_layers, true));
  INGOT_RETURN_IF_ERROR(get_int("num_attention_heads", &c.num_heads, true));
  c.num_kv_heads = c.num_heads;
  INGOT_RETURN_IF_ERROR(get_int("num_key_value_heads", &c.num_kv_heads, false));
  INGOT_RETURN_IF_ERROR(get_int("max_position_embeddings", &c.max_position_embeddings, false));
  c.head_dim = c.num_heads > 0 ? c.hidden_size / c.num_heads : 0;
  INGOT_RETURN_IF_ERROR(get_int("head_dim", &c.head_dim, false));
  INGOT_RETURN_IF_ERROR(get_num(j, "rms_norm_eps", &c.rms_norm_eps));
  INGOT_RETURN_IF_ERROR(get_num(j, "rope_theta", &c.rope_theta));
  c.tie_word_embeddings = j.value("tie_word_embeddings", false);
  c.attention_bias = j.value("attention_bias", c.architecture == "qwen2");
  if (j.contains("sliding_window") && !j["sliding_window"].is_null() && j.value("use_sliding_window", c.architecture == "mistral"))
    return unsupported(what, ": sliding-window attention");
  if (j.contains("rope_scaling") && !j["rope_scaling"].is_null()) {
    const nlohmann::json& r = j["rope_scaling"];
    if (!r.is_object()) return invalid_model(what, ": rope_scaling is not an object");
    const std::string type = r.value("rope_type", r.value("type", std::string("default")));
    if (type == "llama3") {
      c.rope_scaling = "llama3";
      INGOT_RETURN_IF_ERROR(get_num(r, "factor", &c.rope_factor));
      INGOT_RETURN_IF_ERROR(get_num(r, "low_freq_factor", &c.rope_low_freq_factor));
      INGOT_RETURN_IF_ERROR(get_num(r, "high_freq_factor", &c.rope_high_freq_factor));
      double orig = static_cast<double>(c.rope_original_max_positions);
      INGOT_RETURN_IF_ERROR(get_num(r, "original_max_position_embeddings", &orig));
      c.rope_original_max_positions = static_cast<int64_t>(orig);
    } else if (type != "default") {
      return unsupported(what, ": rope_scaling type '", type, "' (ingot has llama3)");
    }
  }
  if (j.contains("quantization_config") && j["quantization_config"].is_object()) {
    const nlohmann::json& q = j["quantization_config"];
    LlamaConfig::Quantization& cq = c.quantization;
    cq.method = q.value("quant_method", std::string());
    for (char& ch : cq.method) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    const nlohmann::json* bits = q.contains("bits") ? &q["bits"] : q.contains("w_bit") ? &q["w_bit"] : nullptr;
    const nlohmann::json* group =
        q.contains("group_size") ? &q["group_size"] : q.contains("q_group_size") ? &q["q_group_size"] : nullptr;
    if (bits && bits->is_number_integer()) cq.bits = bits->get<int64_t>();
    if (group && group->is_number_integer()) cq.group_size = group->get<int64_t>();
    if (q.contains("zero_point") && q["zero_point"].is_boolean()) cq.zero_point = q["zero_point"].get<bool>();
    cq.version = q.value("version", std::string());
    for (char& ch : cq.version) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    cq.format = q.value("format", std::string());
    if (q.contains("desc_act") && q["desc_act"].is_boolean()) cq.desc_act = q["desc_act"].get<bool>();
    cq.checkpoint_format = q.value("checkpoint_format", std::string());
    if (q.contains("config_groups") && q["config_groups"].is_object()) {  // compressed-tensors
      const nlohmann::json& groups = q["config_groups"];
      cq.groups = static_cast<int64_t>(groups.size());
      for (const auto& [name, g] : groups.items()) {
        (void)name;
        if (!g.is_object()) continue;
        if (g.contains("weights") && g["weights"].is_object()) {
          const nlohmann::json& w = g["weights"];
          if (w.contains("num_bits") && w["num_bits"].is_number_integer()) cq.bits = w["num_bits"].get<int64_t>();
          if (w.contains("group_size") && w["group_size"].is_number_integer())
            cq.group_size = w["group_size"].get<int64_t>();
          cq.type = w.value("type", std::string());
          cq.strategy = w.value("strategy", std::string());
          cq.symmetric = w.value("symmetric", true);
          if (w.contains("actorder") && w["actorder"].is_string()) cq.actorder = w["actorder"].get<std::string>();
        }
        cq.activations = g.contains("input_activations") && !g["input_activations"].is_null();
        break;  // the first group (check_hf_quantization refuses more than one)
      }
    }
  }
  INGOT_RETURN_IF_ERROR(check(c, what));
  return c;
}

Result<LlamaConfig> llama_config_from_gguf(const GgufFile& f) {
  LlamaConfig c;
  INGOT_ASSIGN_OR_RETURN(c.architecture, f.get_string("general.architecture"));
  if (c.architecture != "llama" && c.architecture != "qwen2")
    return unsupported("GGUF architecture '", c.architecture, "' (ingot runs llama and qwen2 decoders)");
  const std::string a = c.architecture + ".";
  INGOT_ASSIGN_OR_RETURN(c.hidden_size, f.get_int(a + "embedding_length"));
  INGOT_ASSIGN_OR_RETURN(c.intermediate_size, f.get_int(a + "feed_forward_length"));
  INGOT_ASSIGN_OR_RETURN(c.num_layers, f.get_int(a + "block_count"));
  INGOT_ASSIGN_OR_RETURN(c.num_heads, f.get_int(a + "attention.head_count"));
  auto kv = f.get_int(a + "attention.head_count_kv");
  c.num_kv_heads = kv.ok() ? *kv : c.num_heads;
  auto ctx = f.get_int(a + "context_length");
  c.max_position_embeddings = ctx.ok() ? *ctx : 0;
  auto rot = f.get_int(a + "rope.dimension_count");
  c.head_dim = rot.ok() ? *rot : (c.num_heads > 0 ? c.hidden_size / c.num_heads : 0);
  auto eps = f.get_float(a + "attention.layer_norm_rms_epsilon");
  if (eps.ok()) c.rms_norm_eps = *eps;
  auto theta = f.get_float(a + "rope.freq_base");
  if (theta.ok()) c.rope_theta = *theta;
  auto vocab = f.get_int(a + "vocab_size");
  if (vocab.ok()) {
    c.vocab_size = *vocab;
  } else if (const GgufValue* t = f.find("tokenizer.ggml.tokens")) {
    c.vocab_size = static_cast<int64_t>(t->strings.size());
  }
  c.tie_word_embeddings = f.tensor("output.weight") == nullptr;  // llama.cpp omits a tied head
  c.attention_bias = f.tensor("blk.0.attn_q.bias") != nullptr;
  INGOT_RETURN_IF_ERROR(check(c, "GGUF"));
  return c;
}

}  // namespace ingot::llm
