// Copyright ingot authors. Apache-2.0.
#include "builder/autotune.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <set>
#include <sstream>

#include "backend/device.h"
#include "ir/text.h"

namespace ingot::builder {

namespace {

constexpr const char* kMagic = "ingot-timing-cache 1";

// Tabs and newlines would break the line format: escape them (and the escape itself).
std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\') out += "\\\\";
    else if (c == '\t') out += "\\t";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size()) {
      char c = s[++i];
      out += c == 't' ? '\t' : c == 'n' ? '\n' : c;
    } else {
      out += s[i];
    }
  }
  return out;
}

void append_shape(std::ostringstream& os, DataType t, const Shape64& s) {
  os << data_type_name(t) << "[";
  for (size_t i = 0; i < s.size(); ++i) os << (i ? "," : "") << s[i];
  os << "]";
}

void append_attr(std::ostringstream& os, const ir::Attribute& a) {
  switch (a.type) {
    case ir::AttrType::kFloat: {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.9g", a.f);
      os << buf;
      break;
    }
    case ir::AttrType::kInt: os << a.i; break;
    case ir::AttrType::kString: os << '"' << a.s << '"'; break;
    case ir::AttrType::kInts:
      for (int64_t x : a.ints) os << x << ",";
      break;
    case ir::AttrType::kFloats:
      for (float x : a.floats) os << x << ",";
      break;
    case ir::AttrType::kStrings:
      for (const auto& x : a.strings) os << '"' << x << "\",";
      break;
    case ir::AttrType::kGraph:
      if (a.g) os << "{" << ir::to_text(*a.g, 64) << "}";
      break;
    case ir::AttrType::kTensor:
      os << "tensor";
      append_shape(os, a.t.dtype(), a.t.shape());
      for (int64_t i = 0; i < std::min<int64_t>(a.t.numel(), 64); ++i)
        if (a.t.dtype() != DataType::kString) os << "," << a.t.get_f64(i);
      break;
    default: os << attr_type_name(a.type); break;
  }
}

}  // namespace

Status TimingCache::load(const std::string& path, std::string* warning) {
  std::ifstream f(path);
  if (!f) return Status::Ok();  // no cache yet
  std::string line;
  if (!std::getline(f, line) || line != kMagic) {
    if (warning) *warning = "timing cache '" + path + "' is not an ingot timing cache of this version; starting empty";
    return Status::Ok();
  }
  int bad = 0;
  while (std::getline(f, line)) {
    size_t a = line.find('\t');
    size_t b = a == std::string::npos ? a : line.find('\t', a + 1);
    if (b == std::string::npos) {
      ++bad;
      continue;
    }
    char* end = nullptr;
    std::string ms_text = line.substr(b + 1);
    double ms = std::strtod(ms_text.c_str(), &end);
    if (!end || *end != '\0' || !std::isfinite(ms) || ms < 0) {
      ++bad;
      continue;
    }
    entries_[unescape(line.substr(0, a))][unescape(line.substr(a + 1, b - a - 1))] = ms;
  }
  if (bad && warning) *warning = "timing cache '" + path + "': skipped " + std::to_string(bad) + " malformed lines";
  return Status::Ok();
}

Status TimingCache::save(const std::string& path) const {
  std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    if (!f) return make_status(StatusCode::kIoError, "cannot write timing cache '", tmp, "'");
    f << kMagic << "\n";
    for (const auto& [key, times] : entries_)
      for (const auto& [tactic, ms] : times) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.6g", ms);
        f << escape(key) << "\t" << escape(tactic) << "\t" << buf << "\n";
      }
    if (!f) return make_status(StatusCode::kIoError, "cannot write timing cache '", tmp, "'");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    return make_status(StatusCode::kIoError, "cannot replace timing cache '", path, "'");
  return Status::Ok();
}

const std::map<std::string, double>* TimingCache::find(const std::string& key) const {
  auto it = entries_.find(key);
  return it == entries_.end() ? nullptr : &it->second;
}

std::string timing_key(const std::string& identity, const ir::Node& node, const std::vector<DataType>& in_types,
                       const std::vector<Shape64>& in_shapes, const std::vector<DataType>& out_types,
                       const std::vector<Shape64>& out_shapes) {
  std::ostringstream os;
  os << identity << "|" << (node.domain().empty() ? "" : node.domain() + "::") << node.op_type() << "|";
  for (const auto& [name, a] : node.attrs().all()) {
    os << name << "=";
    append_attr(os, a);
    os << ";";
  }
  os << "|in:";
  for (size_t i = 0; i < in_types.size(); ++i) {
    if (in_types[i] == DataType::kUndefined) os << "-";
    else append_shape(os, in_types[i], i < in_shapes.size() ? in_shapes[i] : Shape64{});
    // Weights decide some tactics' support (constant shapes, indices): mark them.
    if (node.inputs()[i] && node.inputs()[i]->initializer()) os << "w";
    os << " ";
  }
  os << "|out:";
  for (size_t i = 0; i < out_types.size(); ++i) {
    append_shape(os, out_types[i], i < out_shapes.size() ? out_shapes[i] : Shape64{});
    os << " ";
  }
  return os.str();
}

int candidates_for_level(int level) {
  switch (level) {
    case 0:
    case 1: return 1;
    case 2: return 2;
    case 3: return 4;
    case 4: return 8;
    default: return 1 << 20;
  }
}

namespace {

// Device buffers for timing one step: several sets of inputs and outputs, one workspace.
class TimingBuffers {
 public:
  explicit TimingBuffers(backend::Device& d) : device_(d) {}
  ~TimingBuffers() {
    for (void* p : owned_) device_.release(p);
  }
  Result<void*> allocate(size_t bytes) {
    INGOT_ASSIGN_OR_RETURN(void* p, device_.allocate(std::max<size_t>(bytes, 256)));
    owned_.push_back(p);
    return p;
  }

 private:
  backend::Device& device_;
  std::vector<void*> owned_;
};

}  // namespace

void fill_timing_input(Tensor& t) {
  const int64_t n = t.numel();
  const int64_t block = std::min<int64_t>(n, kTimingPatternElements);
  std::mt19937 rng(1234);
  std::uniform_real_distribution<double> u(-1, 1);
  for (int64_t k = 0; k < block; ++k) {
    const double x = u(rng);
    t.set_f64(k, std::copysign(0.01 + 0.99 * std::fabs(x), x));  // never zero, also in fp8
  }
  // The rest repeats the first block's bytes: the values stay random to any kernel, and a batch-128
  // activation (10^8 elements) costs a memcpy instead of ~2 s of generator calls per timed step.
  const size_t pattern = storage_bytes(t.dtype(), block), total = t.nbytes();
  auto* bytes = static_cast<uint8_t*>(t.mutable_raw());
  for (size_t off = pattern; off < total; off += pattern) std::memcpy(bytes + off, bytes, std::min(pattern, total - off));
}

std::string tactic_family(const std::string& name) {
  size_t end = name.size();
  while (end > 0 && std::isdigit(static_cast<unsigned char>(name[end - 1]))) --end;
  if (end < name.size() && end > 0 && name[end - 1] == '.') --end;
  return name.substr(0, end);
}

std::vector<size_t> considered_candidates(const std::vector<std::unique_ptr<backend::Tactic>>& cands, size_t width) {
  std::vector<size_t> out;
  std::set<std::string> families;
  for (size_t i = 0; i < cands.size() && i < width; ++i) {
    out.push_back(i);
    families.insert(tactic_family(cands[i]->name()));
  }
  if (width < 2) return out;
  for (size_t i = width; i < cands.size(); ++i) {
    if (!cands[i]->capturable()) continue;
    if (families.insert(tactic_family(cands[i]->name())).second) out.push_back(i);
  }
  return out;
}

Result<size_t> choose_tactic(const backend::Backend& be, const ir::Node& node,
                             std::vector<std::unique_ptr<backend::Tactic>>& cands, const std::string& key,
                             const std::vector<Shape64>& in_shapes, const std::vector<Shape64>& out_shapes,
                             const TuneOptions& options, TimingCache& cache, TuneStats& stats) {
  const size_t width =
      std::min<size_t>(cands.size(), static_cast<size_t>(candidates_for_level(options.optimization_level)));
  // The considered candidates first (the rest keep their order behind them); indices below and the
  // one returned refer to the reordered list.
  const std::vector<size_t> pick = considered_candidates(cands, width);
  if (pick.size() > width) {
    std::vector<bool> taken(cands.size(), false);
    std::vector<std::unique_ptr<backend::Tactic>> reordered;
    for (size_t i : pick) {
      reordered.push_back(std::move(cands[i]));
      taken[i] = true;
    }
    for (size_t i = 0; i < cands.size(); ++i)
      if (!taken[i]) reordered.push_back(std::move(cands[i]));
    cands = std::move(reordered);
  }
  size_t n = pick.size();
  if (n == 0 || (n == 1 && !options.time_single)) return 0;
  // What the cache knows decides when it knows every candidate considered.
  const std::map<std::string, double>* known = cache.find(key);
  // Host-synchronizing candidates only count when nothing else is there (see below).
  bool any_capturable = false;
  for (size_t i = 0; i < n; ++i) any_capturable |= cands[i]->capturable();
  bool all_known = known != nullptr;
  for (size_t i = 0; i < n && all_known; ++i)
    if (cands[i]->capturable() || !any_capturable) all_known = known->count(cands[i]->name()) > 0;
  std::vector<double> ms(n, INFINITY);
  if (all_known) {
    ++stats.cache_hits;
    for (size_t i = 0; i < n; ++i)
      if (known->count(cands[i]->name())) ms[i] = known->at(cands[i]->name());
  } else {
    backend::Device& dev = be.device();
    if (dev.is_host()) return 0;
    TimingBuffers buffers(dev);
    // Input data: weights as they are, floats random in [-1, 1], integers and bools zero (valid
    // indices for Gather-like ops).
    std::vector<Tensor> host_inputs(node.inputs().size());
    uint64_t set_bytes = 0;
    for (size_t i = 0; i < node.inputs().size(); ++i) {
      const ir::Value* v = node.inputs()[i];
      if (!v) continue;
      if (v->initializer()) {
        host_inputs[i] = *v->initializer();
      } else {
        INGOT_ASSIGN_OR_RETURN(host_inputs[i], Tensor::zeros(v->dtype(), in_shapes[i]));
        if (is_float(v->dtype())) fill_timing_input(host_inputs[i]);
      }
      if (host_inputs[i].dtype() == DataType::kString) return 0;
      set_bytes += host_inputs[i].nbytes();
    }
    for (size_t o = 0; o < node.outputs().size(); ++o)
      if (node.outputs()[o]) set_bytes += storage_bytes(node.outputs()[o]->dtype(), shape_numel(out_shapes[o]));
    // Enough copies to exceed a large L2 (H100/H200: 50-60 MB), at most 8 and ~2 GB.
    const uint64_t kRotate = 128ull << 20;
    size_t sets = static_cast<size_t>(std::clamp<uint64_t>((kRotate + set_bytes - 1) / std::max<uint64_t>(set_bytes, 1),
                                                           1, 8));
    while (sets > 1 && sets * set_bytes > (2ull << 30)) --sets;
    uint64_t ws = 0;
    for (size_t i = 0; i < n; ++i) ws = std::max(ws, cands[i]->workspace_bytes(node, in_shapes));
    ws = std::min(ws, options.workspace_limit);
    void* workspace = nullptr;
    if (ws) {
      INGOT_ASSIGN_OR_RETURN(workspace, buffers.allocate(ws));
    }
    std::vector<std::vector<Tensor>> in_views(sets), out_views(sets);
    std::vector<backend::StepIO> ios(sets);
    for (size_t s = 0; s < sets; ++s) {
      in_views[s].resize(node.inputs().size());
      for (size_t i = 0; i < node.inputs().size(); ++i) {
        if (!node.inputs()[i]) continue;
        const Tensor& h = host_inputs[i];
        INGOT_ASSIGN_OR_RETURN(void* p, buffers.allocate(h.nbytes()));
        INGOT_RETURN_IF_ERROR(dev.copy_to_device(p, h.raw(), h.nbytes(), nullptr));
        in_views[s][i] = Tensor::borrow(h.dtype(), h.shape(), p, nullptr);
      }
      for (size_t o = 0; o < node.outputs().size(); ++o) {
        const ir::Value* v = node.outputs()[o];
        if (!v) {
          out_views[s].emplace_back();
          continue;
        }
        INGOT_ASSIGN_OR_RETURN(void* p, buffers.allocate(storage_bytes(v->dtype(), shape_numel(out_shapes[o]))));
        out_views[s].push_back(Tensor::borrow(v->dtype(), out_shapes[o], p, nullptr));
      }
      ios[s].node = &node;
      for (size_t i = 0; i < node.inputs().size(); ++i)
        ios[s].inputs.push_back(node.inputs()[i] ? &in_views[s][i] : nullptr);
      ios[s].outputs = &out_views[s];
      ios[s].workspace = workspace;
    }
    INGOT_RETURN_IF_ERROR(dev.synchronize(nullptr));
    const int runs = options.optimization_level >= 5 ? 20 : 10;
    // Once one candidate is timed, each next one first runs once (after one warm-up, which also
    // builds its plans): one far slower than the best so far keeps that single measurement and
    // is not timed in full. At large batches the slow candidates (CUDA-core convolutions, the
    // other layout) took most of the build; a 4x margin leaves the single run's noise no say.
    constexpr double kCutShort = 4.0;
    double best_ms = std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < n; ++i) best_ms = std::min(best_ms, ms[i]);
    // Tactics that synchronize with the host (the CUDA host fallback) are timed only when no
    // other candidate ran: they are never the fastest, and timing them at a large batch is slow.
    bool any_timed = false;
    for (int pass = 0; pass < 2 && !any_timed; ++pass)
    for (size_t i = 0; i < n; ++i) {
      if (cands[i]->capturable() != (pass == 0)) continue;
      if (cands[i]->workspace_bytes(node, in_shapes) > ws) continue;
      if (known && known->count(cands[i]->name())) {
        ms[i] = known->at(cands[i]->name());
        best_ms = std::min(best_ms, ms[i]);
        any_timed = true;
        continue;
      }
      if (!cands[i]->prepare(node).ok()) {
        ++stats.failed;
        continue;
      }
      if (std::isfinite(best_ms)) {
        auto once = be.time_enqueue(*cands[i], ios, 1, 1, options.timing);
        if (!once.ok()) {
          ++stats.failed;
          continue;
        }
        if (*once > kCutShort * best_ms) {
          ++stats.timed;
          ++stats.cut_short;
          any_timed = true;
          ms[i] = *once;
          cache.put(key, cands[i]->name(), *once);
          continue;
        }
      }
      auto t = be.time_enqueue(*cands[i], ios, 3, runs, options.timing);
      if (t.status().code() == StatusCode::kUnsupported && i == 0) return 0;
      if (!t.ok()) {
        ++stats.failed;
        continue;
      }
      ++stats.timed;
      any_timed = true;
      ms[i] = *t;
      best_ms = std::min(best_ms, *t);
      cache.put(key, cands[i]->name(), *t);
    }
  }
  size_t best = 0;
  for (size_t i = 1; i < n; ++i)
    if (ms[i] < ms[best]) best = i;
  if (!std::isfinite(ms[best])) return 0;  // nothing could be timed: keep the first guess
  return best;
}

}  // namespace ingot::builder
