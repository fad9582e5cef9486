// Copyright ingot authors. Apache-2.0.
//
// fuse_quant_gemm: a linear layer or a convolution between Q/DQ pairs becomes one quantized
// layer, ingot::QuantGemm or ingot::QuantConv.
//
// Matches (explicit quantization as onnxruntime's quantize_static, modelopt, TensorRT's
// pytorch-quantization and our own insert_qdq write it):
//   MatMul(DequantizeLinear(Xq, sx), DequantizeLinear(Wq, sw))            [K, N] weight
//   Gemm(DequantizeLinear(Xq, sx), DequantizeLinear(Wq, sw) [, C])         transB 0 or 1
// optionally followed by Add(., B) with a constant B of N values (a MatMul's bias), and then by
// Add(., R) with a computed R of the result's shape and type (a residual connection), or by the
// next layer's QuantizeLinear (one scale, zero point 0), with an activation in between or not,
// where Xq is computed at run time (int8, or float8e4m3fn) with one scale and no zero point
// (or a zero one), and Wq is a constant of the same type with one scale or one per output
// channel (axis N). Produces
//   ingot::QuantGemm(Xq, W' [N, K], sx, sw, [B], [R], [sy])   output_dtype = the DequantizeLinear's
//                                                   (or the QuantizeLinear's when it took one)
// which multiplies the 8-bit numbers themselves (int32 / fp32 accumulation) and scales once,
// instead of dequantizing both operands into float copies first.
//
// Convolutions, as TensorRT fuses them (the conv takes its input's DequantizeLinear and its
// output's QuantizeLinear; a residual Add joins):
//   Conv(DequantizeLinear(Xq, sx), DequantizeLinear(Wq, sw) [, B])   sw one value or [M] (axis 0)
//   [-> BatchNormalization]   inference mode, constant statistics: folded into sw (per channel)
//                             and B, which gives what the unfused graph computes up to rounding
//   [-> Add(., b)]            a constant bias per output channel
//   [-> Add(., R)]            a residual: computed, float, of the result's shape; where R is
//                             DequantizeLinear(Rq, sr) of X's 8-bit type (one scale, zero point 0),
//                             Rq itself with r_scale sr (insert_qdq's residual placement)
//   [-> activation]           any the FusedConv matcher takes (passes/activation_match.h)
//   [-> QuantizeLinear(., sy)]  the next layer's: one scale, zero point 0, int8 or float8e4m3fn
// becomes ingot::QuantConv(Xq, Wq, sx, sw', [B'], [R], [sy], [sr]) with Conv's strides, dilations,
// group, kernel_shape, and its pads (auto_pad resolved to them).
//
// Then, between quantized layers (TensorRT's rule that a Q moves backward through a max pool):
//   QuantizeLinear(MaxPool(DequantizeLinear(Xq, s)), s)   int8, one scale s > 0, zero points zero
// becomes MaxPool(Xq) on the int8 numbers: the maximum commutes with a positive scale and with
// the rounding back (|x| <= 127, so s·x/s rounds to x even in fp16), so the result is the same
// bits. ModelOpt's and onnxruntime's QDQ models put one between two convolutions.
//
// A DequantizeLinear of a constant that a MatMul/Gemm/Conv reads is left alone by fold_constants
// (its 8-bit form is a quarter of the float one, and this pass needs it); whichever such
// weight this pass does not take (an unsupported layer), it folds to float itself, so no
// weight is dequantized at run time.
//
// Refused (the layer then runs DequantizeLinear -> MatMul / Conv in float): uint8 or other 8-bit
// types, a non-zero zero point (asymmetric int8 needs a zero-point correction term no int8 conv
// or GEMM epilogue here computes), a per-axis activation scale, a weight scale along K (or along
// a conv weight's input channels), Gemm's transA / alpha / beta != 1, a bias that is not N (M)
// values, operands of different types, a SAME auto_pad over unknown spatial dims.
// The builder splits a QuantGemm / QuantConv back into those float ops where the backend has no
// kernel for it (split_fusions.h).
#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <set>
#include <optional>
#include <string>
#include <vector>

#include "passes/activation_match.h"
#include "passes/fusion_rewrite.h"
#include "passes/pass.h"
#include "passes/passes.h"

namespace ingot::passes {

namespace {

using fusion::is_onnx_op;

constexpr const char* kName = "fuse_quant_gemm";

bool is_quant_type(DataType t) { return t == DataType::kInt8 || t == DataType::kFloat8E4M3FN; }

/// A zero point that is absent or all zeros.
bool zero_or_absent(const ir::Node& dq) {
  const ir::Value* z = dq.input(2);
  if (!z) return true;
  std::optional<Tensor> t = constant_value(z);
  if (!t) return false;
  for (int64_t i = 0; i < t->numel(); ++i)
    if (t->get_f64(i) != 0.0) return false;
  return true;
}

/// DequantizeLinear's scale as a float32 constant, or nullopt.
std::optional<Tensor> f32_scale(const ir::Node& dq) {
  std::optional<Tensor> s = constant_value(dq.input(1));
  if (!s || !is_float(s->dtype()) || s->rank() > 1) return std::nullopt;
  Tensor out = Tensor::zeros(DataType::kFloat32, s->shape()).value();
  for (int64_t i = 0; i < s->numel(); ++i) out.set_f64(i, s->get_f64(i));
  return out;
}

/// An int8 layer's weight scale as the fused node keeps it: one per output channel ([n]), a
/// per-tensor scale written out n times. The numbers are the same; every int8 kernel takes the
/// per-channel form, and the CUTLASS int8 GEMMs take only it (onnxruntime's quantize_static
/// writes per-tensor weight scales by default). An fp8 layer's per-tensor scale stays one number:
/// cuBLASLt's fp8 scale pointers are per tensor.
Tensor weight_scale(Tensor sw, DataType w_type, int64_t n) {
  if (w_type != DataType::kInt8 || sw.numel() != 1 || n <= 1) return sw;
  Tensor out = Tensor::zeros(DataType::kFloat32, {n}).value();
  for (int64_t i = 0; i < n; ++i) out.set_f64(i, sw.get_f64(0));
  return out;
}

/// The type DequantizeLinear produces: its output_dtype attribute, else the scale's type.
DataType dq_output_type(const ir::Node& dq) {
  const int64_t o = dq.attrs().get_int("output_dtype", 0);
  return o != 0 ? static_cast<DataType>(o) : dq.input(1)->dtype();
}

/// Whether `v` is computed from an output of one of `nodes` (a residual that does would make the
/// fused node read its own result).
bool computed_from(const ir::Value* v, const std::vector<ir::Node*>& nodes) {
  std::vector<const ir::Node*> work;
  std::set<const ir::Node*> seen;
  if (v && v->producer()) work.push_back(v->producer());
  while (!work.empty()) {
    const ir::Node* p = work.back();
    work.pop_back();
    if (!seen.insert(p).second) continue;
    if (std::find(nodes.begin(), nodes.end(), p) != nodes.end()) return true;
    for (const ir::Value* in : p->inputs())
      if (in && in->producer()) work.push_back(in->producer());
  }
  return false;
}

bool same_known_shape(const ir::Shape& a, const ir::Shape& b) {
  if (!a.rank_known() || !b.rank_known() || a.rank() != b.rank()) return false;
  for (size_t i = 0; i < a.rank(); ++i)
    if (!a[i].provably_equal(b[i])) return false;
  return true;
}

bool is_dq(const ir::Node* n) { return n && is_onnx_op(*n, "DequantizeLinear") && n->input(1); }

/// A DequantizeLinear of a constant 8-bit weight: what fold_constants keeps for this pass.
bool is_weight_dq(const ir::Node& n) {
  if (!is_onnx_op(n, "DequantizeLinear") || !n.input(0) || !n.input(1)) return false;
  const ir::Value* w = n.input(0);
  return is_quant_type(w->dtype()) && constant_value(w).has_value();
}

/// The scale of QuantizeLinear `c` when a quantized layer's epilogue can take it (what it stores
/// is then what the layer writes): one positive constant scale, a zero point that is zero or
/// absent, an int8 / float8e4m3fn output, saturation, and the default float32 quotient.
std::optional<double> next_layer_scale(const ir::Node& c) {
  if (!is_onnx_op(c, "QuantizeLinear") || !c.input(1) || !c.output(0)) return std::nullopt;
  std::optional<double> s = scalar_value(c.input(1));
  if (!s || !(*s > 0) || !is_quant_type(c.output(0)->dtype()) || !zero_or_absent(c) ||
      c.attrs().get_int("saturate", 1) != 1 || c.attrs().find("output_dtype") != nullptr ||
      c.attrs().get_int("precision", 0) != 0)
    return std::nullopt;
  return s;
}

ir::Value* f32_scalar(ir::Graph& g, const std::string& name, double v) {
  Tensor t = Tensor::zeros(DataType::kFloat32, {}).value();
  t.set_f64(0, v);
  return make_initializer(g, name, std::move(t));
}

void set_activation(ir::Attributes& attrs, const std::optional<ActivationMatch>& act) {
  if (!act) return;
  attrs.set_string("activation", act->name);
  if (!act->params.empty()) attrs.set_floats("activation_params", act->params);
}

bool reads_weight(const ir::Node& user) {
  return is_onnx_op(user, "MatMul") || is_onnx_op(user, "Gemm") || is_onnx_op(user, "Conv");
}

/// Per-channel values of a constant that broadcasts along axis 1 of a rank-`rank` conv output with
/// `channels` channels without growing it ([M], [M,1,1], [1,M,1,1] or one value); empty otherwise.
std::vector<double> per_output_channel(const Tensor& t, size_t rank, int64_t channels) {
  if (t.rank() > rank || !is_float(t.dtype())) return {};
  if (t.numel() == 1) return std::vector<double>(static_cast<size_t>(channels), t.get_f64(0));
  const size_t offset = rank - t.rank();
  for (size_t i = 0; i < t.rank(); ++i)
    if (t.dim(i) != (i + offset == 1 ? channels : 1)) return {};
  return t.to_f64_vector();
}

class FuseQuantGemm final : public Pass {
 public:
  const char* name() const override { return kName; }

  Result<bool> run(ir::Graph& g, PassContext& ctx) override {
    bool changed = false;
    std::vector<ir::Node*> anchors;
    for (const auto& n : g.nodes())
      if (reads_weight(*n)) anchors.push_back(n.get());
    for (ir::Node* n : anchors) {
      std::string why;
      const bool conv = is_onnx_op(*n, "Conv");
      INGOT_ASSIGN_OR_RETURN(bool fused, conv ? try_fuse_conv(g, n, &why) : try_fuse(g, n, &why));
      if (fused) {
        changed = true;
        g.set_opset_import(kIngotDomain, 1);
      } else if (!why.empty()) {
        ctx.note(kName, refusal_note(conv ? "quantized convolution" : "quantized GEMM", n->op_type(), n, why));
      }
    }
    INGOT_ASSIGN_OR_RETURN(bool pooled, pool_in_int8(g));
    changed |= pooled;
    // Weights this pass did not take are dequantized now (fold_constants left them 8-bit).
    std::vector<ir::Node*> leftover;
    for (const auto& n : g.nodes())
      if (is_weight_dq(*n) && constant_value(n->input(1)) &&
          (!n->input(2) || constant_value(n->input(2))))
        for (const auto& [user, idx] : n->output(0)->uses())
          if (reads_weight(*user)) {
            leftover.push_back(n.get());
            break;
          }
    for (ir::Node* dq : leftover) {
      std::vector<Tensor> ins;
      for (const ir::Value* v : dq->inputs())
        if (v) ins.push_back(*constant_value(v));
      if (ins.size() != dq->inputs().size()) continue;  // an absent zero point between present inputs
      auto out = eval_op("DequantizeLinear", ins, dq->attrs(), &g);
      if (!out.ok()) continue;
      ir::Value* o = dq->output(0);
      const std::string name = o->name();
      g.rename_value(o, "");
      ir::Value* init = g.add_initializer(name, std::move((*out)[0]));
      g.replace_all_uses(o, init);
      INGOT_RETURN_IF_ERROR(g.remove_node(dq));
      changed = true;
    }
    return changed;
  }

 private:
  /// The header's Q(MaxPool(DQ(Xq, s)), s) -> MaxPool(Xq), every occurrence.
  static Result<bool> pool_in_int8(ir::Graph& g) {
    std::vector<ir::Node*> pools;
    for (const auto& n : g.nodes())
      if (is_onnx_op(*n, "MaxPool")) pools.push_back(n.get());
    bool changed = false;
    for (ir::Node* pool : pools) {
      if (pool->outputs().size() > 1 && pool->output(1)) continue;  // the Indices output is wanted
      ir::Node* dq = pool->input(0) ? pool->input(0)->producer() : nullptr;
      if (!is_dq(dq) || !dq->input(0) || dq->input(0)->dtype() != DataType::kInt8 || !zero_or_absent(*dq) ||
          fusion::single_consumer(g, dq->output(0)) != pool || is_graph_output(g, dq->output(0)))
        continue;
      ir::Node* q = fusion::single_consumer(g, pool->output(0));
      if (!q || !is_onnx_op(*q, "QuantizeLinear") || !q->input(1) || !q->output(0) ||
          q->output(0)->dtype() != DataType::kInt8 || is_graph_output(g, pool->output(0)))
        continue;
      if (q->input(2)) {  // a zero point, if given, zero
        std::optional<Tensor> z = constant_value(q->input(2));
        if (!z || z->numel() != 1 || z->get_f64(0) != 0.0) continue;
      }
      std::optional<Tensor> sd = constant_value(dq->input(1)), sq = constant_value(q->input(1));
      if (!sd || !sq || sd->numel() != 1 || sq->numel() != 1 || !(sd->get_f64(0) > 0.0) ||
          sd->get_f64(0) != sq->get_f64(0))
        continue;
      ir::Value* xq = dq->input(0);
      ir::Value* y = q->output(0);
      ir::Value* out = g.add_value(unique_value_name(g, pool->output(0)->name() + ".int8"), DataType::kInt8,
                                   pool->output(0)->shape());
      ir::Node* p8 = g.add_node("MaxPool", {xq}, {out}, pool->attrs(), pool->name());
      p8->absorb_origins(*dq);
      p8->absorb_origins(*pool);
      p8->absorb_origins(*q);
      g.replace_all_uses(y, out);
      INGOT_RETURN_IF_ERROR(g.remove_node(q));
      INGOT_RETURN_IF_ERROR(g.remove_node(pool));
      INGOT_RETURN_IF_ERROR(g.remove_node(dq));
      changed = true;
    }
    if (changed) INGOT_RETURN_IF_ERROR(g.topological_sort());  // the new pools were appended
    return changed;
  }

  // What a quantized layer takes from the DequantizeLinear pair it reads (dx: the activation's,
  // dw: the constant weight's): both 8-bit of one type (int8 or float8e4m3fn), zero points zero,
  // one activation scale, one float output type; `weight_fits` says why the weight (given X's
  // shape) does not fit the layer ("" when it does). std::nullopt with `why` empty: not a Q/DQ
  // layer at all; with `why` set: refused, and why.
  struct Operands {
    ir::Node* dx;
    ir::Node* dw;
    Tensor w, sx, sw;
    DataType out_t;
  };
  static std::optional<Operands> quant_operands(ir::Node* layer, std::string* why,
                                                const std::function<const char*(const Tensor&, const ir::Shape&)>& weight_fits) {
    ir::Node* dx = layer->input(0) ? layer->input(0)->producer() : nullptr;
    ir::Node* dw = layer->input(1) ? layer->input(1)->producer() : nullptr;
    if (!is_dq(dx) || !is_dq(dw) || !dx->input(0) || !dw->input(0)) return std::nullopt;
    const DataType q = dx->input(0)->dtype();
    if (!is_quant_type(q) || dw->input(0)->dtype() != q) {
      *why = "operands are " + std::string(data_type_name(dx->input(0)->dtype())) + " and " +
             data_type_name(dw->input(0)->dtype()) + " (int8 or float8e4m3fn, both alike, are fused)";
      return std::nullopt;
    }
    std::optional<Tensor> w = constant_value(dw->input(0));
    const char* misfit = weight_fits(w ? *w : Tensor(), dx->input(0)->shape());  // rank 0: not a constant
    if (*misfit) {
      *why = misfit;
      return std::nullopt;
    }
    if (!zero_or_absent(*dx) || !zero_or_absent(*dw)) {
      *why = "a zero point is not zero (symmetric quantization is fused)";
      return std::nullopt;
    }
    std::optional<Tensor> sx = f32_scale(*dx), sw = f32_scale(*dw);
    if (!sx || !sw || sx->numel() != 1) {
      *why = "the activation scale is not one constant";
      return std::nullopt;
    }
    const DataType out_t = dq_output_type(*dx);
    if (dq_output_type(*dw) != out_t ||
        (out_t != DataType::kFloat32 && out_t != DataType::kFloat16 && out_t != DataType::kBFloat16)) {
      *why = "the two DequantizeLinear give different or non-float types";
      return std::nullopt;
    }
    return Operands{dx, dw, std::move(*w), std::move(*sx), std::move(*sw), out_t};
  }

  // Residual: the Add(*last, R) that alone reads *last, with R computed (not a constant), of the
  // result's shape and type, and not computed from the layer itself (`absorbed`): R, with the Add
  // absorbed and *last moved to its output; nullptr otherwise.
  static ir::Value* take_residual(const ir::Graph& g, DataType out_t, ir::Value** last,
                                  std::vector<ir::Node*>* absorbed) {
    ir::Node* add = fusion::single_consumer(g, *last);
    if (!add || !is_onnx_op(*add, "Add")) return nullptr;
    ir::Value* r = fusion::other_operand(*add, *last);
    if (!r || constant_value(r) || r->dtype() != out_t || !same_known_shape(r->shape(), (*last)->shape()) ||
        !same_known_shape(add->output(0)->shape(), (*last)->shape()) || computed_from(r, *absorbed))
      return nullptr;
    absorbed->push_back(add);
    *last = add->output(0);
    return r;
  }

  Result<bool> try_fuse(ir::Graph& g, ir::Node* mm, std::string* why) {
    const bool gemm = is_onnx_op(*mm, "Gemm");
    std::optional<Operands> op = quant_operands(mm, why, [](const Tensor& w, const ir::Shape&) {
      return w.rank() == 2 ? "" : "the weight is not a constant matrix";
    });
    if (!op) return false;
    ir::Node* dx = op->dx;
    ir::Node* dw = op->dw;
    Tensor *w = &op->w, *sx = &op->sx, *sw = &op->sw;
    const DataType out_t = op->out_t;
    bool trans_b = false;
    if (gemm) {
      if (mm->attrs().get_int("transA", 0) != 0 || mm->attrs().get_float("alpha", 1.0f) != 1.0f ||
          mm->attrs().get_float("beta", 1.0f) != 1.0f) {
        *why = "Gemm with transA, alpha or beta";
        return false;
      }
      trans_b = mm->attrs().get_int("transB", 0) != 0;
    }
    const int64_t k = trans_b ? w->dim(1) : w->dim(0), n = trans_b ? w->dim(0) : w->dim(1);
    if (sw->numel() != 1) {
      const int64_t axis = dw->attrs().get_int("axis", 1);
      const int64_t want = trans_b ? 0 : 1;
      if (sw->numel() != n || (axis != want && axis != want - 2)) {
        *why = "the weight scale is not per output channel";
        return false;
      }
    }
    // Bias: Gemm's C, or a following Add of N constant values.
    ir::Value* bias = nullptr;
    std::vector<ir::Node*> absorbed = {mm};
    ir::Value* last = mm->output(0);
    auto bias_of = [&](ir::Value* c) -> ir::Value* {
      std::optional<Tensor> t = c ? constant_value(c) : std::nullopt;
      if (!t || !is_float(t->dtype()) || t->numel() != n || t->shape().back() != n) return nullptr;
      if (t->rank() == 1 && c->initializer()) return c;
      Tensor flat = *t;
      if (t->rank() != 1) flat = t->reshaped({n}).value();
      return make_initializer(g, c->name().empty() ? mm->name() + ".bias" : c->name(), std::move(flat));
    };
    if (gemm && mm->input(2)) {
      bias = bias_of(mm->input(2));
      if (!bias) {
        *why = "Gemm's C is not a bias of N values";
        return false;
      }
    } else if (!gemm) {
      ir::Node* add = fusion::single_consumer(g, last);
      if (add && is_onnx_op(*add, "Add")) {
        ir::Value* other = fusion::other_operand(*add, last);
        if (ir::Value* b = bias_of(other)) {
          bias = b;
          absorbed.push_back(add);
          last = add->output(0);
        }
      }
    }
    ir::Value* residual = take_residual(g, out_t, &last, &absorbed);
    // The next layer's QuantizeLinear (after an activation, or straight after): the result is
    // quantized in the epilogue, so the float result is never stored (int8/fp8 between layers).
    std::optional<ActivationMatch> act;
    ir::Value* y_scale = nullptr;
    DataType y_type = out_t;
    if (!residual) {
      std::optional<ActivationMatch> a = match_activation(g, last);
      ir::Node* c = fusion::single_consumer(g, a ? a->out : last);
      if (c && next_layer_scale(*c)) {
        if (a) {
          act = a;
          absorbed.insert(absorbed.end(), a->nodes.begin(), a->nodes.end());
        }
        absorbed.push_back(c);
        last = c->output(0);
        y_type = c->output(0)->dtype();
        y_scale = f32_scalar(g, c->input(1)->name() + ".f32", *next_layer_scale(*c));
      }
    }
    // W' = the weight as [N, K] (a Linear layer's layout, what the tensor-core kernels read).
    Tensor wt = *w;
    if (!trans_b) {
      INGOT_ASSIGN_OR_RETURN(wt, Tensor::zeros(w->dtype(), {n, k}));
      for (int64_t i = 0; i < k; ++i)
        for (int64_t j = 0; j < n; ++j) wt.set_f64(j * k + i, w->get_f64(i * n + j));
    }
    ir::Value* wv = make_initializer(g, dw->input(0)->name() + ".nk", std::move(wt));
    ir::Value* sxv = make_initializer(g, dx->input(1)->name() + ".f32", std::move(*sx));
    ir::Value* swv = make_initializer(g, dw->input(1)->name() + ".f32", weight_scale(std::move(*sw), w->dtype(), n));
    ir::Attributes attrs;
    attrs.set_int("output_dtype", static_cast<int64_t>(y_type));
    set_activation(attrs, act);
    std::vector<ir::Value*> ins = {dx->input(0), wv, sxv, swv};
    if (bias || residual || y_scale) ins.push_back(bias);
    if (residual || y_scale) ins.push_back(residual);
    if (y_scale) ins.push_back(y_scale);
    INGOT_RETURN_IF_ERROR(fusion::replace_with_fused(g, "QuantGemm", kIngotDomain, ins, std::move(attrs),
                                                     mm->name(), last, absorbed)
                              .status());
    return true;
  }

  Result<bool> try_fuse_conv(ir::Graph& g, ir::Node* conv, std::string* why) {
    std::optional<Operands> op = quant_operands(conv, why, [](const Tensor& w, const ir::Shape& xs) {
      return w.rank() >= 3 && xs.rank_known() && xs.rank() == w.rank() ? ""
                                                                         : "the weight is not a constant of the input's rank";
    });
    if (!op) return false;
    ir::Node* dx = op->dx;
    ir::Node* dw = op->dw;
    Tensor *w = &op->w, *sx = &op->sx, *sw = &op->sw;
    const ir::Shape& xs = dx->input(0)->shape();
    const DataType out_t = op->out_t;
    const size_t rank = w->rank(), sp = rank - 2;
    const int64_t m_out = w->dim(0);
    if (sw->numel() != 1) {
      const int64_t axis = dw->attrs().get_int("axis", 1);
      if (sw->numel() != m_out || (axis != 0 && axis != -static_cast<int64_t>(rank))) {
        *why = "the weight scale is not per output channel";
        return false;
      }
    }
    // Conv's attributes, auto_pad written out as the pads it stands for.
    const ir::Attributes& ca = conv->attrs();
    std::vector<int64_t> kernel = ca.get_ints("kernel_shape", std::vector<int64_t>(w->shape().begin() + 2, w->shape().end()));
    std::vector<int64_t> strides = ca.get_ints("strides", std::vector<int64_t>(sp, 1));
    std::vector<int64_t> dil = ca.get_ints("dilations", std::vector<int64_t>(sp, 1));
    std::vector<int64_t> pads = ca.get_ints("pads", std::vector<int64_t>(2 * sp, 0));
    if (kernel.size() != sp || strides.size() != sp || dil.size() != sp || pads.size() != 2 * sp) return false;
    const std::string auto_pad = ca.get_string("auto_pad", "NOTSET");
    if (auto_pad == "VALID") {
      pads.assign(2 * sp, 0);
    } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      for (size_t d = 0; d < sp; ++d) {
        if (!xs[d + 2].is_known() || strides[d] <= 0) {
          *why = "auto_pad " + auto_pad + " over an unknown spatial dim";
          return false;
        }
        const int64_t in = xs[d + 2].value(), out = (in + strides[d] - 1) / strides[d];
        const int64_t total = std::max<int64_t>(0, (out - 1) * strides[d] + (kernel[d] - 1) * dil[d] + 1 - in);
        pads[d] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
        pads[d + sp] = total - pads[d];
      }
    } else if (auto_pad != "NOTSET") {
      return false;
    }

    // The epilogue: B, a BatchNormalization, a bias Add, a residual Add, an activation, the next
    // layer's QuantizeLinear, each optional, in this order.
    std::vector<double> bias;
    bool bias_changed = false;     // a BatchNormalization or a bias Add folded into it
    std::vector<double> bn_scale;  // per channel, when a BatchNormalization folds in
    if (ir::Value* b = conv->input(2)) {
      std::optional<Tensor> t = constant_value(b);
      if (!t || !is_float(t->dtype()) || t->numel() != m_out) {
        *why = "the conv's bias is not a constant of M values";
        return false;
      }
      bias = t->to_f64_vector();
    }
    std::vector<ir::Node*> absorbed = {conv};
    ir::Value* last = conv->output(0);
    if (ir::Node* bn = fusion::single_consumer(g, last); bn && is_onnx_op(*bn, "BatchNormalization")) {
      bool ok = bn->attrs().get_int("training_mode", 0) == 0;
      for (size_t i = 1; ok && i < bn->outputs().size(); ++i) ok = !bn->output(i) || bn->output(i)->uses().empty();
      std::vector<std::vector<double>> p;
      for (size_t i = 1; ok && i < 5; ++i) {
        std::optional<Tensor> t = bn->input(i) ? constant_value(bn->input(i)) : std::nullopt;
        ok = t && t->numel() == m_out;
        if (ok) p.push_back(t->to_f64_vector());
      }
      if (ok) {  // y·k + (β − mean·k), k = γ/√(var+ε): fold_batchnorm's affine
        const double eps = bn->attrs().get_float("epsilon", 1e-5f);
        bias.resize(static_cast<size_t>(m_out), 0.0);
        for (int64_t m = 0; m < m_out; ++m) {
          const double k = p[0][m] / std::sqrt(p[3][m] + eps);
          bn_scale.push_back(k);
          bias[m] = (bias[m] - p[2][m]) * k + p[1][m];
        }
        bias_changed = true;
        absorbed.push_back(bn);
        last = bn->output(0);
      }
    }
    if (ir::Node* add = fusion::single_consumer(g, last); add && is_onnx_op(*add, "Add")) {
      ir::Value* other = fusion::other_operand(*add, last);
      std::optional<Tensor> t = other ? constant_value(other) : std::nullopt;
      std::vector<double> v = t ? per_output_channel(*t, rank, m_out) : std::vector<double>{};
      if (!v.empty() && t->dtype() == out_t) {
        bias.resize(static_cast<size_t>(m_out), 0.0);
        for (int64_t m = 0; m < m_out; ++m) bias[m] += v[m];
        bias_changed = true;
        absorbed.push_back(add);
        last = add->output(0);
      }
    }
    ir::Value* residual = take_residual(g, out_t, &last, &absorbed);
    // A residual that is a DequantizeLinear of X's 8-bit type (one positive scale, zero point zero:
    // the placement insert_qdq and TensorRT give a residual block) is read as the 8-bit tensor and
    // its scale, r_scale; the DequantizeLinear stays for its other readers, or goes as dead code.
    ir::Value* r_scale = nullptr;
    if (ir::Node* rdq = residual ? residual->producer() : nullptr;
        is_dq(rdq) && rdq->input(0) && rdq->input(0)->dtype() == dx->input(0)->dtype() && zero_or_absent(*rdq) &&
        dq_output_type(*rdq) == out_t) {
      if (std::optional<double> rs = scalar_value(rdq->input(1)); rs && *rs > 0) {
        residual = rdq->input(0);
        r_scale = f32_scalar(g, rdq->input(1)->name() + ".f32", *rs);
      }
    }
    std::optional<ActivationMatch> act = match_activation(g, last);
    if (act) {
      absorbed.insert(absorbed.end(), act->nodes.begin(), act->nodes.end());
      last = act->out;
    }
    ir::Value* y_scale = nullptr;
    DataType y_type = out_t;
    if (ir::Node* c = fusion::single_consumer(g, last); c && next_layer_scale(*c)) {
      absorbed.push_back(c);
      last = c->output(0);
      y_type = c->output(0)->dtype();
      y_scale = f32_scalar(g, c->input(1)->name() + ".f32", *next_layer_scale(*c));
    }

    ir::Value* wv = dw->input(0)->initializer() ? dw->input(0) : make_initializer(g, dw->input(0)->name(), *w);
    ir::Value* sxv = make_initializer(g, dx->input(1)->name() + ".f32", std::move(*sx));
    ir::Value* swv;
    if (bn_scale.empty()) {
      swv = make_initializer(g, dw->input(1)->name() + ".f32", weight_scale(std::move(*sw), w->dtype(), m_out));
    } else {
      INGOT_ASSIGN_OR_RETURN(Tensor folded, Tensor::zeros(DataType::kFloat32, {m_out}));
      for (int64_t m = 0; m < m_out; ++m) folded.set_f64(m, sw->get_f64(sw->numel() == 1 ? 0 : m) * bn_scale[m]);
      swv = make_initializer(g, dw->input(1)->name() + ".bn", std::move(folded));
    }
    ir::Value* bv = nullptr;
    if (!bias.empty()) {
      ir::Value* own = conv->input(2);
      if (!bias_changed && own && own->initializer() && own->initializer()->rank() == 1) {
        bv = own;  // B as it was (nothing folded into it)
      } else {
        INGOT_ASSIGN_OR_RETURN(Tensor bt, Tensor::zeros(DataType::kFloat32, {m_out}));
        for (int64_t m = 0; m < m_out; ++m) bt.set_f64(m, bias[m]);
        bv = make_initializer(g, conv->name().empty() ? "quant_conv.bias" : conv->name() + ".bias", std::move(bt));
      }
    }
    ir::Attributes attrs;
    if (ca.find("kernel_shape")) attrs.set_ints("kernel_shape", kernel);
    attrs.set_ints("strides", strides);
    attrs.set_ints("pads", pads);
    attrs.set_ints("dilations", dil);
    attrs.set_int("group", ca.get_int("group", 1));
    attrs.set_int("output_dtype", static_cast<int64_t>(y_type));
    set_activation(attrs, act);
    std::vector<ir::Value*> ins = {dx->input(0), wv, sxv, swv, bv, residual, y_scale, r_scale};
    while (ins.size() > 4 && !ins.back()) ins.pop_back();
    INGOT_RETURN_IF_ERROR(fusion::replace_with_fused(g, "QuantConv", kIngotDomain, ins, std::move(attrs),
                                                     conv->name(), last, absorbed)
                              .status());
    return true;
  }
};

}  // namespace

bool keeps_quantized_weight(const ir::Node& n) {
  if (!is_weight_dq(n) || !n.output(0)) return false;
  for (const auto& [user, idx] : n.output(0)->uses())
    if (reads_weight(*user)) return true;
  return false;
}

std::unique_ptr<Pass> make_fuse_quant_gemm() { return std::make_unique<FuseQuantGemm>(); }

}  // namespace ingot::passes
