// Copyright ingot authors. Apache-2.0.
//
// Reference kernels for ingot::FusedConv, ingot::FusedConvPool, ingot::FusedGemm, ingot::SqueezeExcite and
// ingot::Pointwise. The heavy math is not repeated here: Conv/Gemm/MatMul run through their own reference
// kernels on a temporary node, then bias, residual and activation are applied in double and rounded once;
// FusedConvPool is the FusedConv reference, then ingot::Pool's max pool; Pointwise runs its body graph.
#include <cmath>
#include <string>
#include <vector>

#include "backend/cpu/executor.h"
#include "backend/cpu/kernel_util.h"
#include "backend/cpu/kernels/all_kernels.h"
#include "ir/ops/fused_conv_pool.h"

namespace ingot::cpu {

namespace {

// y = act(y + bias [+ residual]) [+ residual], in place. `bias` broadcasts to y's shape along
// `bias_axis` (a 1-D tensor) or numpy-style when bias_axis < 0; `bias_scale` multiplies it.
Status apply_epilogue(KernelContext& k, Tensor& y, const Tensor* bias, int64_t bias_axis, double bias_scale,
                      const Tensor* residual) {
  const ir::Attributes& at = k.attrs();
  std::string act = at.get_string("activation", "");
  std::vector<float> params = at.get_floats("activation_params");
  bool res_first = at.get_int("residual_before_activation", 1) != 0;
  if (residual && residual->shape() != y.shape())
    return k.error("residual has shape ", shape_to_string(residual->shape()), ", output ",
                   shape_to_string(y.shape()));
  Shape64 strides = shape_strides(y.shape());
  std::unique_ptr<BroadcastIndexer> bidx;
  if (bias && bias_axis < 0) {
    auto b = ir::broadcast_shapes(y.shape(), bias->shape());
    if (!b.ok() || *b != y.shape())
      return k.error("bias of shape ", shape_to_string(bias->shape()), " does not broadcast to ",
                     shape_to_string(y.shape()));
    bidx = std::make_unique<BroadcastIndexer>(y.shape(), bias->shape());
  } else if (bias && (bias->numel() != y.dim(static_cast<size_t>(bias_axis)) && bias->numel() != 1)) {
    return k.error("bias has ", bias->numel(), " values, output channel dim is ", y.dim(static_cast<size_t>(bias_axis)));
  }
  for (int64_t i = 0; i < y.numel(); ++i) {
    double v = y.get_f64(i);
    if (bias) {
      int64_t bi = bidx ? (*bidx)(i) : bias->numel() == 1 ? 0 : (i / strides[bias_axis]) % y.dim(bias_axis);
      v += bias_scale * bias->get_f64(bi);
    }
    if (residual && res_first) v += residual->get_f64(i);
    v = apply_activation(act, params, v);
    if (residual && !res_first) v += residual->get_f64(i);
    y.set_f64(i, v);
  }
  return Status::Ok();
}

ir::Attributes copy_except(const ir::Attributes& at, const std::vector<std::string>& drop) {
  ir::Attributes out;
  for (const auto& [name, a] : at.all()) {
    bool skip = false;
    for (const auto& d : drop) skip |= d == name;
    if (!skip) out.set(name, a);
  }
  return out;
}

const std::vector<std::string> kEpilogueAttrs = {"activation", "activation_params", "residual_before_activation"};

Status fused_conv(KernelContext& k) {
  std::vector<std::string> drop = kEpilogueAttrs;
  drop.push_back("transposed");
  drop.push_back("channels_last");
  ir::Attributes conv_attrs = copy_except(k.attrs(), drop);
  const char* layer = k.attrs().get_int("transposed", 0) != 0 ? "ConvTranspose" : "Conv";
  if (k.attrs().get_int("channels_last", 0) != 0) {
    // The channels-first computation on permuted copies (a reference, not a fast path).
    if (!k.input(0) || !k.input(1) || k.input(0)->rank() < 3 || k.input(1)->rank() != k.input(0)->rank())
      return k.error("channels_last needs X and W of the same rank >= 3");
    const size_t n = k.input(0)->rank();
    if (k.input(3) && k.input(3)->rank() != n) return k.error("residual rank differs from X");
    INGOT_ASSIGN_OR_RETURN(Tensor x, permute_dims(*k.input(0), ir::channels_first_perm(n)));
    INGOT_ASSIGN_OR_RETURN(Tensor w, permute_dims(*k.input(1), ir::channels_first_perm(n)));
    Tensor r;
    if (k.input(3)) {
      INGOT_ASSIGN_OR_RETURN(r, permute_dims(*k.input(3), ir::channels_first_perm(n)));
    }
    INGOT_ASSIGN_OR_RETURN(Tensor y, run_inner_op(k, "Conv", std::move(conv_attrs), {&x, &w, k.input(2)}));
    INGOT_RETURN_IF_ERROR(apply_epilogue(k, y, nullptr, -1, 1.0, k.input(3) ? &r : nullptr));
    INGOT_ASSIGN_OR_RETURN(k.output(0), permute_dims(y, ir::channels_last_perm(n)));
    return Status::Ok();
  }
  // Bias goes through Conv / ConvTranspose itself: it is part of the layer's own semantics.
  INGOT_ASSIGN_OR_RETURN(Tensor y, run_inner_op(k, layer, std::move(conv_attrs), {k.input(0), k.input(1), k.input(2)}));
  INGOT_RETURN_IF_ERROR(apply_epilogue(k, y, nullptr, -1, 1.0, k.input(3)));
  k.output(0) = y;
  return Status::Ok();
}

// Y = MaxPool(FusedConv(X, W, B)): the FusedConv reference into a temporary of the conv's output type
// (rounded there, as the unfused pair stores it: max commutes with that rounding, so a kernel that pools
// before rounding gives the same numbers), then ingot::Pool {mode "max"} with the pool_* attributes under
// their own names, in the same layout.
Status fused_conv_pool(KernelContext& k) {
  ir::Attributes conv_attrs;
  for (const auto& [name, a] : k.attrs().all())
    if (!ir::is_fused_pool_attr(name)) conv_attrs.set(name, a);
  ir::Attributes pool_attrs = ir::fused_conv_pool_pool_attrs(k.attrs());
  INGOT_ASSIGN_OR_RETURN(
      Tensor y, run_inner_op(k, "FusedConv", std::move(conv_attrs), {k.input(0), k.input(1), k.input(2)}, "ingot"));
  INGOT_ASSIGN_OR_RETURN(k.output(0), run_inner_op(k, "Pool", std::move(pool_attrs), {&y}, "ingot"));
  return Status::Ok();
}

Status fused_gemm(KernelContext& k) {
  std::string kind = k.attrs().get_string("kind", "gemm");
  std::vector<std::string> drop = kEpilogueAttrs;
  drop.push_back("kind");
  Tensor y;
  if (kind == "gemm") {
    // C is Gemm's own input; Gemm broadcasts it (unidirectionally) to [M, N].
    INGOT_ASSIGN_OR_RETURN(
        y, run_inner_op(k, "Gemm", copy_except(k.attrs(), drop), {k.input(0), k.input(1), k.input(2)}));
    INGOT_RETURN_IF_ERROR(apply_epilogue(k, y, nullptr, -1, 1.0, k.input(3)));
  } else if (kind == "matmul") {
    if (k.attrs().get_int("transA", 0) || k.attrs().get_int("transB", 0))
      return k.unsupported_case("transA/transB are not supported with kind 'matmul'");
    INGOT_ASSIGN_OR_RETURN(y, run_inner_op(k, "MatMul", {}, {k.input(0), k.input(1)}));
    double alpha = k.attrs().get_float("alpha", 1.0f);
    if (alpha != 1.0)
      for (int64_t i = 0; i < y.numel(); ++i) y.set_f64(i, alpha * y.get_f64(i));
    INGOT_RETURN_IF_ERROR(apply_epilogue(k, y, k.input(2), -1, k.attrs().get_float("beta", 1.0f), k.input(3)));
  } else {
    return k.error("kind must be 'gemm' or 'matmul', got '", kind, "'");
  }
  k.output(0) = y;
  return Status::Ok();
}

// Y = X * gate, gate[n, c] = gate_act(B2 + W2 act(B1 + W1 mean_HW(X[n, c]))), in double and rounded once.
Status squeeze_excite(KernelContext& k) {
  const Tensor* x = k.input(0);
  const Tensor* w1 = k.input(1);
  const Tensor* b1 = k.input(2);
  const Tensor* w2 = k.input(3);
  const Tensor* b2 = k.input(4);
  if (!x || !w1 || !w2 || x->rank() != 4 || !is_float(x->dtype()))
    return k.error("needs a float 4-D X and weights W1, W2");
  const bool cl = k.attrs().get_int("channels_last", 0) != 0;
  const int64_t n = x->dim(0), c = x->dim(cl ? 3 : 1), hw = x->dim(cl ? 1 : 2) * x->dim(cl ? 2 : 3);
  const int64_t cr = w1->rank() > 0 ? w1->dim(0) : 0;
  if (cr <= 0 || w1->numel() != cr * c || w2->numel() != c * cr || (w2->rank() > 0 && w2->dim(0) != c) ||
      (b1 && b1->numel() != cr) || (b2 && b2->numel() != c))
    return k.error("W1 ", shape_to_string(w1->shape()), ", W2 ", shape_to_string(w2->shape()),
                   " and the biases do not fit X ", shape_to_string(x->shape()));
  const std::string act1 = k.attrs().get_string("activation", "");
  const std::string act2 = k.attrs().get_string("gate_activation", "");
  const std::vector<float> p1 = k.attrs().get_floats("activation_params");
  const std::vector<float> p2 = k.attrs().get_floats("gate_activation_params");
  // Element (image i, pixel p, channel ch) of X and Y.
  auto at = [&](int64_t i, int64_t p, int64_t ch) { return cl ? (i * hw + p) * c + ch : (i * c + ch) * hw + p; };
  INGOT_ASSIGN_OR_RETURN(Tensor * y, k.allocate_output(0, x->dtype(), x->shape()));
  std::vector<double> pooled(static_cast<size_t>(c)), h(static_cast<size_t>(cr)), gate(static_cast<size_t>(c));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t ch = 0; ch < c; ++ch) {
      double s = 0;
      for (int64_t p = 0; p < hw; ++p) s += x->get_f64(at(i, p, ch));
      pooled[static_cast<size_t>(ch)] = hw > 0 ? s / static_cast<double>(hw) : 0.0;
    }
    for (int64_t r = 0; r < cr; ++r) {
      double s = b1 ? b1->get_f64(r) : 0.0;
      for (int64_t ch = 0; ch < c; ++ch) s += w1->get_f64(r * c + ch) * pooled[static_cast<size_t>(ch)];
      h[static_cast<size_t>(r)] = apply_activation(act1, p1, s);
    }
    for (int64_t ch = 0; ch < c; ++ch) {
      double s = b2 ? b2->get_f64(ch) : 0.0;
      for (int64_t r = 0; r < cr; ++r) s += w2->get_f64(ch * cr + r) * h[static_cast<size_t>(r)];
      gate[static_cast<size_t>(ch)] = apply_activation(act2, p2, s);
    }
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t p = 0; p < hw; ++p) {
        const int64_t e = at(i, p, ch);
        y->set_f64(e, x->get_f64(e) * gate[static_cast<size_t>(ch)]);
      }
  }
  return Status::Ok();
}

Status pointwise(KernelContext& k) {
  const ir::Graph* body = k.attrs().get_graph("body");
  if (!body) return k.error("missing body");
  std::vector<Tensor> ins;
  for (size_t i = 0; i < k.num_inputs(); ++i) {
    if (!k.input(i)) return k.error("input ", i, " is missing");
    ins.push_back(*k.input(i));
  }
  INGOT_ASSIGN_OR_RETURN(std::vector<Tensor> outs, k.run_subgraph(*body, ins));
  if (outs.size() != 1) return k.error("body returned ", outs.size(), " outputs, expected 1");
  k.output(0) = outs[0];
  return Status::Ok();
}

}  // namespace

void register_fused_conv_gemm_kernels(KernelRegistry& r) {
  r.add("FusedConv", fused_conv, "ingot");
  r.add("FusedConvPool", fused_conv_pool, "ingot");
  r.add("FusedGemm", fused_gemm, "ingot");
  r.add("Pointwise", pointwise, "ingot");
  r.add("SqueezeExcite", squeeze_excite, "ingot");
}

}  // namespace ingot::cpu
