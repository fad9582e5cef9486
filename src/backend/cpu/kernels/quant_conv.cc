// Copyright ingot authors. Apache-2.0.
//
// Reference kernel of ingot::QuantConv (ir/ops/quant.cc): Y = act(x_scale * w_scale[m] *
// conv(X, W) + B[m] + R), quantized by y_scale when given; an 8-bit R counts as r_scale * R. The convolution itself is the Conv
// reference kernel (nn_conv.cc: grouped, depthwise, strided, padded, dilated) run in double on the
// decoded 8-bit numbers: int8 products and their sums are integers below 2^53 (|sum| <= C*k*2^14),
// so the double accumulator holds exactly what an int32 one does, in any summation order; E4M3
// products are exact in double and their sums round at 2^-53. The epilogue runs in double and Y
// is rounded once to its type (as QuantizeLinear does when quantized: the float32 quotient, int8
// rounded half to even and saturated, E4M3 rounded to nearest even and saturated at +-448).
#include <cmath>
#include <string>
#include <vector>

#include "backend/cpu/executor.h"
#include "backend/cpu/kernel_util.h"
#include "backend/cpu/kernels/all_kernels.h"

namespace ingot::cpu {

void register_quant_conv_kernels(KernelRegistry& r);

namespace {

// `t`'s numbers as a double tensor of the same shape (8-bit values decode exactly).
Tensor decoded(const Tensor& t) {
  Tensor out = Tensor::zeros(DataType::kFloat64, t.shape()).value();
  double* d = out.mutable_data<double>();
  for (int64_t i = 0; i < t.numel(); ++i) d[i] = t.get_f64(i);
  return out;
}

// conv(x, w) in double with the node's Conv attributes, on the Conv reference kernel.
Result<Tensor> conv_f64(const KernelContext& k, const Tensor& x, const Tensor& w) {
  ir::Attributes attrs;
  for (const char* a : {"strides", "pads", "dilations", "group", "kernel_shape"})
    if (const ir::Attribute* v = k.attrs().find(a)) attrs.set(a, *v);
  ir::Graph tmp("quant_conv_inner");
  tmp.set_opset_import("", 17);
  ir::Value* xv = tmp.add_value("x");
  ir::Value* wv = tmp.add_value("w");
  ir::Value* out = tmp.add_value("y");
  const ir::Node* n = tmp.add_node("Conv", {xv, wv}, {out}, std::move(attrs), k.node().name());
  INGOT_ASSIGN_OR_RETURN(std::vector<Tensor> outs, run_node(*n, {&x, &w}));
  return outs[0];
}

Status quant_conv(KernelContext& k) {
  const Tensor& x = *k.input(0);
  const Tensor& w = *k.input(1);
  const Tensor& xs = *k.input(2);
  const Tensor& ws = *k.input(3);
  const Tensor* b = k.input(4);
  const Tensor* r = k.input(5);
  const Tensor* ysc = k.input(6);
  const Tensor* rsc = k.input(7);
  const DataType q = x.dtype();
  if ((q != DataType::kInt8 && q != DataType::kFloat8E4M3FN) || w.dtype() != q)
    return k.error("X and W must both be int8 or both float8e4m3fn");
  if (x.rank() < 3 || w.rank() != x.rank())
    return k.error("X ", shape_to_string(x.shape()), " and W ", shape_to_string(w.shape()), " must have one rank >= 3");
  const size_t rank = x.rank();
  const bool channels_last = k.attrs().get_int("channels_last", 0) != 0;
  const int64_t m_out = w.dim(0);
  if (xs.numel() != 1 || (ws.numel() != 1 && ws.numel() != m_out))
    return k.error("x_scale must have one value, w_scale one or ", m_out);
  if (ysc && ysc->numel() != 1) return k.error("y_scale must have one value");
  const bool r8 = r && r->dtype() == q;
  if (r8 != (rsc != nullptr) || (rsc && rsc->numel() != 1))
    return k.error("an 8-bit R (X's type) comes with r_scale, one value, and only it");
  const double r_scale = rsc ? rsc->get_f64(0) : 1.0;
  if (b && b->numel() != m_out) return k.error("B has ", b->numel(), " values, M is ", m_out);

  // The convolution, channels-first, on the decoded numbers.
  Tensor xd = decoded(x), wd = decoded(w);
  if (channels_last) {
    INGOT_ASSIGN_OR_RETURN(xd, permute_dims(xd, ir::channels_first_perm(rank)));
    INGOT_ASSIGN_OR_RETURN(wd, permute_dims(wd, ir::channels_first_perm(rank)));
  }
  INGOT_ASSIGN_OR_RETURN(Tensor acc, conv_f64(k, xd, wd));
  const Shape64& as = acc.shape();  // [N, M, spatial...]
  int64_t spatial = 1;
  for (size_t d = 2; d < as.size(); ++d) spatial *= as[d];
  Shape64 ys = as;
  if (channels_last)
    for (size_t d = 0; d < rank; ++d) ys[d] = as[ir::channels_last_perm(rank)[d]];
  if (r && r->shape() != ys) return k.error("R has shape ", shape_to_string(r->shape()), ", Y ", shape_to_string(ys));

  const auto out_t = static_cast<DataType>(k.attrs().get_int("output_dtype", 1));
  Tensor* y = &k.output(0);
  if (!y->defined() || y->dtype() != out_t || y->shape() != ys) {
    INGOT_ASSIGN_OR_RETURN(y, k.allocate_output(0, out_t, ys));
  }
  const std::string act = k.attrs().get_string("activation", "");
  const std::vector<float> params = k.attrs().get_floats("activation_params");
  const double sx = xs.get_f64(0);
  const float y_scale = ysc ? static_cast<float>(ysc->get_f64(0)) : 1.0f;
  const double* a = acc.data<double>();
  const int64_t images = as[0];
  for (int64_t n = 0; n < images; ++n)
    for (int64_t m = 0; m < m_out; ++m) {
      const double scale = sx * ws.get_f64(ws.numel() == 1 ? 0 : m);
      const double bias = b ? b->get_f64(m) : 0.0;
      for (int64_t s = 0; s < spatial; ++s) {
        const int64_t src = (n * m_out + m) * spatial + s;
        const int64_t dst = channels_last ? (n * spatial + s) * m_out + m : src;
        double v = a[src] * scale + bias;
        if (r) v += r8 ? r_scale * r->get_f64(dst) : r->get_f64(dst);
        v = apply_activation(act, params, v);
        if (ysc)
          store_quantized(*y, dst, static_cast<float>(static_cast<float>(v) / y_scale), true);
        else
          y->set_f64(dst, v);
      }
    }
  return Status::Ok();
}

}  // namespace

void register_quant_conv_kernels(KernelRegistry& r) { r.add("QuantConv", quant_conv, "ingot"); }

}  // namespace ingot::cpu
