// Copyright ingot authors. Apache-2.0.
#include "builder/split_fusions.h"

#include <cmath>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "backend/device.h"
#include "passes/pattern_util.h"

namespace ingot::builder {

namespace {

bool is_fused_layer(const ir::Node& n) {
  return n.domain() == "ingot" && (n.op_type() == "FusedConv" || n.op_type() == "FusedGemm");
}

bool is_quant_gemm(const ir::Node& n) { return n.domain() == "ingot" && n.op_type() == "QuantGemm"; }
bool is_quant_conv(const ir::Node& n) { return n.domain() == "ingot" && n.op_type() == "QuantConv"; }
bool is_norm_quantize(const ir::Node& n) { return n.domain() == "ingot" && n.op_type() == "LayerNormQuantize"; }

// FusedConv/FusedGemm inputs: X|A, W|B, bias|C, residual.
constexpr size_t kBiasInput = 2, kResidualInput = 3;
// QuantGemm/QuantConv inputs: X, W, x_scale, w_scale, bias, residual, y_scale.
constexpr size_t kQuantResidualInput = 5;

class Splitter {
 public:
  Splitter(ir::Graph& g, const backend::Backend& be, DataType reduced, bool channels_last)
      : g_(g), be_(be), reduced_(reduced), channels_last_(channels_last) {}

  // Splits `n` when the backend has no device tactic for it; true when it did.
  Result<bool> split(ir::Node* n, std::string* note) {
    if (runs_on_device(*n)) return false;
    const ir::Attributes& at = n->attrs();
    const std::string act = at.get_string("activation", "");
    const std::vector<float> params = at.get_floats("activation_params");
    ir::Value* residual = n->input(kResidualInput);
    const bool residual_first = act.empty() || at.get_int("residual_before_activation", 1) != 0;
    if (act.empty() && !residual) return false;  // nothing to move out

    // The reduced forms, most fused first: keep a residual added before the activation, then
    // only the bias.
    for (int keep_residual = residual && residual_first && !act.empty() ? 1 : 0; keep_residual >= 0; --keep_residual) {
      ir::Node* layer = add_reduced(*n, keep_residual != 0);
      if (!runs_on_device(*layer)) {
        INGOT_RETURN_IF_ERROR(drop(layer));
        continue;
      }
      ir::Value* cur = layer->output(0);
      const std::string base = n->name().empty() ? "fused" : n->name();
      if (residual && !keep_residual && residual_first) cur = add_op("Add", {cur, residual}, {}, base + "/residual");
      if (!act.empty()) {
        INGOT_ASSIGN_OR_RETURN(cur, add_activation(act, params, cur, base + "/" + act));
      }
      if (residual && !residual_first) cur = add_op("Add", {cur, residual}, {}, base + "/residual");
      // The last op takes over the fused node's output: its readers, graph-output slot and name.
      ir::Value* old = n->output(0);
      const std::string name = old->name();
      g_.replace_all_uses(old, cur);
      INGOT_RETURN_IF_ERROR(g_.remove_node(n));
      g_.rename_value(old, "");
      g_.rename_value(cur, name);
      std::string moved = act;
      if (residual && !keep_residual) moved += std::string(moved.empty() ? "" : " and ") + "the residual Add";
      *note = layer->describe() + ": the " + be_.name() + " backend has no fused form with " + moved +
              ", which now run as elementwise steps after it";
      return true;
    }
    return false;
  }

  // Splits ingot::QuantGemm when the backend has no device tactic for it: X is dequantized by a
  // DequantizeLinear step, the weight at build time (a float [K, N] constant), then MatMul, the
  // bias Add, the activation and a Cast to the output type run as float ops.
  Result<bool> split_quant(ir::Node* n, std::string* note) {
    if (runs_on_device(*n)) return false;
    const Tensor* w = n->input(1)->initializer();
    const Tensor* sw = n->input(3)->initializer();
    if (!w || !sw || w->rank() != 2 || (n->input(4) && !n->input(4)->initializer()))
      return false;  // left as it is: the build names it on the host
    const int64_t nn = w->dim(0), kk = w->dim(1);
    const std::string base = n->name().empty() ? "quant_gemm" : n->name();
    INGOT_ASSIGN_OR_RETURN(Tensor wf, Tensor::zeros(DataType::kFloat32, {kk, nn}));
    for (int64_t j = 0; j < nn; ++j)
      for (int64_t i = 0; i < kk; ++i)
        wf.set_f64(i * nn + j, w->get_f64(j * kk + i) * sw->get_f64(sw->numel() == 1 ? 0 : j));
    ir::Value* wv = passes::make_initializer(g_, base + "/w_float", std::move(wf));
    ir::Value* xq = n->input(0);
    ir::Value* xf = g_.add_value(passes::unique_value_name(g_, base + "/x_float"), DataType::kFloat32, xq->shape());
    g_.add_node("DequantizeLinear", {xq, n->input(2)}, {xf}, {}, base + "/dequantize");
    const ir::Value* y = n->output(0);
    ir::Value* cur = g_.add_value(passes::unique_value_name(g_, base + "/matmul"), DataType::kFloat32, y->shape());
    g_.add_node("MatMul", {xf, wv}, {cur}, {}, base + "/matmul");
    if (const ir::Value* b = n->input(4)) {
      INGOT_ASSIGN_OR_RETURN(Tensor bf, Tensor::zeros(DataType::kFloat32, b->initializer()->shape()));
      for (int64_t i = 0; i < bf.numel(); ++i) bf.set_f64(i, b->initializer()->get_f64(i));
      cur = add_op("Add", {cur, passes::make_initializer(g_, base + "/bias_float", std::move(bf))}, {}, base + "/bias");
    }
    if (n->input(5)) cur = add_op("Add", {cur, residual_float(n, base)}, {}, base + "/residual");
    const std::string act = n->attrs().get_string("activation", "");
    if (!act.empty()) {
      INGOT_ASSIGN_OR_RETURN(cur, add_activation(act, n->attrs().get_floats("activation_params"), cur, base + "/" + act));
    }
    *note = n->describe() + ": the " + be_.name() +
            " backend has no quantized GEMM for it; it runs dequantized, as DequantizeLinear, MatMul" +
            (n->input(4) ? ", Add" : "") + (n->input(5) ? ", the residual Add" : "") + (act.empty() ? "" : ", " + act) +
            " in float";
    INGOT_RETURN_IF_ERROR(replace_quant_layer(n, cur, base));
    return true;
  }

  // Splits ingot::QuantConv when the backend has no device tactic for it: X is dequantized by a
  // DequantizeLinear step, the weight at build time (W·w_scale[m], a float constant of W's
  // layout), and the convolution runs in float as a FusedConv with the bias, the residual and the
  // activation (itself split further where the backend lacks that epilogue; a plain Conv when
  // there is none), then a QuantizeLinear or a Cast to the output type.
  Result<bool> split_quant_conv(ir::Node* n, std::string* note) {
    if (runs_on_device(*n)) return false;
    INGOT_ASSIGN_OR_RETURN(bool residual_split, split_quant_residual(n, note));
    if (residual_split) return true;
    const Tensor* w = n->input(1)->initializer();
    const Tensor* sw = n->input(3)->initializer();
    const ir::Value* b = n->input(4);
    if (!w || !sw || w->rank() < 3 || w->dim(0) <= 0 || (b && !b->initializer()))
      return false;  // left as it is: the build names it on the host
    const ir::Attributes& at = n->attrs();
    const int64_t m_out = w->dim(0), per = w->numel() / m_out;
    const std::string base = n->name().empty() ? "quant_conv" : n->name();
    INGOT_ASSIGN_OR_RETURN(Tensor wf, Tensor::zeros(DataType::kFloat32, w->shape()));
    for (int64_t i = 0; i < w->numel(); ++i)
      wf.set_f64(i, w->get_f64(i) * sw->get_f64(sw->numel() == 1 ? 0 : i / per));
    ir::Value* wv = passes::make_initializer(g_, base + "/w_float", std::move(wf));
    ir::Value* xq = n->input(0);
    ir::Value* xf = g_.add_value(passes::unique_value_name(g_, base + "/x_float"), DataType::kFloat32, xq->shape());
    g_.add_node("DequantizeLinear", {xq, n->input(2)}, {xf}, {}, base + "/dequantize");
    ir::Value* bv = nullptr;
    if (b) {
      INGOT_ASSIGN_OR_RETURN(Tensor bf, Tensor::zeros(DataType::kFloat32, {m_out}));
      for (int64_t i = 0; i < m_out; ++i) bf.set_f64(i, b->initializer()->get_f64(i));
      bv = passes::make_initializer(g_, base + "/bias_float", std::move(bf));
    }
    ir::Value* r = n->inputs().size() > 5 && n->input(5) ? residual_float(n, base) : nullptr;
    const std::string act = at.get_string("activation", "");
    const bool channels_last = at.get_int("channels_last", 0) != 0;
    const bool fused = channels_last || r || !act.empty();
    ir::Attributes conv_attrs;
    for (const char* k : {"kernel_shape", "strides", "pads", "dilations", "group"})
      if (const ir::Attribute* a = at.find(k)) conv_attrs.set(k, *a);
    if (fused) {
      if (channels_last) conv_attrs.set_int("channels_last", 1);
      if (!act.empty()) {
        conv_attrs.set_string("activation", act);
        if (at.find("activation_params")) conv_attrs.set_floats("activation_params", at.get_floats("activation_params"));
        if (r) conv_attrs.set_int("residual_before_activation", 1);
      }
      if (g_.opset("ingot") == 0) g_.set_opset_import("ingot", 1);
    }
    std::vector<ir::Value*> ins = {xf, wv, bv, r};
    while (ins.size() > 2 && !ins.back()) ins.pop_back();
    const ir::Value* y = n->output(0);
    ir::Value* cur = g_.add_value(passes::unique_value_name(g_, base + "/conv"), DataType::kFloat32, y->shape());
    ir::Node* layer = g_.add_node(fused ? "FusedConv" : "Conv", ins, {cur}, std::move(conv_attrs), base,
                                  fused ? "ingot" : "");
    layer->absorb_origins(*n);
    *note = n->describe() + ": the " + be_.name() +
            " backend has no quantized convolution for it; it runs dequantized, as DequantizeLinear and " +
            (fused ? "a FusedConv" : "a Conv") + " in float";
    INGOT_RETURN_IF_ERROR(replace_quant_layer(n, cur, base));
    // The float layer's epilogue, where the backend has no fused form of it, as its own steps.
    if (fused) {
      std::string more;
      INGOT_ASSIGN_OR_RETURN(bool again, split(layer, &more));
      if (again) *note += "; " + more;
    }
    return true;
  }

  // Splits ingot::LayerNormQuantize when the backend has no device tactic for it: the norm it stands
  // for (ingot's LayerNormalization or RMSNormalization, which every opset has) and a QuantizeLinear
  // of the norm's output, which take over its outputs' readers, graph-output slots and names.
  Result<bool> split_norm_quantize(ir::Node* n, std::string* note) {
    if (runs_on_device(*n)) return false;
    const ir::Attributes& at = n->attrs();
    const bool rms = at.get_int("rms", 0) != 0;
    const std::string base = n->name().empty() ? "norm" : n->name();
    ir::Attributes norm_attrs;
    for (const char* k : {"axis", "epsilon"})
      if (const ir::Attribute* a = at.find(k)) norm_attrs.set(k, *a);
    ir::Value* x = n->input(0);
    std::vector<ir::Value*> ins = {x, n->input(1)};
    if (!rms && n->input(2)) ins.push_back(n->input(2));
    ir::Value* y = g_.add_value(passes::unique_value_name(g_, base + "/norm"), x->dtype(), x->shape());
    const char* norm_op = rms ? "RMSNormalization" : "LayerNormalization";
    ir::Node* norm = g_.add_node(norm_op, ins, {y}, std::move(norm_attrs), base, "ingot");
    norm->absorb_origins(*n);
    ir::Attributes q_attrs;
    if (at.get_int("saturate", 1) != 1) q_attrs.set_int("saturate", 0);
    ir::Value* yq = n->output(1);
    ir::Value* q = g_.add_value(passes::unique_value_name(g_, base + "/quantize"), yq->dtype(), yq->shape());
    g_.add_node("QuantizeLinear", {y, n->input(3), n->input(4)}, {q}, std::move(q_attrs), base + "/quantize");
    std::vector<std::pair<ir::Value*, ir::Value*>> moved = {{yq, q}};
    if (n->output(0)) moved.push_back({n->output(0), y});
    *note = n->describe() + ": the " + be_.name() + " backend has no fused norm and quantization for it; it runs as " +
            norm_op + " and QuantizeLinear";
    for (auto& [old, now] : moved) g_.replace_all_uses(old, now);
    INGOT_RETURN_IF_ERROR(g_.remove_node(n));
    for (auto& [old, now] : moved) {
      const std::string name = old->name();
      g_.rename_value(old, "");
      g_.rename_value(now, name);
    }
    return true;
  }

 private:
  // QuantConv `n` with an 8-bit residual (r_scale, input 7) that the backend has no kernel for:
  // first the same layer reading the residual dequantized by a DequantizeLinear step, in Y's float
  // type (float32 when Y is quantized); true when the backend runs that (the DequantizeLinear is
  // then the one float step left of the residual's Q/DQ pair).
  Result<bool> split_quant_residual(ir::Node* n, std::string* note) {
    ir::Value* r = n->inputs().size() > 7 ? n->input(5) : nullptr;
    ir::Value* rs = n->inputs().size() > 7 ? n->input(7) : nullptr;
    if (!r || !rs) return false;
    const ir::Value* y = n->output(0);
    const DataType rt = is_float(y->dtype()) ? y->dtype() : DataType::kFloat32;
    const std::string base = n->name().empty() ? "quant_conv" : n->name();
    ir::Attributes da;
    da.set_int("output_dtype", static_cast<int64_t>(rt));
    ir::Value* rf = g_.add_value(passes::unique_value_name(g_, base + "/residual_float"), rt, r->shape());
    ir::Node* dq = g_.add_node("DequantizeLinear", {r, rs}, {rf}, std::move(da), base + "/residual_dequantize");
    std::vector<ir::Value*> ins(n->inputs().begin(), n->inputs().begin() + 7);
    ins[5] = rf;
    while (ins.size() > 4 && !ins.back()) ins.pop_back();
    ir::Value* out = g_.add_value(passes::unique_value_name(g_, y->name() + "/layer"), y->dtype(), y->shape());
    ir::Node* layer = g_.add_node(n->op_type(), ins, {out}, n->attrs(), n->name(), n->domain());
    layer->absorb_origins(*n);
    if (!runs_on_device(*layer)) {
      INGOT_RETURN_IF_ERROR(drop(layer));
      INGOT_RETURN_IF_ERROR(drop(dq));
      return false;
    }
    const std::string name = y->name();
    ir::Value* old = n->output(0);
    g_.replace_all_uses(old, out);
    INGOT_RETURN_IF_ERROR(g_.remove_node(n));
    g_.rename_value(old, "");
    g_.rename_value(out, name);
    *note = layer->describe() + ": the " + be_.name() +
            " backend has no kernel for its 8-bit residual; it reads it dequantized, a DequantizeLinear step";
    return true;
  }

  // QuantConv `n`'s residual as float32 for its split float epilogue: a DequantizeLinear by r_scale
  // for an 8-bit one, a Cast where it is reduced.
  ir::Value* residual_float(ir::Node* n, const std::string& base) {
    ir::Value* r = n->input(5);
    if (ir::Value* rs = n->inputs().size() > 7 ? n->input(7) : nullptr) {
      ir::Value* rf = g_.add_value(passes::unique_value_name(g_, base + "/residual_float"), DataType::kFloat32, r->shape());
      g_.add_node("DequantizeLinear", {r, rs}, {rf}, {}, base + "/residual_dequantize");
      return rf;
    }
    if (r->dtype() == DataType::kFloat32) return r;
    ir::Attributes a;
    a.set_int("to", static_cast<int64_t>(DataType::kFloat32));
    ir::Value* rf = g_.add_value(passes::unique_value_name(g_, base + "/residual_float"), DataType::kFloat32, r->shape());
    g_.add_node("Cast", {r}, {rf}, std::move(a), base + "/residual_float");
    return rf;
  }

  // Ends the split of quantized layer `n` (QuantGemm / QuantConv) whose float result is `cur`:
  // the QuantizeLinear it took when it has a y_scale (input 6; a zero point of Y's type says
  // which type), else a Cast to Y's type where that is not float32; then `n` goes and the result
  // takes over its output's readers, graph-output slot and name.
  Status replace_quant_layer(ir::Node* n, ir::Value* cur, const std::string& base) {
    ir::Value* y = n->output(0);
    if (ir::Value* ys = n->inputs().size() > 6 ? n->input(6) : nullptr) {
      ir::Value* zp = passes::make_initializer(g_, base + "/y_zero_point", Tensor::zeros(y->dtype(), {}).value());
      ir::Value* q = g_.add_value(passes::unique_value_name(g_, base + "/quantize"), y->dtype(), y->shape());
      g_.add_node("QuantizeLinear", {cur, ys, zp}, {q}, {}, base + "/quantize");
      cur = q;
    } else if (y->dtype() != DataType::kFloat32) {
      ir::Attributes a;
      a.set_int("to", static_cast<int64_t>(y->dtype()));
      ir::Value* c = g_.add_value(passes::unique_value_name(g_, base + "/cast"), y->dtype(), y->shape());
      g_.add_node("Cast", {cur}, {c}, std::move(a), base + "/cast");
      cur = c;
    }
    const std::string name = y->name();
    g_.replace_all_uses(y, cur);
    INGOT_RETURN_IF_ERROR(g_.remove_node(n));
    g_.rename_value(y, "");
    g_.rename_value(cur, name);
    return Status::Ok();
  }

  // Whether the backend runs `n` as it is or (channels_last_) as the layout pass may make it.
  bool runs_on_device(const ir::Node& n) {
    return has_device_tactic(be_, n, reduced_) || (channels_last_ && has_channels_last_tactic(n));
  }

  // Whether the backend has a device tactic for `n` channels-last (see channels_last_twin_runs).
  bool has_channels_last_tactic(const ir::Node& n) {
    return ask_channels_last_twin(g_, n, [&](const ir::Node& twin) { return has_device_tactic(be_, twin, reduced_); });
  }

  // n's op with the same attributes minus the activation, reading X, W, the bias and (when
  // `keep_residual`) the residual.
  ir::Node* add_reduced(const ir::Node& n, bool keep_residual) {
    ir::Attributes attrs;
    for (const auto& [k, a] : n.attrs().all())
      if (k != "activation" && k != "activation_params" && k != "residual_before_activation") attrs.set(k, a);
    std::vector<ir::Value*> ins = {n.input(0), n.input(1), n.input(kBiasInput)};
    if (keep_residual) ins.push_back(n.input(kResidualInput));
    while (ins.size() > 2 && !ins.back()) ins.pop_back();
    const ir::Value* y = n.output(0);
    ir::Value* out = g_.add_value(passes::unique_value_name(g_, y->name() + "/layer"), y->dtype(), y->shape());
    ir::Node* layer = g_.add_node(n.op_type(), ins, {out}, std::move(attrs), n.name(), n.domain());
    layer->absorb_origins(n);
    return layer;
  }

  // Removes a reduced form the backend lacks; its output's name is free again.
  Status drop(ir::Node* layer) {
    ir::Value* out = layer->output(0);
    INGOT_RETURN_IF_ERROR(g_.remove_node(layer));
    g_.rename_value(out, "");
    return Status::Ok();
  }

  ir::Value* add_op(const std::string& op, const std::vector<ir::Value*>& ins, ir::Attributes attrs,
                    const std::string& name, const std::string& domain = "") {
    const ir::Value* like = ins[0];
    ir::Value* out = g_.add_value(passes::unique_value_name(g_, name), like->dtype(), like->shape());
    g_.add_node(op, ins, {out}, std::move(attrs), name, domain);
    return out;
  }

  // A scalar constant of x's type (Clip's bounds).
  ir::Value* scalar(const ir::Value* x, double v, const std::string& name) {
    Tensor t = Tensor::zeros(x->dtype(), {}).value();
    t.set_f64(0, v);
    return passes::make_initializer(g_, name, std::move(t));
  }

  // act(x) as the ONNX ops of the graph's opset (ingot's twin for Gelu below opset 20).
  Result<ir::Value*> add_activation(const std::string& act, const std::vector<float>& p, ir::Value* x,
                                    const std::string& name) {
    const int64_t opset = g_.opset("");
    ir::Attributes a;
    if (act == "Relu" || act == "Sigmoid" || act == "Tanh" || act == "HardSwish") return add_op(act, {x}, {}, name);
    if (act == "LeakyRelu") {
      a.set_float("alpha", p.at(0));
      return add_op(act, {x}, std::move(a), name);
    }
    if (act == "HardSigmoid") {
      a.set_float("alpha", p.at(0));
      a.set_float("beta", p.at(1));
      return add_op(act, {x}, std::move(a), name);
    }
    if (act == "Clip") {
      if (opset < 11) {
        a.set_float("min", p.at(0));
        a.set_float("max", p.at(1));
        return add_op(act, {x}, std::move(a), name);
      }
      ir::Value* lo = std::isinf(p.at(0)) ? nullptr : scalar(x, p[0], name + "/min");
      ir::Value* hi = std::isinf(p.at(1)) ? nullptr : scalar(x, p[1], name + "/max");
      std::vector<ir::Value*> ins = {x, lo, hi};
      while (ins.size() > 1 && !ins.back()) ins.pop_back();
      return add_op(act, ins, {}, name);
    }
    if (act == "Gelu" || act == "GeluTanh") {
      a.set_string("approximate", act == "Gelu" ? "none" : "tanh");
      if (opset >= 20) return add_op("Gelu", {x}, std::move(a), name);
      if (g_.opset("ingot") == 0) g_.set_opset_import("ingot", 1);
      return add_op("Gelu", {x}, std::move(a), name, "ingot");
    }
    if (act == "Silu") {
      ir::Value* s = add_op("Sigmoid", {x}, {}, name + "/sigmoid");
      return add_op("Mul", {x, s}, {}, name);
    }
    return unsupported("cannot split activation '", act, "' out of a fused layer");
  }

  ir::Graph& g_;
  const backend::Backend& be_;
  DataType reduced_;
  bool channels_last_;
};

}  // namespace

bool ask_channels_last_twin(ir::Graph& g, const ir::Node& n, const std::function<bool(const ir::Node&)>& ask) {
  // QuantConv too: cuDNN's int8 / fp8 convolutions read NHWC only, so a QuantConv kept for the
  // layout pass must not be split before it (the layout pass asks the same of its twin).
  if (n.domain() != "ingot" || (n.op_type() != "FusedConv" && n.op_type() != "QuantConv") ||
      n.attrs().get_int("channels_last", 0) != 0 || n.attrs().get_int("transposed", 0) != 0 ||
      n.outputs().size() != 1 || !n.output(0))
    return false;
  const size_t residual = is_quant_conv(n) ? kQuantResidualInput : kResidualInput;
  auto nhwc = [](const ir::Value* v) -> std::optional<ir::Shape> {
    if (!v || !v->shape().rank_known() || v->shape().rank() != 4) return std::nullopt;
    const auto& d = v->shape().dims();
    return ir::Shape(std::vector<ir::Dim>{d[0], d[2], d[3], d[1]});
  };
  std::vector<ir::Value*> ins;
  for (size_t i = 0; i < n.inputs().size(); ++i) {
    const ir::Value* v = n.input(i);
    if (!v) {
      ins.push_back(nullptr);
      continue;
    }
    // X, W (KRSC) and the residual are permuted; the bias and a QuantConv's scales keep theirs.
    const bool permuted = i == 0 || i == 1 || i == residual;
    std::optional<ir::Shape> s = permuted ? nhwc(v) : std::optional<ir::Shape>(v->shape());
    if (!s) return false;
    ins.push_back(g.add_value(passes::unique_value_name(g, v->name() + "/nhwc_twin"), v->dtype(), *s));
  }
  std::optional<ir::Shape> ys = nhwc(n.output(0));
  if (!ys || ins.size() < 2) return false;
  ir::Value* y =
      g.add_value(passes::unique_value_name(g, n.output(0)->name() + "/nhwc_twin"), n.output(0)->dtype(), *ys);
  ir::Attributes attrs;
  for (const auto& [k, a] : n.attrs().all()) attrs.set(k, a);
  attrs.set_int("channels_last", 1);
  ir::Node* twin = g.add_node(n.op_type(), ins, {y}, std::move(attrs), n.name() + "/nhwc_twin", n.domain());
  const bool ok = ask(*twin);
  (void)g.remove_node(twin);
  return ok;
}

bool has_device_tactic(const backend::Backend& be, const ir::Node& n, DataType reduced) {
  auto device = [&](const std::vector<ir::TensorType>& types) {
    for (const auto& t : be.candidates(n, types))
      if (!t->is_host_fallback()) return true;
    return false;
  };
  std::vector<ir::TensorType> types = backend::node_input_types(n);
  if (device(types)) return true;
  ir::Value* y = n.output(0);
  const bool norm_quant = is_norm_quantize(n);  // its Y (output 0) may be absent
  if ((reduced != DataType::kFloat16 && reduced != DataType::kBFloat16) || (!y && !norm_quant)) return false;
  // What precision lowering makes of it (precision.cc's rules): the float inputs and output in the
  // reduced type, a quantized layer's scales (inputs 2, 3, 6, 7) in fp32; with an 8-bit output, only
  // a QuantConv's residual, which it reads in any float type; a LayerNormQuantize's X, scale and B
  // (not y_scale), and its Y where it has one.
  const bool quant = is_quant_gemm(n) || is_quant_conv(n);
  const bool float_y = y && y->dtype() == DataType::kFloat32;
  if (!float_y && !norm_quant && !(is_quant_conv(n) && n.inputs().size() > 6 && n.input(6))) return false;
  bool changed = false;
  for (size_t i = 0; i < types.size(); ++i) {
    const bool lowered = norm_quant ? i < 3
                         : float_y  ? !(quant && (i == 2 || i == 3 || i == 6 || i == 7))
                                    : i == kQuantResidualInput;
    if (types[i].dtype == DataType::kFloat32 && lowered) {
      types[i].dtype = reduced;
      changed = true;
    }
  }
  if (!changed && !float_y) return false;  // asked above already
  // Tactics may read the output type from the node: set it while asking.
  if (float_y) y->set_dtype(reduced);
  const bool ok = device(types);
  if (float_y) y->set_dtype(DataType::kFloat32);
  return ok;
}

Status split_host_fusions(ir::Graph& g, const backend::Backend& be, SplitReport* report, DataType reduced,
                          bool channels_last) {
  std::vector<ir::Node*> fused;
  for (const auto& n : g.nodes())
    if (is_fused_layer(*n) || is_quant_gemm(*n) || is_quant_conv(*n) || is_norm_quantize(*n)) fused.push_back(n.get());
  Splitter splitter(g, be, reduced, channels_last);
  bool changed = false;
  for (ir::Node* n : fused) {
    std::string note;
    INGOT_ASSIGN_OR_RETURN(bool done, is_quant_gemm(*n)      ? splitter.split_quant(n, &note)
                                      : is_quant_conv(*n)    ? splitter.split_quant_conv(n, &note)
                                      : is_norm_quantize(*n) ? splitter.split_norm_quantize(n, &note)
                                                             : splitter.split(n, &note));
    if (!done) continue;
    changed = true;
    if (report) {
      ++report->split;
      report->notes.push_back("split: " + note);
    }
  }
  if (changed) INGOT_RETURN_IF_ERROR(g.topological_sort());
  return Status::Ok();
}

}  // namespace ingot::builder
