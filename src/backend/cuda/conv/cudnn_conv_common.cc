// Copyright ingot authors. Apache-2.0.
//
// The parts of the cuDNN convolution tactics both families share (see cudnn_conv_common.h).
#ifdef INGOT_WITH_CUDNN

#include "backend/cuda/conv/cudnn_conv_common.h"

#include <cuda_runtime_api.h>

#include <cstring>
#include <limits>

#include "backend/cuda/core/cuda_check.h"

namespace ingot::backend::cuda {

namespace {

bool is_default_domain(const std::string& d) { return d.empty() || d == "ai.onnx"; }

bool fits_int(int64_t v) { return v >= 0 && v <= std::numeric_limits<int32_t>::max(); }


}  // namespace

bool conv_handles_op(const ir::Node& n) {
  if (is_default_domain(n.domain())) return n.op_type() == "Conv";
  return n.domain() == "ingot" && n.op_type() == "FusedConv";
}

bool is_quant_conv_op(const ir::Node& n) { return n.domain() == "ingot" && n.op_type() == "QuantConv"; }

bool is_conv_dtype(DataType t) {
  return t == DataType::kFloat32 || t == DataType::kFloat16 || t == DataType::kBFloat16;
}

Shape64 to_channels_first(const Shape64& d) {
  if (d.size() < 3) return d;
  Shape64 out = {d[0], d.back()};
  out.insert(out.end(), d.begin() + 1, d.end() - 1);
  return out;
}

ir::Shape to_channels_first(const ir::Shape& s) {
  if (!s.rank_known() || s.rank() < 3) return s;
  std::vector<ir::Dim> d = {s[0], s[s.rank() - 1]};
  for (size_t i = 1; i + 1 < s.rank(); ++i) d.push_back(s[i]);
  return ir::Shape(d);
}

Result<ConvSpec> parse_conv_spec(const ir::Node& node, int spatial) {
  const bool quant = is_quant_conv_op(node);
  if (!conv_handles_op(node) && !quant) return unsupported(node.describe(), ": not a convolution");
  const ir::Attributes& at = node.attrs();
  ConvSpec s;
  if (spatial < 1 || spatial > 3) return unsupported(node.describe(), ": ", spatial, " spatial dims");
  s.spatial = spatial;
  std::string auto_pad = at.get_string("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET") return unsupported(node.describe(), ": auto_pad ", auto_pad);
  std::vector<int64_t> pads = at.get_ints("pads", std::vector<int64_t>(2 * spatial, 0));
  std::vector<int64_t> strides = at.get_ints("strides", std::vector<int64_t>(spatial, 1));
  std::vector<int64_t> dilations = at.get_ints("dilations", std::vector<int64_t>(spatial, 1));
  if (pads.size() != static_cast<size_t>(2 * spatial) || strides.size() != static_cast<size_t>(spatial) ||
      dilations.size() != static_cast<size_t>(spatial))
    return unsupported(node.describe(), ": pads/strides/dilations do not match ", spatial, " spatial dims");
  for (int i = 0; i < spatial; ++i) {
    if (pads[i] != pads[i + spatial]) return unsupported(node.describe(), ": asymmetric pads");
    if (!fits_int(pads[i]) || strides[i] < 1 || !fits_int(strides[i]) || dilations[i] < 1 || !fits_int(dilations[i]))
      return unsupported(node.describe(), ": pads/strides/dilations out of range");
    s.pads[i] = static_cast<int>(pads[i]);
    s.strides[i] = static_cast<int>(strides[i]);
    s.dilations[i] = static_cast<int>(dilations[i]);
  }
  s.kernel_shape = at.get_ints("kernel_shape");
  if (!s.kernel_shape.empty() && s.kernel_shape.size() != static_cast<size_t>(spatial))
    return unsupported(node.describe(), ": kernel_shape rank");
  s.group = at.get_int("group", 1);
  if (s.group < 1 || !fits_int(s.group)) return unsupported(node.describe(), ": group ", s.group);
  if (quant) {
    // X, W, x_scale, w_scale, [B], [R], [y_scale]: act(scaled conv + B + R), the residual first.
    if (node.input(4)) s.bias_input = 4;
    if (node.input(5)) s.residual_input = 5;
    s.channels_last = at.get_int("channels_last", 0) != 0;
    if (s.channels_last && spatial != 2) return unsupported(node.describe(), ": channels-last needs a 2-D conv");
    s.activation = at.get_string("activation", "");
    s.activation_params = at.get_floats("activation_params");
    s.relu = s.activation == "Relu";
    return s;
  }
  if (node.input(2)) s.bias_input = 2;
  if (node.op_type() == "FusedConv") {
    if (at.get_int("transposed", 0) != 0) return unsupported(node.describe(), ": transposed convolution");
    s.channels_last = at.get_int("channels_last", 0) != 0;
    if (s.channels_last && spatial != 2) return unsupported(node.describe(), ": channels-last needs a 2-D conv");
    s.activation = at.get_string("activation", "");
    s.activation_params = at.get_floats("activation_params");
    s.relu = s.activation == "Relu";
    if (node.input(3)) {
      s.residual_input = 3;
      s.residual_after_activation = !s.activation.empty() && at.get_int("residual_before_activation", 1) == 0;
    }
  } else if (node.inputs().size() > 3) {
    return unsupported(node.describe(), ": Conv with more than 3 inputs");
  }
  return s;
}

Status check_conv_types(const ir::Node& node, const std::vector<ir::TensorType>& in, ConvSpec* spec_out) {
  if (in.size() < 2 || !node.input(0) || !node.input(1) || !node.output(0))
    return unsupported(node.describe(), ": needs X, W and an output");
  if (!in[0].shape.rank_known() || !in[1].shape.rank_known() || in[0].shape.rank() != in[1].shape.rank() ||
      in[0].shape.rank() < 3 || in[0].shape.rank() > 5)
    return unsupported(node.describe(), ": X ", in[0].shape.to_string(), " / W ", in[1].shape.to_string(), " ranks");
  INGOT_ASSIGN_OR_RETURN(ConvSpec s, parse_conv_spec(node, static_cast<int>(in[0].shape.rank()) - 2));
  const ir::Shape x = s.channels_last ? to_channels_first(in[0].shape) : in[0].shape;
  const ir::Shape w = s.channels_last ? to_channels_first(in[1].shape) : in[1].shape;
  if (!is_quant_conv_op(node)) {
    DataType dt = in[0].dtype;
    if (!is_conv_dtype(dt)) return unsupported(node.describe(), ": dtype ", data_type_name(dt));
    for (size_t i = 0; i < in.size(); ++i)
      if (node.input(i) && in[i].dtype != dt) return unsupported(node.describe(), ": mixed dtypes");
    if (node.output(0)->dtype() != dt) return unsupported(node.describe(), ": output dtype differs");
  }
  // Channels, when known, must split into the groups (the reference rejects the rest anyway).
  if (x[1].is_known() && w[1].is_known() && x[1].value() != w[1].value() * s.group)
    return unsupported(node.describe(), ": ", x[1].value(), " channels vs W ", w.to_string(), " x group ", s.group);
  if (w[0].is_known() && w[0].value() % s.group != 0)
    return unsupported(node.describe(), ": ", w[0].value(), " filters do not split into ", s.group, " groups");
  if (s.bias_input >= 0) {
    if (static_cast<size_t>(s.bias_input) >= in.size()) return unsupported(node.describe(), ": no bias type");
    const ir::Shape& b = in[static_cast<size_t>(s.bias_input)].shape;
    if (!b.rank_known() || b.rank() != 1 || !b[0].provably_equal(w[0]))
      return unsupported(node.describe(), ": bias ", b.to_string(), " is not [M] for W ", w.to_string());
  }
  if (s.residual_input >= 0) {
    if (static_cast<size_t>(s.residual_input) >= in.size()) return unsupported(node.describe(), ": no residual type");
    const ir::Shape& r = in[static_cast<size_t>(s.residual_input)].shape;
    const ir::Shape& y = node.output(0)->shape();
    if (!r.rank_known() || !y.rank_known() || r.rank() != y.rank())
      return unsupported(node.describe(), ": residual ", r.to_string(), " vs output ", y.to_string());
    for (size_t i = 0; i < r.rank(); ++i)
      if (!r[i].provably_equal(y[i]))
        return unsupported(node.describe(), ": residual ", r.to_string(), " may differ from output ", y.to_string());
  }
  if (spec_out) *spec_out = s;
  return Status::Ok();
}

Result<ConvKey> make_conv_key(const ir::Node& node, const ConvSpec& s, DataType dtype, const Shape64& x,
                              const Shape64& w, bool bias, bool residual) {
  ConvKey k;
  k.node = &node;
  k.bias = bias;
  k.residual = residual;
  k.channels_last = s.channels_last;
  k.dtype = dtype;
  if (x.size() != static_cast<size_t>(s.spatial + 2) || w.size() != x.size())
    return invalid_argument(node.describe(), ": X ", shape_to_string(x), " / W ", shape_to_string(w), " ranks");
  k.nd = s.spatial == 1 ? 4 : s.spatial + 2;
  size_t o = s.spatial == 1 ? 1 : 0;  // 1-D: insert H = 1 after N, C
  for (size_t i = 0; i < static_cast<size_t>(k.nd); ++i) {
    int64_t xv = 1, wv = 1;
    if (i < 2) { xv = x[i]; wv = w[i]; }
    else if (i >= 2 + o) { xv = x[i - o]; wv = w[i - o]; }
    if (!fits_int(xv) || !fits_int(wv))
      return unsupported(node.describe(), ": dims beyond int32 (X ", shape_to_string(x), ")");
    k.x[i] = static_cast<int>(xv);
    k.w[i] = static_cast<int>(wv);
  }
  if (shape_numel(x) > std::numeric_limits<int32_t>::max() || shape_numel(w) > std::numeric_limits<int32_t>::max())
    return unsupported(node.describe(), ": more than 2^31 elements");
  if (k.x[1] != k.w[1] * s.group || k.w[0] % s.group != 0)
    return invalid_argument(node.describe(), ": X ", shape_to_string(x), " and W ", shape_to_string(w),
                            " do not match group ", s.group);
  for (size_t i = 0; i < s.kernel_shape.size(); ++i)
    if (s.kernel_shape[i] != w[2 + i])
      return invalid_argument(node.describe(), ": kernel_shape disagrees with W ", shape_to_string(w));
  return k;
}

Result<ConvCall> read_conv_call(const StepIO& io) {
  const ir::Node& node = *io.node;
  auto input = [&](int i) -> const Tensor* {
    return i >= 0 && static_cast<size_t>(i) < io.inputs.size() ? io.inputs[static_cast<size_t>(i)] : nullptr;
  };
  ConvCall c;
  c.x = input(0);
  c.w = input(1);
  if (!c.x || !c.w || !io.outputs || io.outputs->empty())
    return invalid_argument(node.describe(), ": missing X, W or output");
  INGOT_ASSIGN_OR_RETURN(c.spec, parse_conv_spec(node, static_cast<int>(c.x->shape().size()) - 2));
  c.b = input(c.spec.bias_input);
  c.r = input(c.spec.residual_input);
  if ((c.spec.bias_input >= 0 && !c.b) || (c.spec.residual_input >= 0 && !c.r))
    return invalid_argument(node.describe(), ": missing bias or residual tensor");
  c.y = &(*io.outputs)[0];
  const Tensor& y = *c.y;
  const bool quant = is_quant_conv_op(node);
  for (const Tensor* t : {c.x, c.w, c.b, c.r})
    if (!quant && t && t->dtype() != y.dtype()) return invalid_argument(node.describe(), ": mixed dtypes");
  if (y.numel() == 0) {
    c.empty = true;
    return c;
  }
  if (c.x->numel() == 0 || c.w->numel() == 0)
    return unsupported(node.describe(), ": empty input with a non-empty output");
  const bool cl = c.spec.channels_last;
  const Shape64 xs = cl ? to_channels_first(c.x->shape()) : c.x->shape();
  const Shape64 ws = cl ? to_channels_first(c.w->shape()) : c.w->shape();
  c.ys = cl ? to_channels_first(y.shape()) : y.shape();
  if (c.b && (c.b->shape().size() != 1 || c.b->shape()[0] != c.w->shape()[0]))
    return invalid_argument(node.describe(), ": bias ", shape_to_string(c.b->shape()), " for W ",
                            shape_to_string(c.w->shape()));
  if (c.r && c.r->shape() != y.shape())
    return invalid_argument(node.describe(), ": residual ", shape_to_string(c.r->shape()), " vs output ",
                            shape_to_string(y.shape()));
  if (!io.workspace) return internal_error(node.describe(), ": no workspace");
  INGOT_ASSIGN_OR_RETURN(
      c.key, make_conv_key(node, c.spec, quant ? c.x->dtype() : y.dtype(), xs, ws, c.b != nullptr, c.r != nullptr));
  return c;
}

Result<ConvKey> guessed_conv_key(const ir::Node& node, const std::vector<ir::TensorType>& inputs, ConvSpec* spec_out) {
  constexpr int64_t kGuessDim = 32;
  if (inputs.size() < 2 || !inputs[0].shape.rank_known() || !inputs[1].shape.rank_known())
    return unsupported(node.describe(), ": ranks unknown");
  INGOT_ASSIGN_OR_RETURN(ConvSpec spec, parse_conv_spec(node, static_cast<int>(inputs[0].shape.rank()) - 2));
  const ir::Shape xs = spec.channels_last ? to_channels_first(inputs[0].shape) : inputs[0].shape;
  const ir::Shape ws = spec.channels_last ? to_channels_first(inputs[1].shape) : inputs[1].shape;
  auto concrete = [&](const ir::Shape& s, bool is_x) {
    Shape64 out;
    for (size_t i = 0; i < s.rank(); ++i) out.push_back(s[i].is_known() ? s[i].value() : (is_x && i == 0) ? 1 : kGuessDim);
    return out;
  };
  Shape64 x = concrete(xs, true), w = concrete(ws, false);
  if (!xs[1].is_known() && ws[1].is_known()) x[1] = w[1] * spec.group;
  if (spec_out) *spec_out = spec;
  return make_conv_key(node, spec, inputs[0].dtype, x, w, spec.bias_input >= 0, spec.residual_input >= 0);
}

int conv_tactic_index(const std::string& name, const char* prefix, int count, const std::vector<uint8_t>& params) {
  const size_t n = std::strlen(prefix);
  if (name.size() != n + 1 || name.compare(0, n, prefix) != 0) return -1;
  const int index = name[n] - '0';
  if (index < 0 || index >= count || index > 9) return -1;
  if (!params.empty() && (params.size() != 2 || params[0] != 1 || params[1] != index)) return -1;
  return index;
}

Result<cudnnHandle_t> cudnn_thread_handle(const ir::Node& node) {
  constexpr int kMaxDevices = 64;
  thread_local std::array<cudnnHandle_t, kMaxDevices> handles{};
  int dev = 0;
  INGOT_CUDA_CHECK(cudaGetDevice(&dev));
  if (dev < 0 || dev >= kMaxDevices) return unsupported("CUDA device ordinal ", dev, " is beyond ", kMaxDevices);
  cudnnHandle_t& h = handles[static_cast<size_t>(dev)];
  if (!h) INGOT_CUDNN_CHECK(cudnnCreate(&h), node);
  return h;
}

}  // namespace ingot::backend::cuda

#endif  // INGOT_WITH_CUDNN
