// Copyright ingot authors. Apache-2.0.
#include "onnx/importer.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "ir/op_registry.h"
#include "onnx/onnx.pb.h"
#include "onnx/tensor_proto.h"

namespace ingot::onnx {

namespace {

using FunctionMap = std::map<std::pair<std::string, std::string>, const ::onnx::FunctionProto*>;

struct Ctx {
  TensorSource source;
  FunctionMap functions;
  int inline_counter = 0;
  /// How deep inline_function is; the functions expanded_nodes is sizing, outermost first.
  int inline_depth = 0;
  std::vector<const ::onnx::FunctionProto*> sizing;
  /// Memo of expanded_nodes.
  std::map<const ::onnx::FunctionProto*, int64_t> expanded;
  int64_t inlined_nodes = 0;  // counted before (expanded_nodes)
  int64_t made_inlined = 0;   // made while inlining
  int64_t max_inlined_nodes = 0;
};

Result<ir::Shape> shape_from_proto(const ::onnx::TensorShapeProto& sp, const std::string& value_name) {
  std::vector<ir::Dim> dims;
  for (const auto& d : sp.dim()) {
    if (d.has_dim_value()) {
      if (d.dim_value() < 0)
        return invalid_model("value '", value_name, "' has a negative dim ", d.dim_value());
      dims.emplace_back(d.dim_value());
    } else if (d.has_dim_param() && !d.dim_param().empty()) {
      dims.push_back(ir::Dim::symbol(d.dim_param()));
    } else {
      dims.push_back(ir::Dim::unknown());
    }
  }
  return ir::Shape(std::move(dims));
}

// Applies a ValueInfoProto's type to a value (tensor types; others are noted by kind).
Status apply_value_info(const ::onnx::ValueInfoProto& vi, ir::Value* v) {
  if (!vi.has_type()) return Status::Ok();
  const auto& t = vi.type();
  if (t.has_tensor_type()) {
    const auto& tt = t.tensor_type();
    if (tt.elem_type() != 0) {
      if (!is_valid_data_type(tt.elem_type()))
        return invalid_model("value '", vi.name(), "' has unknown element type ", tt.elem_type());
      v->set_dtype(static_cast<DataType>(tt.elem_type()));
    }
    if (tt.has_shape()) {
      INGOT_ASSIGN_OR_RETURN(ir::Shape s, shape_from_proto(tt.shape(), vi.name()));
      v->set_shape(std::move(s));
    }
  } else if (t.has_sequence_type()) {
    v->set_non_tensor_kind("sequence");
  } else if (t.has_optional_type()) {
    v->set_non_tensor_kind("optional");
  } else if (t.has_map_type()) {
    v->set_non_tensor_kind("map");
  } else if (t.has_sparse_tensor_type()) {
    v->set_non_tensor_kind("sparse tensor");
  }
  return Status::Ok();
}

Status convert_graph(const ::onnx::GraphProto& gp, ir::Graph& g, Ctx& ctx);

Result<ir::Attribute> convert_attribute(const ::onnx::AttributeProto& ap, ir::Graph& owner, Ctx& ctx,
                                        const std::string& node_desc) {
  ir::Attribute a;
  using AP = ::onnx::AttributeProto;
  auto where = [&]() { return node_desc + " attribute '" + ap.name() + "'"; };
  switch (ap.type()) {
    case AP::FLOAT: a.type = ir::AttrType::kFloat; a.f = ap.f(); break;
    case AP::INT: a.type = ir::AttrType::kInt; a.i = ap.i(); break;
    case AP::STRING: a.type = ir::AttrType::kString; a.s = ap.s(); break;
    case AP::FLOATS: a.type = ir::AttrType::kFloats; a.floats.assign(ap.floats().begin(), ap.floats().end()); break;
    case AP::INTS: a.type = ir::AttrType::kInts; a.ints.assign(ap.ints().begin(), ap.ints().end()); break;
    case AP::STRINGS: a.type = ir::AttrType::kStrings; a.strings.assign(ap.strings().begin(), ap.strings().end()); break;
    case AP::TENSOR: {
      a.type = ir::AttrType::kTensor;
      auto t = tensor_from_proto(ap.t(), ctx.source);
      if (!t.ok()) return Status(t.status().code(), where() + ": " + t.status().message());
      a.t = std::move(t).value();
      break;
    }
    case AP::TENSORS: {
      a.type = ir::AttrType::kTensors;
      for (const auto& tp : ap.tensors()) {
        auto t = tensor_from_proto(tp, ctx.source);
        if (!t.ok()) return Status(t.status().code(), where() + ": " + t.status().message());
        a.tensors.push_back(std::move(t).value());
      }
      break;
    }
    case AP::GRAPH: {
      a.type = ir::AttrType::kGraph;
      a.g = std::make_shared<ir::Graph>(ap.g().name(), &owner);
      INGOT_RETURN_IF_ERROR(convert_graph(ap.g(), *a.g, ctx));
      break;
    }
    case AP::GRAPHS: {
      a.type = ir::AttrType::kGraphs;
      for (const auto& gp : ap.graphs()) {
        auto g = std::make_shared<ir::Graph>(gp.name(), &owner);
        INGOT_RETURN_IF_ERROR(convert_graph(gp, *g, ctx));
        a.graphs.push_back(std::move(g));
      }
      break;
    }
    case AP::SPARSE_TENSOR:
    case AP::SPARSE_TENSORS:
      return unsupported(where(), ": sparse tensor attributes are not supported");
    case AP::TYPE_PROTO:
    case AP::TYPE_PROTOS:
      return unsupported(where(), ": type-proto attributes are not supported");
    default:
      return invalid_model(where(), ": attribute type ", static_cast<int>(ap.type()), " is not valid");
  }
  return a;
}

Result<ir::Value*> resolve_input(ir::Graph& g, const std::string& name, const std::string& node_desc) {
  ir::Value* v = g.find_value(name);
  if (!v)
    return invalid_model(node_desc, ": input '", name,
                         "' is not a graph input, an initializer or the output of any node");
  return v;
}

Status add_node(const ::onnx::NodeProto& np, ir::Graph& g, Ctx& ctx);

const ::onnx::FunctionProto* find_function(const ::onnx::NodeProto& np, const Ctx& ctx) {
  auto it = ctx.functions.find({ir::canonical_domain(np.domain()), np.op_type()});
  return it == ctx.functions.end() ? nullptr : it->second;
}

Result<int64_t> expanded_nodes(const ::onnx::FunctionProto& fn, Ctx& ctx);

/// Nodes that converting `nodes` makes once calls to local functions are inlined, subgraphs (If,
/// Loop, Scan bodies) included; saturates just above the cap.
Result<int64_t> nodes_made(const google::protobuf::RepeatedPtrField<::onnx::NodeProto>& nodes, Ctx& ctx) {
  const int64_t cap = ctx.max_inlined_nodes + 1;
  int64_t total = 0;
  for (const auto& np : nodes) {
    int64_t n = 1;
    if (const ::onnx::FunctionProto* callee = find_function(np, ctx)) {
      INGOT_ASSIGN_OR_RETURN(n, expanded_nodes(*callee, ctx));
    } else {
      for (const auto& ap : np.attribute()) {
        if (ap.has_g()) {
          INGOT_ASSIGN_OR_RETURN(int64_t sub, nodes_made(ap.g().node(), ctx));
          n = std::min(n + sub, cap);
        }
        for (const auto& gp : ap.graphs()) {
          INGOT_ASSIGN_OR_RETURN(int64_t sub, nodes_made(gp.node(), ctx));
          n = std::min(n + sub, cap);
        }
      }
    }
    total = std::min(total + n, cap);
  }
  return total;
}

/// Nodes that inlining `fn` makes (nodes_made of its body, memoized). Refuses recursion and
/// absurd nesting before a single node is made.
Result<int64_t> expanded_nodes(const ::onnx::FunctionProto& fn, Ctx& ctx) {
  constexpr size_t kMaxNesting = 256;
  if (auto it = ctx.expanded.find(&fn); it != ctx.expanded.end()) return it->second;
  for (const ::onnx::FunctionProto* active : ctx.sizing) {
    if (active != &fn) continue;
    std::string chain;
    for (auto it = std::find(ctx.sizing.begin(), ctx.sizing.end(), &fn); it != ctx.sizing.end(); ++it)
      chain += (*it)->name() + " -> ";
    return invalid_model("model-local function '", fn.name(), "' calls itself (", chain, fn.name(),
                         "); ONNX functions must not be recursive");
  }
  if (ctx.sizing.size() >= kMaxNesting)
    return invalid_model("model-local functions nest deeper than ", kMaxNesting, " calls (at '", fn.name(), "')");
  ctx.sizing.push_back(&fn);
  auto total = nodes_made(fn.node(), ctx);
  ctx.sizing.pop_back();
  if (total.ok()) ctx.expanded[&fn] = *total;
  return total;
}

Status too_many_inlined_nodes(const Ctx& ctx, const std::string& at) {
  return invalid_model("inlining model-local functions would add more than ", ctx.max_inlined_nodes, " nodes (at ", at,
                       "); nested calls multiply, so check for functions that call others many times");
}

// Inlines a call to a model-local function: formal parameters bind to the caller's values,
// attribute references bind to the caller's attributes, internal names get a unique prefix.
Status inline_function(const ::onnx::NodeProto& call, const ::onnx::FunctionProto& fn, ir::Graph& g, Ctx& ctx) {
  if (ctx.inline_depth == 0) {
    // An outermost call: count the nodes it expands to before making any of them.
    INGOT_ASSIGN_OR_RETURN(int64_t nodes, expanded_nodes(fn, ctx));
    ctx.inlined_nodes += nodes;
    if (ctx.inlined_nodes > ctx.max_inlined_nodes) return too_many_inlined_nodes(ctx, "a call to '" + fn.name() + "'");
  }
  struct Depth {
    Ctx& c;
    explicit Depth(Ctx& ctx) : c(ctx) { ++c.inline_depth; }
    ~Depth() { --c.inline_depth; }
  } depth(ctx);
  std::string prefix = "_inl" + std::to_string(ctx.inline_counter++) + "_" + fn.name() + "/";
  std::map<std::string, std::string> rename;  // function name → graph name
  for (int i = 0; i < fn.input_size(); ++i)
    rename[fn.input(i)] = i < call.input_size() ? call.input(i) : "";
  for (int i = 0; i < fn.output_size(); ++i)
    rename[fn.output(i)] = i < call.output_size() ? call.output(i) : "";
  std::map<std::string, const ::onnx::AttributeProto*> call_attrs;
  for (const auto& a : call.attribute()) call_attrs[a.name()] = &a;
  std::map<std::string, const ::onnx::AttributeProto*> defaults;
  for (const auto& a : fn.attribute_proto()) defaults[a.name()] = &a;
  auto map_name = [&](const std::string& n) -> std::string {
    if (n.empty()) return n;
    auto it = rename.find(n);
    if (it != rename.end()) return it->second;
    return prefix + n;
  };
  for (const auto& body : fn.node()) {
    ::onnx::NodeProto n = body;
    n.set_name(prefix + body.name());
    for (int i = 0; i < n.input_size(); ++i) n.set_input(i, map_name(body.input(i)));
    for (int i = 0; i < n.output_size(); ++i) n.set_output(i, map_name(body.output(i)));
    n.clear_attribute();
    for (const auto& a : body.attribute()) {
      if (!a.ref_attr_name().empty()) {
        const ::onnx::AttributeProto* src = nullptr;
        if (call_attrs.count(a.ref_attr_name())) src = call_attrs[a.ref_attr_name()];
        else if (defaults.count(a.ref_attr_name())) src = defaults[a.ref_attr_name()];
        if (!src) continue;  // unset optional attribute: the op's default applies
        ::onnx::AttributeProto copy = *src;
        copy.set_name(a.name());
        *n.add_attribute() = copy;
      } else {
        *n.add_attribute() = a;
      }
    }
    INGOT_RETURN_IF_ERROR(add_node(n, g, ctx));
  }
  return Status::Ok();
}

Status add_node(const ::onnx::NodeProto& np, ir::Graph& g, Ctx& ctx) {
  std::string domain = ir::canonical_domain(np.domain());
  std::string desc = np.op_type() + (np.name().empty() ? std::string() : " '" + np.name() + "'");
  if (np.op_type().empty()) return invalid_model("a node", np.name().empty() ? "" : " '" + np.name() + "'", " has no op_type");
  if (const ::onnx::FunctionProto* fn = find_function(np, ctx)) return inline_function(np, *fn, g, ctx);

  std::vector<ir::Value*> inputs;
  for (const auto& in : np.input()) {
    if (in.empty()) {
      inputs.push_back(nullptr);
      continue;
    }
    INGOT_ASSIGN_OR_RETURN(ir::Value * v, resolve_input(g, in, desc));
    inputs.push_back(v);
  }
  std::vector<ir::Value*> outputs;
  for (const auto& out : np.output()) {
    if (out.empty()) {
      outputs.push_back(nullptr);
      continue;
    }
    ir::Value* existing = g.find_value(out);
    if (existing && existing->owner() == &g) {
      if (existing->producer() || existing->initializer() ||
          std::find(g.inputs().begin(), g.inputs().end(), existing) != g.inputs().end())
        return invalid_model(desc, ": output '", out, "' is already produced elsewhere (ONNX graphs are SSA)");
      outputs.push_back(existing);  // declared earlier through value_info
    } else {
      outputs.push_back(g.add_value(out));
    }
  }
  ir::Attributes attrs;
  for (const auto& ap : np.attribute()) {
    INGOT_ASSIGN_OR_RETURN(ir::Attribute a, convert_attribute(ap, g, ctx, desc));
    attrs.set(ap.name(), std::move(a));
  }
  // The count above is exact for what it can see; a graph attribute that a function body takes by
  // reference from its caller is not seen there, so the nodes made are counted as well.
  if (ctx.inline_depth > 0 && ++ctx.made_inlined > ctx.max_inlined_nodes) return too_many_inlined_nodes(ctx, desc);
  g.add_node(np.op_type(), inputs, outputs, std::move(attrs), np.name(), domain);
  return Status::Ok();
}

// Name → node index for producers, so node inputs can be resolved regardless of order.
Status convert_graph(const ::onnx::GraphProto& gp, ir::Graph& g, Ctx& ctx) {
  std::set<std::string> initializer_names;
  for (const auto& tp : gp.initializer()) {
    if (tp.name().empty()) return invalid_model("graph '", gp.name(), "' has an initializer without a name");
    auto t = tensor_from_proto(tp, ctx.source);
    if (!t.ok()) return t.status();
    if (!initializer_names.insert(tp.name()).second)
      return invalid_model("graph '", gp.name(), "': initializer '", tp.name(), "' appears twice");
    g.add_initializer(tp.name(), std::move(t).value());
  }
  if (gp.sparse_initializer_size() > 0)
    return unsupported("graph '", gp.name(), "': sparse initializers are not supported");
  for (const auto& vi : gp.input()) {
    if (vi.name().empty()) return invalid_model("graph '", gp.name(), "' has an input without a name");
    ir::Value* v = g.find_value(vi.name());
    if (v && v->owner() == &g && v->initializer()) {
      // An input that is also an initializer: the initializer is its default value.
      DataType dt = v->dtype();
      ir::Shape sh = v->shape();
      INGOT_RETURN_IF_ERROR(apply_value_info(vi, v));
      if (v->dtype() != dt)
        return invalid_model("graph input '", vi.name(), "' is declared ", data_type_name(v->dtype()),
                             " but its initializer is ", data_type_name(dt));
      v->set_shape(sh);
      g.add_input_existing(v);
      continue;
    }
    if (v && v->owner() == &g) return invalid_model("graph input '", vi.name(), "' is declared twice");
    ir::Value* in = g.add_input(vi.name(), DataType::kUndefined, ir::Shape::unknown_rank());
    INGOT_RETURN_IF_ERROR(apply_value_info(vi, in));
  }
  // Nodes may be listed in any order in malformed files; resolve producers first by adding
  // every output name, then connect. ONNX requires topological order, but we sort anyway
  // so a cycle becomes a clear error rather than a hang.
  for (const auto& np : gp.node()) {
    for (const auto& out : np.output()) {
      if (out.empty() || g.find_value(out)) continue;
      bool produced_by_function = find_function(np, ctx) != nullptr;
      if (!produced_by_function) g.add_value(out);
    }
  }
  for (const auto& np : gp.node()) INGOT_RETURN_IF_ERROR(add_node(np, g, ctx));
  for (const auto& vi : gp.value_info()) {
    ir::Value* v = g.find_value(vi.name());
    if (v && v->owner() == &g && !v->initializer()) INGOT_RETURN_IF_ERROR(apply_value_info(vi, v));
  }
  for (const auto& vi : gp.output()) {
    ir::Value* v = g.find_value(vi.name());
    if (!v) return invalid_model("graph output '", vi.name(), "' is not produced by any node, input or initializer");
    INGOT_RETURN_IF_ERROR(apply_value_info(vi, v));
    g.add_output(v);
  }
  // Values named by outputs but never produced (forward references of malformed files).
  for (const auto& np : gp.node())
    for (const auto& in : np.input()) {
      if (in.empty()) continue;
      ir::Value* v = g.find_value(in);
      if (v && !v->producer() && !v->initializer() && v->owner() == &g &&
          std::find(g.inputs().begin(), g.inputs().end(), v) == g.inputs().end())
        return invalid_model("node ", np.op_type(), np.name().empty() ? "" : " '" + np.name() + "'", ": input '", in,
                             "' is not a graph input, an initializer or the output of any node");
    }
  return g.topological_sort();
}

}  // namespace

Result<Model> import_model_bytes(const void* data, size_t size, const std::string& base_dir,
                                 const ImportOptions& options) {
  if (size > static_cast<size_t>(INT32_MAX))
    return invalid_model("model is ", size, " bytes; protobuf files are limited to 2 GiB (use external data)");
  auto proto = std::make_shared<::onnx::ModelProto>();
  if (!proto->ParseFromArray(data, static_cast<int>(size)))
    return invalid_model("not a valid ONNX model: protobuf parsing failed (truncated or corrupt file?)");
  if (!proto->has_graph()) return invalid_model("the ONNX model has no graph");
  Model m;
  m.ir_version = proto->ir_version();
  m.producer_name = proto->producer_name();
  m.producer_version = proto->producer_version();
  m.storage.push_back(proto);
  Ctx ctx;
  ctx.max_inlined_nodes = options.max_inlined_nodes;
  ctx.source.owner = proto;
  ctx.source.base_dir = base_dir;
  ctx.source.storage = &m.storage;
  for (const auto& f : proto->functions()) ctx.functions[{ir::canonical_domain(f.domain()), f.name()}] = &f;
  m.graph = std::make_unique<ir::Graph>(proto->graph().name().empty() ? "main" : proto->graph().name());
  for (const auto& op : proto->opset_import()) m.graph->set_opset_import(ir::canonical_domain(op.domain()), op.version());
  if (m.graph->opset("") == 0 && proto->opset_import_size() == 0) m.graph->set_opset_import("", 1);
  INGOT_RETURN_IF_ERROR(convert_graph(proto->graph(), *m.graph, ctx));
  if (options.infer_shapes) INGOT_RETURN_IF_ERROR(ir::infer_graph(*m.graph));
  return m;
}

namespace {
Result<std::string> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return make_status(StatusCode::kNotFound, "cannot open '", path, "'");
  std::ostringstream ss;
  ss << f.rdbuf();
  if (f.bad()) return make_status(StatusCode::kIoError, "error reading '", path, "'");
  return ss.str();
}
}  // namespace

Result<Model> import_model_file(const std::string& path, const ImportOptions& options) {
  INGOT_ASSIGN_OR_RETURN(std::string bytes, read_file(path));
  std::string dir = ".";
  auto slash = path.find_last_of('/');
  if (slash != std::string::npos) dir = path.substr(0, slash);
  auto r = import_model_bytes(bytes.data(), bytes.size(), dir, options);
  if (!r.ok()) return Status(r.status().code(), path + ": " + r.status().message());
  return r;
}

Result<Tensor> parse_tensor_proto(const void* data, size_t size, std::string* name) {
  auto proto = std::make_shared<::onnx::TensorProto>();
  if (!proto->ParseFromArray(data, static_cast<int>(size)))
    return invalid_model("not a valid TensorProto");
  if (name) *name = proto->name();
  TensorSource src;
  src.owner = proto;
  return tensor_from_proto(*proto, src);
}

Result<Tensor> load_tensor_proto_file(const std::string& path, std::string* name) {
  INGOT_ASSIGN_OR_RETURN(std::string bytes, read_file(path));
  return parse_tensor_proto(bytes.data(), bytes.size(), name);
}

}  // namespace ingot::onnx
