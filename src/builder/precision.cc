// Copyright ingot authors. Apache-2.0.
#include "builder/precision.h"
#include "builder/split_fusions.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "ir/op_registry.h"
#include "ir/verify.h"

namespace ingot::builder {

namespace {

enum class Role { kCompute, kFollow };

struct Rule {
  Role role;
  std::vector<int> data_inputs;   ///< empty: every fp32 input
  std::vector<int> data_outputs;  ///< empty: every fp32 output
};

const Rule* find_rule(const ir::Node& n) {
  static const std::map<std::string, Rule> kOnnx = [] {
    std::map<std::string, Rule> m;
    for (const char* op : {"Conv", "ConvTranspose", "MatMul", "Gemm", "Add", "Sub", "Mul", "Div", "Relu", "Sigmoid",
                           "Tanh", "Gelu", "Erf", "HardSwish", "HardSigmoid", "LeakyRelu", "Clip", "Max", "Min", "Neg",
                           "Abs", "PRelu", "Softmax", "AveragePool", "GlobalAveragePool", "GlobalMaxPool"})
      m[op] = {Role::kCompute, {}, {}};
    m["LayerNormalization"] = {Role::kCompute, {}, {0}};  // Mean / InvStdDev stay fp32
    // Statistics in fp32 inside the kernels (the backend must have a reduced tactic, or the node
    // stays fp32): Llama's RMSNorm kept fp32 cost two Casts per norm.
    for (const char* op : {"RMSNormalization", "GroupNormalization", "InstanceNormalization"})
      m[op] = {Role::kCompute, {}, {0}};
    // Q, K, V reduced; an additive mask stays fp32: masks are built from finfo(float32).min, which
    // fp16 turns into -inf, and a fully masked row would then differ from the fp32 model's.
    m["Attention"] = {Role::kCompute, {0, 1, 2, 4, 5}, {}};  // past_key/value in, every output (type T)
    m["MaxPool"] = {Role::kCompute, {0}, {0}};
    m["ReduceMean"] = {Role::kCompute, {0}, {0}};
    m["ReduceMax"] = {Role::kCompute, {0}, {0}};
    m["ReduceMin"] = {Role::kCompute, {0}, {0}};
    m["Where"] = {Role::kCompute, {1, 2}, {0}};
    for (const char* op : {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Transpose", "Gather", "Slice",
                           "Expand", "Tile", "Resize", "DepthToSpace", "SpaceToDepth", "GatherElements"})
      m[op] = {Role::kFollow, {0}, {0}};
    m["Split"] = {Role::kFollow, {0}, {}};
    m["Pad"] = {Role::kFollow, {0, 2}, {0}};
    m["Concat"] = {Role::kFollow, {}, {0}};
    return m;
  }();
  // QuantGemm and QuantConv (X, W, x_scale, w_scale, B, R, y_scale): the 8-bit operands and the
  // fp32 scales stay; the bias, the residual and a float result take the type (an 8-bit result
  // leaves the layer as it is; see 1a for its residual).
  static const Rule kQuantLayer = {Role::kCompute, {4, 5}, {0}};
  static const std::map<std::string, Rule> kIngot = {
      {"FusedConv", {Role::kCompute, {}, {0}}}, {"FusedGemm", {Role::kCompute, {}, {0}}},
      {"Attention", {Role::kCompute, {0, 1, 2}, {0}}}, {"Gelu", {Role::kCompute, {}, {0}}},
      {"Silu", {Role::kCompute, {}, {0}}},      {"LayerNormalization", {Role::kCompute, {}, {0}}},
      {"RMSNormalization", {Role::kCompute, {}, {0}}}, {"Pointwise", {Role::kCompute, {}, {0}}},
      {"RotaryEmbedding", {Role::kCompute, {}, {0}}}, {"SwiGLU", {Role::kCompute, {}, {0}}},
      {"QuantGemm", kQuantLayer},               {"QuantConv", kQuantLayer},
      // X, scale and B take the type, as a LayerNorm's do; Y (when present) too; y_scale stays fp32
      // and Yq 8-bit. Without Y it still computes in X's type: see computes_without_float_output.
      {"LayerNormQuantize", {Role::kCompute, {0, 1, 2}, {0}}}};
  const auto& table = n.domain().empty() ? kOnnx : n.domain() == "ingot" ? kIngot : kOnnx;
  if (!n.domain().empty() && n.domain() != "ingot") return nullptr;
  auto it = table.find(n.op_type());
  return it == table.end() ? nullptr : &it->second;
}

// A node whose float outputs may all be absent while it still computes in its float inputs' type:
// a LayerNormQuantize whose norm output nothing but the quantization read (what the norm and
// QuantizeLinear it stands for computed in the reduced type, it must too).
bool computes_without_float_output(const ir::Node& n) {
  return n.domain() == "ingot" && n.op_type() == "LayerNormQuantize";
}

bool is_quant_layer(const ir::Node& n) {
  return n.domain() == "ingot" && (n.op_type() == "QuantGemm" || n.op_type() == "QuantConv");
}

// The float input that a layer writing 8-bit numbers reads in whatever float type it comes in
// (its arithmetic runs in fp32 either way): QuantizeLinear's x, the residual of a QuantConv with
// y_scale. -1 for any other node.
int any_float_input(const ir::Node& n) {
  if (n.domain().empty() && n.op_type() == "QuantizeLinear") return 0;
  if (n.domain() == "ingot" && n.op_type() == "QuantConv" && n.inputs().size() > 6 && n.input(6)) return 5;
  return -1;
}

std::vector<int> float_slots(const std::vector<ir::Value*>& vals, const std::vector<int>& listed) {
  std::vector<int> out;
  auto ok = [&](int i) { return i < static_cast<int>(vals.size()) && vals[i] && vals[i]->dtype() == DataType::kFloat32; };
  if (listed.empty()) {
    for (int i = 0; i < static_cast<int>(vals.size()); ++i)
      if (ok(i)) out.push_back(i);
  } else {
    for (int i : listed)
      if (ok(i)) out.push_back(i);
  }
  return out;
}

const char* short_name(DataType t) {
  return t == DataType::kFloat16 ? "fp16" : t == DataType::kBFloat16 ? "bf16" : "fp32";
}

// Precision forced for this node (by its name or an origin's), or kUndefined.
DataType forced_for(const ir::Node& n, const PrecisionOptions& o, std::set<std::string>* matched) {
  auto f = o.forced.find(n.name());
  if (f != o.forced.end()) {
    matched->insert(f->first);
    return f->second;
  }
  for (const std::string& origin : n.origins()) {
    f = o.forced.find(origin);
    if (f != o.forced.end()) {
      matched->insert(f->first);
      return f->second;
    }
  }
  return DataType::kUndefined;
}

}  // namespace

Result<Tensor> convert_tensor(const Tensor& t, DataType to) {
  INGOT_ASSIGN_OR_RETURN(Tensor out, Tensor::zeros(to, t.shape()));
  for (int64_t i = 0; i < t.numel(); ++i) out.set_f64(i, t.get_f64(i));
  return out;
}

namespace {

class Lowering {
 public:
  Lowering(ir::Graph& g, const backend::Backend& be, const PrecisionOptions& o, PrecisionReport& r)
      : g_(g), be_(be), o_(o), r_(r) {}

  Status run() {
    // 0. Layers whose results are rounded to integers or become quantization parameters stay
    //    fp32, with everything computing their inputs: half precision there shows up as an
    //    off-by-one integer, not as a small error.
    std::set<const ir::Node*> exact;
    std::vector<const ir::Value*> work;
    for (const auto& node : g_.nodes()) {
      if (!node->domain().empty()) continue;
      const std::string& op = node->op_type();
      if ((op == "Round" || op == "Floor" || op == "Ceil") && node->input(0)) work.push_back(node->input(0));
      if (op == "Cast" && node->input(0) && !is_float(static_cast<DataType>(node->attrs().get_int("to", 0))))
        work.push_back(node->input(0));
      if (op == "QuantizeLinear" || op == "DequantizeLinear")
        for (size_t i = 1; i < 3; ++i)
          if (node->input(i)) work.push_back(node->input(i));
    }
    for (const auto& node : g_.nodes())  // a LayerNormQuantize's y_scale and y_zero_point
      if (computes_without_float_output(*node))
        for (size_t i = 3; i < 5 && i < node->inputs().size(); ++i)
          if (node->input(i)) work.push_back(node->input(i));
    while (!work.empty()) {
      const ir::Value* v = work.back();
      work.pop_back();
      const ir::Node* p = v->producer();
      if (!p || exact.count(p) || !find_rule(*p)) continue;
      exact.insert(p);
      for (const ir::Value* in : p->inputs())
        if (in) work.push_back(in);
    }
    if (!exact.empty())
      r_.notes.push_back("precision: " + std::to_string(exact.size()) +
                         " layers stay fp32: they compute values rounded to integers or quantization parameters");

    // Reduced I/O: fp32 graph inputs arrive in the reduced type. Reduced readers take them as they
    // are; readers that stay fp32 get a Cast up below, as every reduced value's fp32 readers do.
    // Marked before deciding, so data movement on an input follows it (lift_conv1d's Reshape of
    // Whisper's mel input ran fp32 between two Casts).
    if (o_.reduced_io)
      for (ir::Value* in : g_.inputs())
        if (!in->initializer() && in->dtype() == DataType::kFloat32) low_[in] = o_.reduced;

    // 1. Decide, in topological order (data-movement layers follow their producers). Over a copy
    // of the node list: asking about a conv's channels-last twin adds (and removes) a node.
    std::vector<ir::Node*> order;
    for (const auto& node : g_.nodes()) order.push_back(node.get());
    for (ir::Node* node : order) {
      const Rule* rule = find_rule(*node);
      if (!rule) continue;
      std::vector<int> ins = float_slots(node->inputs(), rule->data_inputs);
      std::vector<int> outs = float_slots(node->outputs(), rule->data_outputs);
      if (outs.empty() && !(computes_without_float_output(*node) && !ins.empty())) continue;
      DataType forced = forced_for(*node, o_, &matched_);
      DataType target = forced != DataType::kUndefined ? forced : exact.count(node) ? DataType::kFloat32 : o_.reduced;
      if (target == DataType::kUndefined) continue;
      if (target == DataType::kFloat32) {
        if (rule->role == Role::kCompute) ++r_.kept_fp32;
        continue;
      }
      bool lower = false;
      if (rule->role == Role::kFollow && forced == DataType::kUndefined) {
        for (int i : ins) lower |= low_.count(node->inputs()[i]) > 0;
        if (!lower) continue;
      }
      if (node->op_type() == "Pointwise") {
        const ir::Attribute* body = node->attrs().find("body");
        if (!body || !body->g || body->g.use_count() > 2) {
          ++r_.kept_fp32;
          continue;
        }
      }
      if (const ir::Value* big = overflowing_weight(*node, ins, target)) {
        // e.g. an attention-mask constant of -3.4e38: it would become -inf, and 0 * -inf NaN.
        if (rule->role == Role::kCompute) ++r_.kept_fp32;
        r_.notes.push_back("precision: " + node->describe() + " stays fp32: weight '" + big->name() +
                           "' holds values beyond the " + short_name(target) + " range");
        continue;
      }
      if (!has_reduced_tactic(*node, ins, outs, target)) {
        if (rule->role == Role::kFollow) continue;
        if (o_.strict || forced != DataType::kUndefined)
          return unsupported(node->describe(), " has no ", short_name(target), " tactic on the ", be_.name(),
                             " backend", o_.strict ? " and strict types forbid falling back to fp32" : "");
        ++r_.kept_fp32;
        r_.notes.push_back("precision: " + node->describe() + " stays fp32 (no " + short_name(target) +
                           " tactic on the " + be_.name() + " backend)");
        continue;
      }
      plan_[node] = {target, ins, outs};
      for (int i : outs) low_[node->outputs()[i]] = target;
    }
    // 1a. QuantizeLinear reads a reduced x as it is: its quotient is computed in fp32 either way
    // (x / scale with an fp32 scale), so a Cast up in front of it only costs a pass over x
    // (BERT fp8 at batch 64: 49 Casts, 1.5 of 7.1 ms in s25q2). So does a QuantConv that
    // quantizes its result read a reduced residual (a ResNet block's downsample branch). Over
    // the copy again: the QuantConv's question may go to its channels-last twin.
    for (ir::Node* node : order) {
      const int i = any_float_input(*node);
      if (i < 0 || !node->input(i) || plan_.count(node)) continue;
      auto lx = low_.find(node->input(i));
      if (lx == low_.end() || node->input(i)->dtype() != DataType::kFloat32 ||
          forced_for(*node, o_, &matched_) != DataType::kUndefined)
        continue;
      if (!has_reduced_tactic(*node, {i}, {}, lx->second)) continue;
      plan_[node] = {lx->second, {i}, {}};
    }
    // 1b. Weight gathers (embedding tables): a Gather of a weight whose every reader takes its
    // output in the reduced type gathers from the converted table instead. Rounding commutes with
    // copying rows, so the values are those of Cast(Gather(W)); the table, the gathered rows and
    // the Cast pass cost half or nothing (BERT-base: 94 MB of fp32 word embeddings).
    for (const auto& node : g_.nodes()) {
      if (plan_.count(node.get()) || !node->domain().empty() || node->op_type() != "Gather") continue;
      const Rule* rule = find_rule(*node);
      std::vector<int> ins = float_slots(node->inputs(), rule->data_inputs);
      std::vector<int> outs = float_slots(node->outputs(), rule->data_outputs);
      if (ins.size() != 1 || outs.size() != 1 || forced_for(*node, o_, &matched_) != DataType::kUndefined) continue;
      const ir::Value* w = node->inputs()[ins[0]];
      ir::Value* y = node->outputs()[outs[0]];
      if (!w->initializer() || std::count(g_.inputs().begin(), g_.inputs().end(), w) ||
          std::count(g_.outputs().begin(), g_.outputs().end(), y) || y->uses().empty())
        continue;
      DataType t = DataType::kUndefined;
      bool all_reduced = true;
      for (const auto& [user, idx] : y->uses()) {
        auto p = plan_.find(user);
        if (p == plan_.end() || !std::count(p->second.ins.begin(), p->second.ins.end(), idx) ||
            (t != DataType::kUndefined && p->second.type != t)) {
          all_reduced = false;
          break;
        }
        t = p->second.type;
      }
      if (!all_reduced || overflowing_weight(*node, ins, t) || !has_reduced_tactic(*node, ins, outs, t)) continue;
      plan_[node.get()] = {t, ins, outs};
      low_[y] = t;
    }
    for (const auto& [name, t] : o_.forced) {
      (void)t;
      bool exists = matched_.count(name) > 0;
      for (const auto& node : g_.nodes()) {
        exists |= node->name() == name;
        for (const std::string& origin : node->origins()) exists |= origin == name;
      }
      if (!exists) return invalid_argument("a layer precision names '", name, "', which is no layer of the model");
    }
    if (plan_.empty() && low_.empty()) return Status::Ok();

    // 2. Rewrite: values, weights, casts at the boundaries, Pointwise bodies.
    std::vector<ir::Node*> lowered;
    for (const auto& node : g_.nodes())
      if (plan_.count(node.get())) lowered.push_back(node.get());
    for (ir::Node* n : lowered) {
      const Decision& d = plan_[n];
      for (int i : d.ins) {
        ir::Value* v = n->inputs()[i];
        auto lv = low_.find(v);
        if (lv != low_.end() && lv->second == d.type) continue;  // already reduced, same type
        INGOT_ASSIGN_OR_RETURN(ir::Value * r, reduced_version(v, d.type));
        n->set_input(i, r);
      }
      if (n->op_type() == "Pointwise") INGOT_RETURN_IF_ERROR(wrap_body(*n, d));
      if (is_quant_layer(*n) && !d.outs.empty())  // its float result: the type is an attribute
        n->mutable_attrs().set_int("output_dtype", static_cast<int64_t>(d.type));
    }
    for (auto& [v, t] : low_) v->set_dtype(t);
    // Readers that stay fp32 (including subgraph nodes and graph outputs) get a cast back.
    std::vector<std::pair<ir::Value*, DataType>> lows(low_.begin(), low_.end());
    for (auto& [v, t] : lows) {
      std::vector<std::pair<ir::Node*, int>> fp32_uses;
      for (const auto& [user, idx] : v->uses()) {
        auto p = plan_.find(user);
        bool reads_reduced = p != plan_.end() && std::count(p->second.ins.begin(), p->second.ins.end(), idx) &&
                             p->second.type == t;
        if (!reads_reduced) fp32_uses.push_back({user, idx});
      }
      bool is_output = std::count(g_.outputs().begin(), g_.outputs().end(), v) > 0;
      if (is_output && o_.reduced_io && t == o_.reduced) is_output = false;  // it stays the output
      if (fp32_uses.empty() && !is_output) continue;
      ir::Value* back = g_.add_value(unique_name(v->name() + "/fp32"), DataType::kFloat32, v->shape());
      add_cast(v, back, DataType::kFloat32);
      for (auto& [user, idx] : fp32_uses) user->set_input(idx, back);
      if (is_output) {
        // The engine output keeps its name and type: the reduced value is renamed.
        std::vector<ir::Value*> outs = g_.outputs();
        for (auto& o : outs)
          if (o == v) o = back;
        g_.set_outputs(outs);
        std::string name = v->name();
        g_.rename_value(v, unique_name(name + "/" + short_name(t)));
        g_.rename_value(back, name);
      }
    }
    // Reduced I/O: the float outputs still fp32 (their producers stayed fp32, or computed in
    // another reduced type) are cast to the reduced type; the cast takes the output's name.
    if (o_.reduced_io) {
      std::vector<ir::Value*> outs = g_.outputs();
      for (ir::Value*& o : outs) {
        if (o->dtype() != DataType::kFloat32) continue;
        ir::Value* r = g_.add_value(unique_name(o->name() + "/" + short_name(o_.reduced)), o_.reduced, o->shape());
        add_cast(o, r, o_.reduced);
        const std::string name = o->name();
        g_.rename_value(o, unique_name(name + "/fp32"));
        g_.rename_value(r, name);
        low_[r] = o_.reduced;
        o = r;
      }
      g_.set_outputs(outs);
    }
    for (const auto& [n, d] : plan_) {
      (void)d;
      ++r_.lowered;
    }
    INGOT_RETURN_IF_ERROR(g_.topological_sort());
    INGOT_RETURN_IF_ERROR(ir::infer_graph(g_));
    for (auto& [v, t] : low_)
      if (v->dtype() != t)
        return internal_error("precision lowering: '", v->name(), "' infers as ", data_type_name(v->dtype()),
                              " after lowering, expected ", data_type_name(t));
    return ir::verify_graph(g_);
  }

 private:
  struct Decision {
    DataType type = DataType::kUndefined;
    std::vector<int> ins, outs;
  };

  bool has_reduced_tactic(const ir::Node& n, const std::vector<int>& ins, const std::vector<int>& outs, DataType t) {
    std::vector<ir::TensorType> types = backend::node_input_types(n);
    for (int i : ins) types[i].dtype = t;
    // Tactics may read output types from the node: set them while asking.
    std::vector<DataType> saved;
    for (int i : outs) {
      saved.push_back(n.outputs()[i]->dtype());
      n.outputs()[i]->set_dtype(t);
    }
    auto cands = be_.candidates(n, types);
    for (size_t k = 0; k < outs.size(); ++k) n.outputs()[outs[k]]->set_dtype(saved[k]);
    for (const auto& c : cands)
      if (c->capturable()) return true;  // not the host fallback, which synchronizes
    // The channels-last twin: cuDNN fuses SiLU only channels-last (without this, EfficientNet's
    // SiLU convs stayed fp32 between Casts: 17 Casts and 30 Transposes at batch 64).
    return o_.channels_last_convs &&
           ask_channels_last_twin(g_, n, [&](const ir::Node& twin) { return has_reduced_tactic(twin, ins, outs, t); });
  }

  // An fp32 weight among `ins` with finite values the reduced type cannot hold, or nullptr.
  const ir::Value* overflowing_weight(const ir::Node& n, const std::vector<int>& ins, DataType t) {
    const double limit = t == DataType::kFloat16 ? 65504.0 : 3.3895313892515355e38;
    for (int i : ins) {
      const ir::Value* v = n.inputs()[i];
      if (!v->initializer()) continue;
      auto key = std::make_pair(v, t);
      auto it = overflows_.find(key);
      if (it == overflows_.end()) {
        bool over = false;
        const Tensor& w = *v->initializer();
        for (int64_t k = 0; k < w.numel() && !over; ++k) {
          double x = w.get_f64(k);
          over = std::isfinite(x) && std::fabs(x) > limit;
        }
        it = overflows_.emplace(key, over).first;
      }
      if (it->second) return v;
    }
    return nullptr;
  }

  std::string unique_name(const std::string& base) {
    std::string name = base;
    for (int k = 1; g_.find_value(name); ++k) name = base + "_" + std::to_string(k);
    return name;
  }

  ir::Node* add_cast(ir::Value* from, ir::Value* to, DataType type) {
    ir::Attributes a;
    a.set_int("to", static_cast<int64_t>(type));
    ++r_.casts;
    ir::Node* c = g_.add_node("Cast", {from}, {to}, std::move(a), unique_node_name(from->name() + "/cast_" + short_name(type)));
    return c;
  }
  std::string unique_node_name(const std::string& base) { return base + "_" + std::to_string(r_.casts); }

  // The reduced-type stand-in for fp32 value `v`: a converted weight or a Cast's output.
  Result<ir::Value*> reduced_version(ir::Value* v, DataType t) {
    auto key = std::make_pair(v, t);
    auto it = converted_.find(key);
    if (it != converted_.end()) return it->second;
    ir::Value* r = nullptr;
    if (v->initializer() && std::count(g_.inputs().begin(), g_.inputs().end(), v) == 0) {
      bool all_reduced = true;
      for (const auto& [user, idx] : v->uses()) {
        auto p = plan_.find(user);
        all_reduced &= p != plan_.end() && p->second.type == t &&
                       std::count(p->second.ins.begin(), p->second.ins.end(), idx) > 0;
      }
      bool is_output = std::count(g_.outputs().begin(), g_.outputs().end(), v) > 0;
      INGOT_ASSIGN_OR_RETURN(Tensor data, convert_tensor(*v->initializer(), t));
      ++r_.weights_converted;
      if (all_reduced && !is_output) {
        g_.set_initializer(v, std::move(data));
        v->set_dtype(t);
        r = v;
      } else {
        r = g_.add_initializer(unique_name(v->name() + "/" + short_name(t)), std::move(data));
      }
    } else {
      r = g_.add_value(unique_name(v->name() + "/" + short_name(t)), t, v->shape());
      add_cast(v, r, t);
    }
    converted_[key] = r;
    return r;
  }

  // Pointwise with reduced outer I/O: the body keeps its fp32 math between Casts at its edges.
  Status wrap_body(ir::Node& n, const Decision& d) {
    const ir::Attribute* a = n.attrs().find("body");
    ir::Graph& body = *a->g;
    for (int i : d.ins) {
      if (i >= static_cast<int>(body.inputs().size())) return internal_error(n.describe(), ": body has fewer inputs");
      ir::Value* in = body.inputs()[i];
      if (in->dtype() != DataType::kFloat32) continue;
      ir::Value* widened = body.add_value(in->name() + "/fp32", DataType::kFloat32, in->shape());
      body.replace_all_uses(in, widened);
      in->set_dtype(d.type);
      ir::Attributes ca;
      ca.set_int("to", static_cast<int64_t>(DataType::kFloat32));
      body.add_node("Cast", {in}, {widened}, std::move(ca), in->name() + "/widen");
    }
    std::vector<ir::Value*> outs = body.outputs();
    for (int o : d.outs) {
      if (o >= static_cast<int>(outs.size()) || outs[o]->dtype() != DataType::kFloat32) continue;
      ir::Value* narrow = body.add_value(outs[o]->name() + "/" + short_name(d.type), d.type, outs[o]->shape());
      ir::Attributes ca;
      ca.set_int("to", static_cast<int64_t>(d.type));
      body.add_node("Cast", {outs[o]}, {narrow}, std::move(ca), outs[o]->name() + "/narrow");
      outs[o] = narrow;
    }
    body.set_outputs(outs);
    return body.topological_sort();
  }

  ir::Graph& g_;
  const backend::Backend& be_;
  const PrecisionOptions& o_;
  PrecisionReport& r_;
  std::unordered_map<const ir::Node*, Decision> plan_;
  std::map<ir::Value*, DataType> low_;
  std::map<std::pair<ir::Value*, DataType>, ir::Value*> converted_;
  std::set<std::string> matched_;
  std::map<std::pair<const ir::Value*, DataType>, bool> overflows_;
};

}  // namespace

Status lower_precision(ir::Graph& g, const backend::Backend& be, const PrecisionOptions& options,
                       PrecisionReport* report) {
  PrecisionReport local;
  if (options.reduced_io && options.reduced == DataType::kUndefined)
    return invalid_argument("reduced-precision inputs and outputs need a reduced precision (fp16 or bf16)");
  if (options.reduced == DataType::kUndefined && options.forced.empty()) return Status::Ok();
  if (options.reduced != DataType::kUndefined && options.reduced != DataType::kFloat16 &&
      options.reduced != DataType::kBFloat16)
    return invalid_argument("reduced precision must be fp16 or bf16, got ", data_type_name(options.reduced));
  Lowering l(g, be, options, report ? *report : local);
  return l.run();
}

}  // namespace ingot::builder
