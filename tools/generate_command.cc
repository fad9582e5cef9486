// Copyright ingot authors. Apache-2.0.
#include "generate_command.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "file_io.h"
#include "ingot/llm.h"
#include "npy.h"
#include "options.h"

namespace ingot::tools {

void generate_help() {
  std::cout << "usage: ingot generate MODEL.gguf|HF_FOLDER --prompt TEXT [options]\n"
               "Generates text with a Llama-family model (a GGUF file, or a Hugging Face folder: config.json,\n"
               "safetensors, tokenizer.json): on the CPU (fp32 reference decoder) or the GPU\n"
               "(--backend cuda), over a paged KV cache, prompts batched by the LLM scheduler.\n"
               "  --backend cpu|cuda     the decoder (default cpu)\n"
               "  --dtype fp16|bf16      cuda: weights, activations and KV cache (default fp16)\n"
               "  --quantization fp8     cuda: fp8 (e4m3) projection weights and activations, per-tensor\n"
               "                         scales (Ada/Hopper); embeddings, LM head, KV cache stay --dtype\n"
               "  --quantization int4    4-bit projection weights (W4A16): a GGUF's Q4_0/Q4_1/Q4_K blocks as\n"
               "                         they are, others rounded per group at load (cuda; cpu: the reference)\n"
               "  --quantization none    a 4-bit checkpoint's values as --dtype weights (unset: a checkpoint\n"
               "                         stored in 4 bits throughout, AWQ/GPTQ/W4A16/Q4 GGUF, runs as int4)\n"
               "  --int4-group N         int4: elements per group, 32, 64 or 128 (default: the file's, or the\n"
               "                         largest that divides the projections)\n"
               "  --kv-cache-dtype fp8   cuda: the KV cache in float8 e4m3 (scales 1): twice the positions\n"
               "  --prompt TEXT          the prompt (repeat for several prompts, batched together)\n"
               "  --chat                 wrap each prompt as one user turn of the model's chat template\n"
               "                         (ChatML, with its default system turn)\n"
               "  --max-tokens N         tokens to generate per prompt (default 32)\n"
               "  --temperature T        0 is greedy (default 0)\n"
               "  --top-k K --top-p P    sampling filters\n"
               "  --seed S               reproducible sampling\n"
               "  --ignore-eos           keep going past the end-of-sequence token\n"
               "  --print-ids            also print the prompt's and the generated token ids\n"
               "  --kv-blocks N          KV cache blocks of 16 positions (default: enough for every prompt)\n"
               "  --gemv-max-tokens N    cuda: steps of <= N tokens (0-8, default 8) run the projections as GEMVs\n"
               "  --gemv-prologue        cuda: the RMSNorms and the SiLU gate inside the GEMVs that read them\n"
               "                         (default for fp16/bf16 weights; --no-gemv-prologue: kernels of their own,\n"
               "                         the default for fp8 and int4 weights)\n"
               "  --gemv-k-split N       cuda: one-token GEMVs with N warps a column (1, 2 or 4; default: chosen)\n"
               "  --decode-attention grouped|per-head  cuda: a block per KV head's query group, each K/V row\n"
               "                         read once per group (grouped), or a block per query head (default)\n"
               "  --int4-gemm-max-tokens N  cuda, int4: longer steps of <= N tokens run the W4A16 tensor-core\n"
               "                         GEMM (default 0: each projection dequantized for cuBLASLt)\n"
               "  --decode-partition N   cuda: the decode attention's parts of a context, in positions (0: one\n"
               "                         part; default: per step, 64-512 so that small batches fill the GPU)\n"
               "Comparing with another implementation (transformers, llama.cpp) on the same weights:\n"
               "  --prompt-ids-file F    prompts as token ids: a JSON list of lists (instead of --prompt)\n"
               "  --logits-out F.npy     the fp32 logits after each prompt's last token, [prompts, vocab]\n"
               "  --json-out F           each prompt's ids, generated ids and finish reason, and the stats\n"
               "Timing a model size without its weights (as vLLM's --load-format dummy):\n"
               "  ingot generate CONFIG.json --load-format dummy --num-prompts P --input-len N --max-tokens M\n"
               "                         random weights of a Hugging Face config.json's shapes, P random\n"
               "                         prompts of N token ids (--seed), M tokens each; prints throughput\n"
               "  --profile-decode       (cuda) then where one decode step of P sequences at N + M positions\n"
               "                         goes: the step as served, and each op's GPU time\n";
}

// --load-format dummy: random weights of CONFIG.json's shapes, random prompts of token ids, the
// throughput of one batched generate() (prefill and decode together, as vLLM's benchmark_throughput).
static int generate_dummy(const std::string& config, const LlmLoadOptions& lo, GenerationParams gp, long long num_prompts,
                   long long input_len, bool profile) {
  if (config.empty() || num_prompts < 1 || input_len < 1) {
    std::cerr << "ingot generate: --load-format dummy needs a CONFIG.json, --num-prompts >= 1 and --input-len >= 1\n";
    return 2;
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto model = LlmModel::load_dummy(config, lo, gp.seed);
  if (!model.ok()) {
    std::cerr << "ingot generate: " << model.status().to_string() << "\n";
    return 1;
  }
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::mt19937_64 rng(gp.seed);
  std::uniform_int_distribution<int32_t> tok(0, 999);  // ids every vocabulary has
  std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(num_prompts));
  for (auto& p : prompts)
    for (long long i = 0; i < input_len; ++i) p.push_back(tok(rng));
  gp.ignore_eos = true;
  GenerationStats st;
  auto results = (*model)->generate_ids(prompts, gp, &st);
  if (!results.ok()) {
    std::cerr << "ingot generate: " << results.status().to_string() << "\n";
    return 1;
  }
  const double s = st.seconds > 0 ? st.seconds : 1e-9;
  std::cout << "model        " << (*model)->describe() << " (dummy weights, "
            << llm_precision_label(lo, (*model)->int4_weights()) << "), loaded in " << load_s
            << " s\n"
            << "requests     " << num_prompts << " x (" << input_len << " in, " << gp.max_tokens << " out)\n"
            << "time         " << st.seconds << " s in " << st.steps << " steps (" << 1000.0 * s / std::max<int64_t>(st.steps, 1)
            << " ms per step)\n"
            << "throughput   " << static_cast<double>(st.generated_tokens) / s << " output tok/s, "
            << static_cast<double>(st.generated_tokens + st.prompt_tokens) / s << " total tok/s\n"
            << "time split   decoder " << st.forward_seconds << " s (" << st.graph_steps << " of " << st.steps
            << " steps from CUDA graphs), sampling " << st.sample_seconds << " s, scheduler and the rest "
            << st.seconds - st.forward_seconds - st.sample_seconds << " s; warmup before " << st.warmup_seconds
            << " s (untimed)\n";
  if (profile) {
    auto rows = (*model)->profile_decode(num_prompts, input_len + gp.max_tokens);
    if (!rows.ok()) {
      std::cerr << "ingot generate: " << rows.status().to_string() << "\n";
      return 1;
    }
    std::cout << "decode step, " << num_prompts << " sequences at " << input_len + gp.max_tokens << " positions:\n";
    for (const auto& [name, ms] : *rows) std::printf("  %-26s %9.4f ms\n", name.c_str(), ms);
  }
  return 0;
}

int generate_command(const std::vector<std::string>& args) {
  std::string path;
  std::vector<std::string> prompts;
  bool print_ids = false;
  GenerationParams gp;
  LlmLoadOptions lo;
  bool dummy = false;
  long long gemv_max_tokens = -1;  // -1: the library's default
  long long int4_gemm_max_tokens = -1;
  std::optional<long long> decode_partition;  // given: checked by LlmModel::load (-1 automatic, 0 never)
  long long int4_group = 0;
  long long num_prompts = 0, input_len = 0;
  std::string ids_file, logits_out, json_out;
  bool profile_decode = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](const char* what) -> const std::string* {
      if (i + 1 >= args.size()) {
        std::cerr << "ingot generate: " << a << " needs " << what << "\n";
        return nullptr;
      }
      return &args[++i];
    };
    try {
      if (a == "-h" || a == "--help") {
        generate_help();
        return 0;
      } else if (a == "--prompt") {
        const std::string* v = value("a text");
        if (!v) return 2;
        prompts.push_back(*v);
      } else if (a == "--chat") {
        gp.chat = true;
      } else if (a == "--backend" || a == "--dtype" || a == "--quantization" || a == "--kv-cache-dtype") {
        const std::string* v = value(a == "--backend"          ? "cpu or cuda"
                                     : a == "--dtype"          ? "fp16 or bf16"
                                     : a == "--kv-cache-dtype" ? "fp8 or auto"
                                                               : "fp8 or none");
        if (!v) return 2;
        std::string err;
        if (!parse_llm_load_flag(a, *v, lo, err)) {
          std::cerr << "ingot generate: " << err << "\n";
          return 2;
        }
      } else if (a == "--prompt-ids-file" || a == "--logits-out" || a == "--json-out") {
        const std::string* v = value("a file");
        if (!v) return 2;
        (a == "--prompt-ids-file" ? ids_file : a == "--logits-out" ? logits_out : json_out) = *v;
      } else if (a == "--profile-decode") {
        profile_decode = true;
      } else if (a == "--print-ids") {
        print_ids = true;
      } else if (a == "--no-gemv-prologue" || a == "--gemv-prologue") {
        lo.gemv_prologue = a == "--gemv-prologue" ? 1 : 0;
      } else if (a == "--decode-attention") {
        const std::string* v = value("grouped or per-head");
        if (!v) return 2;
        if (*v != "grouped" && *v != "per-head") {
          std::cerr << "ingot generate: --decode-attention takes grouped or per-head, got '" << *v << "'\n";
          return 2;
        }
        lo.grouped_decode_attention = *v == "grouped" ? 1 : 0;
      } else if (a == "--ignore-eos") {
        gp.ignore_eos = true;
      } else if (a == "--load-format") {
        const std::string* v = value("dummy");
        if (!v) return 2;
        if (*v != "dummy") {
          std::cerr << "ingot generate: --load-format takes dummy (random weights of a config.json), got '" << *v
                    << "'\n";
          return 2;
        }
        dummy = true;
      } else if (a == "--max-tokens" || a == "--top-k" || a == "--seed" || a == "--kv-blocks" ||
                 a == "--num-prompts" || a == "--input-len" || a == "--gemv-max-tokens" || a == "--int4-group" ||
                 a == "--int4-gemm-max-tokens" || a == "--decode-partition" || a == "--gemv-k-split") {
        const std::string* v = value("a number");
        if (!v) return 2;
        const long long n = std::stoll(*v);
        if (a == "--num-prompts") num_prompts = n;
        else if (a == "--input-len") input_len = n;
        else if (a == "--max-tokens") gp.max_tokens = n;
        else if (a == "--top-k") gp.top_k = n;
        else if (a == "--kv-blocks") gp.kv_blocks = n;
        else if (a == "--gemv-max-tokens") gemv_max_tokens = n;
        else if (a == "--int4-gemm-max-tokens") int4_gemm_max_tokens = n;
        else if (a == "--decode-partition") decode_partition = n;
        else if (a == "--gemv-k-split") lo.gemv_k_split = static_cast<int>(std::clamp<long long>(n, -1, 1 << 20));
        else if (a == "--int4-group") int4_group = n;
        else {
          gp.has_seed = true;
          gp.seed = static_cast<uint64_t>(n);
        }
      } else if (a == "--temperature" || a == "--top-p") {
        const std::string* v = value("a number");
        if (!v) return 2;
        (a == "--temperature" ? gp.temperature : gp.top_p) = std::stod(*v);
      } else if (!a.empty() && a[0] == '-') {
        std::cerr << "ingot generate: unknown option '" << a << "' (ingot generate --help)\n";
        return 2;
      } else if (path.empty()) {
        path = a;
      } else {
        std::cerr << "ingot generate: one model, got '" << path << "' and '" << a << "'\n";
        return 2;
      }
    } catch (const std::exception&) {
      std::cerr << "ingot generate: " << a << " needs a number, got '" << args[i] << "'\n";
      return 2;
    }
  }
  if (gemv_max_tokens >= 0) lo.gemv_max_tokens = static_cast<int>(gemv_max_tokens);
  if (int4_gemm_max_tokens >= 0) lo.int4_gemm_max_tokens = static_cast<int>(int4_gemm_max_tokens);
  if (decode_partition)
    lo.decode_partition = static_cast<int>(std::clamp<long long>(*decode_partition, INT32_MIN, INT32_MAX));
  lo.int4_group = int4_group;
  if (dummy) return generate_dummy(path, lo, gp, num_prompts, input_len, profile_decode);
  if (path.empty() || (prompts.empty() == ids_file.empty())) {
    std::cerr << "ingot generate: a MODEL and either --prompt (one or more) or --prompt-ids-file are required "
                 "(ingot generate --help)\n";
    return 2;
  }
  auto fail = [](const Status& s) {
    std::cerr << "ingot generate: " << s.to_string() << "\n";
    return 1;
  };
  std::vector<std::vector<int32_t>> id_prompts;
  if (!ids_file.empty()) {
    auto text = read_file(ids_file);
    if (!text.ok()) return fail(text.status());
    try {
      const nlohmann::json j = nlohmann::json::parse(*text);
      if (!j.is_array() || j.empty()) throw std::runtime_error("not a non-empty list");
      for (const auto& p : j) id_prompts.push_back(p.get<std::vector<int32_t>>());
    } catch (const std::exception& e) {
      return fail(Status(StatusCode::kInvalidArgument,
                         ids_file + ": a JSON list of lists of token ids is expected (" + e.what() + ")"));
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  if (gp.kv_blocks > 0) lo.kv_blocks = gp.kv_blocks;
  auto model = LlmModel::load(path, lo);
  if (!model.ok()) return fail(model.status());
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!logits_out.empty()) {
    std::vector<std::vector<int32_t>> lp = id_prompts;
    for (const std::string& p : prompts) {
      auto ids = (*model)->encode_prompt(p);
      if (!ids.ok()) return fail(ids.status());
      lp.push_back(*ids);
    }
    auto rows = (*model)->last_logits(lp);
    if (!rows.ok()) return fail(rows.status());
    const int64_t vocab = rows->empty() ? 0 : static_cast<int64_t>(rows->front().size());
    auto t = HostTensor::zeros("logits", DataType::kFloat32, {static_cast<int64_t>(rows->size()), vocab});
    if (!t.ok()) return fail(t.status());
    for (size_t r = 0; r < rows->size(); ++r)
      std::memcpy(t->data.data() + r * static_cast<size_t>(vocab) * sizeof(float), (*rows)[r].data(),
                  static_cast<size_t>(vocab) * sizeof(float));
    Status saved = save_npy(logits_out, *t);
    if (!saved.ok()) return fail(saved);
  }
  GenerationStats st;
  auto results = id_prompts.empty() ? (*model)->generate(prompts, gp, &st) : (*model)->generate_ids(id_prompts, gp, &st);
  if (!results.ok()) return fail(results.status());
  if (!json_out.empty()) {
    nlohmann::json j;
    j["results"] = nlohmann::json::array();
    for (const GenerationResult& g : *results)
      j["results"].push_back({{"prompt_ids", g.prompt_ids}, {"token_ids", g.token_ids},
                              {"finish_reason", g.finish_reason}, {"text", g.text}});
    j["stats"] = {{"seconds", st.seconds}, {"steps", st.steps}, {"graph_steps", st.graph_steps},
                  {"prompt_tokens", st.prompt_tokens}, {"generated_tokens", st.generated_tokens},
                  {"warmup_seconds", st.warmup_seconds}};
    Status w = write_file(json_out, j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
    if (!w.ok()) return fail(w);
  }
  for (size_t r = 0; r < results->size(); ++r) {
    const GenerationResult& g = (*results)[r];
    if (results->size() > 1) std::cout << "--- prompt " << r << " (" << g.finish_reason << ")\n";
    std::cout << g.text << "\n";
    if (print_ids) {
      std::cout << "prompt ids:";
      for (int32_t t : g.prompt_ids) std::cout << " " << t;
      std::cout << "\nids:";
      for (int32_t t : g.token_ids) std::cout << " " << t;
      std::cout << "\n";
    }
  }
  std::cerr << "model " << (*model)->describe() << "; loaded in " << load_s << " s; " << st.prompt_tokens
            << " prompt tokens, " << st.generated_tokens << " generated in " << st.seconds << " s ("
            << (st.seconds > 0 ? static_cast<double>(st.generated_tokens) / st.seconds : 0.0)
            << " tok/s, " << llm_precision_label(lo, (*model)->int4_weights()) << ", " << st.steps << " steps)\n";
  return 0;
}

}  // namespace ingot::tools
