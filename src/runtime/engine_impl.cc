// Copyright ingot authors. Apache-2.0.
#include "runtime/engine_impl.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <unordered_map>

#include "backend/cpu/executor.h"
#include "backend/device.h"
#include "builder/shape_propagation.h"
#include "core/dtype.h"
#include "ir/op_registry.h"

namespace ingot::runtime {

namespace {

struct AlignedFree {
  void operator()(void* p) const { std::free(p); }
};

class EngineImpl;

class ContextImpl : public ExecutionContext {
 public:
  ContextImpl(std::shared_ptr<const EngineImpl> engine, std::shared_ptr<void> arena)
      : engine_(std::move(engine)), arena_(std::move(arena)) {}

  Status init();
  Status set_optimization_profile(int profile) override;
  int optimization_profile() const override { return profile_; }
  Status set_input_shape(const std::string& name, const std::vector<int64_t>& dims) override;
  Status set_tensor_address(const std::string& name, void* address) override;
  const void* tensor_address(const std::string& name) const override;
  Status infer_shapes() override;
  Result<std::vector<int64_t>> tensor_shape(const std::string& name) const override;
  Status enqueue(void* stream) override;
  void set_profiler(Profiler* profiler) override { profiler_ = profiler; }
  void set_tensor_listener(TensorListener* listener) override { listener_ = listener; }
  Status set_cuda_graph_mode(bool enabled) override;
  std::string cuda_graph_status() const override { return graph_status_; }
  int cuda_graphs_held() const override { return static_cast<int>(graphs_.size()); }
  std::string profile_timing() const override { return profile_timing_; }

 private:
  /// How run_steps times each step for the profiler: not at all, host wall time up to a
  /// synchronize after the step, or a timing marker before each step and after the last (device
  /// time; nothing synchronizes, so the steps can be captured).
  enum class StepTiming { kNone, kHostSync, kMarkers };
  /// Runs every step and the output copies: the work a CUDA graph captures.
  Status run_steps(void* stream, StepTiming timing);
  /// enqueue with a profiler attached: the steps' device times from a graph with a marker
  /// between steps, replayed (what a graph run spends, without host enqueue or synchronize
  /// latency), or host times where that graph cannot be made (profile_timing() says why).
  Status run_profiled(void* stream);
  /// Why this run cannot be captured into a graph, or "".
  std::string capture_blocker(void* stream) const;
  /// The part of capture_blocker about the stream and the steps themselves.
  std::string step_capture_blocker(void* stream) const;
  bool graph_mode_ = false;
  std::shared_ptr<void> graph_;  ///< instantiated graph for the current views and shapes
  /// What a captured graph depends on: the profile, every input's dims and every binding. The
  /// arena's offsets, the weights and the workspace do not move, so equal keys mean equal views.
  struct GraphKey {
    int profile = 0;
    std::vector<Shape64> shapes;
    std::vector<void*> addresses;
    bool operator==(const GraphKey& o) const {
      return profile == o.profile && shapes == o.shapes && addresses == o.addresses;
    }
  };
  /// Graphs kept for earlier keys, oldest first (a server's prepared batch sizes each keep
  /// theirs): only graphs whose views hold no buffer allocated for the run (every output bound,
  /// no shape-settled kDynamic value), since prepare_run frees those when the key changes.
  static constexpr size_t kMaxGraphs = 16;
  std::vector<std::pair<GraphKey, std::shared_ptr<void>>> graphs_;
  /// Keys that have had their plain first run (buffers settled, per-shape plans built): the next
  /// enqueue with one of them captures at once, so a caller alternating between buffers (a
  /// Python loop whose output tensors take turns) gets graphs too. Oldest first, at most 32.
  std::vector<GraphKey> settled_;
  GraphKey graph_key_;                          ///< the current views' key
  bool graph_keepable_ = false;                 ///< the current views allocated nothing (see graphs_)
  std::shared_ptr<void> profile_graph_;         ///< run_profiled's graph (steps with markers)
  std::vector<std::shared_ptr<void>> markers_;  ///< one before each step and one after the last
  std::string profile_timing_;
  int plain_runs_since_prepare_ = 0;
  std::string graph_status_;
  /// Graph mode on the legacy default stream: the capture happens on this stream of the
  /// context's own (made on first need), the replay on the caller's.
  std::shared_ptr<void> capture_stream_;
  Profiler* profiler_ = nullptr;
  TensorListener* listener_ = nullptr;
  int io_index(const std::string& name) const;
  const Tensor* lookup(const ir::Value* v) const;
  /// An outer-scope value for a subgraph the host runs (a device engine's host fallback): a host
  /// copy of the device tensor, made on first use in this run (the step's stream is synchronized).
  const Tensor* host_copy(const ir::Value* v);
  Status settle_outputs(const ir::Node& node, const std::vector<const Tensor*>& inputs, std::vector<Tensor>& outputs);
  /// Builds the views and per-step StepIO for the current shapes and bindings.
  Status prepare_run();
  /// After set_tensor_address changed only addresses of bindings the views borrow (same shapes,
  /// no buffer of the run's own): re-points those views, the output views and the steps' output
  /// tensors, and picks the graph for the new key; the rest of prepare_run's work stands.
  Status rebind();
  /// Points the intermediates planned in an output's binding (Storage::kOutputView) at it.
  Status point_output_views();
  /// Whether the step's first output is its first input's buffer (StepIO::in_place).
  static bool reads_own_output(const backend::StepIO& sio, const std::vector<Tensor>& outs) {
    return !outs.empty() && outs[0].defined() && !sio.inputs.empty() && sio.inputs[0] &&
           sio.inputs[0]->raw() == outs[0].raw();
  }
  /// The graph key of the current views, and the kept graph (or the settled key) that matches.
  void select_graph(bool keepable);
  /// Whether the views borrow io tensor i's binding at `address` (a plain device view).
  bool borrows_binding(int i, const void* address) const;
  bool rebind_pending_ = false;  ///< set_tensor_address moved a borrowed binding (see rebind)
  /// Whether output o of step s had a buffer when the run was prepared (not data-dependent).
  bool prepared_defined(size_t s, size_t o) const { return step_prepared_[s].size() > o && step_prepared_[s][o]; }

  /// A zeroed tensor in the engine's device memory (host memory for CPU engines).
  Result<Tensor> device_tensor(DataType dtype, const Shape64& shape) const;
  uint8_t* arena() const { return static_cast<uint8_t*>(arena_.get()); }

  std::shared_ptr<const EngineImpl> engine_;
  std::shared_ptr<void> arena_;
  std::shared_ptr<void> workspace_;  ///< scratch shared by the steps (they run one at a time)
  int profile_ = 0;
  std::vector<Shape64> input_shapes_;  // per io index (inputs only)
  std::vector<bool> input_shape_set_;
  std::vector<void*> addresses_;       // per io index
  std::vector<Tensor> owned_outputs_;  // per io index, for unbound outputs
  bool shapes_valid_ = false;
  builder::ShapeState shapes_;
  std::vector<Tensor> tensors_;  // per plan value, views valid for the current run
  bool views_valid_ = false;     // tensors_ and step_io_ match shapes and bindings
  cpu::SubgraphRunner runner_;
  std::unordered_map<const ir::Value*, Tensor> host_copies_;  // host_copy(): cleared every run
  void* run_stream_ = nullptr;                                // the stream of the current run
  std::vector<backend::StepIO> step_io_;
  std::vector<std::vector<Tensor>> step_outputs_;
  std::vector<std::vector<int>> step_out_vi_;
  std::vector<std::vector<bool>> step_prepared_;
  std::vector<bool> step_dynamic_;
};

class EngineImpl : public Engine, public std::enable_shared_from_this<EngineImpl> {
 public:
  explicit EngineImpl(builder::Plan plan) : plan_(std::move(plan)) {}

  Status init() {
    INGOT_ASSIGN_OR_RETURN(const backend::Backend* be, backend::find_backend(plan_.backend));
    device_ = &be->device();
    for (const builder::Step& s : plan_.steps) {
      INGOT_ASSIGN_OR_RETURN(auto t, be->create_tactic(s.tactic, s.params));
      tactics_.push_back(std::move(t));
      LayerDesc l;
      l.name = s.node->name().empty() ? s.node->op_type() + "_" + std::to_string(layers_.size()) : s.node->name();
      l.op = s.node->domain().empty() ? s.node->op_type() : s.node->domain() + "::" + s.node->op_type();
      l.tactic = s.tactic;
      // Precision: the type of its first floating-point output (else of its first present one: a
      // LayerNormQuantize without its float output is an int8 layer).
      for (const ir::Value* o : s.node->outputs())
        if (o && l.precision.empty() && is_float(o->dtype())) l.precision = data_type_name(o->dtype());
      for (const ir::Value* o : s.node->outputs())
        if (o && l.precision.empty()) l.precision = data_type_name(o->dtype());
      if (s.node->attrs().get_int("channels_last", 0) != 0) l.layout = "NHWC";
      l.origins = s.node->origins();
      for (const ir::Value* v : s.node->inputs()) l.inputs.push_back(v ? v->name() : "");
      for (const ir::Value* v : s.node->outputs()) l.outputs.push_back(v ? v->name() : "");
      layers_.push_back(std::move(l));
    }
    for (size_t i = 0; i < plan_.values.size(); ++i) value_index_[plan_.values[i].value] = static_cast<int>(i);
    // Weights (and defaults of inputs that have one) go to the device once, shared by every
    // context. On the host they are used in place.
    device_values_.assign(plan_.values.size(), Tensor());
    if (!device_->is_host()) {
      for (size_t i = 0; i < plan_.values.size(); ++i) {
        const Tensor* init = plan_.values[i].value->initializer();
        if (!init || init->dtype() == DataType::kString) continue;
        INGOT_ASSIGN_OR_RETURN(device_values_[i], allocate(init->dtype(), init->shape()));
        INGOT_RETURN_IF_ERROR(
            device_->copy_to_device(device_values_[i].mutable_raw(), init->raw(), init->nbytes(), nullptr));
      }
      INGOT_RETURN_IF_ERROR(device_->synchronize(nullptr));
    }
    auto add_io = [&](const ir::Value* v, bool is_input) {
      IoTensorDesc d;
      d.name = v->name();
      d.dtype = v->dtype();
      d.is_input = is_input;
      for (const ir::Dim& dim : v->shape().dims()) {
        d.shape.push_back(dim.is_known() ? dim.value() : -1);
        d.dim_names.push_back(dim.is_symbol() ? dim.symbol_name() : "");
      }
      io_.push_back(d);
      io_values_.push_back(v);
    };
    for (const ir::Value* v : plan_.graph->inputs()) add_io(v, true);
    for (const ir::Value* v : plan_.graph->outputs()) {
      bool dup = false;
      for (const ir::Value* w : io_values_) dup |= w == v;
      if (!dup) add_io(v, false);
    }
    return Status::Ok();
  }

  const std::vector<IoTensorDesc>& io_tensors() const override { return io_; }
  int num_profiles() const override { return static_cast<int>(plan_.profiles.size()); }
  Status profile_dimensions(int profile, const std::string& input, std::vector<int64_t>* min, std::vector<int64_t>* opt,
                            std::vector<int64_t>* max) const override {
    if (profile < 0 || profile >= num_profiles())
      return make_status(StatusCode::kOutOfRange, "profile ", profile, " does not exist (engine has ", num_profiles(),
                         ")");
    const builder::ProfileDims* d = plan_.profiles[profile].find(input);
    if (!d) return make_status(StatusCode::kNotFound, "profile ", profile, " has no entry for '", input, "'");
    if (min) *min = d->min;
    if (opt) *opt = d->opt;
    if (max) *max = d->max;
    return Status::Ok();
  }
  const std::vector<LayerDesc>& layers() const override { return layers_; }
  MemoryFigures memory() const override {
    MemoryFigures m;
    m.arena_bytes = plan_.memory.arena_bytes;
    m.weight_bytes = plan_.memory.weight_bytes;
    m.lower_bound_bytes = plan_.memory.lower_bound_bytes;
    m.workspace_bytes = plan_.memory.workspace_bytes;
    return m;
  }
  std::string backend() const override { return plan_.backend; }

  Result<std::unique_ptr<ExecutionContext>> create_execution_context() const override {
    size_t bytes = ((plan_.memory.arena_bytes + 255) / 256) * 256;
    auto p = device_->allocate(bytes ? bytes : 256);
    if (!p.ok())
      return make_status(StatusCode::kOutOfMemory, "cannot allocate the ", plan_.memory.arena_bytes,
                         "-byte activation arena for a new context: ", p.status().message());
    backend::Device* dev = device_;
    std::shared_ptr<void> arena(*p, [dev](void* q) { dev->release(q); });
    // Poison: every byte 0xFF (NaN for floats, -1 for integers), so a step that reads memory
    // no earlier step wrote gives visibly wrong results instead of plausible stale data.
    INGOT_RETURN_IF_ERROR(device_->fill(arena.get(), 0xFF, bytes ? bytes : 256, nullptr));
    INGOT_RETURN_IF_ERROR(device_->synchronize(nullptr));
    auto ctx = std::make_unique<ContextImpl>(shared_from_this(), std::move(arena));
    INGOT_RETURN_IF_ERROR(ctx->init());
    return std::unique_ptr<ExecutionContext>(std::move(ctx));
  }

  /// A zeroed tensor in device memory (host memory for CPU engines), freed with its last copy.
  Result<Tensor> allocate(DataType dtype, const Shape64& shape) const {
    if (device_->is_host() || dtype == DataType::kString) return Tensor::zeros(dtype, shape);
    size_t bytes = storage_bytes(dtype, shape_numel(shape));
    INGOT_ASSIGN_OR_RETURN(void* p, device_->allocate(bytes));
    backend::Device* dev = device_;
    std::shared_ptr<const void> owner(p, [dev](const void* q) { dev->release(const_cast<void*>(q)); });
    INGOT_RETURN_IF_ERROR(device_->fill(p, 0, bytes, nullptr));
    return Tensor::borrow(dtype, shape, p, owner);
  }
  backend::Device& device() const { return *device_; }
  /// The device copy of an initializer-backed value (CUDA), or nullptr (use the host one).
  const Tensor* device_value(int vi) const {
    return vi >= 0 && device_values_[vi].defined() ? &device_values_[vi] : nullptr;
  }

  const builder::Plan& plan() const { return plan_; }
  const std::vector<std::unique_ptr<backend::Tactic>>& tactics() const { return tactics_; }
  const std::vector<const ir::Value*>& io_values() const { return io_values_; }
  int value_index(const ir::Value* v) const {
    auto it = value_index_.find(v);
    return it == value_index_.end() ? -1 : it->second;
  }

 private:
  builder::Plan plan_;
  std::vector<std::unique_ptr<backend::Tactic>> tactics_;
  std::vector<LayerDesc> layers_;
  std::vector<IoTensorDesc> io_;
  std::vector<const ir::Value*> io_values_;
  std::unordered_map<const ir::Value*, int> value_index_;
  backend::Device* device_ = nullptr;
  std::vector<Tensor> device_values_;
};

Status ContextImpl::init() {
  uint64_t ws = engine_->plan().memory.workspace_bytes;
  if (ws) {
    auto p = engine_->device().allocate(ws);
    if (!p.ok())
      return make_status(StatusCode::kOutOfMemory, "cannot allocate the ", ws,
                         "-byte workspace: ", p.status().message());
    backend::Device* dev = &engine_->device();
    workspace_ = std::shared_ptr<void>(*p, [dev](void* q) { dev->release(q); });
  }
  size_t n = engine_->io_tensors().size();
  input_shapes_.assign(n, {});
  input_shape_set_.assign(n, false);
  addresses_.assign(n, nullptr);
  owned_outputs_.assign(n, Tensor());
  tensors_.assign(engine_->plan().values.size(), Tensor());
  // Inputs whose model shape is fixed need no set_input_shape.
  for (size_t i = 0; i < n; ++i) {
    const IoTensorDesc& d = engine_->io_tensors()[i];
    if (!d.is_input) continue;
    bool fixed = true;
    for (int64_t x : d.shape) fixed &= x >= 0;
    if (fixed && engine_->io_values()[i]->shape().rank_known()) {
      input_shapes_[i] = d.shape;
      input_shape_set_[i] = true;
    }
  }
  return Status::Ok();
}

int ContextImpl::io_index(const std::string& name) const {
  const auto& io = engine_->io_tensors();
  for (size_t i = 0; i < io.size(); ++i)
    if (io[i].name == name) return static_cast<int>(i);
  return -1;
}

Status ContextImpl::set_optimization_profile(int profile) {
  if (profile < 0 || profile >= engine_->num_profiles())
    return make_status(StatusCode::kOutOfRange, "profile ", profile, " does not exist (the engine has ",
                       engine_->num_profiles(), ")");
  profile_ = profile;
  shapes_valid_ = false;
  views_valid_ = false;
  return Status::Ok();
}

Status ContextImpl::set_input_shape(const std::string& name, const std::vector<int64_t>& dims) {
  int i = io_index(name);
  if (i < 0 || !engine_->io_tensors()[i].is_input)
    return make_status(StatusCode::kNotFound, "'", name, "' is not an input of the engine");
  const IoTensorDesc& d = engine_->io_tensors()[i];
  if (dims.size() != d.shape.size())
    return make_status(StatusCode::kInvalidArgument, "input '", name, "' has rank ", d.shape.size(), ", got ",
                       dims.size(), " dims");
  const builder::ProfileDims* p = engine_->plan().profiles[profile_].find(name);
  for (size_t k = 0; k < dims.size(); ++k) {
    if (d.shape[k] >= 0 && dims[k] != d.shape[k])
      return make_status(StatusCode::kOutOfRange, "input '", name, "' dim ", k, " is fixed to ", d.shape[k], ", got ",
                         dims[k]);
    if (p && (dims[k] < p->min[k] || dims[k] > p->max[k]))
      return make_status(StatusCode::kOutOfRange, "input '", name, "' dim ", k, " = ", dims[k],
                         " is outside optimization profile ", profile_, ": allowed ", p->min[k], "..", p->max[k]);
  }
  // The same dims again (a server's steady state): the shapes, views and any captured graph stand.
  if (input_shape_set_[i] && input_shapes_[i] == dims) return Status::Ok();
  input_shapes_[i] = dims;
  input_shape_set_[i] = true;
  shapes_valid_ = false;
  views_valid_ = false;
  return Status::Ok();
}

Status ContextImpl::set_tensor_address(const std::string& name, void* address) {
  int i = io_index(name);
  if (i < 0) return make_status(StatusCode::kNotFound, "'", name, "' is not an input or output of the engine");
  if (addresses_[i] != address) {
    // A new address for a buffer the prepared views borrow only re-points them (rebind) where
    // the views own nothing of the run; anything else is prepared again.
    if (views_valid_ && graph_keepable_ && address && borrows_binding(i, addresses_[i]))
      rebind_pending_ = true;
    else
      views_valid_ = false;
  }
  addresses_[i] = address;
  return Status::Ok();
}

bool ContextImpl::borrows_binding(int i, const void* address) const {
  if (!address) return false;
  const int vi = engine_->value_index(engine_->io_values()[static_cast<size_t>(i)]);
  if (vi < 0 || static_cast<size_t>(vi) >= tensors_.size()) return false;
  const Tensor& t = tensors_[static_cast<size_t>(vi)];
  return t.defined() && t.dtype() != DataType::kString && t.raw() == address;
}

Status ContextImpl::rebind() {
  const auto& io = engine_->io_tensors();
  for (size_t i = 0; i < io.size(); ++i) {
    const int vi = engine_->value_index(engine_->io_values()[i]);
    if (vi < 0) continue;
    Tensor& t = tensors_[static_cast<size_t>(vi)];
    if (t.defined() && t.dtype() != DataType::kString && addresses_[i] && t.raw() != addresses_[i])
      t = Tensor::borrow(t.dtype(), t.shape(), addresses_[i], nullptr);
  }
  INGOT_RETURN_IF_ERROR(point_output_views());
  for (size_t s = 0; s < step_io_.size(); ++s) {
    backend::StepIO& sio = step_io_[s];
    std::vector<Tensor>& outs = step_outputs_[s];
    for (size_t o = 0; o < outs.size(); ++o) {
      const int vi = step_out_vi_[s][o];
      if (vi >= 0 && prepared_defined(s, o)) outs[o] = tensors_[static_cast<size_t>(vi)];
    }
    sio.in_place = reads_own_output(sio, outs);
  }
  rebind_pending_ = false;
  select_graph(graph_keepable_);
  return Status::Ok();
}

const void* ContextImpl::tensor_address(const std::string& name) const {
  int i = io_index(name);
  if (i < 0) return nullptr;
  if (addresses_[i]) return addresses_[i];
  if (!owned_outputs_[i].defined()) return nullptr;
  if (owned_outputs_[i].dtype() == DataType::kString) return owned_outputs_[i].strings().data();
  return owned_outputs_[i].raw();
}

Status ContextImpl::infer_shapes() {
  std::map<const ir::Value*, Shape64> in;
  const auto& io = engine_->io_tensors();
  for (size_t i = 0; i < io.size(); ++i) {
    if (!io[i].is_input) continue;
    if (!input_shape_set_[i])
      return make_status(StatusCode::kInvalidArgument, "input '", io[i].name,
                         "' has open dims: call set_input_shape first");
    in[engine_->io_values()[i]] = input_shapes_[i];
  }
  INGOT_ASSIGN_OR_RETURN(shapes_, builder::propagate_shapes(*engine_->plan().graph, in));
  shapes_valid_ = true;
  views_valid_ = false;
  return Status::Ok();
}

Result<std::vector<int64_t>> ContextImpl::tensor_shape(const std::string& name) const {
  int i = io_index(name);
  if (i < 0) return make_status(StatusCode::kNotFound, "'", name, "' is not an input or output of the engine");
  const ir::Value* v = engine_->io_values()[i];
  int vi = engine_->value_index(v);
  // Shapes inferred from the current input shapes first; the tensors of the last enqueue only
  // while they still match them (a new input shape makes them stale) — they alone know
  // data-dependent dims.
  auto it = shapes_.shapes.find(v);
  if (shapes_valid_ && it != shapes_.shapes.end()) return it->second;
  if (views_valid_ && vi >= 0 && tensors_[vi].defined()) return tensors_[vi].shape();
  if (engine_->io_tensors()[i].is_input && input_shape_set_[i]) return input_shapes_[i];
  auto part = shapes_.partial.find(v);
  if (shapes_valid_ && part != shapes_.partial.end() && part->second.rank_known()) {
    std::vector<int64_t> dims;
    for (const ir::Dim& d : part->second.dims()) dims.push_back(d.is_known() ? d.value() : -1);
    return dims;
  }
  return engine_->io_tensors()[i].shape;  // the model's dims, -1 where open
}

Result<Tensor> ContextImpl::device_tensor(DataType dtype, const Shape64& shape) const {
  return engine_->allocate(dtype, shape);
}

Status ContextImpl::settle_outputs(const ir::Node& node, const std::vector<const Tensor*>& inputs,
                                   std::vector<Tensor>& outputs) {
  // Outputs whose size only the inputs of this run settle (they follow a data-dependent op):
  // infer this node again with the actual input shapes, and give concrete ones a buffer.
  bool any = false;
  for (size_t o = 0; o < outputs.size(); ++o)
    any |= node.outputs()[o] && !outputs[o].defined() && node.outputs()[o]->dtype() != DataType::kString;
  if (!any) return Status::Ok();
  const ir::OpSchema* schema = ir::OpRegistry::global().find(node.op_type(), node.domain());
  if (!schema || !schema->inference()) return Status::Ok();
  std::vector<ir::TensorType> types;
  std::vector<const Tensor*> values;
  for (size_t i = 0; i < inputs.size(); ++i) {
    ir::TensorType t;
    const Tensor* val = nullptr;
    if (inputs[i]) {
      t.dtype = inputs[i]->dtype();
      t.shape = ir::Shape::from_concrete(inputs[i]->shape());
      const ir::Value* v = node.inputs()[i];
      if (engine_->device().is_host())
        val = inputs[i];
      else if (v && v->initializer())
        val = v->initializer();
      else if (v) {
        auto h = shapes_.host_values.find(v);
        if (h != shapes_.host_values.end()) val = &h->second;
      }
    }
    types.push_back(std::move(t));
    values.push_back(val);
  }
  ir::InferenceContext ctx(node, node.owner() ? node.owner()->opset(node.domain()) : 0, std::move(types), values);
  if (!schema->inference()(ctx).ok()) return Status::Ok();  // the step itself reports the error
  for (size_t o = 0; o < outputs.size(); ++o) {
    const ir::Value* v = node.outputs()[o];
    if (!v || outputs[o].defined() || v->dtype() == DataType::kString) continue;
    const ir::TensorType& t = ctx.output(o);
    if (t.dtype == DataType::kUndefined || !t.shape.is_concrete()) continue;
    INGOT_ASSIGN_OR_RETURN(outputs[o], device_tensor(t.dtype, t.shape.concrete()));
  }
  return Status::Ok();
}

const Tensor* ContextImpl::lookup(const ir::Value* v) const {
  int vi = engine_->value_index(v);
  if (vi >= 0 && tensors_[vi].defined()) return &tensors_[vi];
  if (const Tensor* d = engine_->device_value(vi)) return d;
  return v->initializer();
}

const Tensor* ContextImpl::host_copy(const ir::Value* v) {
  auto it = host_copies_.find(v);
  if (it != host_copies_.end()) return &it->second;
  const Tensor* d = lookup(v);
  // Initializers are host tensors; strings never live on the device.
  if (!d || !d->defined() || d == v->initializer() || d->dtype() == DataType::kString) return d;
  auto h = Tensor::zeros(d->dtype(), d->shape());
  if (!h.ok()) return nullptr;
  if (d->nbytes() > 0) {
    if (!engine_->device().copy_to_host(h->mutable_raw(), d->raw(), d->nbytes(), run_stream_).ok()) return nullptr;
    if (!engine_->device().synchronize(run_stream_).ok()) return nullptr;
  }
  return &(host_copies_[v] = std::move(h).value());
}

Status ContextImpl::point_output_views() {
  const builder::Plan& plan = engine_->plan();
  for (size_t vi = 0; vi < plan.values.size(); ++vi) {
    const builder::ValuePlan& vp = plan.values[vi];
    if (vp.storage != builder::Storage::kOutputView) continue;
    const ir::Value* v = vp.value;
    auto sh = shapes_.shapes.find(v);
    if (sh == shapes_.shapes.end() || shapes_.dynamic.count(v))
      return internal_error("no shape for value '", v->name(), "'");
    const Tensor& out = tensors_[static_cast<size_t>(vp.offset)];
    if (!out.defined() || out.nbytes() != storage_bytes(v->dtype(), shape_numel(sh->second)))
      return internal_error("value '", v->name(), "' does not fit the output it is planned in");
    tensors_[vi] = Tensor::borrow(v->dtype(), sh->second, const_cast<void*>(out.raw()), nullptr);
  }
  return Status::Ok();
}

Status ContextImpl::prepare_run() {
  if (!shapes_valid_) INGOT_RETURN_IF_ERROR(infer_shapes());
  const builder::Plan& plan = engine_->plan();
  const auto& io = engine_->io_tensors();
  // Views for the current shapes and bindings: weights, arena tensors, bindings, and buffers for
  // values whose size the shapes settle. Rebuilt only when shapes or bindings change, so the
  // steady-state enqueue below touches no allocator.
  bool allocated_for_run = false;  // a buffer these views own (freed when they are rebuilt)
  for (size_t vi = 0; vi < plan.values.size(); ++vi) {
    const builder::ValuePlan& vp = plan.values[vi];
    const ir::Value* v = vp.value;
    tensors_[vi] = Tensor();
    auto sh = shapes_.shapes.find(v);
    bool known = sh != shapes_.shapes.end() && !shapes_.dynamic.count(v);
    switch (vp.storage) {
      case builder::Storage::kWeight:
        tensors_[vi] = engine_->device_value(static_cast<int>(vi)) ? *engine_->device_value(static_cast<int>(vi))
                                                                   : *v->initializer();
        break;
      case builder::Storage::kArena:
        if (!known) return internal_error("no shape for arena value '", v->name(), "'");
        if (storage_bytes(v->dtype(), shape_numel(sh->second)) > vp.max_bytes)
          return internal_error("value '", v->name(), "' needs more than its planned ", vp.max_bytes, " bytes");
        tensors_[vi] = Tensor::borrow(v->dtype(), sh->second, arena() + vp.offset, nullptr);
        break;
      case builder::Storage::kBinding: {
        int i = -1;
        for (size_t k = 0; k < io.size(); ++k)
          if (engine_->io_values()[k] == v) i = static_cast<int>(k);
        if (i < 0) break;
        if (io[i].is_input) {
          if (!addresses_[i]) {
            if (v->initializer()) {
              const Tensor* d = engine_->device_value(static_cast<int>(vi));
              tensors_[vi] = d ? *d : *v->initializer();
              break;
            }
            if (shape_numel(input_shapes_[i]) == 0) {  // nothing to read: no memory needed
              allocated_for_run = true;
              INGOT_ASSIGN_OR_RETURN(tensors_[vi], device_tensor(v->dtype(), input_shapes_[i]));
              break;
            }
            return make_status(StatusCode::kInvalidArgument, "input '", v->name(),
                               "' has no address: call set_tensor_address");
          }
          if (v->dtype() == DataType::kString) {
            // String bindings are arrays of std::string in host memory on every backend (strings
            // never live on a device); copied in each run.
            allocated_for_run = true;
            INGOT_ASSIGN_OR_RETURN(tensors_[vi], Tensor::zeros(DataType::kString, input_shapes_[i]));
          } else {
            tensors_[vi] = Tensor::borrow(v->dtype(), input_shapes_[i], addresses_[i], nullptr);
          }
        } else if (known && v->dtype() != DataType::kString) {
          void* addr = addresses_[i];
          if (!addr) {
            allocated_for_run = true;  // reallocated when another shape needs other sizes
            if (!owned_outputs_[i].defined() || owned_outputs_[i].shape() != sh->second) {
              INGOT_ASSIGN_OR_RETURN(owned_outputs_[i], device_tensor(v->dtype(), sh->second));
            }
            addr = owned_outputs_[i].mutable_raw();
          }
          tensors_[vi] = Tensor::borrow(v->dtype(), sh->second, addr, nullptr);
        }
        break;
      }
      case builder::Storage::kDynamic:
        // Sizes unknown at build time: when these shapes settle them, give the step a buffer so
        // any tactic can write it; data-dependent ones are allocated by their step each run.
        if (known && v->dtype() != DataType::kString) {
          allocated_for_run = true;
          INGOT_ASSIGN_OR_RETURN(tensors_[vi], device_tensor(v->dtype(), sh->second));
        }
        break;
      case builder::Storage::kOutputView:
        break;  // below, once the outputs' buffers are known
    }
  }
  INGOT_RETURN_IF_ERROR(point_output_views());
  // One StepIO per step, pointing at the views above.
  // Subgraphs (If/Loop/Scan bodies) run on the host: a CPU engine's values are there already, a
  // device engine's outer-scope values are copied to the host when a body reads them.
  if (engine_->device().is_host())
    runner_ = cpu::make_subgraph_runner([this](const ir::Value* v) { return lookup(v); });
  else
    runner_ = cpu::make_subgraph_runner([this](const ir::Value* v) { return host_copy(v); });
  size_t n = plan.steps.size();
  step_io_.assign(n, backend::StepIO());
  step_outputs_.assign(n, {});
  step_out_vi_.assign(n, {});
  step_dynamic_.assign(n, false);
  step_prepared_.assign(n, {});
  for (size_t s = 0; s < n; ++s) {
    const ir::Node& node = *plan.steps[s].node;
    backend::StepIO& sio = step_io_[s];
    sio.node = &node;
    for (const ir::Value* v : node.inputs()) {
      const Tensor* t = nullptr;
      if (v) {
        int vi = engine_->value_index(v);
        t = vi >= 0 ? &tensors_[vi] : v->initializer();  // later steps' outputs are filled in place
        if (!t) return internal_error(node.describe(), ": input '", v->name(), "' has no value");
      }
      sio.inputs.push_back(t);
    }
    step_outputs_[s].assign(node.outputs().size(), Tensor());
    step_out_vi_[s].assign(node.outputs().size(), -1);
    for (size_t o = 0; o < node.outputs().size(); ++o) {
      const ir::Value* v = node.outputs()[o];
      if (!v) continue;
      int vi = engine_->value_index(v);
      step_out_vi_[s][o] = vi;
      if (vi >= 0) step_outputs_[s][o] = tensors_[vi];
      if (!step_outputs_[s][o].defined()) step_dynamic_[s] = true;
    }
    for (const Tensor& t : step_outputs_[s]) step_prepared_[s].push_back(t.defined());
    sio.outputs = &step_outputs_[s];
    sio.workspace = workspace_.get();
    sio.subgraph_runner = runner_;
    sio.allocate_output = [this](DataType dt, const Shape64& shape) { return device_tensor(dt, shape); };
    sio.in_place = reads_own_output(sio, step_outputs_[s]);
  }
  views_valid_ = true;
  rebind_pending_ = false;
  select_graph(!allocated_for_run);
  return Status::Ok();
}

void ContextImpl::select_graph(bool keepable) {
  graph_.reset();
  profile_graph_.reset();
  plain_runs_since_prepare_ = 0;
  graph_key_ = GraphKey{profile_, input_shapes_, addresses_};
  graph_keepable_ = keepable;
  if (!graph_keepable_) {
    graphs_.clear();
    settled_.clear();
  } else {
    for (const auto& [key, g] : graphs_) {
      if (key == graph_key_) {
        graph_ = g;  // the same views as when it was captured: replay from the first enqueue
        plain_runs_since_prepare_ = 1;
        break;
      }
    }
    for (const GraphKey& key : settled_)
      if (!graph_ && key == graph_key_) plain_runs_since_prepare_ = 1;  // capture at the next enqueue
  }
}

Status ContextImpl::set_cuda_graph_mode(bool enabled) {
  if (enabled && engine_->device().is_host())
    return unsupported("CUDA graphs need a CUDA engine; this engine runs on the ", engine_->backend(), " backend");
  graph_mode_ = enabled;
  graph_.reset();
  graphs_.clear();
  settled_.clear();
  graph_status_.clear();
  return Status::Ok();
}

std::string ContextImpl::capture_blocker(void* stream) const {
  if (profiler_) return "a profiler is attached (per-layer timing replays its own graph with markers between steps)";
  if (listener_) return "a tensor listener is attached (it copies every intermediate to the host)";
  return step_capture_blocker(stream);
}

std::string ContextImpl::step_capture_blocker(void* stream) const {
  if (!stream) return "enqueue is on the legacy default stream, which cannot be captured; pass a created stream";
  const builder::Plan& plan = engine_->plan();
  for (size_t s = 0; s < plan.steps.size(); ++s) {
    if (step_dynamic_[s])
      return "step " + std::to_string(s) + " (" + plan.steps[s].node->describe() + ") has data-dependent output shapes";
    if (!engine_->tactics()[s]->capturable())
      return "step " + std::to_string(s) + " (" + plan.steps[s].node->describe() + ") runs tactic " +
             plan.steps[s].tactic + ", which synchronizes with the host";
  }
  return "";
}

Status ContextImpl::enqueue(void* stream) {
  if (!shapes_valid_ || !views_valid_)
    INGOT_RETURN_IF_ERROR(prepare_run());
  else if (rebind_pending_)
    INGOT_RETURN_IF_ERROR(rebind());
  if (profiler_) {
    if (graph_mode_) graph_status_ = capture_blocker(stream);
    return run_profiled(stream);
  }
  if (!graph_mode_) return run_steps(stream, StepTiming::kNone);
  if (graph_ && !profiler_ && !listener_) {  // a graph replays on any stream, the legacy one too
    graph_status_.clear();
    return engine_->device().launch_graph(graph_.get(), stream);
  }
  // The legacy default stream (torch's current stream unless the caller made one) cannot be
  // captured; capturing runs nothing, so the steps are captured on a stream of our own and the
  // graph is launched on the caller's.
  void* capture_on = stream;
  if (!capture_on && !engine_->device().is_host()) {
    if (!capture_stream_) {
      auto s = engine_->device().create_stream();
      if (s.ok()) capture_stream_ = std::move(s).value();
    }
    capture_on = capture_stream_.get();
  }
  graph_status_ = capture_blocker(capture_on);
  // The first run after the shapes or bindings change is plain: it settles output buffers and
  // lets tactics build their per-shape plans outside the capture. The next one is captured.
  if (!graph_status_.empty() || plain_runs_since_prepare_ == 0) {
    if (graph_status_.empty() && graph_keepable_) {
      if (settled_.size() == 2 * kMaxGraphs) settled_.erase(settled_.begin());
      settled_.push_back(graph_key_);
    }
    ++plain_runs_since_prepare_;
    return run_steps(stream, StepTiming::kNone);
  }
  INGOT_RETURN_IF_ERROR(engine_->device().begin_capture(capture_on));
  Status st = run_steps(capture_on, StepTiming::kNone);
  auto g = engine_->device().end_capture(capture_on);
  if (!st.ok()) return Status(st.code(), "during CUDA graph capture: " + st.message());
  if (!g.ok()) {
    graph_status_ = g.status().message();
    return run_steps(stream, StepTiming::kNone);
  }
  graph_ = std::move(g).value();
  if (graph_keepable_) {
    if (graphs_.size() == kMaxGraphs) graphs_.erase(graphs_.begin());
    graphs_.emplace_back(graph_key_, graph_);
  }
  return engine_->device().launch_graph(graph_.get(), stream);
}

Status ContextImpl::run_profiled(void* stream) {
  backend::Device& dev = engine_->device();
  const size_t n = engine_->plan().steps.size();
  std::string why = dev.is_host() ? "a CPU engine: the step's execution"
                    : listener_   ? "a tensor listener is attached"
                                  : step_capture_blocker(stream);
  if (why.empty() && !profile_graph_) {
    if (plain_runs_since_prepare_ == 0) {
      // As in graph mode: the first run after the shapes or bindings change settles output
      // buffers and the tactics' per-shape plans outside a capture. Not reported.
      ++plain_runs_since_prepare_;
      INGOT_RETURN_IF_ERROR(run_steps(stream, StepTiming::kNone));
    }
    while (markers_.size() < n + 1) {
      auto m = dev.create_marker();
      if (!m.ok()) return m.status();
      markers_.push_back(std::move(m).value());
    }
    INGOT_RETURN_IF_ERROR(dev.begin_capture(stream));
    Status st = run_steps(stream, StepTiming::kMarkers);
    auto g = dev.end_capture(stream);
    if (!st.ok()) return Status(st.code(), "during the profiling graph's capture: " + st.message());
    if (g.ok())
      profile_graph_ = std::move(g).value();
    else
      why = "its capture failed: " + g.status().message();
  }
  if (!why.empty()) {
    profile_timing_ =
        "host: wall time from each step's enqueue to a synchronize after it (no device timing: " + why + ")";
    return run_steps(stream, StepTiming::kHostSync);
  }
  INGOT_RETURN_IF_ERROR(dev.launch_graph(profile_graph_.get(), stream));
  INGOT_RETURN_IF_ERROR(dev.synchronize(stream));
  for (size_t s = 0; s < n; ++s) {
    INGOT_ASSIGN_OR_RETURN(float ms, dev.marker_elapsed_ms(markers_[s].get(), markers_[s + 1].get()));
    profiler_->report_layer_time(static_cast<int>(s), engine_->layers()[s].name.c_str(), ms);
  }
  profile_timing_ = "device: each step's GPU time in a CUDA graph replay, between markers recorded around it";
  return Status::Ok();
}

Status ContextImpl::run_steps(void* stream, StepTiming timing) {
  host_copies_.clear();
  run_stream_ = stream;
  const builder::Plan& plan = engine_->plan();
  const auto& io = engine_->io_tensors();
  for (size_t i = 0; i < io.size(); ++i) {
    if (!io[i].is_input || io[i].dtype != DataType::kString || !addresses_[i]) continue;
    int vi = engine_->value_index(engine_->io_values()[i]);
    if (vi < 0 || !tensors_[vi].defined()) continue;
    const std::string* src = static_cast<const std::string*>(addresses_[i]);
    auto& dst = tensors_[vi].mutable_strings();
    for (size_t k = 0; k < dst.size(); ++k) dst[k] = src[k];
  }
  for (size_t s = 0; s < plan.steps.size(); ++s) {
    backend::StepIO& sio = step_io_[s];
    std::vector<Tensor>& outs = step_outputs_[s];
    if (step_dynamic_[s]) {
      // Data-dependent outputs: undefined again, sized by this run's inputs or by the step.
      for (size_t o = 0; o < outs.size(); ++o) {
        int vi = step_out_vi_[s][o];
        if (vi >= 0 && !prepared_defined(s, o)) outs[o] = Tensor();
      }
      INGOT_RETURN_IF_ERROR(settle_outputs(*sio.node, sio.inputs, outs));
    }
    sio.stream = stream;
    using Clock = std::chrono::steady_clock;
    const bool timed = timing != StepTiming::kNone && profiler_;
    if (timing == StepTiming::kMarkers)
      INGOT_RETURN_IF_ERROR(engine_->device().record_marker(markers_[s].get(), stream));
    const auto t0 = timed ? Clock::now() : Clock::time_point();
    Status st = engine_->tactics()[s]->enqueue(sio);
    if (!st.ok()) return Status(st.code(), "step " + std::to_string(s) + ": " + st.message());
    if (timed) {
      const char* name = engine_->layers()[s].name.c_str();
      profiler_->report_layer_enqueue_time(static_cast<int>(s), name,
                                           std::chrono::duration<float, std::milli>(Clock::now() - t0).count());
    }
    if (timed && timing == StepTiming::kHostSync) {
      INGOT_RETURN_IF_ERROR(engine_->device().synchronize(stream));
      float ms = std::chrono::duration<float, std::milli>(Clock::now() - t0).count();
      profiler_->report_layer_time(static_cast<int>(s), engine_->layers()[s].name.c_str(), ms);
    }
    if (step_dynamic_[s])
      for (size_t o = 0; o < outs.size(); ++o)
        if (step_out_vi_[s][o] >= 0) tensors_[step_out_vi_[s][o]] = outs[o];
    if (listener_) {
      for (size_t o = 0; o < outs.size(); ++o) {
        const ir::Value* v = sio.node->outputs()[o];
        if (!v || !outs[o].defined() || outs[o].dtype() == DataType::kString) continue;
        const Tensor& t = outs[o];
        if (engine_->device().is_host()) {
          listener_->on_tensor(static_cast<int>(s), v->name().c_str(), t.dtype(), t.shape(), t.raw());
        } else {
          INGOT_ASSIGN_OR_RETURN(Tensor host, Tensor::zeros(t.dtype(), t.shape()));
          INGOT_RETURN_IF_ERROR(engine_->device().copy_to_host(host.mutable_raw(), t.raw(), t.nbytes(), stream));
          INGOT_RETURN_IF_ERROR(engine_->device().synchronize(stream));
          listener_->on_tensor(static_cast<int>(s), v->name().c_str(), t.dtype(), t.shape(), host.raw());
        }
      }
    }
  }
  if (timing == StepTiming::kMarkers)
    INGOT_RETURN_IF_ERROR(engine_->device().record_marker(markers_[plan.steps.size()].get(), stream));
  // Outputs that no step wrote into their binding: data-dependent shapes, strings, or outputs
  // that are graph inputs / initializers themselves.
  for (size_t i = 0; i < io.size(); ++i) {
    if (io[i].is_input) continue;
    const ir::Value* v = engine_->io_values()[i];
    const Tensor* t = lookup(v);
    if (!t) return internal_error("output '", v->name(), "' was not computed");
    bool copied = false;
    if (addresses_[i] && t->dtype() == DataType::kString) {
      std::string* dst = static_cast<std::string*>(addresses_[i]);
      for (int64_t k = 0; k < t->numel(); ++k) dst[k] = t->strings()[static_cast<size_t>(k)];
      continue;
    }
    if (addresses_[i] && t->raw() != addresses_[i] && t->dtype() != DataType::kString) {
      INGOT_RETURN_IF_ERROR(engine_->device().copy_on_device(addresses_[i], t->raw(), t->nbytes(), stream));
      copied = true;
    } else if (!addresses_[i] && (t->dtype() == DataType::kString || !owned_outputs_[i].defined() ||
                                  owned_outputs_[i].raw() != t->raw())) {
      if (engine_->device().is_host() || t->dtype() == DataType::kString) {
        owned_outputs_[i] = t->clone();
      } else {
        INGOT_ASSIGN_OR_RETURN(owned_outputs_[i], device_tensor(t->dtype(), t->shape()));
        INGOT_RETURN_IF_ERROR(
            engine_->device().copy_on_device(owned_outputs_[i].mutable_raw(), t->raw(), t->nbytes(), stream));
      }
      copied = true;
    }
    int vi = engine_->value_index(v);
    if (copied && vi >= 0)
      tensors_[vi] = addresses_[i] ? Tensor::borrow(t->dtype(), t->shape(), addresses_[i], nullptr) : owned_outputs_[i];
  }
  return Status::Ok();
}

}  // namespace

Result<std::shared_ptr<Engine>> make_engine(builder::Plan plan) {
  auto e = std::make_shared<EngineImpl>(std::move(plan));
  INGOT_RETURN_IF_ERROR(e->init());
  return std::shared_ptr<Engine>(e);
}

}  // namespace ingot::runtime
