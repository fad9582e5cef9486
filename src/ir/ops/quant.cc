// Copyright ingot authors. Apache-2.0.
//
// Type conversion and quantization ops: Cast, CastLike, BitCast, QuantizeLinear,
// DequantizeLinear, DynamicQuantizeLinear, MatMulInteger, ConvInteger, QLinearMatMul,
// QLinearConv; and ingot::QuantGemm / ingot::QuantConv, the quantized layers fuse_quant_gemm forms:
//
//   QuantGemm(X, W, x_scale, w_scale, [B], [R], [y_scale]) -> Y   (domain "ingot", opset 1)
//     X: int8 or float8e4m3fn, [..., K]; W: X's type, [N, K] (a Linear layer's weight, Gemm's
//     transB = 1); x_scale: float32, one value; w_scale: float32, one value or [N]; B: optional
//     float [N]; R: optional residual of Y's type and shape. Y: [..., N] of type `output_dtype`
//     (float32, float16 or bfloat16; default float32).
//     Y = act(x_scale * w_scale[n] * sum_k X[.., k] * W[n, k] + B[n] + R), `activation` and
//     `activation_params` as FusedGemm's. int8 products accumulate exactly (int32); fp8 in fp32.
//     What DequantizeLinear(X) -> MatMul(., DequantizeLinear(W)^T) -> Add(B) -> act computes,
//     without the float copies of X and W.
//     With y_scale (float32, one value) the result is quantized for the next layer, as
//     QuantizeLinear(Y, y_scale) would (quotient in float32, int8 rounded half to even and
//     saturated, fp8 rounded to nearest even and saturated at +-448): `output_dtype` is then int8
//     or float8e4m3fn, and there is no R.
//
//   QuantConv(X, W, x_scale, w_scale, [B], [R], [y_scale], [r_scale]) -> Y   (domain "ingot", opset 1)
//     The quantized convolution fuse_quant_gemm forms from DequantizeLinear(X), DequantizeLinear(W)
//     -> Conv [-> Add(R)] [-> act] [-> QuantizeLinear]: X int8 or float8e4m3fn, [N, C, spatial...]
//     as Conv's; W: X's type, [M, C/group, kernel...]; x_scale: float32, one value; w_scale:
//     float32, one value or [M]; B: optional float [M]; R: optional float residual of Y's shape
//     (of Y's type when Y is float); y_scale: optional float32, one value. Conv's strides, pads,
//     dilations, group and kernel_shape (no auto_pad: the pass writes the pads it resolves to).
//     Y = act(x_scale * w_scale[m] * conv(X, W)[n, m, ...] + B[m] + R), then, with y_scale,
//     quantized as QuantizeLinear(Y, y_scale) would (as QuantGemm's; a residual may come with
//     it here: ResNet's conv -> Add -> Relu -> the next block's QuantizeLinear). int8 products
//     accumulate exactly (what an int32 accumulator holds); fp8 in fp32 or wider.
//     With `channels_last` = 1, X, R and Y are [N, spatial..., C] and W is [M, kernel..., C/group]
//     (NHWC / KRSC, what cuDNN's and CUTLASS's int8 / fp8 convolutions read), as FusedConv's.
//     R may also be 8-bit, of X's type, with r_scale (float32, one value; given only then): the
//     residual is then r_scale * R, what DequantizeLinear(R, r_scale) gives. That is TensorRT's
//     placement for a residual block: the block's output is quantized once, for the next block's
//     first conv and for its residual Add alike, so no layer writes it in float.
#include <string>
#include <vector>

#include "ir/ops/all_ops.h"

namespace ingot::ir {

namespace {

bool cast_target_ok(int64_t to) {
  return is_valid_data_type(static_cast<int32_t>(to)) &&
         static_cast<DataType>(to) != DataType::kComplex64 &&
         static_cast<DataType>(to) != DataType::kComplex128;
}

/// Small known inputs (shape computations) are cast at inference time so that downstream
/// shape inference sees the value.
void fold_cast(InferenceContext& c, DataType to) {
  const Tensor* v = c.input_value(0);
  if (!v || v->numel() > 1024 || v->dtype() == DataType::kString || to == DataType::kString) return;
  if (!(is_integer(v->dtype()) || v->dtype() == DataType::kBool || is_float(v->dtype()))) return;
  auto out = Tensor::zeros(to, v->shape());
  if (!out.ok()) return;
  bool int_path = (is_integer(v->dtype()) || v->dtype() == DataType::kBool) &&
                  (is_integer(to) || to == DataType::kBool);
  for (int64_t i = 0; i < v->numel(); ++i) {
    if (int_path) out->set_i64(i, v->get_i64(i));
    else out->set_f64(i, v->get_f64(i));
  }
  c.set_output_value(0, std::move(*out));
}

/// numpy matmul shape of inputs a and b (1-D operands promoted and the added dim dropped).
Result<Shape> matmul_shape(const InferenceContext& c, size_t ia, size_t ib) {
  const Shape& a = c.input_shape(ia);
  const Shape& b = c.input_shape(ib);
  if (!a.rank_known() || !b.rank_known()) return Shape::unknown_rank();
  if (a.rank() == 0 || b.rank() == 0) return c.error("MatMul operands must not be scalars");
  std::vector<Dim> ad = a.dims(), bd = b.dims();
  bool a1 = ad.size() == 1, b1 = bd.size() == 1;
  if (a1) ad.insert(ad.begin(), Dim(1));
  if (b1) bd.push_back(Dim(1));
  const Dim& k1 = ad.back();
  const Dim& k2 = bd[bd.size() - 2];
  if (k1.is_known() && k2.is_known() && k1.value() != k2.value())
    return c.error("inner dimensions differ: ", a.to_string(), " x ", b.to_string());
  Shape ba(std::vector<Dim>(ad.begin(), ad.end() - 2));
  Shape bb(std::vector<Dim>(bd.begin(), bd.end() - 2));
  auto batch = broadcast_shapes(ba, bb);
  if (!batch.ok()) return c.error(batch.status().message());
  std::vector<Dim> out = batch->dims();
  if (!a1) out.push_back(ad[ad.size() - 2]);
  if (!b1) out.push_back(bd.back());
  return Shape(out);
}

/// Output shape of an (integer) convolution of inputs x and w.
Result<Shape> conv_shape(const InferenceContext& c, size_t ix, size_t iw) {
  const Shape& x = c.input_shape(ix);
  const Shape& w = c.input_shape(iw);
  if (!x.rank_known()) return Shape::unknown_rank();
  if (x.rank() < 3) return c.error("input must have rank >= 3, got ", x.to_string());
  size_t sp = x.rank() - 2;
  if (w.rank_known() && w.rank() != x.rank())
    return c.error("weight rank ", w.rank(), " differs from input rank ", x.rank());
  std::vector<int64_t> kernel = c.attrs().get_ints("kernel_shape");
  if (kernel.empty() && w.rank_known()) {
    for (size_t i = 0; i < sp; ++i) kernel.push_back(w[i + 2].is_known() ? w[i + 2].value() : -1);
  }
  std::vector<int64_t> strides = c.attrs().get_ints("strides", std::vector<int64_t>(sp, 1));
  std::vector<int64_t> dil = c.attrs().get_ints("dilations", std::vector<int64_t>(sp, 1));
  std::vector<int64_t> pads = c.attrs().get_ints("pads", std::vector<int64_t>(2 * sp, 0));
  std::string auto_pad = c.attrs().get_string("auto_pad", "NOTSET");
  if (strides.size() != sp || dil.size() != sp || pads.size() != 2 * sp ||
      (!kernel.empty() && kernel.size() != sp))
    return c.error("kernel_shape/strides/dilations/pads do not match ", sp, " spatial dims");
  for (size_t i = 0; i < sp; ++i)
    if (strides[i] <= 0 || dil[i] <= 0) return c.error("strides and dilations must be positive");
  std::vector<Dim> out;
  out.push_back(x[0]);
  if (w.rank_known()) out.push_back(w[0]);
  else out.push_back(Dim::unknown());
  int64_t group = c.attrs().get_int("group", 1);
  if (group <= 0) return c.error("group must be positive");
  if (w.rank_known() && x[1].is_known() && w[1].is_known() && x[1].value() != w[1].value() * group)
    return c.error("input channels ", x[1].value(), " != weight channels ", w[1].value(), " * group ", group);
  for (size_t i = 0; i < sp; ++i) {
    const Dim& d = x[i + 2];
    if (!d.is_known() || kernel.empty() || kernel[i] < 0) {
      out.push_back(Dim::unknown());
      continue;
    }
    int64_t ek = (kernel[i] - 1) * dil[i] + 1;
    int64_t o;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      o = (d.value() + strides[i] - 1) / strides[i];
    } else if (auto_pad == "VALID") {
      o = d.value() >= ek ? (d.value() - ek) / strides[i] + 1 : 0;
    } else {
      int64_t padded = d.value() + pads[i] + pads[i + sp];
      if (padded < ek) return c.error("kernel larger than padded input");
      o = (padded - ek) / strides[i] + 1;
    }
    out.push_back(Dim(o));
  }
  return Shape(out);
}

Status infer_quantize(InferenceContext& c) {
  DataType out = DataType::kUInt8;
  int64_t odt = c.attrs().get_int("output_dtype", 0);
  if (c.has_input(2)) {
    out = c.input_dtype(2);
    if (odt != 0 && out != DataType::kUndefined && static_cast<int64_t>(out) != odt)
      return c.error("output_dtype ", odt, " differs from the zero point's type ", data_type_name(out));
  } else if (odt != 0) {
    if (!is_valid_data_type(static_cast<int32_t>(odt))) return c.error("invalid output_dtype ", odt);
    out = static_cast<DataType>(odt);
  }
  if (out != DataType::kUndefined && !is_integer(out) && !is_float8(out) && out != DataType::kFloat4E2M1)
    return c.error("cannot quantize to ", data_type_name(out));
  c.set_output(0, out, c.input_shape(0));
  return Status::Ok();
}

Status infer_dequantize(InferenceContext& c) {
  DataType out = c.input_dtype(1);
  int64_t odt = c.attrs().get_int("output_dtype", 0);
  if (odt != 0) {
    if (!is_valid_data_type(static_cast<int32_t>(odt)) || !is_float(static_cast<DataType>(odt)))
      return c.error("invalid output_dtype ", odt);
    out = static_cast<DataType>(odt);
  }
  c.set_output(0, out, c.input_shape(0));
  return Status::Ok();
}

/// What QuantGemm and QuantConv check alike: the 8-bit operands, the fp32 scales (one value or a
/// vector), B, R and y_scale, and the output type. Returns the output type.
Result<DataType> check_quant_layer(InferenceContext& c, bool residual_with_y_scale) {
  const DataType q = c.input_dtype(0);
  if (q != DataType::kInt8 && q != DataType::kFloat8E4M3FN)
    return c.error("X must be int8 or float8e4m3fn, got ", data_type_name(q));
  if (c.input_dtype(1) != q) return c.error("W must have X's type ", data_type_name(q));
  if (c.input_dtype(2) != DataType::kFloat32 || c.input_dtype(3) != DataType::kFloat32)
    return c.error("x_scale and w_scale must be float32");
  const auto out = static_cast<DataType>(c.attrs().get_int("output_dtype", 1));
  const bool quantized = c.has_input(6);
  if (quantized) {
    if (out != DataType::kInt8 && out != DataType::kFloat8E4M3FN)
      return c.error("with y_scale, output_dtype must be int8 or float8e4m3fn");
    if (c.input_dtype(6) != DataType::kFloat32) return c.error("y_scale must be float32");
    if (c.has_input(5) && !residual_with_y_scale) return c.error("a quantized output takes no residual");
  } else if (out != DataType::kFloat32 && out != DataType::kFloat16 && out != DataType::kBFloat16) {
    return c.error("output_dtype must be float32, float16 or bfloat16");
  }
  if (c.has_input(4) && !is_float(c.input_dtype(4))) return c.error("B must be float");
  const bool r8 = c.has_input(5) && c.input_dtype(5) == q;  // an 8-bit residual (QuantConv's, with r_scale)
  if (c.has_input(5) && !r8) {
    const DataType r = c.input_dtype(5);
    if (quantized ? !(r == DataType::kFloat32 || r == DataType::kFloat16 || r == DataType::kBFloat16) : r != out)
      return c.error("R must have ", quantized ? "a float type" : "the output's type " + std::string(data_type_name(out)),
                     ", got ", data_type_name(r));
  }
  if (r8 && !c.has_input(7)) return c.error("an 8-bit R needs r_scale (input 7)");
  if (c.has_input(7)) {
    if (!r8) return c.error("r_scale goes with an 8-bit R of X's type only");
    if (c.input_dtype(7) != DataType::kFloat32) return c.error("r_scale must be float32");
    const Shape& s = c.input_shape(7);
    if (s.rank_known() && !(s.rank() == 0 || (s.rank() == 1 && s[0].is_known() && s[0].value() == 1)))
      return c.error("r_scale must be one value, got ", s.to_string());
  }
  for (size_t i : {size_t{2}, size_t{3}, size_t{6}}) {
    if (!c.has_input(i)) continue;
    const Shape& s = c.input_shape(i);
    if (s.rank_known() && s.rank() > 1) return c.error("scale ", i, " must be a scalar or a vector");
  }
  return out;
}

Status infer_quant_conv(InferenceContext& c) {
  INGOT_ASSIGN_OR_RETURN(DataType out, check_quant_layer(c, /*residual_with_y_scale=*/true));
  if (c.attrs().find("auto_pad") != nullptr) return c.error("auto_pad must be resolved to pads");
  const int64_t channels_last = c.attrs().get_int("channels_last", 0);
  if (channels_last != 0 && channels_last != 1) return c.error("channels_last must be 0 or 1, got ", channels_last);
  const Shape& x = c.input_shape(0);
  const Shape& w = c.input_shape(1);
  if (x.rank_known() && x.rank() < 3) return c.error("X must have rank >= 3, got ", x.to_string());
  if (x.rank_known() && w.rank_known() && w.rank() != x.rank())
    return c.error("W has shape ", w.to_string(), ", X ", x.to_string(), " (ranks differ)");
  // Conv's own inference on X and W (channels-first views), so there stays one shape path.
  const size_t rank = x.rank_known() ? x.rank() : 0;
  auto view = [&](const Shape& s) { return channels_last && rank ? permute_shape(s, channels_first_perm(rank)) : s; };
  std::vector<TensorType> types = {{DataType::kFloat32, view(x)}, {DataType::kFloat32, view(w)}};
  InferenceContext inner(c.node(), 17, std::move(types), {nullptr, nullptr});
  const OpSchema* conv = OpRegistry::global().find("Conv", "");
  if (!conv || !conv->inference()) return c.error("no inference for Conv");
  INGOT_RETURN_IF_ERROR(conv->inference()(inner));
  Shape y = inner.output(0).shape;
  if (channels_last && rank) y = permute_shape(y, channels_last_perm(rank));
  if (c.has_input(5) && y.rank_known()) {
    const Shape& r = c.input_shape(5);
    bool same = r.rank_known() && r.rank() == y.rank();
    for (size_t i = 0; same && i < r.rank(); ++i)
      same = !(r[i].is_known() && y[i].is_known() && r[i].value() != y[i].value());
    if (!same) return c.error("R has shape ", r.to_string(), ", Y ", y.to_string());
  }
  if (w.rank_known() && c.has_input(4)) {
    const Shape& b = c.input_shape(4);
    const Dim& m = w[0];
    if (b.rank_known() && (b.rank() != 1 || (b[0].is_known() && m.is_known() && b[0].value() != m.value())))
      return c.error("B has shape ", b.to_string(), ", expected [", m.to_string(), "]");
  }
  c.set_output(0, out, y);
  return Status::Ok();
}

}  // namespace

void register_quant_ops(OpRegistry& r) {
  r.add("Cast").inputs(1, 1).outputs(1, 1).opsets(1)
      .attr("to", AttrType::kInt, true)
      .attr("saturate", AttrType::kInt)
      .attr("round_mode", AttrType::kString)
      .infer([](InferenceContext& c) -> Status {
        int64_t to = c.attrs().get_int("to", 0);
        if (!cast_target_ok(to)) return c.error("invalid target type ", to);
        c.set_output(0, static_cast<DataType>(to), c.input_shape(0));
        fold_cast(c, static_cast<DataType>(to));
        return Status::Ok();
      });

  r.add("CastLike").inputs(2, 2).outputs(1, 1).opsets(15)
      .attr("saturate", AttrType::kInt)
      .attr("round_mode", AttrType::kString)
      .infer([](InferenceContext& c) -> Status {
        DataType to = c.input_dtype(1);
        c.set_output(0, to, c.input_shape(0));
        if (to != DataType::kUndefined) fold_cast(c, to);
        return Status::Ok();
      });

  r.add("BitCast").inputs(1, 1).outputs(1, 1).opsets(26)
      .attr("to", AttrType::kInt, true)
      .infer([](InferenceContext& c) -> Status {
        int64_t to = c.attrs().get_int("to", 0);
        if (!is_valid_data_type(static_cast<int32_t>(to)) || static_cast<DataType>(to) == DataType::kString)
          return c.error("invalid target type ", to);
        DataType from = c.input_dtype(0);
        if (from == DataType::kString) return c.error("cannot bit-cast strings");
        if (from != DataType::kUndefined && data_type_bits(from) != data_type_bits(static_cast<DataType>(to)))
          return c.error("bit widths differ: ", data_type_name(from), " (", data_type_bits(from), ") vs ",
                         data_type_name(static_cast<DataType>(to)), " (",
                         data_type_bits(static_cast<DataType>(to)), ")");
        c.set_output(0, static_cast<DataType>(to), c.input_shape(0));
        return Status::Ok();
      });

  r.add("QuantizeLinear").inputs(2, 3).outputs(1, 1).opsets(10)
      .attr("axis", AttrType::kInt)
      .attr("saturate", AttrType::kInt)
      .attr("block_size", AttrType::kInt)
      .attr("output_dtype", AttrType::kInt)
      .attr("precision", AttrType::kInt)
      .infer(infer_quantize);

  r.add("DequantizeLinear").inputs(2, 3).outputs(1, 1).opsets(10)
      .attr("axis", AttrType::kInt)
      .attr("block_size", AttrType::kInt)
      .attr("output_dtype", AttrType::kInt)
      .infer(infer_dequantize);

  r.add("DynamicQuantizeLinear").inputs(1, 1).outputs(3, 3).opsets(11)
      .infer([](InferenceContext& c) -> Status {
        c.set_output(0, DataType::kUInt8, c.input_shape(0));
        c.set_output(1, DataType::kFloat32, Shape());
        c.set_output(2, DataType::kUInt8, Shape());
        return Status::Ok();
      });

  r.add("MatMulInteger").inputs(2, 4).outputs(1, 1).opsets(10)
      .infer([](InferenceContext& c) -> Status {
        auto s = matmul_shape(c, 0, 1);
        if (!s.ok()) return s.status();
        c.set_output(0, DataType::kInt32, *s);
        return Status::Ok();
      });

  r.add("QLinearMatMul").inputs(8, 8).outputs(1, 1).opsets(10)
      .infer([](InferenceContext& c) -> Status {
        auto s = matmul_shape(c, 0, 3);
        if (!s.ok()) return s.status();
        c.set_output(0, c.input_dtype(7), *s);
        return Status::Ok();
      });

  auto conv_attrs = [](OpSchema& s) -> OpSchema& {
    return s.attr("auto_pad", AttrType::kString)
        .attr("dilations", AttrType::kInts)
        .attr("group", AttrType::kInt)
        .attr("kernel_shape", AttrType::kInts)
        .attr("pads", AttrType::kInts)
        .attr("strides", AttrType::kInts);
  };

  conv_attrs(r.add("ConvInteger").inputs(2, 4).outputs(1, 1).opsets(10))
      .infer([](InferenceContext& c) -> Status {
        auto s = conv_shape(c, 0, 1);
        if (!s.ok()) return s.status();
        c.set_output(0, DataType::kInt32, *s);
        return Status::Ok();
      });

  r.add("QuantGemm", "ingot").inputs(4, 7).outputs(1, 1).opsets(1)
      .attr("activation", AttrType::kString)
      .attr("activation_params", AttrType::kFloats)
      .attr("output_dtype", AttrType::kInt)
      .infer([](InferenceContext& c) -> Status {
        INGOT_ASSIGN_OR_RETURN(DataType out, check_quant_layer(c, /*residual_with_y_scale=*/false));
        const Shape& x = c.input_shape(0);
        const Shape& w = c.input_shape(1);
        if (w.rank_known() && w.rank() != 2) return c.error("W must be [N, K], got ", w.to_string());
        if (x.rank_known() && x.rank() < 1) return c.error("X must have rank >= 1");
        if (!x.rank_known() || !w.rank_known()) {
          c.set_output(0, out, Shape::unknown_rank());
          return Status::Ok();
        }
        const Dim& k = x.dims().back();
        if (k.is_known() && w.dims()[1].is_known() && k.value() != w.dims()[1].value())
          return c.error("X has K = ", k.value(), ", W has ", w.dims()[1].value());
        std::vector<Dim> dims = x.dims();
        dims.back() = w.dims()[0];
        if (c.has_input(5) && c.input_shape(5).rank_known() && c.input_shape(5).rank() != dims.size())
          return c.error("R has shape ", c.input_shape(5).to_string(), ", Y ", Shape(dims).to_string());
        c.set_output(0, out, Shape(dims));
        return Status::Ok();
      })
      .doc("quantized (int8/fp8) linear layer: act(x_scale*w_scale*X.W^T + B + R)");

  r.add("QuantConv", "ingot").inputs(4, 8).outputs(1, 1).opsets(1)
      .attr("dilations", AttrType::kInts)
      .attr("group", AttrType::kInt)
      .attr("kernel_shape", AttrType::kInts)
      .attr("pads", AttrType::kInts)
      .attr("strides", AttrType::kInts)
      .attr("channels_last", AttrType::kInt)
      .attr("activation", AttrType::kString)
      .attr("activation_params", AttrType::kFloats)
      .attr("output_dtype", AttrType::kInt)
      .infer(infer_quant_conv)
      .doc("quantized (int8/fp8) convolution: act(x_scale*w_scale[m]*conv(X, W) + B + R) [quantized by y_scale]");

  conv_attrs(r.add("QLinearConv").inputs(8, 9).outputs(1, 1).opsets(10))
      .infer([](InferenceContext& c) -> Status {
        auto s = conv_shape(c, 0, 3);
        if (!s.ok()) return s.status();
        c.set_output(0, c.input_dtype(7), *s);
        return Status::Ok();
      });
}

}  // namespace ingot::ir
