// Copyright ingot authors. Apache-2.0.
#include "server/openai_server.h"

#include <httplib.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>
#include <vector>

namespace ingot::server {

namespace {

using nlohmann::json;

// JSON text that never throws: a string that is not valid UTF-8 (a model's bytes, a client's)
// gets U+FFFD where nlohmann's default would throw from inside an HTTP handler.
std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

using Clock = std::chrono::steady_clock;

// A request's events, filled on the engine's thread, read by an HTTP worker (which may have
// dropped it: a client that went away).
struct Pending {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<StreamEvent> events;
  int64_t id = -1;
};

// A request's times, owned by its engine callback (engine thread only), so that the metrics see
// every request end, also one whose client went away and whose Pending is gone.
struct RequestTimes {
  Clock::time_point submitted, first;  ///< when queued, when its first event came
  bool any = false;
};

// vLLM's serving metrics under ingot_llm_ names, observed on the engine's thread per request.
struct LlmMetrics {
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  prometheus::Family<prometheus::Gauge>& running =
      prometheus::BuildGauge().Name("ingot_llm_num_requests_running").Help("Sequences in the running batch").Register(*registry);
  prometheus::Family<prometheus::Gauge>& waiting =
      prometheus::BuildGauge().Name("ingot_llm_num_requests_waiting").Help("Requests waiting to start").Register(*registry);
  prometheus::Family<prometheus::Gauge>& kv =
      prometheus::BuildGauge().Name("ingot_llm_kv_cache_blocks").Help("KV cache blocks, by state (in_use, total)").Register(*registry);
  prometheus::Family<prometheus::Counter>& prompt_tokens =
      prometheus::BuildCounter().Name("ingot_llm_prompt_tokens_total").Help("Prompt tokens of finished requests").Register(*registry);
  prometheus::Family<prometheus::Counter>& generation_tokens =
      prometheus::BuildCounter().Name("ingot_llm_generation_tokens_total").Help("Tokens generated for finished requests").Register(*registry);
  prometheus::Family<prometheus::Counter>& finished =
      prometheus::BuildCounter().Name("ingot_llm_request_success_total").Help("Finished requests, by finish_reason").Register(*registry);
  prometheus::Family<prometheus::Counter>& refused =
      prometheus::BuildCounter().Name("ingot_llm_request_refused_total").Help("Requests refused with 503 (queue full)").Register(*registry);
  prometheus::Family<prometheus::Histogram>& ttft =
      prometheus::BuildHistogram().Name("ingot_llm_time_to_first_token_seconds").Help("Queued to first token").Register(*registry);
  prometheus::Family<prometheus::Histogram>& tpot =
      prometheus::BuildHistogram().Name("ingot_llm_time_per_output_token_seconds").Help("Mean time between output tokens, per request").Register(*registry);
  prometheus::Family<prometheus::Histogram>& e2e =
      prometheus::BuildHistogram().Name("ingot_llm_e2e_request_latency_seconds").Help("Queued to finished").Register(*registry);
  prometheus::Histogram& ttft_h = ttft.Add({}, buckets());
  prometheus::Histogram& tpot_h = tpot.Add({}, buckets());
  prometheus::Histogram& e2e_h = e2e.Add({}, buckets());
  prometheus::Counter& prompt_c = prompt_tokens.Add({});
  prometheus::Counter& generation_c = generation_tokens.Add({});
  prometheus::Counter& refused_c = refused.Add({});

  static prometheus::Histogram::BucketBoundaries buckets() {
    return {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0};
  }
  void observe(const RequestTimes& p, const StreamEvent& ev, Clock::time_point now) {
    if (!p.any) ttft_h.Observe(std::chrono::duration<double>(now - p.submitted).count());
    if (!ev.finished) return;
    const Clock::time_point first = p.any ? p.first : now;
    e2e_h.Observe(std::chrono::duration<double>(now - p.submitted).count());
    if (ev.completion_tokens > 1)
      tpot_h.Observe(std::chrono::duration<double>(now - first).count() / static_cast<double>(ev.completion_tokens - 1));
    prompt_c.Increment(static_cast<double>(ev.prompt_tokens));
    generation_c.Increment(static_cast<double>(ev.completion_tokens));
    finished.Add({{"finish_reason", ev.finish_reason}}).Increment();
  }
};

struct HttpError {
  int status;
  std::string message;
  std::string type;
};

HttpError bad(const std::string& m) { return {400, m, "invalid_request_error"}; }

void send_error(httplib::Response& res, const HttpError& e) {
  res.status = e.status;
  json body = {{"error", {{"message", e.message}, {"type", e.type}, {"param", nullptr}, {"code", e.status}}}};
  res.set_content(dump(body), "application/json");
}

std::string random_id(const char* prefix) {
  static std::mutex mu;
  static std::mt19937_64 rng(std::random_device{}());
  std::lock_guard<std::mutex> lock(mu);
  char buf[40];
  std::snprintf(buf, sizeof buf, "%s-%016llx", prefix, static_cast<unsigned long long>(rng()));
  return buf;
}

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// OpenAI's finish reasons are "stop" and "length"; the model's own length limit is a length.
json finish_reason_json(const std::string& r) {
  if (r == "model_length") return "length";
  if (r.empty()) return nullptr;
  return r;
}

// The sampling parameters every endpoint takes; a HttpError for what is malformed or not taken.
struct Parsed {
  GenerationParams params;
  bool stream = false;
  bool include_usage = false;
};

HttpError parse_common(const json& body, const std::string& served, int64_t default_max_tokens, Parsed* out) {
  if (!body.is_object()) return bad("the request body must be a JSON object");
  if (body.contains("model") && !body["model"].is_null()) {
    if (!body["model"].is_string()) return bad("'model' must be a string");
    if (body["model"].get<std::string>() != served)
      return {404, "The model `" + body["model"].get<std::string>() + "` does not exist.", "NotFoundError"};
  }
  GenerationParams& p = out->params;
  p.max_tokens = default_max_tokens;
  p.temperature = 1.0;
  auto number = [&](const char* key, double lo, double hi, double* v) -> bool {
    if (!body.contains(key) || body[key].is_null()) return true;
    if (!body[key].is_number()) return false;
    *v = body[key].get<double>();
    return *v >= lo && *v <= hi;
  };
  double d = 0;
  for (const char* key : {"max_tokens", "max_completion_tokens"}) {
    if (!body.contains(key) || body[key].is_null()) continue;
    if (!body[key].is_number_integer() || body[key].get<int64_t>() < 1)
      return bad(std::string("'") + key + "' must be an integer >= 1");
    p.max_tokens = body[key].get<int64_t>();
  }
  if (!number("temperature", 0, 2, &p.temperature)) return bad("'temperature' must be a number in [0, 2]");
  if (!number("top_p", 1e-9, 1, &p.top_p)) return bad("'top_p' must be a number in (0, 1]");
  d = 0;
  if (!number("top_k", -1, 1e9, &d) || d != static_cast<double>(static_cast<int64_t>(d)))
    return bad("'top_k' must be an integer >= -1");
  p.top_k = d < 0 ? 0 : static_cast<int64_t>(d);
  if (body.contains("seed") && !body["seed"].is_null()) {
    if (!body["seed"].is_number_integer()) return bad("'seed' must be an integer");
    p.has_seed = true;
    p.seed = static_cast<uint64_t>(body["seed"].get<int64_t>());
  }
  if (body.contains("ignore_eos") && !body["ignore_eos"].is_null()) {
    if (!body["ignore_eos"].is_boolean()) return bad("'ignore_eos' must be a boolean");
    p.ignore_eos = body["ignore_eos"].get<bool>();
  }
  if (body.contains("stop") && !body["stop"].is_null()) {
    const json& s = body["stop"];
    if (s.is_string()) {
      p.stop.push_back(s.get<std::string>());
    } else if (s.is_array() && s.size() <= 4) {
      for (const json& e : s) {
        if (!e.is_string()) return bad("'stop' must be a string or an array of at most 4 strings");
        p.stop.push_back(e.get<std::string>());
      }
    } else {
      return bad("'stop' must be a string or an array of at most 4 strings");
    }
    for (const std::string& st : p.stop)
      if (st.empty()) return bad("'stop' strings must not be empty");
  }
  if (body.contains("n") && !body["n"].is_null() && !(body["n"].is_number_integer() && body["n"].get<int64_t>() == 1))
    return bad("only n = 1 is supported");
  if (body.contains("best_of") && !body["best_of"].is_null() &&
      !(body["best_of"].is_number_integer() && body["best_of"].get<int64_t>() == 1))
    return bad("only best_of = 1 is supported");
  for (const char* key : {"logprobs", "top_logprobs", "echo", "suffix", "tools", "functions", "logit_bias"}) {
    if (!body.contains(key) || body[key].is_null()) continue;
    if (body[key].is_boolean() && !body[key].get<bool>()) continue;
    return bad(std::string("'") + key + "' is not supported");
  }
  for (const char* key : {"presence_penalty", "frequency_penalty"})
    if (body.contains(key) && !body[key].is_null() && !(body[key].is_number() && body[key].get<double>() == 0))
      return bad(std::string("'") + key + "' is not supported (only 0)");
  if (body.contains("stream") && !body["stream"].is_null()) {
    if (!body["stream"].is_boolean()) return bad("'stream' must be a boolean");
    out->stream = body["stream"].get<bool>();
  }
  if (body.contains("stream_options") && body["stream_options"].is_object()) {
    const json& so = body["stream_options"];
    out->include_usage = so.contains("include_usage") && so["include_usage"].is_boolean() && so["include_usage"].get<bool>();
  }
  return {0, "", ""};
}

}  // namespace

struct OpenAiServer::Impl {
  std::shared_ptr<LlmEngine> engine;
  OpenAiServerOptions options;
  std::shared_ptr<LlmMetrics> metrics = std::make_shared<LlmMetrics>();
  httplib::Server http;
  std::thread thread;
  int port = 0;

  /// Submits one prompt; the Pending gets its events. A HttpError when the engine refuses it.
  HttpError submit(std::vector<int32_t> ids, const GenerationParams& p, const std::shared_ptr<Pending>& pending) {
    std::weak_ptr<Pending> weak = pending;
    std::shared_ptr<LlmMetrics> m = metrics;
    auto times = std::make_shared<RequestTimes>();
    times->submitted = Clock::now();
    auto id = engine->submit(std::move(ids), p, [weak, m, times](const StreamEvent& ev) {
      const Clock::time_point now = Clock::now();
      m->observe(*times, ev, now);
      if (!times->any) times->first = now, times->any = true;
      if (auto pp = weak.lock()) {
        std::lock_guard<std::mutex> lock(pp->mu);
        pp->events.push_back(ev);
        pp->cv.notify_all();
      }
    });
    if (!id.ok()) {
      if (id.status().code() == StatusCode::kUnavailable) {
        metrics->refused_c.Increment();
        return {503, "the server is overloaded: " + id.status().message() + "; retry later", "ServiceUnavailableError"};
      }
      return bad(id.status().message());
    }
    pending->id = *id;
    return {0, "", ""};
  }

  void handle(const httplib::Request& req, httplib::Response& res, bool chat);
};

OpenAiServer::OpenAiServer() : impl_(std::make_unique<Impl>()) {}

OpenAiServer::~OpenAiServer() {
  stop();
  if (impl_->thread.joinable()) impl_->thread.join();
}

Result<std::unique_ptr<OpenAiServer>> OpenAiServer::create(std::shared_ptr<LlmEngine> engine,
                                                           OpenAiServerOptions options) {
  if (!engine) return invalid_argument("OpenAiServer: no engine");
  if (options.model_name.empty()) return invalid_argument("OpenAiServer: no model name");
  if (options.threads < 1) return invalid_argument("OpenAiServer: threads must be >= 1");
  if (options.max_request_bytes < 1) return invalid_argument("OpenAiServer: max_request_bytes must be >= 1");
  std::unique_ptr<OpenAiServer> s(new OpenAiServer());
  Impl* impl = s->impl_.get();
  impl->engine = std::move(engine);
  impl->options = options;
  const int threads = options.threads;
  impl->http.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  // httplib answers a body over the limit with 413 before reading it; the error handler gives that
  // (and a 404 for an unknown path) OpenAI's error object.
  impl->http.set_payload_max_length(options.max_request_bytes);
  impl->http.set_error_handler(
      httplib::Server::HandlerWithResponse([impl](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        if (res.status == 413)
          send_error(res, {413,
                           "request body of " + req.get_header_value("Content-Length") + " bytes exceeds the limit of " +
                               std::to_string(impl->options.max_request_bytes) + " bytes (--max-request-bytes)",
                           "invalid_request_error"});
        else if (res.status == 404)
          send_error(res, {404, "no endpoint " + req.method + " " + req.path, "NotFoundError"});
        else
          send_error(res, {res.status, "HTTP error " + std::to_string(res.status), "invalid_request_error"});
        return httplib::Server::HandlerResponse::Handled;
      }));
  impl->http.Get("/health", [](const httplib::Request&, httplib::Response& res) { res.set_content("", "text/plain"); });
  impl->http.Get("/v1/models", [impl](const httplib::Request&, httplib::Response& res) {
    json m = {{"id", impl->options.model_name}, {"object", "model"}, {"created", unix_now()}, {"owned_by", "ingot"}};
    res.set_content(dump(json{{"object", "list"}, {"data", json::array({m})}}), "application/json");
  });
  impl->http.Get("/metrics", [impl](const httplib::Request&, httplib::Response& res) {
    const EngineStats st = impl->engine->stats();
    LlmMetrics& m = *impl->metrics;
    m.running.Add({}).Set(static_cast<double>(st.running));
    m.waiting.Add({}).Set(static_cast<double>(st.waiting));
    m.kv.Add({{"state", "in_use"}}).Set(static_cast<double>(st.kv_blocks_total - st.kv_blocks_free));
    m.kv.Add({{"state", "total"}}).Set(static_cast<double>(st.kv_blocks_total));
    prometheus::TextSerializer serializer;
    res.set_content(serializer.Serialize(m.registry->Collect()), "text/plain; version=0.0.4");
  });
  // A field of the wrong JSON type that a check above missed (json::value and get throw on
  // those) is a bad request, not a dropped connection.
  auto guarded = [impl](bool chat) {
    return [impl, chat](const httplib::Request& req, httplib::Response& res) {
      try {
        impl->handle(req, res, chat);
      } catch (const nlohmann::json::exception& e) {
        send_error(res, bad(std::string("malformed request: ") + e.what()));
      }
    };
  };
  impl->http.Post("/v1/completions", guarded(false));
  impl->http.Post("/v1/chat/completions", guarded(true));
  return s;
}

void OpenAiServer::Impl::handle(const httplib::Request& req, httplib::Response& res, bool chat) {
  json body = json::parse(req.body, nullptr, false);
  if (body.is_discarded()) return send_error(res, bad("the request body is not valid JSON"));
  Parsed parsed;
  HttpError e = parse_common(body, options.model_name, chat ? options.chat_max_tokens : 16, &parsed);
  if (e.status) return send_error(res, e);

  // The prompts, as token ids.
  std::vector<std::vector<int32_t>> prompts;
  const LlmModel& model = engine->model();
  if (chat) {
    if (!body.contains("messages") || !body["messages"].is_array() || body["messages"].empty())
      return send_error(res, bad("'messages' must be a non-empty array"));
    std::vector<ChatMessage> msgs;
    for (const json& m : body["messages"]) {
      if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
        return send_error(res, bad("each message needs a string 'role'"));
      std::string content;
      if (m.contains("content") && m["content"].is_string()) {
        content = m["content"].get<std::string>();
      } else if (m.contains("content") && m["content"].is_array()) {  // [{"type": "text", "text": ...}]
        for (const json& part : m["content"]) {
          if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string())
            return send_error(res, bad("only text content parts are supported"));
          content += part["text"].get<std::string>();
        }
      } else {
        return send_error(res, bad("each message needs 'content' (a string or text parts)"));
      }
      msgs.push_back({m["role"].get<std::string>(), content});
    }
    auto ids = model.encode_chat(msgs);
    if (!ids.ok()) return send_error(res, bad(ids.status().message()));
    prompts.push_back(std::move(*ids));
  } else {
    if (!body.contains("prompt")) return send_error(res, bad("'prompt' is required"));
    const json& p = body["prompt"];
    auto encode = [&](const std::string& text) -> bool {
      auto ids = model.encode_prompt(text);
      if (!ids.ok()) return false;
      prompts.push_back(std::move(*ids));
      return true;
    };
    auto token_list = [&](const json& a) -> bool {
      std::vector<int32_t> ids;
      for (const json& t : a) {
        if (!t.is_number_integer()) return false;
        const int64_t v = t.get<int64_t>();
        if (v < 0 || v > INT32_MAX) return false;
        ids.push_back(static_cast<int32_t>(v));
      }
      prompts.push_back(std::move(ids));
      return true;
    };
    bool ok = true;
    if (p.is_string()) {
      ok = encode(p.get<std::string>());
    } else if (p.is_array() && !p.empty() && p[0].is_number_integer()) {
      ok = token_list(p);
    } else if (p.is_array() && p.size() > 64) {
      return send_error(res, bad("at most 64 prompts per request"));
    } else if (p.is_array() && !p.empty()) {
      for (const json& x : p) {
        if (x.is_string()) ok = ok && encode(x.get<std::string>());
        else if (x.is_array() && !x.empty()) ok = ok && token_list(x);
        else ok = false;
      }
    } else {
      ok = false;
    }
    if (!ok) return send_error(res, bad("'prompt' must be a string, an array of strings, or token ids"));
  }

  // Submit every prompt (one choice each); refuse the request whole if one is refused.
  std::vector<std::shared_ptr<Pending>> pending;
  for (std::vector<int32_t>& ids : prompts) {
    auto pp = std::make_shared<Pending>();
    HttpError se = submit(std::move(ids), parsed.params, pp);
    if (se.status) {
      for (auto& q : pending) engine->abort(q->id);
      return send_error(res, se);
    }
    pending.push_back(pp);
  }
  const std::string id = random_id(chat ? "chatcmpl" : "cmpl");
  const int64_t created = unix_now();
  const std::string object = chat ? "chat.completion" : "text_completion";

  if (!parsed.stream) {
    json choices = json::array();
    int64_t prompt_tokens = 0, completion_tokens = 0;
    for (size_t i = 0; i < pending.size(); ++i) {
      Pending& p = *pending[i];
      std::string text, reason, error;
      for (bool done = false; !done;) {
        std::unique_lock<std::mutex> lock(p.mu);
        p.cv.wait(lock, [&] { return !p.events.empty(); });
        while (!p.events.empty()) {
          StreamEvent ev = std::move(p.events.front());
          p.events.pop_front();
          text += ev.text;
          if (ev.finished) {
            done = true;
            reason = ev.finish_reason;
            error = ev.error;
            prompt_tokens += ev.prompt_tokens;
            completion_tokens += ev.completion_tokens;
          }
        }
      }
      if (reason == "error") {
        for (auto& q : pending) engine->abort(q->id);
        return send_error(res, {500, "generation failed: " + error, "InternalServerError"});
      }
      json c = {{"index", i}, {"finish_reason", finish_reason_json(reason)}};
      if (chat) c["message"] = {{"role", "assistant"}, {"content", text}};
      else c["text"] = text, c["logprobs"] = nullptr;
      choices.push_back(c);
    }
    json out = {{"id", id},
                {"object", object},
                {"created", created},
                {"model", options.model_name},
                {"choices", choices},
                {"usage",
                 {{"prompt_tokens", prompt_tokens},
                  {"completion_tokens", completion_tokens},
                  {"total_tokens", prompt_tokens + completion_tokens}}}};
    res.set_content(dump(out), "application/json");
    return;
  }

  // Streaming: server-sent events, one chunk per piece of text, in the order pieces arrive.
  struct StreamState {
    std::vector<std::shared_ptr<Pending>> pending;
    std::vector<bool> finished;
    bool role_sent = false, done = false;
    int64_t prompt_tokens = 0, completion_tokens = 0;
  };
  auto st = std::make_shared<StreamState>();
  st->pending = pending;
  st->finished.assign(pending.size(), false);
  const std::string chunk_object = chat ? "chat.completion.chunk" : "text_completion";
  const std::string model_name = options.model_name;
  const bool include_usage = parsed.include_usage;
  std::shared_ptr<LlmEngine> eng = engine;
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [st, id, created, chunk_object, model_name, chat, include_usage](size_t, httplib::DataSink& sink) {
        auto send = [&](const json& j) {
          const std::string line = "data: " + dump(j) + "\n\n";
          return sink.write(line.data(), line.size());
        };
        auto chunk = [&](size_t index, const json& piece, const json& reason) {
          json c = {{"index", index}, {"finish_reason", reason}};
          if (chat) c["delta"] = piece;
          else c["text"] = piece, c["logprobs"] = nullptr;
          return json{{"id", id}, {"object", chunk_object}, {"created", created}, {"model", model_name},
                      {"choices", json::array({c})}};
        };
        if (chat && !st->role_sent) {
          st->role_sent = true;
          for (size_t i = 0; i < st->pending.size(); ++i)
            if (!send(chunk(i, {{"role", "assistant"}, {"content", ""}}, nullptr))) return false;
        }
        // Wait for any request's events (poll the requests in turn, a short wait each).
        bool progressed = false;
        for (size_t i = 0; i < st->pending.size(); ++i) {
          if (st->finished[i]) continue;
          Pending& p = *st->pending[i];
          std::deque<StreamEvent> evs;
          {
            std::unique_lock<std::mutex> lock(p.mu);
            p.cv.wait_for(lock, std::chrono::milliseconds(20), [&] { return !p.events.empty(); });
            evs.swap(p.events);
          }
          for (StreamEvent& ev : evs) {
            progressed = true;
            if (!ev.text.empty() && !send(chunk(i, chat ? json{{"content", ev.text}} : json(ev.text), nullptr)))
              return false;
            if (!ev.finished) continue;
            st->finished[i] = true;
            st->prompt_tokens += ev.prompt_tokens;
            st->completion_tokens += ev.completion_tokens;
            if (ev.finish_reason == "error") {
              json err = {{"error", {{"message", "generation failed: " + ev.error}, {"type", "InternalServerError"},
                                     {"code", 500}}}};
              if (!send(err)) return false;
            }
            if (!send(chunk(i, chat ? json::object() : json(""), finish_reason_json(ev.finish_reason)))) return false;
          }
        }
        (void)progressed;
        bool all = true;
        for (bool f : st->finished) all = all && f;
        if (!all) return true;  // called again
        if (include_usage) {
          json u = {{"id", id},
                    {"object", chunk_object},
                    {"created", created},
                    {"model", model_name},
                    {"choices", json::array()},
                    {"usage",
                     {{"prompt_tokens", st->prompt_tokens},
                      {"completion_tokens", st->completion_tokens},
                      {"total_tokens", st->prompt_tokens + st->completion_tokens}}}};
          if (!send(u)) return false;
        }
        const std::string end = "data: [DONE]\n\n";
        if (!sink.write(end.data(), end.size())) return false;
        st->done = true;
        sink.done();
        return true;
      },
      [st, eng](bool) {
        // The stream ended (done, or the client went away): abort whatever still runs.
        for (size_t i = 0; i < st->pending.size(); ++i)
          if (!st->finished[i]) eng->abort(st->pending[i]->id);
      });
}

Status OpenAiServer::start() {
  Impl* impl = impl_.get();
  if (impl->thread.joinable()) return Status::Ok();  // serving already
  if (impl->options.port == 0) {
    impl->port = impl->http.bind_to_any_port(impl->options.host);
    if (impl->port <= 0) return make_status(StatusCode::kIoError, "cannot bind to ", impl->options.host);
  } else {
    if (!impl->http.bind_to_port(impl->options.host.c_str(), impl->options.port))
      return make_status(StatusCode::kIoError, "cannot bind to ", impl->options.host, ":", impl->options.port);
    impl->port = impl->options.port;
  }
  impl->thread = std::thread([impl] { impl->http.listen_after_bind(); });
  return Status::Ok();
}

Status OpenAiServer::serve_forever() {
  INGOT_RETURN_IF_ERROR(start());  // a no-op when start() ran
  if (impl_->thread.joinable()) impl_->thread.join();
  return Status::Ok();
}

void OpenAiServer::stop() { impl_->http.stop(); }

int OpenAiServer::port() const { return impl_->port; }

}  // namespace ingot::server
