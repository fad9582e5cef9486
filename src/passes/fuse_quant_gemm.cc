// Copyright ingot authors. Apache-2.0.
//
// fuse_quant_gemm: a linear layer between Q/DQ pairs becomes one quantized GEMM.
//
// Matches (explicit quantization as onnxruntime's quantize_static, modelopt and our own
// insert_qdq write it):
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
// A DequantizeLinear of a constant that a MatMul/Gemm reads is left alone by fold_constants
// (its 8-bit form is a quarter of the float one, and this pass needs it); whichever such
// weight this pass does not take (an unsupported layer), it folds to float itself, so no
// weight is dequantized at run time.
//
// Refused (the layer then runs DequantizeLinear -> MatMul in float): uint8 or other 8-bit
// types, a non-zero zero point, a per-axis activation scale, a weight scale along K, Gemm's
// transA / alpha / beta != 1, a bias that is not N values, operands of different types.
// The builder splits a QuantGemm back into those float ops where the backend has no kernel
// for it (split_fusions.h).
#include <algorithm>
#include <memory>
#include <set>
#include <optional>
#include <string>
#include <vector>

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

/// The activation name QuantGemm's epilogue uses for `n` ("" when `n` is none it takes).
std::string activation_of(const ir::Node& n) {
  const bool onnx = n.domain().empty();
  if (!onnx && !fusion::is_ingot_activation(n)) return "";
  const std::string& op = n.op_type();
  if (op == "Relu" || op == "Sigmoid" || op == "Tanh" || op == "HardSwish" || op == "Silu") return op;
  if (op == "Gelu") {
    const std::string approx = n.attrs().get_string("approximate", "none");
    return approx == "none" ? "Gelu" : approx == "tanh" ? "GeluTanh" : "";
  }
  return "";
}

bool is_dq(const ir::Node* n) { return n && is_onnx_op(*n, "DequantizeLinear") && n->input(1); }

/// A DequantizeLinear of a constant 2-D 8-bit weight: what fold_constants keeps for this pass.
bool is_weight_dq(const ir::Node& n) {
  if (!is_onnx_op(n, "DequantizeLinear") || !n.input(0) || !n.input(1)) return false;
  const ir::Value* w = n.input(0);
  return is_quant_type(w->dtype()) && constant_value(w).has_value();
}

class FuseQuantGemm final : public Pass {
 public:
  const char* name() const override { return kName; }

  Result<bool> run(ir::Graph& g, PassContext& ctx) override {
    bool changed = false;
    std::vector<ir::Node*> anchors;
    for (const auto& n : g.nodes())
      if (is_onnx_op(*n, "MatMul") || is_onnx_op(*n, "Gemm")) anchors.push_back(n.get());
    for (ir::Node* n : anchors) {
      std::string why;
      INGOT_ASSIGN_OR_RETURN(bool fused, try_fuse(g, n, &why));
      if (fused) {
        changed = true;
        g.set_opset_import(kIngotDomain, 1);
      } else if (!why.empty()) {
        ctx.note(kName, refusal_note("quantized GEMM", n->op_type(), n, why));
      }
    }
    // Weights this pass did not take are dequantized now (fold_constants left them 8-bit).
    std::vector<ir::Node*> leftover;
    for (const auto& n : g.nodes())
      if (is_weight_dq(*n) && constant_value(n->input(1)) &&
          (!n->input(2) || constant_value(n->input(2))))
        for (const auto& [user, idx] : n->output(0)->uses())
          if (is_onnx_op(*user, "MatMul") || is_onnx_op(*user, "Gemm")) {
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
  Result<bool> try_fuse(ir::Graph& g, ir::Node* mm, std::string* why) {
    const bool gemm = is_onnx_op(*mm, "Gemm");
    ir::Node* dx = mm->input(0) ? mm->input(0)->producer() : nullptr;
    ir::Node* dw = mm->input(1) ? mm->input(1)->producer() : nullptr;
    if (!is_dq(dx) || !is_dq(dw) || !dx->input(0) || !dw->input(0)) return false;  // not a Q/DQ layer
    const DataType q = dx->input(0)->dtype();
    if (!is_quant_type(q) || dw->input(0)->dtype() != q) {
      *why = "operands are " + std::string(data_type_name(dx->input(0)->dtype())) + " and " +
             data_type_name(dw->input(0)->dtype()) + " (int8 or float8e4m3fn, both alike, are fused)";
      return false;
    }
    std::optional<Tensor> w = constant_value(dw->input(0));
    if (!w || w->rank() != 2) {
      *why = "the weight is not a constant matrix";
      return false;
    }
    if (!zero_or_absent(*dx) || !zero_or_absent(*dw)) {
      *why = "a zero point is not zero (symmetric quantization is fused)";
      return false;
    }
    std::optional<Tensor> sx = f32_scale(*dx), sw = f32_scale(*dw);
    if (!sx || !sw || sx->numel() != 1) {
      *why = "the activation scale is not one constant";
      return false;
    }
    const DataType out_t = dq_output_type(*dx);
    if (dq_output_type(*dw) != out_t ||
        (out_t != DataType::kFloat32 && out_t != DataType::kFloat16 && out_t != DataType::kBFloat16)) {
      *why = "the two DequantizeLinear give different or non-float types";
      return false;
    }
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
    // Residual: Add(., R) of a computed R with the result's shape and type.
    ir::Value* residual = nullptr;
    if (ir::Node* add = fusion::single_consumer(g, last); add && is_onnx_op(*add, "Add")) {
      ir::Value* r = fusion::other_operand(*add, last);
      if (r && !constant_value(r) && r->dtype() == out_t && same_known_shape(r->shape(), last->shape()) &&
          same_known_shape(add->output(0)->shape(), last->shape()) && !computed_from(r, absorbed)) {
        residual = r;
        absorbed.push_back(add);
        last = add->output(0);
      }
    }
    // The next layer's QuantizeLinear (after an activation, or straight after): the result is
    // quantized in the epilogue, so the float result is never stored (int8/fp8 between layers).
    std::string act;
    ir::Value* y_scale = nullptr;
    DataType y_type = out_t;
    if (!residual) {
      ir::Node* c = fusion::single_consumer(g, last);
      ir::Node* act_node = nullptr;
      if (c && !activation_of(*c).empty() && c->outputs().size() == 1) {
        act_node = c;
        c = fusion::single_consumer(g, c->output(0));
      }
      std::optional<double> ys = c && is_onnx_op(*c, "QuantizeLinear") && c->input(1) && c->output(0)
                                     ? scalar_value(c->input(1))
                                     : std::nullopt;
      if (ys && *ys > 0 && is_quant_type(c->output(0)->dtype()) && zero_or_absent(*c) &&
          c->attrs().get_int("saturate", 1) == 1 && c->attrs().find("output_dtype") == nullptr) {
        if (act_node) {
          act = activation_of(*act_node);
          absorbed.push_back(act_node);
        }
        absorbed.push_back(c);
        last = c->output(0);
        y_type = c->output(0)->dtype();
        Tensor t = Tensor::zeros(DataType::kFloat32, {}).value();
        t.set_f64(0, *ys);
        y_scale = make_initializer(g, c->input(1)->name() + ".f32", std::move(t));
      }
    }
    // W' = the weight as [N, K] (a Linear layer's layout, what the tensor-core kernels read).
    Tensor wt = *w;
    if (!trans_b) {
      INGOT_ASSIGN_OR_RETURN(wt, Tensor::zeros(q, {n, k}));
      for (int64_t i = 0; i < k; ++i)
        for (int64_t j = 0; j < n; ++j) wt.set_f64(j * k + i, w->get_f64(i * n + j));
    }
    ir::Value* wv = make_initializer(g, dw->input(0)->name() + ".nk", std::move(wt));
    ir::Value* sxv = make_initializer(g, dx->input(1)->name() + ".f32", std::move(*sx));
    ir::Value* swv = make_initializer(g, dw->input(1)->name() + ".f32", std::move(*sw));
    ir::Attributes attrs;
    attrs.set_int("output_dtype", static_cast<int64_t>(y_type));
    if (!act.empty()) attrs.set_string("activation", act);
    std::vector<ir::Value*> ins = {dx->input(0), wv, sxv, swv};
    if (bias || residual || y_scale) ins.push_back(bias);
    if (residual || y_scale) ins.push_back(residual);
    if (y_scale) ins.push_back(y_scale);
    INGOT_RETURN_IF_ERROR(fusion::replace_with_fused(g, "QuantGemm", kIngotDomain, ins, std::move(attrs),
                                                     mm->name(), last, absorbed)
                              .status());
    return true;
  }
};

}  // namespace

bool keeps_quantized_weight(const ir::Node& n) {
  if (!is_weight_dq(n) || !n.output(0)) return false;
  for (const auto& [user, idx] : n.output(0)->uses())
    if (is_onnx_op(*user, "MatMul") || is_onnx_op(*user, "Gemm")) return true;
  return false;
}

std::unique_ptr<Pass> make_fuse_quant_gemm() { return std::make_unique<FuseQuantGemm>(); }

}  // namespace ingot::passes
