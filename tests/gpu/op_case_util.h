// Copyright ingot authors. Apache-2.0.
//
// One-node op cases for the GPU tactic-family tests (pool, reduce, data movement): describe the
// node's inputs (graph inputs with random or given data, integer initializers, omitted optional
// inputs), build the graph in the IR text form, ask a TacticFamily for the node, rebuild the
// chosen tactic from its name (as an engine load does) and compare it with cpu::run_node.
#pragma once

#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/core/cuda_tactics.h"
#include "gpu_test_util.h"

namespace ingot::gpu_test {

struct Operand {
  DataType dtype = DataType::kUndefined;  ///< kUndefined: an omitted optional input
  Shape64 shape;
  Tensor data;               ///< given data; random in the case's [lo, hi) when undefined
  bool initializer = false;  ///< declared with `init` and `data` (which is then required)
};

/// Every FusedConv activation with its parameters, as attribute text to put before the others
/// (the first: none), for the convolution families that fuse them all.
inline const char* const kConvActivations[] = {"",
                                              "activation=\"Relu\", ",
                                              "activation=\"HardSwish\", ",
                                              "activation=\"HardSigmoid\", activation_params=[0.2, 0.5], ",
                                              "activation=\"Clip\", activation_params=[0.0, 6.0], ",
                                              "activation=\"LeakyRelu\", activation_params=[0.1], ",
                                              "activation=\"Sigmoid\", ",
                                              "activation=\"Tanh\", ",
                                              "activation=\"Silu\", ",
                                              "activation=\"Gelu\", ",
                                              "activation=\"GeluTanh\", "};

inline Operand input(DataType t, Shape64 s) { return {t, std::move(s), Tensor(), false}; }
inline Operand input(Tensor data) { return {data.dtype(), data.shape(), data, false}; }
inline Operand initializer(Tensor data) { return {data.dtype(), data.shape(), data, true}; }
inline Operand omitted() { return {}; }

/// An int64 tensor of `values` (shape {n}, or {} for a scalar).
inline Tensor i64s(const std::vector<int64_t>& values, bool scalar = false) {
  return Tensor::from_vector(DataType::kInt64, scalar ? Shape64{} : Shape64{static_cast<int64_t>(values.size())},
                             values);
}

inline std::string dims_text(const Shape64& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? "," : "") + std::to_string(s[i]);
  return r + "]";
}

/// A one-node graph: operands %i0.., `call` (op and attributes, e.g. "Concat {axis=-1}"),
/// outputs %y0..%y{outputs-1}.
inline std::string op_graph(int64_t opset, const std::vector<Operand>& ins, const std::string& call, int outputs = 1) {
  std::string g = "graph main {\n  opset \"\" " + std::to_string(opset) + "\n  opset \"ingot\" 1\n";
  std::string args, outs;
  for (size_t i = 0; i < ins.size(); ++i) {
    if (i) args += ", ";
    const Operand& o = ins[i];
    if (o.dtype == DataType::kUndefined) {
      args += "_";
      continue;
    }
    const std::string name = "%i" + std::to_string(i);
    const std::string type = std::string(data_type_name(o.dtype)) + dims_text(o.shape);
    if (o.initializer) {
      std::string values;
      for (int64_t k = 0; k < o.data.numel(); ++k)
        values += (k ? ", " : "") + (is_float(o.dtype) ? std::to_string(o.data.get_f64(k))
                                                       : std::to_string(o.data.get_i64(k)));
      g += "  init " + name + ": " + type + " = [" + values + "]\n";
    } else {
      g += "  input " + name + ": " + type + "\n";
    }
    args += name;
  }
  for (int k = 0; k < outputs; ++k) outs += (k ? ", %y" : "%y") + std::to_string(k);
  g += "  " + outs + " = " + call + "(" + args + ") @n0\n";
  for (int k = 0; k < outputs; ++k) g += "  output %y" + std::to_string(k) + "\n";
  return g + "}\n";
}

/// Unlike CudaTest, does not skip up front: without a device, check() still parses the node,
/// asks the family, rebuilds the tactic and runs the reference (host-side mistakes fail
/// everywhere), then skips the device comparison saying why. refuses() needs no device.
class OpCaseTest : public ::testing::Test {
 protected:
  void SetUp() override { no_device_ = cuda_unavailable_reason(); }

  std::string no_device_;  ///< empty when a CUDA device is usable
  std::mt19937 rng_{20261130};

  /// Asks `family` for the node (its candidate named `want`: a family may offer several variants
  /// of one node), rebuilds it by name and checks every output against the reference. `tune` may edit the parsed node (e.g. set a
  /// tensor attribute the text form cannot state) before anything runs.
  void check(const backend::cuda::TacticFamily& family, int64_t opset, const std::vector<Operand>& ins,
             const std::string& call, const std::string& want, int outputs = 1, double lo = -3.0, double hi = 3.0,
             const Tolerance* tol = nullptr, const std::function<void(ir::Node&)>& tune = nullptr) {
    const std::string text = op_graph(opset, ins, call, outputs);
    SCOPED_TRACE(text);
    auto g = parse_graph(text);
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    ir::Node& node = *(*g)->nodes()[0];
    if (tune) {
      tune(node);
      Status st = ir::infer_graph(**g);
      ASSERT_TRUE(st.ok()) << st.to_string();
    }
    auto cands = family.candidates(node, input_types(node));
    ASSERT_FALSE(cands.empty()) << "family refused the node";
    std::string names;
    const backend::Tactic* chosen = nullptr;
    for (const auto& c : cands) {
      names += " " + c->name();
      if (c->name() == want) chosen = c.get();
    }
    ASSERT_NE(chosen, nullptr) << "no candidate named " << want << " among" << names;
    std::unique_ptr<backend::Tactic> rebuilt = family.create(chosen->name(), chosen->serialize());
    ASSERT_NE(rebuilt, nullptr);
    std::vector<Tensor> data;
    for (const Operand& o : ins) {
      if (o.dtype == DataType::kUndefined) data.emplace_back();
      else if (o.data.defined()) data.push_back(o.data);
      else data.push_back(random_tensor(o.dtype, o.shape, rng_, lo, hi));
    }
    auto ref = run_reference(node, data);
    ASSERT_TRUE(ref.ok()) << "reference: " << ref.status().to_string();
    if (!no_device_.empty()) GTEST_SKIP() << no_device_;
    // Outputs whose shape depends on computed inputs get the reference's shapes, as the
    // runtime's shape propagation would give them.
    std::vector<Shape64> shapes;
    for (size_t o = 0; o < node.outputs().size(); ++o) {
      const ir::Value* v = node.output(o);
      if (v && !v->shape().is_concrete()) {
        for (const Tensor& t : *ref) shapes.push_back(t.shape());
        break;
      }
    }
    auto got = run_tactic(*rebuilt, node, data, shapes);
    ASSERT_TRUE(got.ok()) << "tactic: " << got.status().to_string();
    ASSERT_EQ(got->size(), ref->size());
    for (size_t o = 0; o < got->size(); ++o) {
      const Tensor& w = (*ref)[o];
      EXPECT_TRUE(all_close((*got)[o], w, tol ? *tol : tolerance_for(w.dtype()))) << "output " << o;
    }
  }

  /// The names of the candidates `family` offers for the node (in its order).
  std::vector<std::string> candidate_names(const backend::cuda::TacticFamily& family, int64_t opset,
                                           const std::vector<Operand>& ins, const std::string& call) {
    auto g = parse_graph(op_graph(opset, ins, call, 1));
    std::vector<std::string> names;
    if (!g.ok()) {
      ADD_FAILURE() << g.status().to_string();
      return names;
    }
    const ir::Node& node = *(*g)->nodes()[0];
    for (const auto& c : family.candidates(node, input_types(node))) names.push_back(c->name());
    return names;
  }

  /// Like check(), but the tactic's enqueue is captured into a CUDA graph (which fails on a
  /// host sync or a copy from pageable memory) and the graph is replayed twice before comparing.
  void check_captured(const backend::cuda::TacticFamily& family, int64_t opset, const std::vector<Operand>& ins,
                      const std::string& call, double lo = -3.0, double hi = 3.0, int outputs = 1) {
    const std::string text = op_graph(opset, ins, call, outputs);
    SCOPED_TRACE(text);
    auto g = parse_graph(text);
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    const ir::Node& node = *(*g)->nodes()[0];
    auto cands = family.candidates(node, input_types(node));
    ASSERT_EQ(cands.size(), 1u) << "family refused the node";
    std::vector<Tensor> data;
    std::vector<Shape64> in_shapes;
    for (const Operand& o : ins) {
      data.push_back(o.dtype == DataType::kUndefined ? Tensor()
                     : o.data.defined()              ? o.data
                                                     : random_tensor(o.dtype, o.shape, rng_, lo, hi));
      in_shapes.push_back(data.back().defined() ? data.back().shape() : Shape64{});
    }
    auto ref = run_reference(node, data);
    ASSERT_TRUE(ref.ok()) << "reference: " << ref.status().to_string();
    if (!no_device_.empty()) GTEST_SKIP() << no_device_;
    std::vector<Tensor> d_in(data.size());
    std::vector<const Tensor*> in_ptrs(data.size(), nullptr);
    for (size_t i = 0; i < data.size(); ++i) {
      if (!data[i].defined()) continue;
      auto up = upload(data[i]);
      ASSERT_TRUE(up.ok()) << up.status().to_string();
      d_in[i] = *up;
      in_ptrs[i] = &d_in[i];
    }
    std::vector<Tensor> d_out;
    for (const Tensor& r : *ref) {
      auto t = device_alloc(r.dtype(), r.shape());
      ASSERT_TRUE(t.ok());
      ASSERT_TRUE(poison(*t).ok());
      d_out.push_back(*t);
    }
    DeviceBuffer workspace(cands[0]->workspace_bytes(node, in_shapes));
    cudaStream_t stream = nullptr;
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
    backend::StepIO io;
    io.node = &node;
    io.inputs = in_ptrs;
    io.outputs = &d_out;
    io.workspace = workspace.get();
    io.stream = stream;
    ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    Status st = cands[0]->enqueue(io);
    cudaGraph_t graph = nullptr;
    const cudaError_t end = cudaStreamEndCapture(stream, &graph);
    EXPECT_TRUE(st.ok()) << st.to_string();
    ASSERT_EQ(end, cudaSuccess) << cudaGetErrorString(end);
    cudaGraphExec_t exec = nullptr;
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    for (int replay = 0; replay < 2; ++replay) ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(stream);
    for (size_t o = 0; o < d_out.size(); ++o) {
      auto got = download(d_out[o]);
      ASSERT_TRUE(got.ok());
      EXPECT_TRUE(all_close(*got, (*ref)[o])) << "output " << o;
    }
  }

  /// The family must offer no candidate for this node (the host fallback takes it).
  void refuses(const backend::cuda::TacticFamily& family, int64_t opset, const std::vector<Operand>& ins,
               const std::string& call, int outputs = 1) {
    const std::string text = op_graph(opset, ins, call, outputs);
    SCOPED_TRACE(text);
    auto g = parse_graph(text);
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    const ir::Node& node = *(*g)->nodes()[0];
    EXPECT_TRUE(family.candidates(node, input_types(node)).empty());
  }
};

/// The params bytes an engine keeps for a tactic, written field by field as the engine format has
/// them (tests that a tactic still reads engines written before a change).
struct ParamBytes {
  std::vector<uint8_t> b;
  explicit ParamBytes(uint8_t version) : b{version} {}
  template <class T>
  ParamBytes& add(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    b.insert(b.end(), p, p + sizeof v);
    return *this;
  }
};

}  // namespace ingot::gpu_test
