// Copyright ingot authors. Apache-2.0.
#include "profile_diff.h"

#include "svg_text.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "file_io.h"

namespace ingot::tools {

namespace {

std::string ms_text(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, ms == 0 ? "%.0f" : std::fabs(ms) >= 10 ? "%.2f" : "%.4f", ms);
  return buf;
}

std::string signed_ms(double ms) { return (ms > 0 ? "+" : "") + ms_text(ms); }

std::string label(const DiffRow& r) {
  if (r.a && r.b && (r.a->name != r.b->name || r.a->op != r.b->op))
    return r.a->name + " (" + r.a->op + ") -> " + r.b->name + " (" + r.b->op + ")";
  const ProfileStep& s = r.b ? *r.b : *r.a;
  return s.name + " (" + s.op + ")";
}

std::string tactic_text(const DiffRow& r) {
  if (r.a && r.b) return r.a->tactic == r.b->tactic ? r.a->tactic : r.a->tactic + " -> " + r.b->tactic;
  return r.a ? r.a->tactic + " (gone)" : r.b->tactic + " (new)";
}

// Pairs of bars (A grey above, B coloured below) for the `rows` with the largest changes, widths
// proportional to the times (the longest spans the plot), the change printed at the right.
std::string chart(const std::string& title, const std::vector<DiffRow>& rows, size_t limit) {
  const size_t n = std::min(rows.size(), limit);
  double longest = 0;
  for (size_t i = 0; i < n; ++i) longest = std::max({longest, rows[i].a ? rows[i].a->ms : 0, rows[i].b ? rows[i].b->ms : 0});
  const double label_w = 420, plot_w = 420, row_h = 22, top = 48;
  const double width = label_w + plot_w + 110, height = top + row_h * static_cast<double>(n) + 30;
  std::ostringstream s;
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
    << "\" font-family=\"sans-serif\" font-size=\"11\">\n"
    << "<text x=\"8\" y=\"18\" font-size=\"13\">" << xml_escape(title) << "</text>\n"
    << "<text x=\"8\" y=\"36\" fill=\"#555\">grey: A, blue: B (slower in red); the " << n
    << " steps whose time changed most</text>\n";
  for (size_t i = 0; i < n; ++i) {
    const DiffRow& r = rows[i];
    const double y = top + row_h * static_cast<double>(i);
    const double wa = longest > 0 && r.a ? plot_w * r.a->ms / longest : 0;
    const double wb = longest > 0 && r.b ? plot_w * r.b->ms / longest : 0;
    s << "<text x=\"8\" y=\"" << y + 14 << "\">" << xml_escape(label(r).substr(0, 64)) << "</text>\n"
      << "<rect class=\"a\" x=\"" << label_w << "\" y=\"" << y + 3 << "\" width=\"" << wa
      << "\" height=\"7\" fill=\"#9c9c9c\" data-ms=\"" << (r.a ? r.a->ms : 0) << "\"/>\n"
      << "<rect class=\"b\" x=\"" << label_w << "\" y=\"" << y + 11 << "\" width=\"" << wb << "\" height=\"7\" fill=\""
      << (r.delta_ms() > 0 ? "#e15759" : "#4e79a7") << "\" data-ms=\"" << (r.b ? r.b->ms : 0) << "\"><title>"
      << xml_escape(label(r) + ": " + tactic_text(r)) << "</title></rect>\n"
      << "<text x=\"" << label_w + plot_w + 8 << "\" y=\"" << y + 14 << "\">" << signed_ms(r.delta_ms())
      << " ms</text>\n";
  }
  s << "</svg>\n";
  return s.str();
}

}  // namespace

Result<Profile> read_profile_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status(StatusCode::kIoError, "cannot open profile '" + path + "'");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(f);
  } catch (const nlohmann::json::exception& e) {
    return Status(StatusCode::kInvalidArgument, "profile '" + path + "': malformed JSON (" + e.what() + ")");
  }
  if (!j.is_object() || !j.contains("layers") || !j["layers"].is_array())
    return Status(StatusCode::kInvalidArgument,
                  "profile '" + path + "' has no \"layers\" array (write it with ingot run ENGINE --export-profile FILE)");
  Profile prof;
  if (j.contains("profilingRuns") && j["profilingRuns"].is_number()) prof.runs = j["profilingRuns"].get<int>();
  if (j.contains("timing") && j["timing"].is_string()) prof.timing = j["timing"].get<std::string>();
  std::vector<ProfileStep>& steps = prof.steps;
  for (size_t i = 0; i < j["layers"].size(); ++i) {
    const nlohmann::json& l = j["layers"][i];
    if (!l.is_object() || !l.contains("medianMs") || !l["medianMs"].is_number() || l["medianMs"].get<double>() < 0 ||
        !l.contains("name") || !l["name"].is_string())
      return Status(StatusCode::kInvalidArgument, "profile '" + path + "': step " + std::to_string(i) +
                                                      " has no \"name\" or no \"medianMs\" number >= 0");
    ProfileStep s;
    auto str = [&](const char* key) { return l.contains(key) && l[key].is_string() ? l[key].get<std::string>() : ""; };
    s.name = str("name");
    s.op = str("op");
    s.tactic = str("tactic");
    s.precision = str("precision");
    s.ms = l["medianMs"].get<double>();
    if (l.contains("origins") && l["origins"].is_array())
      for (const auto& o : l["origins"])
        if (o.is_string()) s.origins.push_back(o.get<std::string>());
    steps.push_back(std::move(s));
  }
  return prof;
}

std::vector<DiffRow> diff_profiles(const std::vector<ProfileStep>& a, const std::vector<ProfileStep>& b) {
  std::vector<const ProfileStep*> partner(a.size(), nullptr);
  std::vector<bool> b_used(b.size(), false);
  // Three passes, each over what the earlier left: the same name and op; a model node among both
  // steps' origins (a step renamed because what it fuses changed; the same op first); the same
  // name alone.
  auto pass = [&](const std::function<bool(const ProfileStep&, const ProfileStep&)>& same) {
    for (size_t i = 0; i < a.size(); ++i) {
      if (partner[i]) continue;
      for (size_t j = 0; j < b.size(); ++j)
        if (!b_used[j] && same(a[i], b[j])) {
          b_used[j] = true;
          partner[i] = &b[j];
          break;
        }
    }
  };
  auto shares_origin = [](const ProfileStep& x, const ProfileStep& y) {
    std::set<std::string> mine(x.origins.begin(), x.origins.end());
    mine.insert(x.name);
    if (mine.count(y.name)) return true;
    for (const std::string& o : y.origins)
      if (mine.count(o)) return true;
    return false;
  };
  pass([](const ProfileStep& x, const ProfileStep& y) { return x.name == y.name && x.op == y.op; });
  pass([&](const ProfileStep& x, const ProfileStep& y) { return x.op == y.op && shares_origin(x, y); });
  pass(shares_origin);
  pass([](const ProfileStep& x, const ProfileStep& y) { return x.name == y.name; });
  std::vector<DiffRow> rows;
  for (size_t i = 0; i < a.size(); ++i) rows.push_back({&a[i], partner[i]});
  for (size_t j = 0; j < b.size(); ++j)
    if (!b_used[j]) rows.push_back({nullptr, &b[j]});
  std::stable_sort(rows.begin(), rows.end(),
                   [](const DiffRow& x, const DiffRow& y) { return std::fabs(x.delta_ms()) > std::fabs(y.delta_ms()); });
  return rows;
}

int profile_diff_command(const std::string& a_path, const std::string& b_path, const std::string& svg_path,
                         std::ostream& os) {
  auto pa = read_profile_file(a_path);
  auto pb = pa.ok() ? read_profile_file(b_path) : Result<Profile>(pa.status());
  if (!pa.ok() || !pb.ok()) {
    std::cerr << "ingot inspect: " << (pa.ok() ? pb.status() : pa.status()).message() << "\n";
    return 1;
  }
  const std::vector<ProfileStep>* a = &pa->steps;
  const std::vector<ProfileStep>* b = &pb->steps;
  const std::vector<DiffRow> rows = diff_profiles(*a, *b);
  double ta = 0, tb = 0;
  for (const ProfileStep& s : *a) ta += s.ms;
  for (const ProfileStep& s : *b) tb += s.ms;
  char head[256];
  std::snprintf(head, sizeof head, "%.4f ms (%zu steps) -> %.4f ms (%zu steps): %s ms (%+.1f%%)", ta, a->size(), tb,
                b->size(), signed_ms(tb - ta).c_str(), ta > 0 ? 100.0 * (tb - ta) / ta : 0.0);
  os << "profile diff: A " << a_path << "\n              B " << b_path << "\ntotal " << head << "\n";
  // Device times (a graph replay) and host times (enqueue to a synchronize, per step) differ by
  // the host's share, so a step-by-step diff across the two would show changes nobody made.
  auto basis = [](const std::string& t) { return t.empty() ? std::string("host") : t.substr(0, t.find(':')); };
  if (basis(pa->timing) != basis(pb->timing))
    os << "warning: A's steps are timed on the " << basis(pa->timing) << ", B's on the " << basis(pb->timing)
       << ": their times are not comparable step by step (profile both with the same ingot and engine kind)\n";
  os << "\n";
  char line[512];
  std::snprintf(line, sizeof line, "%10s %10s %10s  %-48s %s\n", "change ms", "A ms", "B ms", "step (op)", "tactic");
  os << line;
  int tactics_changed = 0;
  std::vector<const DiffRow*> appeared, gone;
  for (const DiffRow& r : rows) {
    if (r.a && r.b && r.a->tactic != r.b->tactic) ++tactics_changed;
    if (!r.a) appeared.push_back(&r);
    if (!r.b) gone.push_back(&r);
    std::snprintf(line, sizeof line, "%10s %10s %10s  %-48s %s\n", signed_ms(r.delta_ms()).c_str(),
                  r.a ? ms_text(r.a->ms).c_str() : "-", r.b ? ms_text(r.b->ms).c_str() : "-", label(r).c_str(),
                  tactic_text(r).c_str());
    os << line;
  }
  os << "\n" << rows.size() - appeared.size() - gone.size() << " steps in both, " << tactics_changed
     << " with another tactic; " << appeared.size() << " only in B, " << gone.size() << " only in A\n";
  for (const DiffRow* r : appeared) os << "  only in B: " << label(*r) << "  " << ms_text(r->b->ms) << " ms\n";
  for (const DiffRow* r : gone) os << "  only in A: " << label(*r) << "  " << ms_text(r->a->ms) << " ms\n";
  if (!svg_path.empty()) {
    Status s = write_file(svg_path, chart("profile diff: total " + std::string(head), rows, 40));
    if (!s.ok()) {
      std::cerr << "ingot inspect: " << s.message() << "\n";
      return 1;
    }
    os << "diff chart: " << svg_path << "\n";
  }
  return 0;
}

}  // namespace ingot::tools
