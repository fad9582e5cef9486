// Copyright ingot authors. Apache-2.0.
//
// `ingot serve MODEL.gguf`: an OpenAI-compatible server (/v1/completions, /v1/chat/completions,
// /v1/models) over the LLM engine loop, as `vllm serve MODEL` is. Runs until SIGINT/SIGTERM.
#include "serve_llm_command.h"

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>

#include "ingot/llm.h"
#include "options.h"
#include "server/openai_server.h"

namespace ingot::tools {

namespace {

server::OpenAiServer* g_server = nullptr;

void on_signal(int) {
  if (g_server) g_server->stop();
}

void serve_llm_help() {
  std::cout << "usage: ingot serve MODEL.gguf|HF_FOLDER [options]\n\n"
               "Serves a Llama-family model (GGUF, or a Hugging Face folder) with an OpenAI-compatible API (as `vllm serve`):\n"
               "GET /v1/models, POST /v1/completions, POST /v1/chat/completions (ChatML template), GET /health;\n"
               "streaming with \"stream\": true. Continuous batching, chunked prefill and a paged KV cache\n"
               "with prefix caching, on the CPU reference decoder or the GPU decoder (--backend cuda).\n"
               "  --backend cpu|cuda           the decoder (default cpu)\n"
               "  --dtype fp16|bf16            cuda: weights, activations and KV cache (default fp16)\n"
               "  --quantization fp8           cuda: fp8 (e4m3) projection weights and activations (Ada/Hopper)\n"
               "  --quantization int4          4-bit projection weights (W4A16; a GGUF's Q4 blocks as they are)\n"
               "  --quantization none          a 4-bit checkpoint's values as --dtype weights (unset: a checkpoint\n"
               "                               stored in 4 bits throughout runs as int4)\n"
               "  --kv-cache-dtype fp8         cuda: the KV cache in float8 e4m3 (scales 1)\n"
               "  --host ADDR                  address to listen on (default 127.0.0.1)\n"
               "  --port N                     port (default 8000; 0: any free port, printed)\n"
               "  --served-model-name NAME     the model name clients send (default: the file's name)\n"
               "  --kv-blocks N                KV cache blocks of 16 positions (default 512)\n"
               "  --max-num-seqs N             sequences in one step (default 32)\n"
               "  --max-num-batched-tokens N   tokens computed in one step (default 256)\n"
               "  --max-queued N               requests waiting to start before 503s (default 64)\n"
               "  --chat-max-tokens N          a chat request's max_tokens when it gives none (default 256)\n"
               "  --max-request-bytes N        larger request bodies get 413 (default 16777216)\n";
}

}  // namespace

bool is_llm_serve(const std::vector<std::string>& args) {
  for (const std::string& a : args) {
    if (a.empty() || a[0] == '-') continue;
    std::error_code ec;
    return (a.size() > 5 && a.compare(a.size() - 5, 5, ".gguf") == 0) ||
           std::filesystem::exists(std::filesystem::path(a) / "config.json", ec);
  }
  return false;
}

int serve_llm_command(const std::vector<std::string>& args) {
  std::string path;
  server::OpenAiServerOptions so;
  EngineOptions eo;
  LlmLoadOptions lo;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    std::string v;
    auto value = [&]() {
      if (i + 1 >= args.size()) {
        std::cerr << "ingot serve: " << a << " needs a value\n";
        return false;
      }
      v = args[++i];
      return true;
    };
    long long n = 0;
    auto as_int = [&](long long lo, long long hi) { return parse_int_arg("ingot serve", a, v, lo, hi, n); };
    if (a == "-h" || a == "--help") {
      serve_llm_help();
      return 0;
    } else if (a == "--backend" || a == "--dtype" || a == "--quantization" || a == "--kv-cache-dtype") {
      if (!value()) return 2;
      std::string err;
      if (!parse_llm_load_flag(a, v, lo, err)) {
        std::cerr << "ingot serve: " << err << "\n";
        return 2;
      }
    } else if (a == "--host") {
      if (!value()) return 2;
      so.host = v;
    } else if (a == "--port") {
      if (!value() || !as_int(0, 65535)) return 2;
      so.port = static_cast<int>(n);
    } else if (a == "--served-model-name") {
      if (!value()) return 2;
      so.model_name = v;
    } else if (a == "--kv-blocks") {
      if (!value() || !as_int(1, 1 << 24)) return 2;
      eo.kv_blocks = n;
    } else if (a == "--max-num-seqs") {
      if (!value() || !as_int(1, 1 << 16)) return 2;
      eo.max_num_seqs = n;
    } else if (a == "--max-num-batched-tokens") {
      if (!value() || !as_int(1, 1 << 24)) return 2;
      eo.max_num_batched_tokens = n;
    } else if (a == "--max-queued") {
      if (!value() || !as_int(1, 1 << 20)) return 2;
      eo.max_queued = n;
    } else if (a == "--chat-max-tokens") {
      if (!value() || !as_int(1, 1 << 20)) return 2;
      so.chat_max_tokens = n;
    } else if (a == "--max-request-bytes") {
      if (!value() || !as_int(1, int64_t{1} << 40)) return 2;
      so.max_request_bytes = static_cast<size_t>(n);
    } else if (!a.empty() && a[0] != '-' && path.empty()) {
      path = a;
    } else {
      std::cerr << "ingot serve: unknown option '" << a << "' (ingot serve MODEL.gguf --help)\n";
      return 2;
    }
  }
  if (so.model_name.empty()) {  // the file's name without .gguf, or the folder's name
    std::string p = path;
    while (p.size() > 1 && p.back() == '/') p.pop_back();
    const size_t slash = p.rfind('/');
    so.model_name = p.substr(slash == std::string::npos ? 0 : slash + 1);
    if (so.model_name.size() > 5 && so.model_name.compare(so.model_name.size() - 5, 5, ".gguf") == 0)
      so.model_name.resize(so.model_name.size() - 5);
  }
  lo.kv_blocks = eo.kv_blocks;
  auto model = LlmModel::load(path, lo);
  if (!model.ok()) {
    std::cerr << "ingot serve: " << model.status().to_string() << "\n";
    return 1;
  }
  std::shared_ptr<LlmModel> shared(std::move(*model));
  auto engine = LlmEngine::start(shared, eo);
  if (!engine.ok()) {
    std::cerr << "ingot serve: " << engine.status().to_string() << "\n";
    return 1;
  }
  auto srv = server::OpenAiServer::create(std::shared_ptr<LlmEngine>(std::move(*engine)), so);
  if (!srv.ok()) {
    std::cerr << "ingot serve: " << srv.status().to_string() << "\n";
    return 1;
  }
  Status st = (*srv)->start();
  if (!st.ok()) {
    std::cerr << "ingot serve: " << st.to_string() << "\n";
    return 1;
  }
  std::cout << "ingot serve: " << so.model_name << " (" << shared->describe() << ", "
            << llm_precision_label(lo, shared->int4_weights()) << ") on http://" << so.host << ":" << (*srv)->port()
            << "/v1 (OpenAI API)" << std::endl;
  g_server = srv->get();
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  st = (*srv)->serve_forever();
  g_server = nullptr;
  return st.ok() ? 0 : 1;
}

}  // namespace ingot::tools
