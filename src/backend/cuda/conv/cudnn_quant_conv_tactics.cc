// Copyright ingot authors. Apache-2.0.
//
// cuDNN graph-API tactics (through cudnn-frontend) for ingot::QuantConv (ir/ops/quant.cc):
//   Y = act(x_scale * w_scale[m] * conv(X, W) + B[m] + R), then with y_scale Y / y_scale as int8
//   (or fp8), without it Y in output_dtype (float32, float16, bfloat16),
// as one operation graph per call shape, which cuDNN runs as one fused kernel:
//
//   X, W (int8: compute INT32, exact; float8e4m3fn: compute FLOAT) -> conv_fprop -> the sums
//     (fp32; for int8 the int32 accumulators where cuDNN takes no fp32 ones) -> MUL x_scale
//     [1,1,1,1] -> MUL w_scale ([1,1,1,1] or [1,M,1,1]) [-> ADD B [1,M,1,1]] [-> ADD R]
//     [-> the activation, as the FusedConv graph family forms it (add_activation)]
//     [-> DIV y_scale [1,1,1,1]] -> Y
//
// every pointwise operation in fp32. The scales are device tensors read by the kernel (never on
// the host: engines are captured into CUDA graphs); B and R keep their own float types (the
// precision pass may leave fp16 ones beside an fp32 or int8 Y). Tensor UIDs follow the node's
// input order, then Y, so execution passes the device pointers in that order, absent ones skipped.
//
// Layout: channels_last = 1 only (X, R, Y NHWC, W KRSC), what the builder's layout pass makes of
// a 2-D QuantConv: cuDNN's 8-bit convolutions read no other layout but its vectorized ones. Refused
// in supports(), so that the builder splits the layer into DequantizeLinear and a float conv as it
// did before this family: channels-first, 1-D / 3-D, group != 1 (no grouped 8-bit engines are
// asked for), C or M not a multiple of 4 (the int8 NHWC rule; the same byte alignment for fp8), W
// without known C and M, a per-channel w_scale that is not [M], a y_scale Y of another 8-bit type
// than X, fp8 below sm_90 (cuDNN's fp8 convolutions are Hopper's), activations add_activation has
// no form for (Tanh). Where a device is present, candidates() also asks cuDNN for plans at the
// node's shapes (unknown dims guessed as the FusedConv family guesses them) and offers none when it
// has none; a shape without a plan at enqueue is kUnsupported naming the node, never a crash.
//
// "cuda.cudnn.graph.quant_conv.<i>" runs the i-th execution plan of cuDNN's heuristics (mode A,
// then the fallback list) that builds within kGraphConvWorkspaceBytes, through the plan machinery
// cudnn_graph_conv_tactics.cc's candidates use too (GraphConvTactic, cudnn_graph_conv_common.h):
// the graph of a signature is shared by the process, plans are cached per tactic (lookups take no
// lock), and the engine keeps the chosen plan serialized for the builder's opt shapes (params
// {2, i, record}) so a loaded engine does not compile it again.
#if defined(INGOT_WITH_CUDNN) && defined(INGOT_WITH_CUDNN_FRONTEND)

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/conv/cudnn_conv_common.h"
#include "backend/cuda/conv/cudnn_graph_conv_common.h"
#include "backend/cuda/core/cuda_tactics.h"
#include "backend/cuda/core/cudnn_frontend_util.h"
#include "backend/cuda/core/device_info.h"
#include "backend/cuda/core/param_bytes.h"

namespace ingot::backend::cuda {

TacticFamily cudnn_quant_conv_family();

namespace {

namespace fe = cudnn_frontend;

// QuantConv's inputs.
constexpr size_t kXScaleInput = 2, kWScaleInput = 3, kYScaleInput = 6, kRScaleInput = 7;

// Tensor UIDs: the node's input order, then Y (execution takes pointers in this order; Y is last
// in every graph, so plans serialized before r_scale had a UID, with Y at 8, run the same way).
enum : int64_t { kUidX = 1, kUidW, kUidXScale, kUidWScale, kUidB, kUidR, kUidYScale, kUidRScale, kUidY };

bool is_8bit(DataType t) { return t == DataType::kInt8 || t == DataType::kFloat8E4M3FN; }

fe::DataType_t fe_io_type(DataType t) {
  if (t == DataType::kInt8) return fe::DataType_t::INT8;
  if (t == DataType::kFloat8E4M3FN) return fe::DataType_t::FP8_E4M3;
  return fe_type(t);
}

// Whether `s` holds exactly `v` elements (a scalar, or a vector of known length).
bool numel_is(const ir::Shape& s, int64_t v) {
  if (!s.rank_known() || s.rank() > 1) return false;
  return s.rank() == 0 ? v == 1 : s[0].is_known() && s[0].value() == v;
}

// A call as its graph depends on it: the convolution (conv.dtype is X's and W's type) and the
// epilogue's types and forms.
struct QuantKey {
  ConvKey conv;
  DataType y = DataType::kUndefined;
  DataType bias = DataType::kUndefined;      // kUndefined: none
  DataType residual = DataType::kUndefined;  // kUndefined: none
  bool per_channel = false;                  // w_scale [M] (else one value)
  bool y_scale = false;                      // Y quantized by y_scale
  bool same_epilogue(const QuantKey& o) const {
    return y == o.y && bias == o.bias && residual == o.residual && per_channel == o.per_channel && y_scale == o.y_scale;
  }
  /// The same call dims and types, whichever node (a plan serialized in an engine has none).
  bool same_call(const QuantKey& o) const { return conv.same_call(o.conv) && same_epilogue(o); }
  bool operator==(const QuantKey& o) const { return conv == o.conv && same_epilogue(o); }
};

// What supports() decides from types (see the header): the spec on success.
Status check_node(const ir::Node& node, const std::vector<ir::TensorType>& in, ConvSpec* spec_out = nullptr) {
  if (!is_quant_conv_op(node)) return unsupported(node.describe(), ": not a QuantConv");
  if (in.size() < 4 || !node.output(0)) return unsupported(node.describe(), ": needs X, W, x_scale, w_scale and Y");
  if (!activation_supported(node))
    return unsupported(node.describe(), ": no cuDNN form of activation '", node.attrs().get_string("activation", ""),
                       "'");
  ConvSpec s;
  INGOT_RETURN_IF_ERROR(check_conv_types(node, in, &s));  // ranks, window, channels, group split, B and R shapes
  if (!s.channels_last || s.spatial != 2)
    return unsupported(node.describe(), ": cuDNN's 8-bit convolutions read 2-D NHWC / KRSC only (channels_last = 1)");
  if (s.group != 1) return unsupported(node.describe(), ": group ", s.group, " (grouped 8-bit convolutions)");
  const DataType q = in[0].dtype;
  if (!is_8bit(q) || in[1].dtype != q)
    return unsupported(node.describe(), ": X and W must both be int8 or both float8e4m3fn, got ", data_type_name(q),
                       " and ", data_type_name(in[1].dtype));
  if (q == DataType::kFloat8E4M3FN) {
    const int cc = current_device_info().cc;
    if (cc != 0 && cc < 90)
      return unsupported(node.describe(), ": cuDNN's fp8 convolutions need sm_90, the device is sm_", cc);
  }
  const ir::Shape& w = in[1].shape;  // KRSC
  if (!w[0].is_known() || !w[3].is_known())
    return unsupported(node.describe(), ": W ", w.to_string(), " without known output and input channels");
  const int64_t m = w[0].value(), c = w[3].value();
  if (m % 4 != 0 || c % 4 != 0)
    return unsupported(node.describe(), ": ", c, " input and ", m,
                       " output channels (cuDNN's 8-bit NHWC convolutions need multiples of 4)");
  if (in[kXScaleInput].dtype != DataType::kFloat32 || in[kWScaleInput].dtype != DataType::kFloat32)
    return unsupported(node.describe(), ": x_scale and w_scale must be float32");
  if (!numel_is(in[kXScaleInput].shape, 1)) return unsupported(node.describe(), ": x_scale must be one value");
  if (!numel_is(in[kWScaleInput].shape, 1) && !numel_is(in[kWScaleInput].shape, m))
    return unsupported(node.describe(), ": w_scale ", in[kWScaleInput].shape.to_string(), " is neither one value nor [",
                       m, "]");
  const DataType y = node.output(0)->dtype();
  if (node.input(kYScaleInput)) {
    if (in.size() <= kYScaleInput || in[kYScaleInput].dtype != DataType::kFloat32 ||
        !numel_is(in[kYScaleInput].shape, 1))
      return unsupported(node.describe(), ": y_scale must be one float32 value");
    if (y != q)
      return unsupported(node.describe(), ": a ", data_type_name(q), " convolution quantizing to ", data_type_name(y));
  } else if (!is_conv_dtype(y)) {
    return unsupported(node.describe(), ": output ", data_type_name(y));
  }
  if (s.bias_input >= 0 && !is_conv_dtype(in[static_cast<size_t>(s.bias_input)].dtype))
    return unsupported(node.describe(), ": bias of ", data_type_name(in[static_cast<size_t>(s.bias_input)].dtype));
  if (s.residual_input >= 0) {
    const DataType r = in[static_cast<size_t>(s.residual_input)].dtype;
    if (r == q) {  // an 8-bit residual, read with its scale
      if (!node.input(kRScaleInput) || in.size() <= kRScaleInput || in[kRScaleInput].dtype != DataType::kFloat32 ||
          !numel_is(in[kRScaleInput].shape, 1))
        return unsupported(node.describe(), ": an 8-bit residual needs r_scale, one float32 value");
    } else if (!is_conv_dtype(r) || (!node.input(kYScaleInput) && r != y)) {
      return unsupported(node.describe(), ": residual of ", data_type_name(r), " for a ", data_type_name(y), " output");
    }
  }
  if (spec_out) *spec_out = s;
  return Status::Ok();
}

// The family's part of GraphConvTactic (see cudnn_graph_conv_common.h).
struct QuantConvGraph {
  using Key = QuantKey;
  static constexpr const char* kPrefix = "cuda.cudnn.graph.quant_conv.";
  static constexpr int kMinCandidates = 0;  // the graph made but listing no plan: offer none

  static const ConvKey& conv(const QuantKey& k) { return k.conv; }
  static ConvKey& conv(QuantKey& k) { return k.conv; }

  static bool supports(const ir::Node& node, const std::vector<ir::TensorType>& inputs) {
    return check_node(node, inputs).ok();
  }

  static Result<bool> read_call(const StepIO& io, ConvCall& c, const Tactic& tactic, GraphConvArgs<QuantKey>* a);
  static Result<QuantKey> opt_key(const ir::Node& node, const std::vector<Shape64>& in, ConvSpec* spec);
  static Result<QuantKey> guessed_key(const ir::Node& node, const std::vector<ir::TensorType>& in, ConvSpec* spec);
  static std::string signature(const ConvSpec& s, const QuantKey& k);
  static Result<std::shared_ptr<fe::graph::Graph>> make_graph(const ir::Node& node, const ConvSpec& s,
                                                              const QuantKey& k, cudnnHandle_t handle);
  static void put_key(const QuantKey& k, std::vector<uint8_t>& out);
  static bool get_key(ParamReader& rd, QuantKey* k);
};

// The operation graph for a key with the convolution's output (the sums) of type `sums`, with its
// execution plans listed (not yet built).
Result<std::shared_ptr<fe::graph::Graph>> try_graph(const ir::Node& node, const ConvSpec& s, const QuantKey& k,
                                                    cudnnHandle_t handle, fe::DataType_t sums) {
  const ConvKey& c = k.conv;
  if (c.nd != 4 || !c.channels_last) return unsupported(node.describe(), ": not a 2-D channels-last convolution");
  const bool int8 = c.dtype == DataType::kInt8;
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(fe_io_type(c.dtype))
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  const std::vector<int64_t> xd(c.x.begin(), c.x.begin() + 4), wd(c.w.begin(), c.w.begin() + 4);
  const std::array<int64_t, kConvMaxNd> ya = conv_output_dims(s, c);
  const std::vector<int64_t> yd(ya.begin(), ya.begin() + 4);
  for (int64_t v : yd)
    if (v <= 0) return invalid_argument(node.describe(), ": empty convolution output");
  const std::vector<int64_t> one = {1, 1, 1, 1}, per_m = {1, c.w[0], 1, 1};
  auto tensor = [&](const char* name, int64_t uid, const std::vector<int64_t>& d, DataType t) {
    return g->tensor(fe::graph::Tensor_attributes()
                         .set_name(name)
                         .set_uid(uid)
                         .set_dim(d)
                         .set_stride(strides_for(d, true))
                         .set_data_type(fe_io_type(t)));
  };
  auto X = tensor("x", kUidX, xd, c.dtype);
  auto W = tensor("w", kUidW, wd, c.dtype);
  auto y = g->conv_fprop(X, W,
                         fe::graph::Conv_fprop_attributes()
                             .set_name("conv")
                             .set_padding({s.pads[0], s.pads[1]})
                             .set_stride({s.strides[0], s.strides[1]})
                             .set_dilation({s.dilations[0], s.dilations[1]})
                             .set_compute_data_type(int8 ? fe::DataType_t::INT32 : fe::DataType_t::FLOAT));
  y->set_data_type(sums);
  auto pointwise = [&](const char* name, fe::PointwiseMode_t mode) {
    return fe::graph::Pointwise_attributes().set_name(name).set_mode(mode).set_compute_data_type(fe::DataType_t::FLOAT);
  };
  y = g->pointwise(y, tensor("x_scale", kUidXScale, one, DataType::kFloat32),
                   pointwise("x_scale", fe::PointwiseMode_t::MUL));
  y = g->pointwise(y, tensor("w_scale", kUidWScale, k.per_channel ? per_m : one, DataType::kFloat32),
                   pointwise("w_scale", fe::PointwiseMode_t::MUL));
  if (k.bias != DataType::kUndefined)
    y = g->pointwise(y, tensor("b", kUidB, per_m, k.bias), pointwise("bias", fe::PointwiseMode_t::ADD));
  if (is_8bit(k.residual)) {  // r_scale * R, the residual's DequantizeLinear, in fp32
    auto r = g->pointwise(tensor("r", kUidR, yd, k.residual), tensor("r_scale", kUidRScale, one, DataType::kFloat32),
                          pointwise("r_scale", fe::PointwiseMode_t::MUL));
    y = g->pointwise(y, r, pointwise("residual", fe::PointwiseMode_t::ADD));
  } else if (k.residual != DataType::kUndefined) {
    y = g->pointwise(y, tensor("r", kUidR, yd, k.residual), pointwise("residual", fe::PointwiseMode_t::ADD));
  }
  if (!s.activation.empty()) {
    INGOT_ASSIGN_OR_RETURN(y, add_activation(*g, y, s, node));
  }
  if (k.y_scale)
    y = g->pointwise(y, tensor("y_scale", kUidYScale, one, DataType::kFloat32),
                     pointwise("y_scale", fe::PointwiseMode_t::DIV));
  y->set_output(true).set_uid(kUidY).set_dim(yd).set_stride(strides_for(yd, true)).set_data_type(fe_io_type(k.y));

  INGOT_RETURN_IF_ERROR(list_graph_conv_plans(*g, handle, node, /*no_tf32=*/false));
  return g;
}

// The operation graph for a key: the sums handed to the epilogue as fp32 (what PyTorch's cuDNN
// int8 convolution declares), else, for int8, as the int32 accumulators themselves, whichever
// cuDNN takes first; the first refusal when neither.
Result<std::shared_ptr<fe::graph::Graph>> QuantConvGraph::make_graph(const ir::Node& node, const ConvSpec& s,
                                                                     const QuantKey& k, cudnnHandle_t handle) {
  auto g = try_graph(node, s, k, handle, fe::DataType_t::FLOAT);
  if (g.ok() || k.conv.dtype != DataType::kInt8) return g;
  auto g32 = try_graph(node, s, k, handle, fe::DataType_t::INT32);
  return g32.ok() ? g32 : g;
}

// What make_graph builds from (the spec's window and epilogue, the key's dims and types) and the
// device: equal signatures give the same cuDNN graph.
std::string QuantConvGraph::signature(const ConvSpec& s, const QuantKey& k) {
  std::string sig = device_tag() + "quant_conv" + conv_spec_signature(s, 2) + conv_dims_signature(k.conv);
  sig += " l" + std::to_string(k.conv.channels_last) + " t";
  for (DataType t : {k.conv.dtype, k.y, k.bias, k.residual}) sig += std::to_string(static_cast<int>(t)) + ",";
  sig += " c" + std::to_string(k.per_channel) + " q" + std::to_string(k.y_scale);
  return sig;
}

bool record_type_ok(uint8_t t, bool optional) {
  const auto d = static_cast<DataType>(t);
  return is_8bit(d) || is_conv_dtype(d) || (optional && d == DataType::kUndefined);
}

// Record encoding: {2, index, nd (4), flags (per_channel | y_scale << 1 | channels_last << 2),
// X, Y, B, R types (kUndefined: absent), x[nd] and w[nd] as int32, workspace as int64, name length
// u32 + name, blob length u32 + blob}, in the host's byte order (engines are bound to their GPU).
// These are the bytes from nd to R's type.
void QuantConvGraph::put_key(const QuantKey& k, std::vector<uint8_t>& out) {
  for (uint8_t b : {static_cast<uint8_t>(k.conv.nd),
                    static_cast<uint8_t>(k.per_channel | (k.y_scale << 1) | (k.conv.channels_last << 2)),
                    static_cast<uint8_t>(k.conv.dtype), static_cast<uint8_t>(k.y), static_cast<uint8_t>(k.bias),
                    static_cast<uint8_t>(k.residual)})
    out.push_back(b);
}

bool QuantConvGraph::get_key(ParamReader& rd, QuantKey* k) {
  uint8_t nd = 0, flags = 0, xt = 0, yt = 0, bt = 0, rt = 0;
  if (!rd.get(&nd) || !rd.get(&flags) || !rd.get(&xt) || !rd.get(&yt) || !rd.get(&bt) || !rd.get(&rt)) return false;
  if (nd != 4 || flags > 7) return false;
  if (!is_8bit(static_cast<DataType>(xt)) || !record_type_ok(yt, false) || !record_type_ok(bt, true) ||
      !record_type_ok(rt, true))
    return false;
  k->conv.nd = nd;
  k->conv.dtype = static_cast<DataType>(xt);
  k->per_channel = flags & 1;
  k->y_scale = (flags >> 1) & 1;
  k->conv.channels_last = (flags >> 2) & 1;
  k->y = static_cast<DataType>(yt);
  k->bias = static_cast<DataType>(bt);
  k->residual = static_cast<DataType>(rt);
  k->conv.bias = k->bias != DataType::kUndefined;
  k->conv.residual = k->residual != DataType::kUndefined;
  return true;
}

// The epilogue's part of a key from the node's input types `in` (and its output's type).
void set_epilogue(const ir::Node& node, const std::vector<ir::TensorType>& in, const ConvSpec& spec, QuantKey* k) {
  k->y = node.output(0)->dtype();
  if (spec.bias_input >= 0) k->bias = in[static_cast<size_t>(spec.bias_input)].dtype;
  if (spec.residual_input >= 0) k->residual = in[static_cast<size_t>(spec.residual_input)].dtype;
  k->per_channel = !numel_is(in[kWScaleInput].shape, 1);
  k->y_scale = node.input(kYScaleInput) != nullptr;
}

// The key for a node's types (check_node's) with symbolic dims guessed (guessed_conv_key's guesses).
Result<QuantKey> QuantConvGraph::guessed_key(const ir::Node& node, const std::vector<ir::TensorType>& in,
                                             ConvSpec* spec) {
  QuantKey k;
  INGOT_ASSIGN_OR_RETURN(k.conv, guessed_conv_key(node, in, spec));
  set_epilogue(node, in, *spec, &k);
  return k;
}

// A step's key and tensors (X, W, B, R, Y read by read_conv_call), with what supports() decided
// from types checked again on the tensors. Ascending UIDs: x, w, x_scale, w_scale, [b], [r],
// [y_scale], [r_scale] (then y).
Result<bool> QuantConvGraph::read_call(const StepIO& io, ConvCall& c, const Tactic& tactic,
                                       GraphConvArgs<QuantKey>* a) {
  const ir::Node& node = *io.node;
  auto input = [&](size_t i) -> const Tensor* { return i < io.inputs.size() ? io.inputs[i] : nullptr; };
  const Tensor* xs = input(kXScaleInput);
  const Tensor* ws = input(kWScaleInput);
  const Tensor* ys = node.input(kYScaleInput) ? input(kYScaleInput) : nullptr;
  const Tensor* rs = node.input(kRScaleInput) ? input(kRScaleInput) : nullptr;
  if (!xs || !ws || (node.input(kYScaleInput) && !ys) || (node.input(kRScaleInput) && !rs))
    return invalid_argument(node.describe(), ": missing x_scale, w_scale, y_scale or r_scale");
  if (c.empty) return false;
  QuantKey& key = a->key;
  key.conv = c.key;
  key.y = c.y->dtype();
  key.bias = c.b ? c.b->dtype() : DataType::kUndefined;
  key.residual = c.r ? c.r->dtype() : DataType::kUndefined;
  key.per_channel = ws->numel() != 1;
  key.y_scale = ys != nullptr;
  const int64_t m = c.w->shape()[0];
  if (!c.spec.channels_last || c.spec.group != 1 || key.conv.nd != 4 || !is_8bit(c.x->dtype()) ||
      c.w->dtype() != c.x->dtype() || xs->dtype() != DataType::kFloat32 || ws->dtype() != DataType::kFloat32 ||
      xs->numel() != 1 || (key.per_channel && ws->numel() != m) ||
      (ys && (ys->dtype() != DataType::kFloat32 || ys->numel() != 1)) ||
      (ys ? key.y != c.x->dtype() : !is_conv_dtype(key.y)) || (c.b && !is_conv_dtype(key.bias)) ||
      (c.r && (key.residual == c.x->dtype() ? !rs || rs->dtype() != DataType::kFloat32 || rs->numel() != 1
                                             : !is_conv_dtype(key.residual) || rs != nullptr)))
    return invalid_argument(node.describe(), ": tensors do not match the tactic ", tactic.name(), " (X ",
                            data_type_name(c.x->dtype()), ", Y ", data_type_name(key.y), ", w_scale of ", ws->numel(),
                            " values)");
  a->in = {c.x, c.w, xs, ws, c.b, c.r, ys, rs};
  return true;
}

// The key at the builder's shapes `in` (the node's types checked as supports() does).
Result<QuantKey> QuantConvGraph::opt_key(const ir::Node& node, const std::vector<Shape64>& in, ConvSpec* spec) {
  if (in.size() < 4 || !node.output(0)) return unsupported("no device or shapes");
  const std::vector<ir::TensorType> types = node_input_types(node);
  INGOT_RETURN_IF_ERROR(check_node(node, types, spec));
  QuantKey key;
  INGOT_ASSIGN_OR_RETURN(key.conv,
                         make_conv_key(node, *spec, types[0].dtype, to_channels_first(in[0]), to_channels_first(in[1]),
                                       spec->bias_input >= 0, spec->residual_input >= 0));
  set_epilogue(node, types, *spec, &key);
  return key;
}

using CudnnQuantConvTactic = GraphConvTactic<QuantConvGraph>;

}  // namespace

TacticFamily cudnn_quant_conv_family() { return CudnnQuantConvTactic::family("cudnn.graph.quant_conv"); }

int64_t cudnn_quant_conv_plans_deserialized() { return CudnnQuantConvTactic::plans_deserialized(); }

}  // namespace ingot::backend::cuda

#endif  // INGOT_WITH_CUDNN && INGOT_WITH_CUDNN_FRONTEND
