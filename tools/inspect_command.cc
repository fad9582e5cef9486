// Copyright ingot authors. Apache-2.0.
//
// `ingot inspect FILE`: what the optimizer did to a model (node tables before and after, op
// counts, pass notes), or what an engine holds (I/O, profiles, memory, steps); either as a
// Graphviz picture on request. For an engine with `--profile FILE.json` (from `ingot run
// --export-profile`) it also draws a per-step timing bar chart, as plain SVG written here.
#include "inspect_command.h"
#include "profile_diff.h"
#include "svg_text.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <set>
#include <sstream>

#include "file_io.h"
#include "ingot/engine.h"
#include "ingot/inspect.h"
#include "options.h"

extern char** environ;

namespace ingot::tools {

namespace {

struct InspectArgs {
  std::string file, dot_path, svg_path;
  std::string profile_path, timing_svg_path;  // --profile, --timing-svg
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
  Status s = write_file(path, text);
  if (!s.ok()) std::cerr << "ingot inspect: " << s.message() << "\n";
  return s.ok();
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

// ---- the timing chart ---------------------------------------------------------------------

struct TimedStep {
  int step = 0;
  std::string name, op, tactic, precision;
  double ms = 0, percent = 0;
};

// The profile's steps, checked against the engine's (same count, names and ops in order), so a
// profile of another engine is refused rather than drawn with the wrong labels.
bool read_profile(const std::string& path, const Engine& e, std::vector<TimedStep>& steps, int& runs,
                  std::string& err) {
  auto prof = read_profile_file(path);
  if (!prof.ok()) {
    err = prof.status().message();
    return false;
  }
  runs = prof->runs;
  const auto& el = e.layers();
  if (prof->steps.size() != el.size()) {
    err = "profile '" + path + "' has " + std::to_string(prof->steps.size()) + " steps, the engine has " +
          std::to_string(el.size()) + " (a profile of another engine?)";
    return false;
  }
  for (size_t i = 0; i < el.size(); ++i) {
    const ProfileStep& p = prof->steps[i];
    if (p.name != el[i].name || p.op != el[i].op) {
      err = "profile '" + path + "' does not match the engine: step " + std::to_string(i) + " is '" + p.name + "' (" +
            p.op + ") in the profile and '" + el[i].name + "' (" + el[i].op + ") in the engine";
      return false;
    }
    TimedStep t;
    t.step = static_cast<int>(i);
    t.name = p.name;
    t.op = p.op;
    t.tactic = p.tactic;
    t.precision = p.precision;
    t.ms = p.ms;
    steps.push_back(t);
  }
  double total = 0;
  for (const TimedStep& t : steps) total += t.ms;
  for (TimedStep& t : steps) t.percent = total > 0 ? 100.0 * t.ms / total : 0;
  return true;
}

std::string fixed(double v, int digits) {
  std::ostringstream ss;
  ss << std::fixed << std::setprecision(digits) << v;
  return ss.str();
}

// Enough digits to give the value back (for data-ms attributes).
std::string exact(double v) {
  std::ostringstream ss;
  ss << std::setprecision(10) << v;
  return ss.str();
}

// Milliseconds with about four significant digits.
std::string ms_text(double ms) { return ms == 0 ? "0" : fixed(ms, ms >= 100 ? 1 : ms >= 10 ? 2 : ms >= 1 ? 3 : 4); }

// Shortens to `n` characters (by code unit; names are ASCII in practice), marking the cut.
std::string clip(const std::string& s, size_t n) { return s.size() <= n ? s : s.substr(0, n - 3) + "..."; }

// Bar colour by the kind of work: convolutions, matrix products, attention, normalization, rest.
const char* op_colour(const std::string& op) {
  auto has = [&](const char* w) { return op.find(w) != std::string::npos; };
  if (has("Conv")) return "#4e79a7";
  if (has("Attention")) return "#b07aa1";
  if (has("Gemm") || has("MatMul")) return "#59a14f";
  if (has("Norm")) return "#f28e2b";
  return "#9c9c9c";
}

// One horizontal bar per step, longest first, each bar's width proportional to its time (the
// longest spans the plot), labelled "#step name  op  tactic" on the left and "ms  %" on the
// right. Every bar is a <rect class="bar" data-step data-ms> with a <title> tooltip.
std::string timing_svg(const std::string& title, const std::vector<TimedStep>& steps, int runs) {
  std::vector<TimedStep> sorted = steps;
  std::stable_sort(sorted.begin(), sorted.end(), [](const TimedStep& a, const TimedStep& b) { return a.ms > b.ms; });
  double total = 0, longest = 0;
  for (const TimedStep& t : sorted) total += t.ms, longest = std::max(longest, t.ms);
  // Label: "#step name" then, greyed, "op tactic precision".
  std::vector<std::string> heads, tails;
  size_t label_chars = 20;
  for (const TimedStep& t : sorted) {
    heads.push_back("#" + std::to_string(t.step) + " " + clip(t.name.empty() ? "-" : t.name, 40));
    tails.push_back(t.op + " " + clip(t.tactic, 36) +
                    (t.precision.empty() || t.precision == "-" ? "" : " " + t.precision));
    label_chars = std::max(label_chars, heads.back().size() + 1 + tails.back().size());
  }
  const double char_w = 7.3, row_h = 20, bar_h = 14, top = 84, plot_w = 560;
  const double label_w = 10 + char_w * static_cast<double>(label_chars);
  const double x0 = label_w + 10, width = x0 + plot_w + 170;
  const double height = top + row_h * static_cast<double>(sorted.size()) + 40;
  std::ostringstream os;
  os << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
     << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << fixed(width, 0) << "\" height=\"" << fixed(height, 0)
     << "\" viewBox=\"0 0 " << fixed(width, 0) << " " << fixed(height, 0)
     << "\" font-family=\"DejaVu Sans Mono, Menlo, Consolas, monospace\" font-size=\"12\">\n"
     << "<rect x=\"0\" y=\"0\" width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
     << "<text x=\"10\" y=\"22\" font-size=\"15\" font-weight=\"bold\">" << xml_escape(title) << "</text>\n"
     << "<text x=\"10\" y=\"42\" fill=\"#444\">time per step, longest first: " << sorted.size() << " steps, total "
     << ms_text(total) << " ms" << (runs > 0 ? " (median of " + std::to_string(runs) + " profiled runs)" : "")
     << "</text>\n";
  // Colour legend, under the subtitle.
  const std::pair<const char*, const char*> legend[] = {{"Conv", "Conv"},     {"Gemm", "GEMM/MatMul"},
                                                         {"Attention", "Attention"}, {"Norm", "Norm"},
                                                         {"", "other"}};
  double lx = 10;
  for (const auto& [op, label] : legend) {
    os << "<rect x=\"" << fixed(lx, 1) << "\" y=\"50\" width=\"12\" height=\"12\" fill=\"" << op_colour(op)
       << "\"/><text x=\"" << fixed(lx + 16, 1) << "\" y=\"60\" fill=\"#444\">" << label << "</text>\n";
    lx += 110;
  }
  // Grid at quarters of the longest step, with its time.
  for (int q = 0; q <= 4; ++q) {
    double x = x0 + plot_w * q / 4.0;
    os << "<line x1=\"" << fixed(x, 1) << "\" y1=\"" << fixed(top - 6, 0) << "\" x2=\"" << fixed(x, 1) << "\" y2=\""
       << fixed(top + row_h * sorted.size(), 0) << "\" stroke=\"#ddd\"/>\n"
       << "<text x=\"" << fixed(x, 1) << "\" y=\"" << fixed(top + row_h * sorted.size() + 16, 0)
       << "\" text-anchor=\"middle\" fill=\"#666\" font-size=\"10\">" << ms_text(longest * q / 4.0) << " ms</text>\n";
  }
  for (size_t i = 0; i < sorted.size(); ++i) {
    const TimedStep& t = sorted[i];
    double y = top + row_h * static_cast<double>(i);
    double w = longest > 0 ? plot_w * t.ms / longest : 0;
    std::string tip = heads[i] + " " + tails[i] + ": " + ms_text(t.ms) + " ms, " + fixed(t.percent, 1) + "%";
    os << "<text x=\"" << fixed(label_w, 1) << "\" y=\"" << fixed(y + bar_h - 3, 1) << "\" text-anchor=\"end\">"
       << xml_escape(heads[i]) << "<tspan dx=\"7\" fill=\"#777\">" << xml_escape(tails[i]) << "</tspan></text>\n"
       << "<rect class=\"bar\" data-step=\"" << t.step << "\" data-ms=\"" << exact(t.ms) << "\" x=\"" << fixed(x0, 1)
       << "\" y=\"" << fixed(y, 1) << "\" width=\"" << fixed(w, 3) << "\" height=\"" << fixed(bar_h, 0)
       << "\" fill=\"" << op_colour(t.op) << "\"><title>" << xml_escape(tip) << "</title></rect>\n"
       << "<text x=\"" << fixed(x0 + w + 6, 1) << "\" y=\"" << fixed(y + bar_h - 3, 1) << "\">" << ms_text(t.ms)
       << " ms  " << fixed(t.percent, 1) << "%</text>\n";
  }
  os << "</svg>\n";
  return os.str();
}

// "out.svg" -> "out.timing.svg" (any other name gets ".timing.svg" appended).
std::string timing_path_for(const std::string& svg) {
  if (ends_with(svg, ".svg")) return svg.substr(0, svg.size() - 4) + ".timing.svg";
  return svg + ".timing.svg";
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
  // The timing chart first: a bad profile fails before any output, and the chart needs no
  // Graphviz, so it is written even where the graph cannot be.
  std::string chart_note;
  if (!a.profile_path.empty()) {
    std::vector<TimedStep> steps;
    int runs = 0;
    std::string err;
    if (!read_profile(a.profile_path, *e, steps, runs, err)) {
      std::cerr << "ingot inspect: " << err << "\n";
      return 1;
    }
    std::string path = a.timing_svg_path.empty() ? timing_path_for(a.svg_path) : a.timing_svg_path;
    if (!write_text(path, timing_svg(a.file + " (" + e->backend() + ")", steps, runs))) return 1;
    double total = 0;
    for (const TimedStep& t : steps) total += t.ms;
    chart_note = "timing chart: " + path + " (" + std::to_string(steps.size()) + " steps, " + ms_text(total) +
                 " ms in all, from " + a.profile_path + ")\n";
  }
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
  os << "  " << cell("#", 3) << cell("op", op_w) << cell("name", name_w) << cell("tactic", tac_w) << cell("prec", 5)
     << cell("layout", 7) << "fuses\n";
  GraphReport g;
  for (const IoTensorDesc& d : e->io_tensors()) (d.is_input ? g.inputs : g.outputs).push_back(io_text[d.name]);
  for (size_t i = 0; i < e->layers().size(); ++i) {
    const LayerDesc& l = e->layers()[i];
    std::string f = fuses_text(l.name, l.origins);
    os << "  " << cell(std::to_string(i), 3) << cell(l.op, op_w) << cell(l.name.empty() ? "-" : l.name, name_w)
       << cell(l.tactic, tac_w) << cell(l.precision.empty() ? "-" : l.precision, 5)
       << cell(l.layout.empty() ? "-" : l.layout, 7) << (f.empty() ? "-" : f.substr(7)) << "\n";
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
  os << chart_note;
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
               "  --profile FILE.json per-step times from `ingot run ENGINE --export-profile FILE.json`\n"
               "                      (engines only): also draws a timing bar chart, one bar per step,\n"
               "                      longest first, to OUT.timing.svg next to --svg OUT.svg\n"
               "  --timing-svg FILE   where to write that chart instead (needs no --svg, no Graphviz)\n"
               "  --disable-pass NAME skip an optimizer pass (repeatable; models only)\n"
               "  --no-optimize       run no pass (models only)\n"
               "  --before-only       print only the table before optimization (models only)\n"
               "  --after-only        print only the table after optimization (models only)\n\n"
               "usage: ingot inspect --diff A.json B.json [--diff-svg OUT.svg]\n\n"
               "Two profiles (`ingot run ENGINE --export-profile FILE.json`, e.g. a baseline and a new\n"
               "build) step by step: matched by name, then by a shared fused origin, the largest change\n"
               "first, with the totals, tactics that changed and steps only in one of them; --diff-svg\n"
               "draws the 40 largest changes.\n";
}

int inspect_command(const std::vector<std::string>& args) {
  if (!args.empty() && args[0] == "--diff") {
    if (args.size() != 3 && !(args.size() == 5 && args[3] == "--diff-svg")) {
      std::cerr << "ingot inspect: --diff takes two profiles: --diff A.json B.json [--diff-svg OUT.svg]\n";
      return 2;
    }
    return profile_diff_command(args[1], args[2], args.size() == 5 ? args[4] : "", std::cout);
  }
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
    } else if (s == "--profile") {
      if (!value(a.profile_path)) return 2;
    } else if (s == "--timing-svg") {
      if (!value(a.timing_svg_path)) return 2;
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
  if (!a.timing_svg_path.empty() && a.profile_path.empty()) {
    std::cerr << "ingot inspect: --timing-svg draws the times of --profile FILE.json, which was not given\n";
    return 2;
  }
  if (!a.profile_path.empty() && a.svg_path.empty() && a.timing_svg_path.empty()) {
    std::cerr << "ingot inspect: --profile needs --svg OUT.svg (the chart goes to OUT.timing.svg) or --timing-svg "
                 "FILE\n";
    return 2;
  }
  if (!a.profile_path.empty() && ends_with(a.file, ".onnx")) {
    std::cerr << "ingot inspect: --profile applies to engines (per-step times of `ingot run ENGINE "
                 "--export-profile`), and '"
              << a.file << "' is an ONNX model\n";
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
  if (!a.profile_path.empty()) {
    std::cerr << "ingot inspect: --profile applies to engines, and '" << a.file << "' is an ONNX model\n";
    return 2;
  }
  return inspect_onnx(a);
}

}  // namespace ingot::tools
