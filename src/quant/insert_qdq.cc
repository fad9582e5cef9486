// Copyright ingot authors. Apache-2.0.
#include "quant/insert_qdq.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <unordered_map>
#include <utility>

#include "core/dtype.h"

namespace ingot::quant {
namespace {

bool quantizable(const ir::Node& n) {
  return n.domain().empty() && (n.op_type() == "Conv" || n.op_type() == "Gemm" || n.op_type() == "MatMul");
}

// The output-channel axis of a layer's constant weight, or -1 for one scale over the tensor.
int64_t channel_axis(const ir::Node& n, int64_t rank) {
  if (n.op_type() == "Conv") return rank >= 3 ? 0 : -1;
  if (n.op_type() == "Gemm") return rank == 2 ? (n.attrs().get_int("transB", 0) ? 0 : 1) : -1;
  return rank == 2 ? 1 : -1;  // MatMul [K, N]
}

// One value quantized with `scale` and back: int8 rounds half to even within +-127 (weights stay
// symmetric), FP8 E4M3 rounds to its nearest number, saturating at 448.
double round_trip(double v, double scale, QuantType type) {
  if (!(scale > 0)) return 0.0;
  if (type == QuantType::kFp8E4M3) {
    const uint8_t b = float_to_small_float(static_cast<float>(v / scale), DataType::kFloat8E4M3FN, true);
    return static_cast<double>(small_float_to_float(b, DataType::kFloat8E4M3FN)) * scale;
  }
  return std::clamp(std::nearbyint(v / scale), -127.0, 127.0) * scale;
}

// w rounded per channel along `axis` (or per tensor), returned dequantized (fp32).
Tensor fake_quant_weight(const Tensor& w, int64_t axis, QuantType type) {
  const Shape64& s = w.shape();
  int64_t outer = 1, channels = 1, inner = 1;
  if (axis >= 0) {
    for (int64_t d = 0; d < axis; ++d) outer *= s[static_cast<size_t>(d)];
    channels = s[static_cast<size_t>(axis)];
    for (size_t d = static_cast<size_t>(axis) + 1; d < s.size(); ++d) inner *= s[d];
  } else {
    inner = w.numel();
  }
  std::vector<double> amax(static_cast<size_t>(channels), 0.0);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t i = 0; i < inner; ++i)
        amax[static_cast<size_t>(c)] =
            std::max(amax[static_cast<size_t>(c)], std::fabs(w.get_f64((o * channels + c) * inner + i)));
  Tensor out = Tensor::zeros(DataType::kFloat32, s).value();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < channels; ++c) {
      const double scale = amax[static_cast<size_t>(c)] / quant_max(type);
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t k = (o * channels + c) * inner + i;
        out.set_f64(k, static_cast<float>(round_trip(w.get_f64(k), scale, type)));
      }
    }
  return out;
}

// A MatMul/Gemm/Conv weight in its 8-bit form for a DequantizeLinear: the numbers and the scale
// (per output channel along `axis` for int8; one for FP8, as TensorRT and modelopt scale FP8
// weights and as the FP8 tensor-core GEMMs and convolutions take them). Each rounds exactly as fake_quant_weight's do.
// `shared_amax` > 0 (FP8): the scale is that / 448 instead of this weight's own max (the layers
// reading one input share a scale, so their GEMMs can be one: fuse_qkv_projection).
std::pair<Tensor, Tensor> quantize_weight(const Tensor& w, int64_t axis, QuantType type, double shared_amax = 0) {
  const DataType qt = type == QuantType::kFp8E4M3 ? DataType::kFloat8E4M3FN : DataType::kInt8;
  if (type == QuantType::kFp8E4M3) axis = -1;
  const Shape64& s = w.shape();
  const int64_t channels = axis >= 0 ? s[static_cast<size_t>(axis)] : 1;
  int64_t inner = 1;
  for (size_t d = axis >= 0 ? static_cast<size_t>(axis) + 1 : 0; d < s.size(); ++d) inner *= s[d];
  auto channel_of = [&](int64_t k) { return axis >= 0 ? (k / inner) % channels : 0; };
  std::vector<double> amax(static_cast<size_t>(channels), 0.0);
  for (int64_t k = 0; k < w.numel(); ++k)
    amax[channel_of(k)] = std::max(amax[channel_of(k)], std::fabs(w.get_f64(k)));
  Tensor scale = Tensor::zeros(DataType::kFloat32, axis >= 0 ? Shape64{channels} : Shape64{}).value();
  if (shared_amax > 0 && axis < 0) amax[0] = std::max(amax[0], shared_amax);
  for (int64_t c = 0; c < channels; ++c) {
    const double a = amax[static_cast<size_t>(c)];
    scale.set_f64(c, a > 0 ? static_cast<float>(a / quant_max(type)) : 1.0f);
  }
  Tensor q = Tensor::zeros(qt, s).value();
  for (int64_t k = 0; k < w.numel(); ++k) {
    const double sc = scale.get_f64(channel_of(k));
    const double v = w.get_f64(k) / sc;
    q.set_f64(k, type == QuantType::kFp8E4M3 ? static_cast<double>(small_float_to_float(
                                                   float_to_small_float(static_cast<float>(v), qt, true), qt))
                                             : std::clamp(std::nearbyint(v), -127.0, 127.0));
  }
  return {std::move(q), std::move(scale)};
}

// How a quantizable layer's first two inputs split into activations (read through Q/DQ pairs) and
// the constant weight, or why the layer stays in float whatever the scales (a non-float input, a
// constant input 0, no activation, no constant weight): the scales are looked up afterwards.
struct LayerInputs {
  std::vector<size_t> acts;
  size_t weight = SIZE_MAX;
  std::string why;  // "" when the layer can be quantized given its activations' scales
};

LayerInputs split_inputs(const ir::Node& n) {
  LayerInputs r;
  for (size_t i = 0; i < std::min<size_t>(2, n.inputs().size()); ++i) {
    const ir::Value* v = n.input(i);
    if (!v) continue;
    if (v->dtype() != DataType::kFloat32) {
      r.why = "input '" + v->name() + "' is " + data_type_name(v->dtype()) + ", not f32";
      break;
    }
    if (v->initializer()) {
      if (i == 1)
        r.weight = i;
      else
        r.why = "input 0 is a constant";
      continue;
    }
    r.acts.push_back(i);
  }
  if (r.why.empty() && r.acts.empty()) r.why = "no activation input";
  // A product of two activations (attention's Q.K^T and P.V) stays in float: the fused
  // attention kernels run it, and Q/DQ pairs between them would break the pattern up.
  if (r.why.empty() && r.weight == SIZE_MAX) r.why = "no constant weight (a product of activations)";
  return r;
}

// The Conv that `v` comes from, through at most one inference BatchNormalization, or nullptr.
const ir::Node* conv_behind(const ir::Value* v) {
  const ir::Node* p = v ? v->producer() : nullptr;
  if (p && p->domain().empty() && p->op_type() == "BatchNormalization" && p->input(0)) p = p->input(0)->producer();
  return p && p->domain().empty() && p->op_type() == "Conv" ? p : nullptr;
}

// TensorRT's placement for residual blocks: an Add of a quantized Conv's result (the block's last
// conv, maybe through its BatchNormalization) and an activation that already has a Q/DQ pair (the
// block's input, quantized for the next block's first conv) reads that pair's output too. Then
// fuse_quant_gemm takes the 8-bit tensor as the conv's residual (QuantConv's R with r_scale), the
// block's output has only quantized readers and is written in int8 by its conv, and no standalone
// QuantizeLinear is left between the blocks (session 37: 15 of them, 1.11 ms of ResNet-50's 4.44 at
// batch 128). Other Adds (a transformer's residuals, whose GEMMs take float residuals) keep reading
// the float tensor.
void share_residual_qdq(ir::Graph& g, const std::set<const ir::Node*>& quantized_convs,
                        const std::unordered_map<ir::Value*, ir::Value*>& dequantized) {
  for (const auto& n : g.nodes()) {
    if (!n->domain().empty() || n->op_type() != "Add" || n->inputs().size() != 2 || !n->input(0) || !n->input(1))
      continue;
    for (size_t i = 0; i < 2; ++i) {
      auto it = dequantized.find(n->input(i));
      const ir::Node* conv = conv_behind(n->input(1 - i));
      if (it == dequantized.end() || !conv || !quantized_convs.count(conv)) continue;
      if (it->second->shape().rank_known() && n->input(1 - i)->shape().rank_known() &&
          it->second->shape() != n->input(1 - i)->shape())
        continue;  // a broadcasting Add is no residual
      n->set_input(i, it->second);
      break;
    }
  }
}

}  // namespace

std::string fresh_name(const ir::Graph& g, const std::string& base) {
  std::string name = base;
  for (int k = 1; g.find_value(name) != nullptr; ++k) name = base + "_" + std::to_string(k);
  return name;
}

std::string layer_name(const ir::Node& n) { return n.name().empty() ? n.op_type() : n.name(); }

double quant_max(QuantType t) { return t == QuantType::kFp8E4M3 ? 448.0 : 127.0; }

std::vector<std::string> quantizable_layers(const ir::Graph& g) {
  std::vector<std::string> out;
  for (const auto& n : g.nodes())
    if (quantizable(*n)) out.push_back(layer_name(*n));
  return out;
}

std::vector<std::string> calibrated_tensors(const ir::Graph& g) {
  std::vector<std::string> out;
  for (const auto& n : g.nodes()) {
    if (!quantizable(*n)) continue;
    const LayerInputs li = split_inputs(*n);
    if (!li.why.empty()) continue;
    for (size_t i : li.acts) {
      const std::string& name = n->input(i)->name();
      if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
    }
  }
  return out;
}

Result<QdqReport> insert_qdq(ir::Graph& g, const std::map<std::string, float>& scales,
                             const std::map<std::string, std::string>& keep_float, QuantType type) {
  const DataType qtype = type == QuantType::kFp8E4M3 ? DataType::kFloat8E4M3FN : DataType::kInt8;
  const std::string tag = type == QuantType::kFp8E4M3 ? "_fp8" : "_int8";
  QdqReport rep;
  std::vector<ir::Node*> layers;
  for (const auto& n : g.nodes())
    if (quantizable(*n)) layers.push_back(n.get());
  std::unordered_map<ir::Value*, ir::Value*> dequantized;  // activation -> its Q/DQ output
  std::set<const ir::Node*> quantized_convs;               // layers given Q/DQ inputs (Conv ones count)
  // FP8: one weight scale for the MatMul/Gemm layers that read the same input (Q, K and V),
  // from the largest |w| among them. E4M3 is a float format: a larger scale costs precision only
  // for weights that fall below its normal range (2^-6 of 448 times the scale).
  std::unordered_map<const ir::Value*, double> shared_amax;
  if (type == QuantType::kFp8E4M3)
    for (ir::Node* n : layers) {
      if (n->op_type() == "Conv" || n->inputs().size() < 2 || !n->input(0) || !n->input(1) ||
          !n->input(1)->initializer() || n->input(1)->initializer()->rank() != 2)
        continue;
      const Tensor& w = *n->input(1)->initializer();
      double a = 0;
      for (int64_t k = 0; k < w.numel(); ++k) a = std::max(a, std::fabs(w.get_f64(k)));
      double& m = shared_amax[n->input(0)];
      m = std::max(m, a);
    }
  for (ir::Node* n : layers) {
    const std::string layer = layer_name(*n);
    if (auto k = keep_float.find(layer); k != keep_float.end()) {
      rep.kept.push_back(layer + " (" + n->op_type() + "): " + k->second);
      continue;
    }
    const ir::Value* in0 = n->inputs().empty() ? nullptr : n->input(0);  // before the Q/DQ pair replaces it
    // Which inputs are activations (quantized through Q/DQ) and which the constant weight.
    const LayerInputs li = split_inputs(*n);
    const std::vector<size_t>& acts = li.acts;
    const size_t weight = li.weight;
    std::string why = li.why;
    for (size_t i : acts) {
      if (!why.empty()) break;
      auto it = scales.find(n->input(i)->name());
      if (it == scales.end() || !(it->second > 0)) why = "no calibrated range for '" + n->input(i)->name() + "'";
    }
    if (!why.empty()) {
      rep.kept.push_back(layer + " (" + n->op_type() + "): " + why);
      continue;
    }
    for (size_t i : acts) {
      ir::Value* v = n->input(i);
      ir::Value*& dq = dequantized[v];
      if (!dq) {
        const std::string base = v->name().empty() ? layer + "_in" : v->name();
        Tensor s = Tensor::zeros(DataType::kFloat32, {}).value();
        s.set_f64(0, scales.at(v->name()));
        Tensor zp = Tensor::zeros(qtype, {}).value();
        ir::Value* sv = g.add_initializer(fresh_name(g, base + tag + "_scale"), std::move(s));
        ir::Value* zv = g.add_initializer(fresh_name(g, base + tag + "_zero_point"), std::move(zp));
        ir::Value* q = g.add_value(fresh_name(g, base + tag), qtype, v->shape());
        dq = g.add_value(fresh_name(g, base + "_dequantized"), DataType::kFloat32, v->shape());
        g.add_node("QuantizeLinear", {v, sv, zv}, {q}, {}, base + "/quantize");
        g.add_node("DequantizeLinear", {q, sv, zv}, {dq}, {}, base + "/dequantize");
        ++rep.qdq_pairs;
      }
      n->set_input(i, dq);
    }
    if (weight != SIZE_MAX) {
      ir::Value* w = n->input(weight);
      const Tensor& wt = *w->initializer();
      const int64_t axis = channel_axis(*n, static_cast<int64_t>(wt.shape().size()));
      if (n->op_type() == "Conv" ? wt.rank() >= 3 : wt.rank() == 2) {
        // MatMul / Gemm / Conv: the 8-bit weight and a DequantizeLinear, which fuse_quant_gemm
        // turns with the activation's pair into one QuantGemm / QuantConv.
        auto it = shared_amax.find(in0);
        auto [q, sc] = quantize_weight(wt, axis, type, it == shared_amax.end() ? 0.0 : it->second);
        ir::Value* qv = g.add_initializer(fresh_name(g, w->name() + tag), std::move(q));
        ir::Value* sv = g.add_initializer(fresh_name(g, w->name() + tag + "_scale"), std::move(sc));
        ir::Value* dq = g.add_value(fresh_name(g, w->name() + "_dequantized"), DataType::kFloat32, w->shape());
        ir::Attributes a;
        if (axis >= 0 && type == QuantType::kInt8) a.set_int("axis", axis);
        g.add_node("DequantizeLinear", {qv, sv}, {dq}, std::move(a), w->name() + "/dequantize");
        n->set_input(weight, dq);
      } else {
        ir::Value* nw =
            g.add_initializer(fresh_name(g, w->name() + tag + "_rounded"), fake_quant_weight(wt, axis, type));
        nw->set_shape(w->shape());
        n->set_input(weight, nw);
      }
    }
    ++rep.quantized_layers;
    rep.int8.push_back(layer);
    quantized_convs.insert(n);
  }
  share_residual_qdq(g, quantized_convs, dequantized);
  INGOT_RETURN_IF_ERROR(g.topological_sort());
  return rep;
}

}  // namespace ingot::quant
