// Copyright ingot authors. Apache-2.0.
//
// What the calibration tests (tests/unit/calibration_backend_test.cc on the CPU backend,
// tests/gpu/cuda_calibration_test.cc on CUDA) share: two small models written as ONNX bytes with
// several quantizable layers, calibration batches, a Calibrator that hands them out and keeps the
// cache it is given, and the expected scales computed the way calibration worked before it ran
// on engines: the reference interpreter computes every value of each batch (run_all) and the
// named tensors go through quant::TensorCalibration and quant::threshold.
#pragma once

#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/status.h"
#include "ingot/builder.h"
#include "ingot/reference.h"
#include "onnx/onnx.pb.h"
#include "quant/calibration.h"

namespace ingot::calibration_test {

// A small ONNX graph written in code (opset 17): inputs and outputs with fixed or symbolic dims,
// sin-pattern fp32 initializers, nodes with int / ints attributes.
class OnnxWriter {
 public:
  OnnxWriter() {
    m_.set_ir_version(8);
    m_.add_opset_import()->set_version(17);
    g_ = m_.mutable_graph();
    g_->set_name("calibration_test");
  }
  /// dims: a number, or a symbol such as "N"; rank_known false leaves the shape out.
  void input(const std::string& name, const std::vector<std::string>& dims, bool rank_known = true) {
    io(g_->add_input(), name, dims, rank_known);
  }
  void output(const std::string& name, const std::vector<std::string>& dims) { io(g_->add_output(), name, dims, true); }
  void weight(const std::string& name, const std::vector<int64_t>& dims, float scale, float offset = 0.0f) {
    auto* t = g_->add_initializer();
    t->set_name(name);
    t->set_data_type(::onnx::TensorProto::FLOAT);
    int64_t n = 1;
    for (int64_t d : dims) {
      t->add_dims(d);
      n *= d;
    }
    for (int64_t i = 0; i < n; ++i) t->add_float_data(offset + scale * std::sin(0.7f * static_cast<float>(i) + 0.3f));
  }
  void int64_weight(const std::string& name, const std::vector<int64_t>& values) {
    auto* t = g_->add_initializer();
    t->set_name(name);
    t->set_data_type(::onnx::TensorProto::INT64);
    t->add_dims(static_cast<int64_t>(values.size()));
    for (int64_t v : values) t->add_int64_data(v);
  }
  ::onnx::NodeProto* node(const std::string& op, const std::vector<std::string>& in, const std::string& out,
                          const std::string& name = "") {
    auto* n = g_->add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (const std::string& i : in) n->add_input(i);
    n->add_output(out);
    return n;
  }
  static void ints(::onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  }
  static void integer(::onnx::NodeProto* n, const std::string& name, int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::INT);
    a->set_i(v);
  }
  std::string bytes() const { return m_.SerializeAsString(); }

 private:
  static void io(::onnx::ValueInfoProto* vi, const std::string& name, const std::vector<std::string>& dims,
                 bool rank_known) {
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(::onnx::TensorProto::FLOAT);
    if (!rank_known) return;
    auto* shape = tt->mutable_shape();
    for (const std::string& d : dims) {
      if (!d.empty() && d.find_first_not_of("0123456789") == std::string::npos)
        shape->add_dim()->set_dim_value(std::stoll(d));
      else
        shape->add_dim()->set_dim_param(d);
    }
  }
  ::onnx::ModelProto m_;
  ::onnx::GraphProto* g_ = nullptr;
};

/// x: f32[N, 3, 10, 10] -> conv1 (3x3, pad 1) -> relu1 = r1 -> conv2 -> BatchNormalization ->
/// relu2 -> add (+ r1) = s -> conv3 (1x1) -> relu3 -> MaxPool 2x2 -> GlobalAveragePool -> Flatten
/// = f -> fc (Gemm, transB) -> y: f32[N, 5]. Quantizable layers conv1, conv2, conv3, fc read x,
/// r1, s and f; the engine folds the BatchNormalization into conv2 and fuses bias and ReLU, so
/// its values differ from the interpreter's by rounding.
inline std::string conv_net_onnx() {
  OnnxWriter m;
  m.input("x", {"N", "3", "10", "10"});
  m.output("y", {"N", "5"});
  m.weight("w1", {8, 3, 3, 3}, 0.4f);
  m.weight("b1", {8}, 0.1f);
  m.weight("w2", {8, 8, 3, 3}, 0.2f);
  m.weight("b2", {8}, 0.05f);
  m.weight("bn_scale", {8}, 0.3f, 1.0f);
  m.weight("bn_bias", {8}, 0.2f);
  m.weight("bn_mean", {8}, 0.1f);
  m.weight("bn_var", {8}, 0.4f, 1.0f);
  m.weight("w3", {12, 8, 1, 1}, 0.5f);
  m.weight("b3", {12}, 0.1f);
  m.weight("wf", {5, 12}, 0.6f);
  m.weight("bf", {5}, 0.1f);
  OnnxWriter::ints(m.node("Conv", {"x", "w1", "b1"}, "c1", "conv1"), "pads", {1, 1, 1, 1});
  m.node("Relu", {"c1"}, "r1", "relu1");
  OnnxWriter::ints(m.node("Conv", {"r1", "w2", "b2"}, "c2", "conv2"), "pads", {1, 1, 1, 1});
  m.node("BatchNormalization", {"c2", "bn_scale", "bn_bias", "bn_mean", "bn_var"}, "n2", "bn2");
  m.node("Relu", {"n2"}, "r2", "relu2");
  m.node("Add", {"r1", "r2"}, "s", "add");
  m.node("Conv", {"s", "w3", "b3"}, "c3", "conv3");
  m.node("Relu", {"c3"}, "r3", "relu3");
  auto* pool = m.node("MaxPool", {"r3"}, "p3", "pool");
  OnnxWriter::ints(pool, "kernel_shape", {2, 2});
  OnnxWriter::ints(pool, "strides", {2, 2});
  m.node("GlobalAveragePool", {"p3"}, "g", "gap");
  m.node("Flatten", {"g"}, "f", "flatten");
  OnnxWriter::integer(m.node("Gemm", {"f", "wf", "bf"}, "y", "fc"), "transB", 1);
  return m.bytes();
}
inline const std::vector<std::string> kConvNetObserved = {"x", "r1", "s", "f"};

/// A self-attention block, as MiniLM's layers are: x: f32[N, S, 16] -> q, k, v projections
/// (MatMul by constants) -> q.k^T (k transposed) -> Softmax -> .v = o -> proj (MatMul) + bias ->
/// Relu = h -> Reshape [-1, 16] = hf -> fc (Gemm) -> y: f32[M, 6]. Quantizable: q/k/v/proj read
/// x and o, fc reads hf; the two products of activations (scores, context) stay in float, so
/// q, kt, p and v need no scale.
inline std::string attention_onnx() {
  OnnxWriter m;
  m.input("x", {"N", "S", "16"});
  m.output("y", {"M", "6"});
  m.weight("wq", {16, 16}, 0.3f);
  m.weight("wk", {16, 16}, 0.25f);
  m.weight("wv", {16, 16}, 0.35f);
  m.weight("wo", {16, 16}, 0.3f);
  m.weight("bo", {16}, 0.1f);
  m.weight("wf", {16, 6}, 0.4f);
  m.weight("bf", {6}, 0.05f);
  m.int64_weight("flat_shape", {-1, 16});
  m.node("MatMul", {"x", "wq"}, "q", "q_proj");
  m.node("MatMul", {"x", "wk"}, "k", "k_proj");
  m.node("MatMul", {"x", "wv"}, "v", "v_proj");
  OnnxWriter::ints(m.node("Transpose", {"k"}, "kt", "k_t"), "perm", {0, 2, 1});
  m.node("MatMul", {"q", "kt"}, "scores", "qk");
  OnnxWriter::integer(m.node("Softmax", {"scores"}, "p", "softmax"), "axis", -1);
  m.node("MatMul", {"p", "v"}, "o", "pv");
  m.node("MatMul", {"o", "wo"}, "po", "out_proj");
  m.node("Add", {"po", "bo"}, "pb", "out_bias");
  m.node("Relu", {"pb"}, "h", "relu");
  m.node("Reshape", {"h", "flat_shape"}, "hf", "flatten");
  m.node("Gemm", {"hf", "wf", "bf"}, "y", "fc");
  return m.bytes();
}
inline const std::vector<std::string> kAttentionObserved = {"x", "o", "hf"};

/// y = Relu(x . w1) . w2 with x of unknown rank (no shape in the model): batches of rank 2 and 3
/// both run on the interpreter, but no one optimization profile covers them.
inline std::string any_rank_mlp_onnx() {
  OnnxWriter m;
  m.input("x", {}, /*rank_known=*/false);
  m.output("y", {});
  m.weight("w1", {8, 8}, 0.5f);
  m.weight("w2", {8, 4}, 0.5f);
  m.node("MatMul", {"x", "w1"}, "h", "mm1");
  m.node("Relu", {"h"}, "hr", "relu");
  m.node("MatMul", {"hr", "w2"}, "y", "mm2");
  return m.bytes();
}

/// A float input of `shape` named `name`: N(0.3, 1) values with `seed` (never exactly zero).
inline HostTensor random_input(const std::string& name, const std::vector<int64_t>& shape, unsigned seed) {
  HostTensor t = HostTensor::zeros(name, DataType::kFloat32, shape).value();
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.3f, 1.0f);
  auto* p = reinterpret_cast<float*>(t.data.data());
  for (int64_t i = 0; i < t.numel(); ++i) {
    float v = nd(rng);
    p[i] = v == 0.0f ? 1e-3f : v;
  }
  return t;
}

/// Hands out fixed batches; records the cache the builder writes and how many batches it took.
class FixedBatches final : public Calibrator {
 public:
  FixedBatches(std::vector<std::vector<HostTensor>> batches, std::string algorithm, std::string cache = "")
      : batches_(std::move(batches)), algorithm_(std::move(algorithm)), cache_(std::move(cache)) {}
  Result<std::vector<HostTensor>> next_batch(const std::vector<TensorInfo>&) override {
    if (next_ >= batches_.size()) return std::vector<HostTensor>{};
    ++handed_out;
    return batches_[next_++];
  }
  int num_batches() const override { return static_cast<int>(batches_.size()); }
  std::string algorithm() const override { return algorithm_; }
  std::string read_cache() override { return cache_; }
  void write_cache(const std::string& text) override { written = text; }

  std::string written;  ///< the cache text the build wrote
  int handed_out = 0;

 private:
  std::vector<std::vector<HostTensor>> batches_;
  std::string algorithm_, cache_;
  size_t next_ = 0;
};

/// One tensor's expected scale, and how far a histogram-based threshold may move when the
/// observed values differ by rounding: one bin of the tensor's histogram, as a scale.
struct Expected {
  float scale = 0;
  double bin = 0;
};

/// Calibration as the interpreter path computes it: every value of each batch from
/// ReferenceModel::run_all, the `observed` tensors (graph inputs from the batch itself) folded
/// in batch order, threshold / divisor (127 for int8, 448 for fp8).
inline Result<std::map<std::string, Expected>> interpreter_scales(const std::string& model_bytes,
                                                                  const std::vector<std::vector<HostTensor>>& batches,
                                                                  const std::vector<std::string>& observed,
                                                                  quant::CalibrationAlgorithm algo,
                                                                  double divisor = 127.0, double percentile = 99.99) {
  INGOT_ASSIGN_OR_RETURN(auto model, ReferenceModel::load_bytes(model_bytes.data(), model_bytes.size()));
  std::map<std::string, quant::TensorCalibration> seen;
  for (const auto& batch : batches) {
    INGOT_ASSIGN_OR_RETURN(std::vector<HostTensor> values, model->run_all(batch));
    for (const std::vector<HostTensor>* list : {&batch, static_cast<const std::vector<HostTensor>*>(&values)})
      for (const HostTensor& t : *list)
        for (const std::string& name : observed)
          if (t.name == name) seen[name].observe(reinterpret_cast<const float*>(t.data.data()), t.numel());
  }
  std::map<std::string, Expected> out;
  for (const auto& [name, t] : seen) {
    const double th = quant::threshold(t, algo, percentile);
    if (th > 0) out[name] = {static_cast<float>(th / divisor), t.range() / quant::kHistogramBins / divisor};
  }
  return out;
}

}  // namespace ingot::calibration_test
