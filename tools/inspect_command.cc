// Copyright ingot authors. Apache-2.0.
//
// `ingot inspect FILE`: what the optimizer did to a model (node tables before and after, op
// counts, pass notes), or what an engine holds (I/O, profiles, memory, steps); either as a
// Graphviz picture on request.
#include "inspect_command.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <set>
#include <sstream>

#include "ingot/engine.h"
#include "ingot/inspect.h"
#include "options.h"

extern char** environ;

namespace ingot::tools {

namespace {

struct InspectArgs {
  std::string file, dot_path, svg_path;
  InspectOptions model;
  bool before = true, after = true;
  bool model_only_flags = false;  // a flag that means nothing for an engine was given
};

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// `s` left-aligned in `width` columns, always followed by two spaces (long names push on).
std::string cell(const std::string& s, size_t width) {
  return s + std::string(s.size() < width ? width - s.size() + 2 : 2, ' ');
}

std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

// A fused node's "fuses: a, b, c", or "" for a node standing for itself.
std::string fuses_text(const std::string& name, const std::vector<std::string>& origins) {
  if (origins.empty() || (origins.size() == 1 && origins[0] == name)) return "";
  std::vector<std::string> shown;
  for (const auto& o : origins) shown.push_back(o.empty() ? "(unnamed)" : o);
  return "fuses: " + join(shown, ", ");
}

void print_table(std::ostream& os, const std::string& heading, const GraphReport& g) {
  os << heading << " (" << g.nodes.size() << " nodes):\n";
  size_t op_w = 2, name_w = 4;
  for (const NodeRow& n : g.nodes) {
    op_w = std::max(op_w, n.op.size());
    name_w = std::max(name_w, n.name.size());
  }
  op_w = std::min<size_t>(op_w, 28);
  name_w = std::min<size_t>(name_w, 32);
  os << "  " << cell("#", 3) << cell("op", op_w) << cell("name", name_w) << "inputs -> outputs\n";
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const NodeRow& n = g.nodes[i];
    os << "  " << cell(std::to_string(i), 3) << cell(n.op, op_w) << cell(n.name.empty() ? "-" : n.name, name_w)
       << join(n.inputs, ", ") << " -> " << join(n.outputs, ", ");
    std::string f = fuses_text(n.name, n.origins);
    if (!f.empty()) os << "   " << f;
    os << "\n";
  }
}

void print_counts(std::ostream& os, const GraphReport& before, const GraphReport& after) {
  std::set<std::string> ops;
  for (const auto& kv : before.op_counts) ops.insert(kv.first);
  for (const auto& kv : after.op_counts) ops.insert(kv.first);
  size_t w = 5;
  for (const auto& op : ops) w = std::max(w, op.size());
  auto count = [](const GraphReport& g, const std::string& op) {
    auto it = g.op_counts.find(op);
    return it == g.op_counts.end() ? 0 : it->second;
  };
  os << "op counts (before -> after):\n";
  for (const auto& op : ops)
    os << "  " << std::left << std::setw(w + 2) << op << std::right << std::setw(5) << count(before, op) << " -> "
       << std::setw(5) << count(after, op) << "\n";
  os << "  " << std::left << std::setw(w + 2) << "total" << std::right << std::setw(5) << before.nodes.size() << " -> "
     << std::setw(5) << after.nodes.size() << "\n";
}

bool write_text(const std::string& path, const std::string& text) {
  if (path == "-") {
    std::cout << text;
    return true;
  }
  std::ofstream f(path, std::ios::binary);
  f << text;
  f.close();
  if (!f) {
    std::cerr << "ingot inspect: cannot write '" << path << "'\n";
    return false;
  }
  return true;
}

bool on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::stringstream ss(path ? path : "");
  std::string dir;
  while (std::getline(ss, dir, ':'))
    if (!dir.empty() && access((dir + "/" + program).c_str(), X_OK) == 0) return true;
  return false;
}

// Renders dot text to an SVG file with Graphviz's `dot`, run directly (no shell, so paths
// need no quoting).
bool write_svg(const std::string& path, const std::string& dot_text) {
  if (!on_path("dot")) {
    std::cerr << "ingot inspect: --svg needs Graphviz 'dot' on PATH (install graphviz, or write --dot FILE.dot)\n";
    return false;
  }
  char tmpl[] = "/tmp/ingot-inspect-XXXXXX";
  int fd = mkstemp(tmpl);
  if (fd < 0) {
    std::cerr << "ingot inspect: cannot create a temporary file for dot\n";
    return false;
  }
  ssize_t left = static_cast<ssize_t>(dot_text.size());
  const char* p = dot_text.data();
  while (left > 0) {
    ssize_t n = write(fd, p, static_cast<size_t>(left));
    if (n <= 0) break;
    p += n;
    left -= n;
  }
  close(fd);
  std::string in = tmpl, out = path;
  std::vector<char*> argv = {const_cast<char*>("dot"), const_cast<char*>("-Tsvg"), const_cast<char*>("-o"),
                             out.data(), in.data(), nullptr};
  pid_t pid;
  int status = -1;
  bool ok = left == 0 && posix_spawnp(&pid, "dot", nullptr, nullptr, argv.data(), environ) == 0 &&
            waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  std::remove(tmpl);
  if (!ok) std::cerr << "ingot inspect: Graphviz 'dot -Tsvg' failed writing '" << path << "'\n";
  return ok;
}

bool draw(const InspectArgs& a, const GraphReport& g, const std::string& title) {
  if (a.dot_path.empty() && a.svg_path.empty()) return true;
  std::string text = to_dot(g, title);
  if (!a.dot_path.empty() && !write_text(a.dot_path, text)) return false;
  if (!a.svg_path.empty() && !write_svg(a.svg_path, text)) return false;
  return true;
}

int inspect_onnx(const InspectArgs& a) {
  auto r = inspect_model(a.file, a.model);
  if (!r.ok()) {
    std::cerr << "ingot inspect: " << r.status().to_string() << "\n";
    return 1;
  }
  const ModelReport& m = *r;
  // With --dot - the picture owns stdout.
  std::ostream& os = (a.dot_path == "-") ? std::cerr : std::cout;
  os << a.file << ": ONNX model, opset " << m.opset << ", " << m.before.nodes.size() << " nodes, "
     << m.after.nodes.size() << " after optimization" << (a.model.optimize ? "" : " (optimization off)") << "\n";
  os << "inputs:  " << join(m.before.inputs, ", ") << "\noutputs: " << join(m.before.outputs, ", ") << "\n\n";
  if (a.before) {
    print_table(os, "before optimization", m.before);
    os << "\n";
  }
  if (a.after) {
    print_table(os, "after optimization", m.after);
    os << "\n";
  }
  print_counts(os, m.before, m.after);
  os << "\npass notes" << (m.pass_notes.empty() ? ": none" : ":") << "\n";
  for (const auto& n : m.pass_notes) os << "  " << n << "\n";
  return draw(a, m.after, a.file + " (optimized)") ? 0 : 1;
}

std::string dims_text(const std::vector<int64_t>& dims, const std::vector<std::string>& names) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ",";
    if (dims[i] >= 0) s += std::to_string(dims[i]);
    else s += (i < names.size() && !names[i].empty()) ? names[i] : "?";
  }
  return s + "]";
}

int inspect_engine(const InspectArgs& a, const std::shared_ptr<Engine>& e) {
  std::ostream& os = (a.dot_path == "-") ? std::cerr : std::cout;
  os << a.file << ": ingot engine, backend " << e->backend() << ", " << e->layers().size() << " steps, "
     << e->num_profiles() << " profile" << (e->num_profiles() == 1 ? "" : "s") << "\n";
  std::map<std::string, std::string> io_text;
  for (bool inputs : {true, false}) {
    os << (inputs ? "inputs:\n" : "outputs:\n");
    for (const IoTensorDesc& d : e->io_tensors()) {
      if (d.is_input != inputs) continue;
      std::string t = std::string(data_type_name(d.dtype)) + dims_text(d.shape, d.dim_names);
      io_text[d.name] = d.name + ": " + t;
      os << "  " << d.name << "  " << t << "\n";
    }
  }
  os << "profiles:\n";
  bool any_open = false;
  for (int p = 0; p < e->num_profiles(); ++p)
    for (const IoTensorDesc& d : e->io_tensors()) {
      if (!d.is_input || std::find(d.shape.begin(), d.shape.end(), -1) == d.shape.end()) continue;
      std::vector<int64_t> mn, opt, mx;
      Status st = e->profile_dimensions(p, d.name, &mn, &opt, &mx);
      if (!st.ok()) continue;
      any_open = true;
      os << "  " << p << "  " << d.name << "  min " << dims_to_string(mn) << "  opt " << dims_to_string(opt)
         << "  max " << dims_to_string(mx) << "\n";
    }
  if (!any_open) os << "  (every input fixed)\n";
  MemoryFigures m = e->memory();
  os << "memory:\n"
     << "  arena            " << human_bytes(m.arena_bytes) << " per context (" << m.arena_bytes << " B)\n"
     << "  lower bound      " << human_bytes(m.lower_bound_bytes) << " (" << m.lower_bound_bytes
     << " B, largest sum of live activations)\n"
     << "  weights          " << human_bytes(m.weight_bytes) << " shared\n"
     << "  workspace        " << human_bytes(m.workspace_bytes) << "\n";
  os << "steps:\n";
  size_t op_w = 2, name_w = 4, tac_w = 6;
  for (const LayerDesc& l : e->layers()) {
    op_w = std::max(op_w, l.op.size());
    name_w = std::min<size_t>(32, std::max(name_w, l.name.size()));
    tac_w = std::max(tac_w, l.tactic.size());
  }
  os << "  " << cell("#", 3) << cell("op", op_w) << cell("name", name_w) << cell("tactic", tac_w) << "fuses\n";
  GraphReport g;
  for (const IoTensorDesc& d : e->io_tensors()) (d.is_input ? g.inputs : g.outputs).push_back(io_text[d.name]);
  for (size_t i = 0; i < e->layers().size(); ++i) {
    const LayerDesc& l = e->layers()[i];
    std::string f = fuses_text(l.name, l.origins);
    os << "  " << cell(std::to_string(i), 3) << cell(l.op, op_w) << cell(l.name.empty() ? "-" : l.name, name_w)
       << cell(l.tactic, tac_w) << (f.empty() ? "-" : f.substr(7)) << "\n";
    NodeRow row;
    row.name = l.name;
    row.op = l.op;
    row.origins = f.empty() ? std::vector<std::string>{} : l.origins;
    auto with_type = [&](const std::string& t) {
      auto it = io_text.find(t);
      return it == io_text.end() ? t : it->second;
    };
    for (const auto& t : l.inputs) row.inputs.push_back(with_type(t));
    for (const auto& t : l.outputs) row.outputs.push_back(with_type(t));
    g.nodes.push_back(std::move(row));
  }
  return draw(a, g, a.file) ? 0 : 1;
}

}  // namespace

void inspect_help() {
  std::cout << "usage: ingot inspect FILE.onnx|FILE.engine [options]\n\n"
               "An ONNX model: the node table before and after the builder's optimizer (op, name,\n"
               "inputs -> outputs with dtype and shape, what each fused node absorbed), op counts\n"
               "before -> after, and the notes passes left (refusals and counts).\n"
               "An engine: backend, inputs and outputs, profiles, memory figures and the step list.\n\n"
               "options:\n"
               "  --dot FILE          write the graph (optimized model, or engine steps) as Graphviz text\n"
               "                      (FILE '-' is stdout; the report then goes to stderr)\n"
               "  --svg FILE          render it to SVG with Graphviz 'dot' from PATH\n"
               "  --disable-pass NAME skip an optimizer pass (repeatable; models only)\n"
               "  --no-optimize       run no pass (models only)\n"
               "  --before-only       print only the table before optimization (models only)\n"
               "  --after-only        print only the table after optimization (models only)\n";
}

int inspect_command(const std::vector<std::string>& args) {
  InspectArgs a;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& s = args[i];
    auto value = [&](std::string& out) {
      if (i + 1 >= args.size()) {
        std::cerr << "ingot inspect: " << s << " needs a value\n";
        return false;
      }
      out = args[++i];
      return true;
    };
    std::string v;
    if (s == "-h" || s == "--help") {
      inspect_help();
      return 0;
    } else if (s == "--dot") {
      if (!value(a.dot_path)) return 2;
    } else if (s == "--svg") {
      if (!value(a.svg_path)) return 2;
    } else if (s == "--disable-pass") {
      if (!value(v)) return 2;
      a.model.disabled_passes.push_back(v);
      a.model_only_flags = true;
    } else if (s == "--no-optimize") {
      a.model.optimize = false;
      a.model_only_flags = true;
    } else if (s == "--before-only") {
      a.after = false;
      a.model_only_flags = true;
    } else if (s == "--after-only") {
      a.before = false;
      a.model_only_flags = true;
    } else if (!s.empty() && s[0] == '-') {
      std::cerr << "ingot inspect: unknown option '" << s << "' (see ingot inspect --help)\n";
      return 2;
    } else if (a.file.empty()) {
      a.file = s;
    } else {
      std::cerr << "ingot inspect: unexpected argument '" << s << "'\n";
      return 2;
    }
  }
  if (a.file.empty()) {
    std::cerr << "ingot inspect: need a model or engine file (see ingot inspect --help)\n";
    return 2;
  }
  if (!a.before && !a.after) {
    std::cerr << "ingot inspect: --before-only and --after-only exclude each other\n";
    return 2;
  }
  if (!std::ifstream(a.file)) {
    std::cerr << "ingot inspect: cannot open '" << a.file << "'\n";
    return 1;
  }
  if (ends_with(a.file, ".onnx")) return inspect_onnx(a);
  // An engine by name, or any other file that loads as one; else try it as a model.
  Runtime runtime;
  auto e = runtime.deserialize_file(a.file);
  if (e.ok()) {
    if (a.model_only_flags) {
      std::cerr << "ingot inspect: --disable-pass, --no-optimize, --before-only and --after-only apply to ONNX "
                   "models, and '"
                << a.file << "' is an engine\n";
      return 2;
    }
    return inspect_engine(a, *e);
  }
  if (ends_with(a.file, ".engine")) {
    std::cerr << "ingot inspect: " << e.status().to_string() << "\n";
    return 1;
  }
  auto m = inspect_model(a.file, a.model);
  if (!m.ok()) {
    std::cerr << "ingot inspect: '" << a.file << "' is neither an ingot engine nor an ONNX model ("
              << e.status().message() << "; as ONNX: " << m.status().message() << ")\n";
    return 1;
  }
  return inspect_onnx(a);
}

}  // namespace ingot::tools
