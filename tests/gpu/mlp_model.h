// Copyright ingot authors. Apache-2.0.
//
// The small MLP the whole-engine GPU tests build through the public API, as ONNX bytes:
// probs = Softmax(Relu(x·W1 + b1)·W2 + b2), opset 17, weights drawn from N(0, 0.3) with `seed`.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "onnx/onnx.pb.h"

namespace ingot::gpu_test {

/// x: f32[batch, in] (batch < 0: the symbolic dim "N"), probs: f32[batch, out].
inline std::string mlp_onnx(int64_t batch, int64_t in, int64_t hidden, int64_t out, unsigned seed) {
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name("mlp");
  auto io = [batch](::onnx::ValueInfoProto* vi, const char* name, int64_t cols) {
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(::onnx::TensorProto::FLOAT);
    if (batch < 0)
      tt->mutable_shape()->add_dim()->set_dim_param("N");
    else
      tt->mutable_shape()->add_dim()->set_dim_value(batch);
    tt->mutable_shape()->add_dim()->set_dim_value(cols);
  };
  io(g->add_input(), "x", in);
  io(g->add_output(), "probs", out);
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, 0.3f);
  auto init = [&](const char* name, std::vector<int64_t> dims) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(::onnx::TensorProto::FLOAT);
    int64_t n = 1;
    for (int64_t d : dims) {
      t->add_dims(d);
      n *= d;
    }
    for (int64_t i = 0; i < n; ++i) t->add_float_data(nd(rng));
  };
  init("w1", {in, hidden});
  init("b1", {hidden});
  init("w2", {hidden, out});
  init("b2", {out});
  auto node = [&](const char* op, std::vector<const char*> ins, const char* o) {
    auto* n = g->add_node();
    n->set_op_type(op);
    for (const char* i : ins) n->add_input(i);
    n->add_output(o);
    return n;
  };
  node("MatMul", {"x", "w1"}, "h");
  node("Add", {"h", "b1"}, "hb");
  node("Relu", {"hb"}, "hr");
  node("MatMul", {"hr", "w2"}, "o");
  node("Add", {"o", "b2"}, "ob");
  auto* sm = node("Softmax", {"ob"}, "probs");
  auto* axis = sm->add_attribute();
  axis->set_name("axis");
  axis->set_type(::onnx::AttributeProto::INT);
  axis->set_i(-1);
  return m.SerializeAsString();
}

}  // namespace ingot::gpu_test
