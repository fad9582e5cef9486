// Copyright ingot authors. Apache-2.0.
#include "ingot/inspect.h"

#include <sstream>

#include "onnx/importer.h"
#include "passes/pass_manager.h"

namespace ingot {

namespace {

std::string tensor_text(const ir::Value* v) {
  if (!v) return "_";
  std::string s = v->name() + ": ";
  if (!v->non_tensor_kind().empty()) return s + v->non_tensor_kind();
  return s + data_type_name(v->dtype()) + v->shape().to_string();
}

std::string op_text(const ir::Node& n) {
  if (n.domain().empty() || n.domain() == "ai.onnx") return n.op_type();
  return n.domain() + "::" + n.op_type();
}

// Imported node name → op; names used twice (or empty) map to "?" since they do not say which.
using OpsByName = std::map<std::string, std::string>;

OpsByName ops_by_name(const ir::Graph& g) {
  OpsByName m;
  for (const auto& n : g.nodes()) {
    auto [it, fresh] = m.emplace(n->name(), op_text(*n));
    if (!fresh || n->name().empty()) it->second = "?";
  }
  return m;
}

GraphReport report_of(const ir::Graph& g, const OpsByName& imported_ops) {
  GraphReport r;
  for (const ir::Value* v : g.inputs())
    if (!v->initializer()) r.inputs.push_back(tensor_text(v));
  for (const ir::Value* v : g.outputs()) r.outputs.push_back(tensor_text(v));
  for (const auto& n : g.nodes()) {
    NodeRow row;
    row.name = n->name();
    row.op = op_text(*n);
    for (const ir::Value* v : n->inputs()) row.inputs.push_back(tensor_text(v));
    for (const ir::Value* v : n->outputs()) row.outputs.push_back(tensor_text(v));
    row.origins = n->origins();
    for (const std::string& o : row.origins) {
      auto it = imported_ops.find(o);
      row.origin_ops.push_back(it == imported_ops.end() ? "?" : it->second);
    }
    ++r.op_counts[row.op];
    r.nodes.push_back(std::move(row));
  }
  return r;
}

std::string tensor_name(const std::string& text) {
  size_t p = text.find(": ");
  return p == std::string::npos ? text : text.substr(0, p);
}

std::string tensor_type(const std::string& text) {
  size_t p = text.find(": ");
  return p == std::string::npos ? "" : text.substr(p + 2);
}

// A dot double-quoted string: backslash and quote escaped, newlines as centered line breaks.
std::string quote(const std::string& s) {
  std::string q = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') q += '\\';
    if (c == '\n') {
      q += "\\n";
      continue;
    }
    q += c;
  }
  return q + "\"";
}

}  // namespace

Result<ModelReport> inspect_model(const std::string& onnx_path, const InspectOptions& options) {
  INGOT_ASSIGN_OR_RETURN(onnx::Model model, onnx::import_model_file(onnx_path));
  ir::Graph& g = *model.graph;
  ModelReport report;
  report.opset = g.opset("");
  OpsByName imported = ops_by_name(g);
  report.before = report_of(g, imported);
  if (!options.optimize) {
    if (!options.disabled_passes.empty())
      return Status(StatusCode::kInvalidArgument, "disabled passes given with optimization off");
    report.after = report.before;
    return report;
  }
  passes::PipelineOptions popts;
  popts.disabled.insert(options.disabled_passes.begin(), options.disabled_passes.end());
  passes::PassContext ctx(popts.pass_options);
  passes::PassManager pm = passes::default_pipeline();
  Status st = pm.run(g, popts, ctx);
  if (!st.ok()) return Status(st.code(), onnx_path + ": " + st.message());
  report.after = report_of(g, imported);
  report.pass_notes = ctx.notes();
  return report;
}

std::string to_dot(const GraphReport& report, const std::string& title) {
  std::ostringstream os;
  os << "digraph " << quote(title) << " {\n"
     << "  label=" << quote(title) << ";\n  labelloc=t;\n  rankdir=TB;\n"
     << "  node [fontname=\"Helvetica\", fontsize=10];\n  edge [fontname=\"Helvetica\", fontsize=8];\n";
  // Where each tensor comes from: a node id or a graph input id.
  std::map<std::string, std::string> source;
  for (size_t i = 0; i < report.inputs.size(); ++i) {
    std::string id = "in" + std::to_string(i);
    source[tensor_name(report.inputs[i])] = id;
    os << "  " << id << " [shape=ellipse, style=filled, fillcolor=\"#dff0d8\", label="
       << quote(report.inputs[i]) << "];\n";
  }
  for (size_t i = 0; i < report.nodes.size(); ++i) {
    const NodeRow& n = report.nodes[i];
    std::string id = "n" + std::to_string(i);
    std::string label = n.op + (n.name.empty() ? "" : "\n" + n.name);
    bool fused = !n.origins.empty();
    if (fused) {
      // The absorbed op where known, else the origin's name.
      std::string joined;
      for (size_t k = 0; k < n.origins.size(); ++k) {
        std::string part = k < n.origin_ops.size() && n.origin_ops[k] != "?" ? n.origin_ops[k] : n.origins[k];
        joined += (joined.empty() ? "" : " + ") + (part.empty() ? "(unnamed)" : part);
      }
      label += "\n[" + joined + "]";
    }
    os << "  " << id << " [shape=box, style=\"rounded,filled\", fillcolor=" << (fused ? "\"#fce8b2\"" : "\"#e8eef7\"")
       << ", label=" << quote(label) << "];\n";
    for (const std::string& in : n.inputs) {
      auto it = source.find(tensor_name(in));
      if (it != source.end()) os << "  " << it->second << " -> " << id << " [label=" << quote(tensor_type(in)) << "];\n";
    }
    for (const std::string& out : n.outputs)
      if (out != "_") source[tensor_name(out)] = id;
  }
  for (size_t i = 0; i < report.outputs.size(); ++i) {
    std::string id = "out" + std::to_string(i);
    os << "  " << id << " [shape=ellipse, style=filled, fillcolor=\"#f2dede\", label=" << quote(report.outputs[i])
       << "];\n";
    auto it = source.find(tensor_name(report.outputs[i]));
    if (it != source.end())
      os << "  " << it->second << " -> " << id << " [label=" << quote(tensor_type(report.outputs[i])) << "];\n";
  }
  os << "}\n";
  return os.str();
}

}  // namespace ingot
