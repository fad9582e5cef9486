// Copyright ingot authors. Apache-2.0.
//
// ingot::FusedConv, ingot::FusedGemm and ingot::Pointwise: the ops fuse_conv_gemm and
// fuse_pointwise create (domain "ingot", opset 1).
//
//   FusedConv(X, W, [B], [R]): y = act(Conv(X, W) + B + R), or act(Conv(X, W) + B) + R when
//     residual_before_activation = 0. Every Conv attribute; `activation` is "" (none), Relu,
//     Clip [min,max], LeakyRelu [alpha], Sigmoid, Tanh, HardSwish, HardSigmoid [alpha,beta],
//     Gelu, GeluTanh or Silu, its numbers in `activation_params`. With `transposed` = 1 the
//     layer is ConvTranspose instead (its output_padding / output_shape attributes apply), so
//     deconvolution epilogues fuse without a second op type for every backend to learn.
//     With `channels_last` = 1, X, R and Y are [N, spatial..., C] and W is [K, kernel..., C/group]
//     (NHWC / KRSC, the layout tensor-core convolutions read); the builder's layout pass makes
//     these, with Transposes at the edges of channels-last regions.
//   FusedGemm(A, B, [C], [R]): y = act(alpha·op(A)·op(B) + beta·C [+ R]). kind "gemm" follows
//     Gemm (2-D, transA/transB, C broadcast to [M,N]); kind "matmul" follows MatMul (N-D,
//     batched, broadcasting) with C a bias broadcast on the last dim.
//   Pointwise(inputs...): runs the elementwise graph in attribute `body`, whose inputs are the
//     node's inputs in order; the CUDA backend compiles it into one kernel.
//
// Shape inference delegates to Conv / Gemm / MatMul so there stays one shape path.
#include "ir/ops/all_ops.h"

namespace ingot::ir {

namespace {

InferFn delegate_to(const char* op_type) {
  return [op_type](InferenceContext& c) -> Status {
    const OpSchema* s = OpRegistry::global().find(op_type, "");
    if (!s || !s->inference()) return c.error("no inference for ", op_type);
    return s->inference()(c);
  };
}

Status check_epilogue(InferenceContext& c, size_t residual_input) {
  static const char* kActs[] = {"", "Relu", "Clip", "LeakyRelu", "Sigmoid", "Tanh", "HardSwish",
                                "HardSigmoid", "Gelu", "GeluTanh", "Silu"};
  std::string act = c.attrs().get_string("activation", "");
  bool known = false;
  for (const char* a : kActs) known |= act == a;
  if (!known) return c.error("unknown activation '", act, "'");
  size_t need = act == "Clip" || act == "HardSigmoid" ? 2 : act == "LeakyRelu" ? 1 : 0;
  if (c.attrs().get_floats("activation_params").size() < need)
    return c.error("activation ", act, " needs ", need, " activation_params");
  if (c.has_input(residual_input) && c.output(0).shape.rank_known()) {
    const Shape& r = c.input_shape(residual_input);
    if (r.rank_known() && r.rank() != c.output(0).shape.rank())
      return c.error("residual has shape ", r.to_string(), ", output ", c.output(0).shape.to_string());
  }
  return Status::Ok();
}

// channels_last = 1: X, R and Y are [N, spatial..., C] and W is [K, kernel..., C/group]; the
// shapes are checked by Conv's inference on the channels-first view.
Status infer_channels_last_conv(InferenceContext& c) {
  if (c.attrs().get_int("transposed", 0) != 0) return c.error("channels_last needs transposed = 0");
  std::vector<TensorType> types;
  std::vector<const Tensor*> values;
  size_t rank = c.input_shape(0).rank_known() ? c.input_shape(0).rank() : 0;
  if (rank != 0 && rank < 3) return c.error("channels_last needs a rank >= 3 input, got ", c.input_shape(0).to_string());
  for (size_t i = 0; i < c.num_inputs(); ++i) {
    TensorType t;
    t.dtype = c.input_dtype(i);
    t.shape = c.input_shape(i);
    if (i != 2 && c.has_input(i) && rank) t.shape = permute_shape(t.shape, channels_first_perm(rank));
    types.push_back(t);
    values.push_back(nullptr);
  }
  InferenceContext inner(c.node(), c.opset(), std::move(types), std::move(values));
  INGOT_RETURN_IF_ERROR(delegate_to("Conv")(inner));
  const TensorType& y = inner.output(0);
  c.set_output(0, y.dtype, rank ? permute_shape(y.shape, channels_last_perm(rank)) : y.shape);
  return Status::Ok();
}

Status infer_pointwise(InferenceContext& c) {
  const Graph* body = c.attrs().get_graph("body");
  if (!body || body->outputs().size() != 1) return c.error("body must be a graph with one output");
  if (body->inputs().size() != c.num_inputs())
    return c.error("body takes ", body->inputs().size(), " inputs, node has ", c.num_inputs());
  // Every body op broadcasts, so the result has the broadcast shape of all inputs.
  Shape s;
  for (size_t i = 0; i < c.num_inputs(); ++i) {
    if (!c.input_shape(i).rank_known()) {
      s = Shape::unknown_rank();
      break;
    }
    auto b = broadcast_shapes(s, c.input_shape(i));
    if (!b.ok()) return c.error(b.status().message());
    s = *b;
  }
  DataType dt = body->outputs()[0]->dtype();
  if (dt == DataType::kUndefined && c.num_inputs() > 0) dt = c.input_dtype(0);
  c.set_output(0, dt, s);
  return Status::Ok();
}

}  // namespace

void register_fused_conv_gemm_ops(OpRegistry& r) {
  auto epilogue = [](OpSchema& s) -> OpSchema& {
    return s.attr("activation", AttrType::kString)
        .attr("activation_params", AttrType::kFloats)
        .attr("residual_before_activation", AttrType::kInt);
  };
  epilogue(r.add("FusedConv", "ingot")
               .inputs(2, 4)
               .outputs(1, 1)
               .opsets(1)
               .attr("auto_pad", AttrType::kString)
               .attr("kernel_shape", AttrType::kInts)
               .attr("pads", AttrType::kInts)
               .attr("strides", AttrType::kInts)
               .attr("dilations", AttrType::kInts)
               .attr("group", AttrType::kInt)
               .attr("transposed", AttrType::kInt)
               .attr("output_padding", AttrType::kInts)
               .attr("output_shape", AttrType::kInts)
               .attr("channels_last", AttrType::kInt))
      .infer([](InferenceContext& c) -> Status {
        const int64_t transposed = c.attrs().get_int("transposed", 0);
        if (transposed != 0 && transposed != 1) return c.error("transposed must be 0 or 1, got ", transposed);
        const int64_t channels_last = c.attrs().get_int("channels_last", 0);
        if (channels_last != 0 && channels_last != 1)
          return c.error("channels_last must be 0 or 1, got ", channels_last);
        if (channels_last) {
          INGOT_RETURN_IF_ERROR(infer_channels_last_conv(c));
          return check_epilogue(c, 3);
        }
        INGOT_RETURN_IF_ERROR(delegate_to(transposed ? "ConvTranspose" : "Conv")(c));
        return check_epilogue(c, 3);
      })
      .doc("Conv or ConvTranspose (transposed=1) + bias + residual + activation");
  epilogue(r.add("FusedGemm", "ingot")
               .inputs(2, 4)
               .outputs(1, 1)
               .opsets(1)
               .attr("kind", AttrType::kString)
               .attr("alpha", AttrType::kFloat)
               .attr("beta", AttrType::kFloat)
               .attr("transA", AttrType::kInt)
               .attr("transB", AttrType::kInt))
      .infer([](InferenceContext& c) -> Status {
        std::string kind = c.attrs().get_string("kind", "gemm");
        if (kind != "gemm" && kind != "matmul") return c.error("kind must be 'gemm' or 'matmul', got '", kind, "'");
        INGOT_RETURN_IF_ERROR(delegate_to(kind == "gemm" ? "Gemm" : "MatMul")(c));
        return check_epilogue(c, 3);
      })
      .doc("Gemm/MatMul + bias + residual + activation");
  r.add("Pointwise", "ingot")
      .inputs(1, -1)
      .outputs(1, 1)
      .opsets(1)
      .attr("body", AttrType::kGraph, true)
      .infer(infer_pointwise)
      .doc("a fused chain of elementwise ops held as a subgraph");
}

}  // namespace ingot::ir
