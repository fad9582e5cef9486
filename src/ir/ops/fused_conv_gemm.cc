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
//   FusedConvPool(X, W, [B]): Y = MaxPool(FusedConv(X, W, B)), a CNN stem's convolution and the max
//     pooling after it (fuse_conv_pool forms it after the layout pass, where a device tactic pools
//     in the convolution's epilogue and the convolution's output is never written). FusedConv's
//     attributes but the transposed and residual ones (no R input), the same layout with
//     `channels_last`, and the pool's window as pool_kernel_shape (required), pool_strides (1s),
//     pool_pads (0s), pool_dilations (1s) and pool_ceil_mode (0), meaning what MaxPool's
//     kernel_shape, strides, pads, dilations and ceil_mode mean (no auto_pad: explicit pads).
//   FusedGemm(A, B, [C], [R]): y = act(alpha·op(A)·op(B) + beta·C [+ R]). kind "gemm" follows
//     Gemm (2-D, transA/transB, C broadcast to [M,N]); kind "matmul" follows MatMul (N-D,
//     batched, broadcasting) with C a bias broadcast on the last dim.
//   SqueezeExcite(X, W1, [B1], W2, [B2]): X scaled per image and channel by the gate of a
//     squeeze-excite block: global average pool, a 1x1 conv to Cr channels with `activation`, a
//     1x1 conv back to C with `gate_activation` (fuse_squeeze_excite forms it after the layout pass).
//   Pointwise(inputs...): runs the elementwise graph in attribute `body`, whose inputs are the
//     node's inputs in order; the CUDA backend compiles it into one kernel. The body may start
//     with a Concat of its first inputs (fuse_concat_pointwise): the pieces are then read where
//     they lie and the joined tensor is never written.
//
// Shape inference delegates to Conv / Gemm / MatMul (FusedConvPool: to FusedConv, then ingot::Pool)
// so there stays one shape path.
#include "ir/ops/all_ops.h"
#include "ir/ops/fused_conv_pool.h"

namespace ingot::ir {

namespace {

InferFn delegate_to(const char* op_type) {
  return [op_type](InferenceContext& c) -> Status {
    const OpSchema* s = OpRegistry::global().find(op_type, "");
    if (!s || !s->inference()) return c.error("no inference for ", op_type);
    return s->inference()(c);
  };
}

// The activation named by attribute `attr` (numbers in `params_attr`) is one the epilogues know.
Status check_activation(InferenceContext& c, const char* attr, const char* params_attr) {
  static const char* kActs[] = {"", "Relu", "Clip", "LeakyRelu", "Sigmoid", "Tanh", "HardSwish",
                                "HardSigmoid", "Gelu", "GeluTanh", "Silu"};
  std::string act = c.attrs().get_string(attr, "");
  bool known = false;
  for (const char* a : kActs) known |= act == a;
  if (!known) return c.error("unknown ", attr, " '", act, "'");
  size_t need = act == "Clip" || act == "HardSigmoid" ? 2 : act == "LeakyRelu" ? 1 : 0;
  if (c.attrs().get_floats(params_attr).size() < need)
    return c.error(attr, " ", act, " needs ", need, " ", params_attr);
  return Status::Ok();
}

Status check_epilogue(InferenceContext& c, size_t residual_input) {
  INGOT_RETURN_IF_ERROR(check_activation(c, "activation", "activation_params"));
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

// FusedConvPool(X, W, [B]): FusedConv's inference on the node (it reads only the conv attributes),
// then ingot::Pool's {mode "max"} on that result, run on a scratch Pool node that carries the pool_*
// attributes under their own names: both halves keep their one shape path.
Status infer_fused_conv_pool(InferenceContext& c) {
  const Attributes& at = c.attrs();
  const std::vector<int64_t> kernel = at.get_ints("pool_kernel_shape");
  if (kernel.empty()) return c.error("pool_kernel_shape is required");
  const OpSchema* conv = OpRegistry::global().find("FusedConv", "ingot");
  if (!conv || !conv->inference()) return c.error("no inference for ingot::FusedConv");
  INGOT_RETURN_IF_ERROR(conv->inference()(c));
  const TensorType y = c.output(0);
  // Conv's inference leaves a known rank >= 3; unknown, the kernel's length stands for it.
  const size_t nsp = y.shape.rank_known() ? y.shape.rank() - 2 : kernel.size();
  auto length_is = [&](const char* name, size_t want) -> Status {
    if (!at.has(name)) return Status::Ok();
    const size_t got = at.get_ints(name).size();
    if (got != want) return c.error(name, " has ", got, " values, expected ", want, " for ", nsp, " spatial dims");
    return Status::Ok();
  };
  INGOT_RETURN_IF_ERROR(length_is("pool_kernel_shape", nsp));
  INGOT_RETURN_IF_ERROR(length_is("pool_strides", nsp));
  INGOT_RETURN_IF_ERROR(length_is("pool_dilations", nsp));
  INGOT_RETURN_IF_ERROR(length_is("pool_pads", 2 * nsp));
  const OpSchema* pool = OpRegistry::global().find("Pool", "ingot");
  if (!pool || !pool->inference()) return c.error("no inference for ingot::Pool");
  Attributes pool_attrs = fused_conv_pool_pool_attrs(at);
  Graph scratch("fused_conv_pool");
  Value* in = scratch.add_value("conv");
  Value* out = scratch.add_value("pool");
  const Node* n = scratch.add_node("Pool", {in}, {out}, std::move(pool_attrs), c.node().name(), "ingot");
  InferenceContext inner(*n, 1, {y}, {nullptr});
  Status s = pool->inference()(inner);
  if (!s.ok()) return c.error("the max pool after the convolution: ", s.message());
  c.set_output(0, inner.output(0).dtype, inner.output(0).shape);
  return Status::Ok();
}

// SqueezeExcite(X, W1, [B1], W2, [B2]): X [N, C, H, W] (or [N, H, W, C] with channels_last),
// W1 [Cr, C, 1, 1] / [Cr, 1, 1, C], W2 [C, Cr, 1, 1] / [C, 1, 1, Cr]: what is checked is each
// weight's first dim and the product of the rest, which is all the op reads of them (row-major
// [Cr][C] and [C][Cr] either way). Y has X's type and shape.
Status infer_squeeze_excite(InferenceContext& c) {
  const int64_t cl = c.attrs().get_int("channels_last", 0);
  if (cl != 0 && cl != 1) return c.error("channels_last must be 0 or 1, got ", cl);
  if (!c.has_input(3)) return c.error("W2 (input 3) is missing");
  INGOT_RETURN_IF_ERROR(check_activation(c, "activation", "activation_params"));
  INGOT_RETURN_IF_ERROR(check_activation(c, "gate_activation", "gate_activation_params"));
  const DataType t = c.input_dtype(0);
  if (t != DataType::kUndefined && !is_float(t)) return c.error("X must be a floating type, got ", data_type_name(t));
  for (size_t i = 1; i < c.num_inputs(); ++i)
    if (c.has_input(i) && t != DataType::kUndefined && c.input_dtype(i) != DataType::kUndefined && c.input_dtype(i) != t)
      return c.error("input ", i, " is ", data_type_name(c.input_dtype(i)), " but X is ", data_type_name(t));
  const Shape& x = c.input_shape(0);
  if (x.rank_known() && x.rank() != 4) return c.error("X must be 4-D, got ", x.to_string());
  const Dim ch = x.rank_known() ? x[cl ? 3 : 1] : Dim::unknown();
  // {first dim, product of the others} of a known 4-D weight, else {-1, -1}.
  auto rows_cols = [&](size_t i) -> std::pair<int64_t, int64_t> {
    const Shape& w = c.input_shape(i);
    if (!w.rank_known() || w.rank() != 4 || !w.is_concrete()) return {-1, -1};
    return {w[0].value(), w[1].value() * w[2].value() * w[3].value()};
  };
  const auto [cr1, c1] = rows_cols(1);
  const auto [c2, cr2] = rows_cols(3);
  for (size_t i : {size_t{1}, size_t{3}}) {
    const Shape& w = c.input_shape(i);
    if (w.rank_known() && w.rank() != 4) return c.error(i == 1 ? "W1" : "W2", " must be 4-D, got ", w.to_string());
  }
  if (cr1 >= 0 && c2 >= 0 && (c1 != c2 || cr1 != cr2))
    return c.error("W1 ", c.input_shape(1).to_string(), " and W2 ", c.input_shape(3).to_string(),
                   " are not [Cr, C] and [C, Cr]");
  if (ch.is_known() && c1 >= 0 && c1 != ch.value())
    return c.error("W1 ", c.input_shape(1).to_string(), " does not take X's ", ch.value(), " channels");
  auto bias_fits = [&](size_t i, int64_t n) {
    if (!c.has_input(i) || n < 0) return true;
    const Shape& b = c.input_shape(i);
    return !b.rank_known() || (b.rank() == 1 && (!b[0].is_known() || b[0].value() == n));
  };
  if (!bias_fits(2, cr1)) return c.error("B1 ", c.input_shape(2).to_string(), " is not [", cr1, "]");
  if (!bias_fits(4, c2)) return c.error("B2 ", c.input_shape(4).to_string(), " is not [", c2, "]");
  c.set_output(0, t, x);
  return Status::Ok();
}

Status infer_pointwise(InferenceContext& c) {
  const Graph* body = c.attrs().get_graph("body");
  if (!body || body->outputs().size() != 1) return c.error("body must be a graph with one output");
  if (body->inputs().size() != c.num_inputs())
    return c.error("body takes ", body->inputs().size(), " inputs, node has ", c.num_inputs());
  // Every body op broadcasts, so the result has the broadcast shape of all inputs; a leading Concat
  // of the first inputs (fuse_concat_pointwise) counts as its result.
  Shape s;
  size_t first = 0;
  const Node* lead = body->nodes().empty() ? nullptr : body->nodes()[0].get();
  if (lead && lead->op_type() == "Concat" && lead->domain().empty() && lead->inputs().size() >= 2 &&
      lead->inputs().size() <= c.num_inputs()) {
    bool leading = true;
    for (size_t j = 0; j < lead->inputs().size() && leading; ++j) leading = lead->input(j) == body->inputs()[j];
    if (leading) {
      first = lead->inputs().size();
      s = c.input_shape(0);
      for (size_t j = 1; j < first && s.rank_known(); ++j) {
        const Shape& x = c.input_shape(j);
        if (!x.rank_known()) {
          s = Shape::unknown_rank();
          break;
        }
        if (x.rank() != s.rank()) return c.error("Concat pieces of ranks ", s.rank(), " and ", x.rank());
        int64_t axis = lead->attrs().get_int("axis", 0);
        if (axis < 0) axis += static_cast<int64_t>(s.rank());
        if (axis < 0 || axis >= static_cast<int64_t>(s.rank())) return c.error("Concat axis out of range");
        const size_t a = static_cast<size_t>(axis);
        std::vector<Dim> d = s.dims();
        d[a] = d[a].is_known() && x[a].is_known() ? Dim(d[a].value() + x[a].value()) : Dim::unknown();
        s = Shape(d);
      }
    }
  }
  for (size_t i = first; i < c.num_inputs(); ++i) {
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
  // Conv's window attributes, which FusedConv and FusedConvPool both carry.
  auto conv_window = [](OpSchema& s) -> OpSchema& {
    return s.attr("auto_pad", AttrType::kString)
        .attr("kernel_shape", AttrType::kInts)
        .attr("pads", AttrType::kInts)
        .attr("strides", AttrType::kInts)
        .attr("dilations", AttrType::kInts)
        .attr("group", AttrType::kInt)
        .attr("channels_last", AttrType::kInt);
  };
  epilogue(conv_window(r.add("FusedConv", "ingot").inputs(2, 4).outputs(1, 1).opsets(1))
               .attr("transposed", AttrType::kInt)
               .attr("output_padding", AttrType::kInts)
               .attr("output_shape", AttrType::kInts))
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
  conv_window(r.add("FusedConvPool", "ingot").inputs(2, 3).outputs(1, 1).opsets(1))
      .attr("activation", AttrType::kString)
      .attr("activation_params", AttrType::kFloats)
      .attr("pool_kernel_shape", AttrType::kInts, true)
      .attr("pool_strides", AttrType::kInts)
      .attr("pool_pads", AttrType::kInts)
      .attr("pool_dilations", AttrType::kInts)
      .attr("pool_ceil_mode", AttrType::kInt)
      .infer(infer_fused_conv_pool)
      .doc("FusedConv (no residual) then max pooling with the pool_* window (fuse_conv_pool): a CNN stem as one op");
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
  r.add("SqueezeExcite", "ingot")
      .inputs(2, 5)  // W2 (input 3) is required too; B1 between may be omitted
      .outputs(1, 1)
      .opsets(1)
      .attr("channels_last", AttrType::kInt)
      .attr("activation", AttrType::kString)
      .attr("activation_params", AttrType::kFloats)
      .attr("gate_activation", AttrType::kString)
      .attr("gate_activation_params", AttrType::kFloats)
      .infer(infer_squeeze_excite)
      .doc("a squeeze-excite block (fuse_squeeze_excite): Y = X * gate_act(W2 act(W1 mean_HW(X) + B1) + B2), "
           "the gate per image and channel");
  r.add("Pointwise", "ingot")
      .inputs(1, -1)
      .outputs(1, 1)
      .opsets(1)
      .attr("body", AttrType::kGraph, true)
      .infer(infer_pointwise)
      .doc("a fused chain of elementwise ops held as a subgraph");
}

}  // namespace ingot::ir
