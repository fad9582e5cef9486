// Copyright ingot authors. Apache-2.0.
#include "builder/builder.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <set>
#include <unordered_map>
#include <utility>

#include "backend/device.h"
#include "backend/tactic.h"
#include "builder/memory_planner.h"
#include "builder/shape_propagation.h"
#include "builder/split_fusions.h"
#include "builder/timed_fusions.h"
#include "ir/op_registry.h"
#include "passes/passes.h"

namespace ingot::builder {

bool is_reshape_op(const ir::Node& node) {
  static const std::set<std::string> kOps = {"Reshape", "Flatten", "Squeeze", "Unsqueeze"};
  return node.domain().empty() && kOps.count(node.op_type());
}

bool op_allows_in_place(const ir::Node& node) {
  // Reference kernels of these ops read element i of each input before writing element i of
  // the output, so output 0 may share input 0's buffer when their sizes match. The reshapes
  // keep every element where it is: in place they are free (the CPU kernel returns a view of the
  // input, the CUDA copy is skipped when the output aliases it).
  static const std::set<std::string> kOps = {
      "Relu", "Sigmoid", "Tanh", "Exp", "Log", "Abs", "Neg", "Sqrt", "Reciprocal", "Erf", "Gelu",
      "LeakyRelu", "Elu", "Selu", "Celu", "HardSigmoid", "HardSwish", "Softplus", "Softsign", "Mish",
      "Floor", "Ceil", "Round", "Sin", "Cos", "Add", "Sub", "Mul", "Div", "Identity"};
  return node.domain().empty() && (kOps.count(node.op_type()) || is_reshape_op(node)) && node.outputs().size() == 1;
}

namespace {

// Index of the top-level step that reads `v` through a subgraph node (outer-scope use).
const ir::Node* top_level_node(const ir::Node* n, const ir::Graph& root) {
  while (n && n->owner() != &root) {
    const ir::Graph* g = n->owner();
    const ir::Node* owner_node = nullptr;
    // The node whose attribute holds g.
    std::function<const ir::Node*(const ir::Graph&)> find_owner = [&](const ir::Graph& where) -> const ir::Node* {
      for (const auto& cand : where.nodes())
        for (const auto& [k, a] : cand->attrs().all()) {
          if (a.g.get() == g) return cand.get();
          for (const auto& sg : a.graphs)
            if (sg.get() == g) return cand.get();
          if (a.g)
            if (const ir::Node* r = find_owner(*a.g)) return r;
          for (const auto& sg : a.graphs)
            if (const ir::Node* r = find_owner(*sg)) return r;
        }
      return nullptr;
    };
    owner_node = find_owner(root);
    if (!owner_node) return nullptr;
    n = owner_node;
  }
  return n;
}

Status check_profiles(const ir::Graph& g, const std::vector<Profile>& profiles) {
  for (size_t p = 0; p < profiles.size(); ++p) {
    for (const auto& d : profiles[p].inputs) {
      const ir::Value* in = nullptr;
      for (const ir::Value* v : g.inputs())
        if (v->name() == d.input) in = v;
      if (!in) return invalid_argument("profile ", p, " names '", d.input, "', which is not an input of the model");
      size_t rank = in->shape().rank_known() ? in->shape().rank() : d.min.size();
      if (d.min.size() != rank || d.opt.size() != rank || d.max.size() != rank)
        return invalid_argument("profile ", p, " input '", d.input, "': min/opt/max must have rank ", rank);
      for (size_t i = 0; i < rank; ++i) {
        if (d.min[i] < 0 || d.min[i] > d.opt[i] || d.opt[i] > d.max[i])
          return invalid_argument("profile ", p, " input '", d.input, "' dim ", i, ": need 0 <= min <= opt <= max, got ",
                                  d.min[i], " / ", d.opt[i], " / ", d.max[i]);
        const ir::Dim& md = in->shape().rank_known() ? in->shape()[i] : ir::Dim();
        if (md.is_known() && (d.min[i] != md.value() || d.max[i] != md.value()))
          return invalid_argument("profile ", p, " input '", d.input, "' dim ", i, " is fixed to ", md.value(),
                                  " by the model, the profile gives ", d.min[i], "..", d.max[i]);
      }
    }
    for (const ir::Value* in : g.inputs()) {
      if (in->initializer() || profiles[p].find(in->name())) continue;
      if (!in->shape().is_concrete())
        return invalid_argument("input '", in->name(), "' has open dims ", in->shape().to_string(), " but profile ", p,
                                " gives no min/opt/max for it");
    }
  }
  return Status::Ok();
}

std::map<const ir::Value*, Shape64> profile_shapes(const ir::Graph& g, const Profile& p, int which) {
  std::map<const ir::Value*, Shape64> m;
  for (const ir::Value* in : g.inputs()) {
    if (in->initializer()) continue;
    const ProfileDims* d = p.find(in->name());
    if (d) m[in] = which == 0 ? d->min : which == 1 ? d->opt : d->max;
    else m[in] = in->shape().concrete();
  }
  return m;
}

// "<op> '<node>' (opset N): <why>" for a step left on the host fallback.
std::string describe_host_step(const ir::Node& n, const backend::Backend& be) {
  const int64_t opset = n.owner() ? n.owner()->opset(n.domain()) : 0;
  std::string d = n.op_type() + " '" + n.name() + "' (" + (n.domain().empty() ? "ai.onnx" : n.domain()) +
                  " opset " + std::to_string(opset) + "): no " + be.name() + " tactic takes it with inputs";
  for (const ir::Value* v : n.inputs())
    d += v ? " " + std::string(data_type_name(v->dtype())) + v->shape().to_string() : std::string(" -");
  const std::string act = n.attrs().get_string("activation", "");
  if (!act.empty()) d += ", activation " + act;
  return d;
}

}  // namespace

Result<Plan> build_plan(std::shared_ptr<ir::Graph> graph, std::vector<std::shared_ptr<const void>> storage,
                        const BuildOptions& options, BuildReport* report) {
  BuildReport local;
  BuildReport& rep = report ? *report : local;
  rep.nodes_before = static_cast<int>(graph->nodes().size());
  INGOT_ASSIGN_OR_RETURN(const backend::Backend* be, backend::find_backend(options.backend));

  for (const ir::Value* v : graph->inputs())
    if (!v->non_tensor_kind().empty())
      return unsupported("input '", v->name(), "' is a ", v->non_tensor_kind(), "; engines take tensors only");

  std::vector<Profile> profiles = options.profiles;
  if (profiles.empty()) profiles.emplace_back();  // all inputs fixed: one implicit profile
  INGOT_RETURN_IF_ERROR(check_profiles(*graph, profiles));

  // Dims that every profile pins to one value are constants of this engine: give them to the
  // graph before optimizing, so shape arithmetic folds and fusions can prove shapes equal (an
  // exported model's "batch" is otherwise an unknown the optimizer cannot reason about).
  bool specialized = false;
  for (ir::Value* in : graph->inputs()) {
    if (in->initializer() || !options.profiles.size()) continue;
    std::vector<int64_t> fixed;
    bool all = true;
    for (const Profile& p : profiles) {
      const ProfileDims* d = p.find(in->name());
      if (!d) {
        all = false;
        break;
      }
      if (fixed.empty()) fixed = d->min;
      for (size_t i = 0; i < d->min.size(); ++i)
        if (d->min[i] != d->max[i] || i >= fixed.size() || fixed[i] != d->min[i]) fixed[i] = -1;
    }
    if (!all || fixed.empty()) continue;
    ir::Shape s = in->shape().rank_known() ? in->shape() : ir::Shape(std::vector<ir::Dim>(fixed.size()));
    if (s.rank() != fixed.size()) continue;
    bool any = false;
    for (size_t i = 0; i < fixed.size(); ++i)
      if (fixed[i] >= 0 && !s[i].is_known()) {
        s.mutable_dims()[i] = ir::Dim(fixed[i]);
        any = true;
      }
    if (any) {
      in->set_shape(s);
      specialized = true;
    }
  }
  if (specialized) INGOT_RETURN_IF_ERROR(ir::infer_graph(*graph));

  auto progress = [&](const char* phase, int done, int total) {
    if (options.progress) options.progress(phase, done, total);
  };
  // Wall seconds per phase into the report: each mark() closes the phase named.
  auto phase_start = std::chrono::steady_clock::now();
  auto mark = [&](const char* phase) {
    const auto now = std::chrono::steady_clock::now();
    const double sec = std::chrono::duration<double>(now - phase_start).count();
    phase_start = now;
    for (auto& [name, total] : rep.phase_seconds)
      if (name == phase) {
        total += sec;
        return;
      }
    rep.phase_seconds.emplace_back(phase, sec);
  };
  progress("optimize", 0, 1);
  if (options.optimize) {
    passes::PassContext pctx(options.pipeline.pass_options);
    passes::PassManager pm = passes::default_pipeline();
    INGOT_RETURN_IF_ERROR(pm.run(*graph, options.pipeline, pctx));
    rep.notes = pctx.notes();
  }
  mark("optimize");
  // Fused layers the backend would run only on the host go back to GPU steps: before precision
  // lowering (which keeps a layer it has no reduced tactic for in fp32), at the types it may lower
  // to, then again at the final types, and before the layout pass so their convolutions can still
  // go channels-last with the split-out ops.
  // A conv the backend runs fused only channels-last stays fused while the layout pass may make
  // it so, and is split after it if it did not.
  const bool may_go_channels_last = options.conv_layout != "nchw";
  INGOT_RETURN_IF_ERROR(
      split_host_fusions(*graph, *be, &rep.split, options.precision.reduced, may_go_channels_last));
  mark("split");
  PrecisionOptions precision = options.precision;
  precision.channels_last_convs = may_go_channels_last;
  INGOT_RETURN_IF_ERROR(lower_precision(*graph, *be, precision, &rep.precision));
  mark("precision");
  INGOT_RETURN_IF_ERROR(split_host_fusions(*graph, *be, &rep.split, DataType::kUndefined, may_go_channels_last));
  mark("split");
  rep.notes.insert(rep.notes.end(), rep.precision.notes.begin(), rep.precision.notes.end());
  // The timing cache serves the layout choice and the tactic choice below.
  TimingCache cache;
  if (!options.timing_cache_file.empty()) {
    std::string warning;
    INGOT_RETURN_IF_ERROR(cache.load(options.timing_cache_file, &warning));
    if (!warning.empty()) rep.notes.push_back(warning);
  }
  std::string identity = be->name() + " " + be->device().arch();
  for (const auto& [lib, ver] : be->device().library_versions()) identity += " " + lib + "=" + ver;
  if (options.tune.timing == backend::TimingMode::kDevice) identity += " timing=device";  // never mixed with stream timings
  LayoutTiming layout_timing{&cache, &options.tune, identity, &rep.tune};
  rep.notes.insert(rep.notes.end(), rep.split.notes.begin(), rep.split.notes.end());
  INGOT_RETURN_IF_ERROR(choose_conv_layout(*graph, *be, options.conv_layout, &rep.layout, &layout_timing));
  if (options.optimize && !options.pipeline.disabled.count("fuse_squeeze_excite")) {
    // Squeeze-excite blocks, now wholly channels-last or channels-first, as one node where the backend
    // runs that node and it measured no slower; before the split below, which would take a gate
    // activation out of its conv.
    passes::PassContext pctx(options.pipeline.pass_options);
    INGOT_RETURN_IF_ERROR(fuse_squeeze_excite_where_faster(*graph, *be, &layout_timing, pctx, nullptr));
    rep.notes.insert(rep.notes.end(), pctx.notes().begin(), pctx.notes().end());
  }
  if (options.optimize && !options.pipeline.disabled.count("fuse_conv_pool")) {
    // A stem's convolution and its max pooling, now in one layout (the layout pass made the pool an
    // ingot::Pool in channels-last regions), as one node where the backend runs it and it measured no
    // slower: the convolution's output is then never written.
    passes::PassContext pctx(options.pipeline.pass_options);
    INGOT_RETURN_IF_ERROR(fuse_conv_pool_where_faster(*graph, *be, &layout_timing, pctx, nullptr));
    rep.notes.insert(rep.notes.end(), pctx.notes().begin(), pctx.notes().end());
  }
  if (may_go_channels_last) {
    // What stayed channels-first of the fused convs kept for channels-last.
    const size_t noted = rep.split.notes.size();
    INGOT_RETURN_IF_ERROR(split_host_fusions(*graph, *be, &rep.split));
    rep.notes.insert(rep.notes.end(), rep.split.notes.begin() + static_cast<std::ptrdiff_t>(noted),
                     rep.split.notes.end());
  }
  if (rep.layout.channels_last_convs > 0 && options.optimize && !options.pipeline.disabled.count("simplify_algebra")) {
    passes::PassContext pctx(options.pipeline.pass_options);
    INGOT_RETURN_IF_ERROR(simplify_region_edges(*graph, pctx, &rep.layout));
  }
  if ((rep.split.split > 0 || rep.layout.channels_last_convs > 0) && options.optimize &&
      !options.pipeline.disabled.count("fuse_pointwise")) {
    // The split-out epilogues and the elementwise ops the layout pass moved into channels-last
    // regions (it takes Pointwise nodes apart to move through them) become one kernel per tree.
    passes::PassContext pctx(options.pipeline.pass_options);
    INGOT_RETURN_IF_ERROR(passes::make_fuse_pointwise()->run(*graph, pctx).status());
  }
  if (options.optimize && !options.pipeline.disabled.count("fuse_concat_pointwise")) {
    // Concats read only by a Pointwise over their whole result (DenseNet's Concat + BatchNorm + Relu),
    // now that Pointwise nodes and layouts are final.
    passes::PassContext pctx(options.pipeline.pass_options);
    INGOT_RETURN_IF_ERROR(fuse_concat_pointwise_where_faster(*graph, *be, &layout_timing, pctx, nullptr));
    rep.notes.insert(rep.notes.end(), pctx.notes().begin(), pctx.notes().end());
  }
  if (rep.layout.nchw_ms >= 0) {
    char buf[200];
    std::snprintf(buf, sizeof buf, "layout: convolutions measured %.4f ms channels-first, %.4f ms channels-last "
                  "with the reformats; chose %s", rep.layout.nchw_ms, rep.layout.nhwc_ms,
                  rep.layout.channels_last_convs ? "channels-last" : "channels-first");
    rep.notes.push_back(buf);
  }
  mark("layout");

  progress("optimize", 1, 1);
  // Shapes at every profile's min, opt and max; sizes come from the max, tactics are timed at
  // the first profile's opt.
  std::vector<ShapeState> max_states;
  ShapeState opt_state;
  for (size_t p = 0; p < profiles.size(); ++p)
    for (int which = 0; which < 3; ++which) {
      auto st = propagate_shapes(*graph, profile_shapes(*graph, profiles[p], which));
      if (!st.ok())
        return Status(st.status().code(), "at profile " + std::to_string(p) + " " +
                                              (which == 0 ? "min" : which == 1 ? "opt" : "max") + " shapes: " +
                                              st.status().message());
      if (which == 1 && p == 0) opt_state = *st;
      if (which == 2) max_states.push_back(std::move(st).value());
    }

  Plan plan;
  plan.graph = graph;
  plan.storage = std::move(storage);
  plan.profiles = profiles;
  plan.backend = be->name();
  plan.gpu_arch = be->device().arch();

  // Steps, in node order, each with the fastest of its candidate tactics.
  auto opt_shape = [&](const ir::Value* v, bool* ok) {
    auto it = v ? opt_state.shapes.find(v) : opt_state.shapes.end();
    if (it == opt_state.shapes.end() || opt_state.dynamic.count(v)) {
      *ok = false;
      return Shape64{};
    }
    return it->second;
  };
  const int total_steps = static_cast<int>(graph->nodes().size());
  std::unordered_map<const ir::Node*, int> step_of;
  for (const auto& node : graph->nodes()) {
    progress("tactics", static_cast<int>(plan.steps.size()), total_steps);
    auto all = be->candidates(*node, backend::node_input_types(*node));
    std::vector<std::unique_ptr<backend::Tactic>> cands;
    std::vector<Shape64> max_in;
    for (const ir::Value* v : node->inputs()) {
      auto it = v ? max_states[0].shapes.find(v) : max_states[0].shapes.end();
      max_in.push_back(it != max_states[0].shapes.end() ? it->second : Shape64{});
    }
    // Outputs whose size only the data settles (no planned buffer): only tactics that allocate.
    bool dynamic_out = false;
    for (const ir::Value* o : node->outputs())
      for (const ShapeState& st : max_states)
        dynamic_out |= o && (st.dynamic.count(o) > 0 || !st.shapes.count(o));
    // TF32 only when allowed; scratch within the configured limit (unless nothing else runs it).
    std::vector<std::unique_ptr<backend::Tactic>> over_limit;
    for (auto& t : all) {
      if (!options.tune.tf32 && t->uses_tf32()) continue;
      if (dynamic_out && !t->handles_dynamic_outputs()) continue;
      if (t->workspace_bytes(*node, max_in) > options.tune.workspace_limit) over_limit.push_back(std::move(t));
      else cands.push_back(std::move(t));
    }
    if (cands.empty() && !over_limit.empty()) {
      rep.notes.push_back(node->describe() + ": every tactic needs more scratch than the workspace limit; using " +
                          over_limit[0]->name());
      cands.push_back(std::move(over_limit[0]));
    }
    rep.tactics_considered += static_cast<int>(cands.size());
    if (cands.empty())
      return unsupported("backend '", be->name(), "' has no tactic for ", node->describe());
    size_t chosen = 0;
    bool known = true;
    std::vector<DataType> in_t, out_t;
    std::vector<Shape64> in_s, out_s;
    for (const ir::Value* v : node->inputs()) {
      in_t.push_back(v ? v->dtype() : DataType::kUndefined);
      in_s.push_back(v ? opt_shape(v, &known) : Shape64{});
    }
    for (const ir::Value* v : node->outputs()) {
      out_t.push_back(v ? v->dtype() : DataType::kUndefined);
      out_s.push_back(v ? opt_shape(v, &known) : Shape64{});
    }
    if (cands.size() > 1) {
      if (known) {
        std::string key = timing_key(identity, *node, in_t, in_s, out_t, out_s);
        INGOT_ASSIGN_OR_RETURN(chosen, choose_tactic(*be, *node, cands, key, in_s, out_s, options.tune, cache, rep.tune));
      }
    }
    if (cands[chosen]->is_host_fallback()) rep.host_steps.push_back(describe_host_step(*node, *be));
    INGOT_RETURN_IF_ERROR(cands[chosen]->prepare(*node));
    Step s;
    s.node = node.get();
    s.tactic = cands[chosen]->name();
    s.params = known ? cands[chosen]->serialize_for(*node, in_s) : cands[chosen]->serialize();
    s.workspace_bytes = cands[chosen]->workspace_bytes(*node, max_in);
    plan.memory.workspace_bytes = std::max(plan.memory.workspace_bytes, s.workspace_bytes);
    if (node->origins().size() > 1) ++rep.fused_steps;
    step_of[node.get()] = static_cast<int>(plan.steps.size());
    plan.steps.push_back(std::move(s));
  }

  progress("tactics", total_steps, total_steps);
  if (!options.allow_host_fallback && !rep.host_steps.empty()) {
    std::string list;
    for (const std::string& h : rep.host_steps) list += "\n  " + h;
    return unsupported(rep.host_steps.size(), " step", rep.host_steps.size() == 1 ? "" : "s",
                       " would run on the host fallback, which this build forbids (--no-host-fallback):", list);
  }
  if (!options.timing_cache_file.empty() && (rep.tune.timed > 0 || cache.size() == 0)) {
    Status saved = cache.save(options.timing_cache_file);
    if (!saved.ok()) rep.notes.push_back("timing cache not saved: " + saved.message());
  }
  rep.timing_cache_entries = cache.size();
  mark("tactics");
  progress("memory", 0, 1);

  // Values and their storage.
  std::set<const ir::Value*> outputs(graph->outputs().begin(), graph->outputs().end());
  std::set<const ir::Value*> inputs(graph->inputs().begin(), graph->inputs().end());
  std::vector<const ir::Value*> order;
  for (const ir::Value* v : graph->inputs()) order.push_back(v);
  for (const ir::Value* v : graph->initializers())
    if (!inputs.count(v)) order.push_back(v);
  for (const auto& n : graph->nodes())
    for (const ir::Value* o : n->outputs())
      if (o) order.push_back(o);
  int last = static_cast<int>(plan.steps.size()) - 1;
  for (const ir::Value* v : order) {
    ValuePlan vp;
    vp.value = v;
    if (v->producer()) vp.first_step = step_of[v->producer()];
    vp.last_step = vp.first_step;
    for (const auto& [user, idx] : v->uses()) {
      const ir::Node* top = top_level_node(user, *graph);
      if (top && step_of.count(top)) vp.last_step = std::max(vp.last_step, step_of[top]);
    }
    if (outputs.count(v)) vp.last_step = last;
    uint64_t bytes = 0;
    bool dynamic = false;
    for (const ShapeState& st : max_states) {
      auto it = st.shapes.find(v);
      if (it == st.shapes.end() || st.dynamic.count(v)) {
        dynamic = true;
        continue;
      }
      bytes = std::max<uint64_t>(bytes, storage_bytes(v->dtype(), shape_numel(it->second)));
    }
    vp.max_bytes = bytes;
    if (v->initializer() && !inputs.count(v)) {
      vp.storage = Storage::kWeight;
      vp.max_bytes = v->initializer()->nbytes();
    } else if (inputs.count(v) || outputs.count(v)) {
      vp.storage = Storage::kBinding;
    } else if (dynamic || v->dtype() == DataType::kString) {
      vp.storage = Storage::kDynamic;
    } else {
      vp.storage = Storage::kArena;
    }
    plan.values.push_back(vp);
  }

  // A graph output made by a reshape of an intermediate only it reads (GPT-2's logits: Gemm on
  // [B*S, K], then Reshape to [B, S, N]): the intermediate is written into the output's binding.
  {
    std::unordered_map<const ir::Value*, size_t> index_of;
    for (size_t i = 0; i < plan.values.size(); ++i) index_of[plan.values[i].value] = i;
    std::map<const ir::Value*, int> output_count;
    for (const ir::Value* o : graph->outputs()) ++output_count[o];
    for (const ir::Value* o : graph->outputs()) {
      const ir::Node* p = o->producer();
      if (!p || output_count[o] != 1 || inputs.count(o) || !is_reshape_op(*p) || p->outputs().size() != 1 ||
          p->inputs().empty() || !p->inputs()[0])
        continue;
      const ir::Value* x = p->inputs()[0];
      auto xi = index_of.find(x), oi = index_of.find(o);
      if (xi == index_of.end() || oi == index_of.end()) continue;
      ValuePlan& xp = plan.values[xi->second];
      const ValuePlan& op = plan.values[oi->second];
      if (xp.storage != Storage::kArena || op.storage != Storage::kBinding || x->uses().size() != 1 ||
          outputs.count(x) || x->dtype() != o->dtype() || xp.max_bytes != op.max_bytes || o->dtype() == DataType::kString)
        continue;
      xp.storage = Storage::kOutputView;
      xp.offset = oi->second;
    }
  }

  // Arena offsets from lifetimes.
  std::vector<TensorLifetime> lifetimes;
  std::vector<size_t> arena_index;
  std::unordered_map<const ir::Value*, int> lifetime_of;
  for (size_t i = 0; i < plan.values.size(); ++i) {
    const ValuePlan& vp = plan.values[i];
    if (vp.storage != Storage::kArena) continue;
    TensorLifetime t;
    t.bytes = vp.max_bytes;
    t.first = vp.first_step;
    t.last = vp.last_step;
    const ir::Node* p = vp.value->producer();
    if (p && op_allows_in_place(*p) && p->inputs().size() >= 1 && p->inputs()[0]) {
      auto in = lifetime_of.find(p->inputs()[0]);
      if (in != lifetime_of.end() && lifetimes[in->second].bytes == t.bytes && lifetimes[in->second].last == t.first &&
          p->inputs()[0]->uses().size() == 1)
        t.inplace_of = in->second;
    }
    lifetime_of[vp.value] = static_cast<int>(lifetimes.size());
    lifetimes.push_back(t);
    arena_index.push_back(i);
  }
  MemoryAssignment ma = plan_memory(lifetimes, 256);
  for (size_t k = 0; k < arena_index.size(); ++k) plan.values[arena_index[k]].offset = ma.offsets[k];
  plan.memory.arena_bytes = ma.arena_bytes;
  plan.memory.lower_bound_bytes = ma.lower_bound_bytes;
  uint64_t woff = 0;
  for (ValuePlan& vp : plan.values)
    if (vp.storage == Storage::kWeight) {
      vp.offset = woff;
      woff += (vp.max_bytes + 63) / 64 * 64;
    }
  plan.memory.weight_bytes = woff;
  mark("memory");
  progress("memory", 1, 1);
  return plan;
}

}  // namespace ingot::builder
