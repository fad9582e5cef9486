// Copyright ingot authors. Apache-2.0.
//
// Attention family: symbolic shape inference, error cases and small hand-computed values
// for behaviour the ONNX node suite covers thinly.
#include <gtest/gtest.h>

#include <cmath>

#include "backend/cpu/executor.h"
#include "ir/graph.h"
#include "ir/op_registry.h"

namespace ingot {
namespace {

using ir::Dim;
using ir::Shape;

Dim sym(const char* s) { return Dim::symbol(s); }

Tensor f64(Shape64 shape, std::vector<double> v) { return Tensor::from_vector(DataType::kFloat64, std::move(shape), v); }

// Runs a single node whose inputs are given concretely; returns its outputs.
Result<std::vector<Tensor>> run_one(const std::string& op, const std::vector<const Tensor*>& ins, size_t n_out,
                                    ir::Attributes attrs, int64_t opset, const std::string& domain = "") {
  static std::vector<std::unique_ptr<ir::Graph>> keep;  // nodes must outlive the run
  keep.push_back(std::make_unique<ir::Graph>());
  ir::Graph& g = *keep.back();
  g.set_opset_import(domain, opset);
  std::vector<ir::Value*> in_values, out_values;
  for (size_t i = 0; i < ins.size(); ++i)
    in_values.push_back(ins[i] ? g.add_input("in" + std::to_string(i), ins[i]->dtype(), Shape::from_concrete(ins[i]->shape()))
                               : nullptr);
  for (size_t i = 0; i < n_out; ++i) out_values.push_back(g.add_value("out" + std::to_string(i)));
  ir::Node* node = g.add_node(op, in_values, out_values, std::move(attrs), "n", domain);
  return cpu::run_node(*node, ins);
}

TEST(AttentionOps, Attention3DSymbolicInference) {
  ir::Graph g;
  g.set_opset_import("", 24);
  auto* q = g.add_input("q", DataType::kFloat32, Shape({sym("batch"), sym("seq"), 8}));
  auto* k = g.add_input("k", DataType::kFloat32, Shape({sym("batch"), sym("kv"), 4}));
  auto* v = g.add_input("v", DataType::kFloat32, Shape({sym("batch"), sym("kv"), 6}));
  auto* pk = g.add_input("pk", DataType::kFloat32, Shape({sym("batch"), 2, 5, 2}));
  auto* pv = g.add_input("pv", DataType::kFloat32, Shape({sym("batch"), 2, 5, 3}));
  auto* y = g.add_value("y");
  auto* prk = g.add_value("prk");
  auto* prv = g.add_value("prv");
  auto* qk = g.add_value("qk");
  ir::Attributes a;
  a.set_int("q_num_heads", 4);
  a.set_int("kv_num_heads", 2);
  ir::Node* n = g.add_node("Attention", {q, k, v, nullptr, pk, pv}, {y, prk, prv, qk}, a, "att");
  ASSERT_TRUE(ir::infer_node(*n).ok());
  // head size of V is 6 / 2 = 3, so Y's hidden size is 4 heads * 3.
  EXPECT_EQ(y->shape(), Shape({sym("batch"), sym("seq"), 12}));
  // total kv length = 5 (past) + symbolic kv -> unknown.
  EXPECT_EQ(prk->shape(), Shape({sym("batch"), 2, Dim::unknown(), 2}));
  EXPECT_EQ(prv->shape(), Shape({sym("batch"), 2, Dim::unknown(), 3}));
  EXPECT_EQ(qk->shape(), Shape({sym("batch"), 4, sym("seq"), Dim::unknown()}));
  EXPECT_EQ(y->dtype(), DataType::kFloat32);
}

TEST(AttentionOps, Attention4DInferenceAndHeadMismatch) {
  ir::Graph g;
  g.set_opset_import("", 23);
  auto* q = g.add_input("q", DataType::kFloat16, Shape({2, 6, sym("s"), 8}));
  auto* k = g.add_input("k", DataType::kFloat16, Shape({2, 3, 7, 8}));
  auto* v = g.add_input("v", DataType::kFloat16, Shape({2, 3, 7, 5}));
  auto* y = g.add_value("y");
  ir::Node* n = g.add_node("Attention", {q, k, v}, {y}, {}, "att");
  ASSERT_TRUE(ir::infer_node(*n).ok());
  EXPECT_EQ(y->shape(), Shape({2, 6, sym("s"), 5}));
  EXPECT_EQ(y->dtype(), DataType::kFloat16);

  auto* k4 = g.add_input("k4", DataType::kFloat16, Shape({2, 4, 7, 8}));
  auto* v4 = g.add_input("v4", DataType::kFloat16, Shape({2, 4, 7, 5}));
  auto* y2 = g.add_value("y2");
  ir::Node* bad = g.add_node("Attention", {q, k4, v4}, {y2}, {}, "bad");
  Status s = ir::infer_node(*bad);
  EXPECT_FALSE(s.ok());  // 6 query heads cannot share 4 kv heads
}

TEST(AttentionOps, Attention3DNeedsHeadCounts) {
  ir::Graph g;
  g.set_opset_import("", 23);
  auto* q = g.add_input("q", DataType::kFloat32, Shape({1, 2, 8}));
  auto* y = g.add_value("y");
  ir::Node* n = g.add_node("Attention", {q, q, q}, {y}, {}, "att");
  EXPECT_FALSE(ir::infer_node(*n).ok());
}

TEST(AttentionOps, AttentionValues) {
  // One query [1, 0], keys [1, 0] and [0, 0], values 1 and 0, scale 1:
  // scores [1, 0] -> weights [e/(e+1), 1/(e+1)] -> Y = e/(e+1).
  Tensor q = f64({1, 1, 1, 2}, {1, 0});
  Tensor k = f64({1, 1, 2, 2}, {1, 0, 0, 0});
  Tensor v = f64({1, 1, 2, 1}, {1, 0});
  ir::Attributes a;
  a.set_float("scale", 1.0f);
  auto r = run_one("Attention", {&q, &k, &v}, 1, a, 23);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const double e = std::exp(1.0);
  EXPECT_NEAR(r.value()[0].get_f64(0), e / (e + 1), 1e-12);

  // Causal with one query and no cache: only key 0 is visible -> Y = 1.
  a.set_int("is_causal", 1);
  r = run_one("Attention", {&q, &k, &v}, 1, a, 23);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_NEAR(r.value()[0].get_f64(0), 1.0, 1e-12);

  // An all-false boolean mask: the row is fully masked and yields 0, not NaN.
  Tensor mask = Tensor::from_vector(DataType::kBool, {2}, std::vector<uint8_t>{0, 0});
  ir::Attributes b;
  b.set_int("qk_matmul_output_mode", 3);
  r = run_one("Attention", {&q, &k, &v, &mask}, 4, b, 23);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value()[0].get_f64(0), 0.0);
  EXPECT_EQ(r.value()[3].get_f64(0), 0.0);
  EXPECT_EQ(r.value()[3].get_f64(1), 0.0);
}

TEST(AttentionOps, AttentionPastCacheConcat) {
  // past key/value hold one token, the new K/V one more: present has both, in order.
  Tensor q = f64({1, 1, 1, 1}, {0});  // zero query: uniform weights over the 2 keys
  Tensor k = f64({1, 1, 1, 1}, {5});
  Tensor v = f64({1, 1, 1, 1}, {4});
  Tensor pk = f64({1, 1, 1, 1}, {7});
  Tensor pv = f64({1, 1, 1, 1}, {2});
  auto r = run_one("Attention", {&q, &k, &v, nullptr, &pk, &pv}, 3, {}, 23);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_NEAR(r.value()[0].get_f64(0), 3.0, 1e-12);  // (2 + 4) / 2
  EXPECT_EQ(r.value()[1].shape(), (Shape64{1, 1, 2, 1}));
  EXPECT_EQ(r.value()[1].get_f64(0), 7.0);
  EXPECT_EQ(r.value()[1].get_f64(1), 5.0);
  EXPECT_EQ(r.value()[2].get_f64(0), 2.0);
  EXPECT_EQ(r.value()[2].get_f64(1), 4.0);
}

TEST(AttentionOps, RotaryEmbeddingQuarterTurn) {
  // cos = 0, sin = 1 rotates (x1, x2) = (1, 0) to (0, 1).
  Tensor x = Tensor::from_vector(DataType::kFloat32, {1, 1, 1, 2}, std::vector<float>{1, 0});
  Tensor cosc = Tensor::from_vector(DataType::kFloat32, {1, 1}, std::vector<float>{0});
  Tensor sinc = Tensor::from_vector(DataType::kFloat32, {1, 1}, std::vector<float>{1});
  Tensor pos = Tensor::from_vector(DataType::kInt64, {1, 1}, std::vector<int64_t>{0});
  auto r = run_one("RotaryEmbedding", {&x, &cosc, &sinc, &pos}, 1, {}, 23);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value()[0].get_f64(0), 0.0);
  EXPECT_EQ(r.value()[0].get_f64(1), 1.0);

  Tensor bad_pos = Tensor::from_vector(DataType::kInt64, {1, 1}, std::vector<int64_t>{3});
  r = run_one("RotaryEmbedding", {&x, &cosc, &sinc, &bad_pos}, 1, {}, 23);
  EXPECT_FALSE(r.ok());  // position id out of the cache's range
}

TEST(AttentionOps, SwiGLUValue) {
  Tensor a = f64({2}, {0, 1});
  Tensor b = f64({2}, {5, 2});
  auto r = run_one("SwiGLU", {&a, &b}, 1, {}, 28);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value()[0].get_f64(0), 0.0);
  EXPECT_NEAR(r.value()[0].get_f64(1), 2.0 / (1.0 + std::exp(-1.0)), 1e-12);  // 1 * sigmoid(1) * 2
}

TEST(AttentionOps, CausalConvWithStateValuesAndInference) {
  Tensor x = Tensor::from_vector(DataType::kFloat32, {1, 1, 3}, std::vector<float>{1, 2, 3});
  Tensor w = Tensor::from_vector(DataType::kFloat32, {1, 1, 2}, std::vector<float>{1, 1});
  auto r = run_one("CausalConvWithState", {&x, &w}, 2, {}, 27);
  ASSERT_TRUE(r.ok()) << r.status().message();
  // padded [0, 1, 2, 3] with kernel [1, 1] -> [1, 3, 5]; the carry is the last input, 3.
  EXPECT_EQ(r.value()[0].get_f64(0), 1.0);
  EXPECT_EQ(r.value()[0].get_f64(1), 3.0);
  EXPECT_EQ(r.value()[0].get_f64(2), 5.0);
  EXPECT_EQ(r.value()[1].shape(), (Shape64{1, 1, 1}));
  EXPECT_EQ(r.value()[1].get_f64(0), 3.0);

  ir::Graph g;
  g.set_opset_import("", 27);
  auto* xi = g.add_input("x", DataType::kFloat32, Shape({sym("b"), 4, sym("len")}));
  auto* wi = g.add_input("w", DataType::kFloat32, Shape({4, 1, 3}));
  auto* y = g.add_value("y");
  auto* st = g.add_value("st");
  ir::Node* n = g.add_node("CausalConvWithState", {xi, wi}, {y, st}, {}, "cc");
  ASSERT_TRUE(ir::infer_node(*n).ok());
  EXPECT_EQ(y->shape(), Shape({sym("b"), 4, sym("len")}));
  EXPECT_EQ(st->shape(), Shape({sym("b"), 4, 2}));
}

TEST(AttentionOps, LinearAttentionLinearRule) {
  // One head, d_k = d_v = 1, scale 1: S1 = 1*3 = 3 -> o1 = 1*3; S2 = 3 + 2*4 = 11 -> o2 = 11.
  Tensor q = f64({1, 2, 1}, {1, 1});
  Tensor k = f64({1, 2, 1}, {1, 2});
  Tensor v = f64({1, 2, 1}, {3, 4});
  ir::Attributes a;
  a.set_int("q_num_heads", 1);
  a.set_int("kv_num_heads", 1);
  a.set_float("scale", 1.0f);
  a.set_string("update_rule", "linear");
  // (f64 is outside the schema's types, but run_node does not check them and it keeps the
  // expected values exact.)
  auto r = run_one("LinearAttention", {&q, &k, &v}, 2, a, 27);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value()[0].get_f64(0), 3.0);
  EXPECT_EQ(r.value()[0].get_f64(1), 11.0);
  EXPECT_EQ(r.value()[1].get_f64(0), 11.0);

  // "gated" without a decay input is rejected.
  a.set_string("update_rule", "gated");
  r = run_one("LinearAttention", {&q, &k, &v}, 2, a, 27);
  EXPECT_FALSE(r.ok());
}

}  // namespace
}  // namespace ingot
