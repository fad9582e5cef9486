// Copyright ingot authors. Apache-2.0.
#include "benchmark.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <sstream>
#include <thread>

#include "device_io.h"
#include "file_io.h"
#include "ingot/inspect.h"

namespace ingot::tools {

namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// Bytes per element; 0 for sub-byte, string and unknown dtypes (their sizes are
// left "-").
int64_t dtype_bytes(DataType t) {
  switch (t) {
  case DataType::kFloat64:
  case DataType::kInt64:
  case DataType::kUInt64:
  case DataType::kComplex64:
    return 8;
  case DataType::kComplex128:
    return 16;
  case DataType::kFloat32:
  case DataType::kInt32:
  case DataType::kUInt32:
    return 4;
  case DataType::kFloat16:
  case DataType::kBFloat16:
  case DataType::kInt16:
  case DataType::kUInt16:
    return 2;
  case DataType::kUInt8:
  case DataType::kInt8:
  case DataType::kBool:
  case DataType::kFloat8E4M3FN:
  case DataType::kFloat8E4M3FNUZ:
  case DataType::kFloat8E5M2:
  case DataType::kFloat8E5M2FNUZ:
  case DataType::kFloat8E8M0:
    return 1;
  default:
    return 0;
  }
}

int64_t numel(const std::vector<int64_t> &d) {
  int64_t n = 1;
  for (int64_t x : d)
    n *= x;
  return n;
}

bool parse_number(const std::string &v, double &out) {
  if (v.empty())
    return false;
  char *end = nullptr;
  out = std::strtod(v.c_str(), &end);
  return end == v.c_str() + v.size() && std::isfinite(out);
}

// ---- statistics
// -------------------------------------------------------------------------

double median(std::vector<double> v) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Nearest-rank percentile of sorted values (as trtexec reports them).
double percentile(const std::vector<double> &sorted, double p) {
  if (sorted.empty())
    return 0;
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * sorted.size()));
  return sorted[std::min(sorted.size() - 1, rank ? rank - 1 : 0)];
}

struct Stats {
  double min = 0, max = 0, mean = 0, median = 0;
  std::vector<double> pct;
};

Stats stats_of(std::vector<double> v, const std::vector<double> &percentiles) {
  Stats s;
  if (v.empty())
    return s;
  std::sort(v.begin(), v.end());
  s.min = v.front();
  s.max = v.back();
  double sum = 0;
  for (double x : v)
    sum += x;
  s.mean = sum / v.size();
  s.median = median(v);
  for (double p : percentiles)
    s.pct.push_back(percentile(v, p));
  return s;
}

std::string pct_label(double p) {
  std::ostringstream ss;
  ss << p;
  return ss.str();
}

// ---- running
// ----------------------------------------------------------------------------

struct Iteration {
  int stream = 0;
  double start_ms = 0;   // since the timed loop began
  double latency_ms = 0; // enqueue to results ready
  double enqueue_ms = 0; // host time inside enqueue
  // cuda engines, from CUDA events on the stream (0 on cpu engines):
  double h2d_ms = 0, compute_ms = 0, d2h_ms = 0;
};

struct StreamRun {
  std::unique_ptr<ExecutionContext> ctx;
  std::unique_ptr<IoBuffers> io; // after ctx: freed first
  std::unique_ptr<GpuEvent> events[4];
  std::vector<Iteration> iterations;
  Status status = Status::Ok();
  double first_query_ms = -1;  ///< host wall time of the first warm-up query (tactics' lazy setup)
  double back_to_back_ms = -1; ///< per query, of --back-to-back N queries between two events
};

// One trial of --back-to-back: ms for n queries enqueued with no synchronize between them.
Result<double> back_to_back_trial(StreamRun &run, bool transfers, int n) {
  IoBuffers &io = *run.io;
  void *stream = io.stream();
  const bool gpu = io.on_device();
  auto t0 = Clock::now();
  Status s = gpu ? run.events[0]->record(stream) : Status::Ok();
  for (int i = 0; s.ok() && i < n; ++i) {
    if (transfers && gpu)
      s = io.copy_inputs_to_device();
    if (s.ok())
      s = gpu ? run.ctx->enqueue(stream) : run.ctx->enqueue(nullptr);
    if (s.ok() && transfers && gpu)
      s = io.copy_outputs_to_host();
  }
  if (s.ok() && gpu)
    s = run.events[3]->record(stream);
  if (s.ok())
    s = io.synchronize();
  if (!s.ok())
    return s;
  double ms = ms_between(t0, Clock::now());
  if (gpu) {
    auto t = run.events[3]->elapsed_since(*run.events[0]);
    if (!t.ok())
      return t.status();
    ms = *t;
  }
  return ms;
}

// --back-to-back: N queries with no synchronize between them, timed by two events on the stream
// (the host clock on CPU engines, whose enqueue is synchronous); the time per query, the median of
// kTrials such trials.
Status back_to_back(StreamRun &run, bool transfers, int n) {
  constexpr int kTrials = 5;
  std::vector<double> per;
  for (int t = 0; t < kTrials; ++t) {
    auto ms = back_to_back_trial(run, transfers, n);
    if (!ms.ok())
      return ms.status();
    per.push_back(*ms / n);
  }
  std::sort(per.begin(), per.end());
  run.back_to_back_ms = per[per.size() / 2];
  return Status::Ok();
}

// Each stream warms up, waits for all others, then runs the timed loop; so the
// timed windows overlap and the aggregate throughput counts only concurrent
// work.
// One query on a cuda engine, as trtexec times it: events around the H2D copies, the enqueue
// and the D2H copies on the stream; latency is the first event to the last.
Status gpu_query(StreamRun &run, bool transfers, Iteration &it) {
  IoBuffers &io = *run.io;
  GpuEvent *ev[4] = {run.events[0].get(), run.events[1].get(),
                     run.events[2].get(), run.events[3].get()};
  void *stream = io.stream();
  Status s = ev[0]->record(stream);
  if (s.ok() && transfers)
    s = io.copy_inputs_to_device();
  if (s.ok())
    s = ev[1]->record(stream);
  if (!s.ok())
    return s;
  auto e0 = Clock::now();
  s = run.ctx->enqueue(stream);
  it.enqueue_ms = ms_between(e0, Clock::now());
  if (s.ok())
    s = ev[2]->record(stream);
  if (s.ok() && transfers)
    s = io.copy_outputs_to_host();
  if (s.ok())
    s = ev[3]->record(stream);
  if (s.ok())
    s = io.synchronize();
  if (!s.ok())
    return s;
  float ms[3] = {0, 0, 0};
  for (int k = 0; k < 3; ++k) {
    auto t = ev[k + 1]->elapsed_since(*ev[k]);
    if (!t.ok())
      return t.status();
    ms[k] = *t;
  }
  it.h2d_ms = ms[0];
  it.compute_ms = ms[1];
  it.d2h_ms = ms[2];
  it.latency_ms = ms[0] + ms[1] + ms[2];
  return Status::Ok();
}

// Each stream warms up, waits for all others, then runs the timed loop; so the
// timed windows overlap and the aggregate throughput counts only concurrent
// work.
void stream_loop(int index, StreamRun &run, const BenchmarkOptions &opt,
                 std::atomic<int> &ready, std::atomic<bool> &go,
                 const Clock::time_point *start, std::atomic<bool> &failed) {
  bool gpu = run.io->on_device();
  bool transfers = !opt.no_data_transfers;
  Iteration scratch;
  auto warm_start = Clock::now();
  for (int i = 0; i < opt.warmup_runs ||
                  ms_between(warm_start, Clock::now()) < opt.warmup_ms;
       ++i) {
    if (failed)
      break;
    auto q0 = Clock::now();
    run.status = gpu ? gpu_query(run, transfers, scratch)
                     : run.ctx->enqueue(nullptr);
    if (!run.status.ok()) {
      failed = true;
      break;
    }
    if (i == 0)  // the query synchronizes before returning (events / host engine)
      run.first_query_ms = ms_between(q0, Clock::now());
  }
  ready.fetch_add(1);
  while (!go)
    std::this_thread::yield();
  if (failed)
    return;
  run.iterations.reserve(static_cast<size_t>(opt.iterations));
  for (int i = 0;; ++i) {
    auto now = Clock::now();
    if (i >= opt.iterations &&
        ms_between(*start, now) >= opt.duration_s * 1000.0)
      break;
    Iteration it;
    it.stream = index;
    it.start_ms = ms_between(*start, now);
    Status s = Status::Ok();
    if (gpu) {
      s = gpu_query(run, transfers, it);
    } else {
      s = run.ctx->enqueue(nullptr);
      // CPU enqueue is synchronous: results are ready when it returns.
      it.latency_ms = it.enqueue_ms = ms_between(now, Clock::now());
    }
    if (!s.ok()) {
      run.status = s;
      failed = true;
      return;
    }
    run.iterations.push_back(it);
  }
  if (opt.back_to_back > 0) {
    Status s = back_to_back(run, !opt.no_data_transfers, opt.back_to_back);
    if (!s.ok()) {
      run.status = s;
      failed = true;
    }
  }
}

class ShapeRecorder : public TensorListener {
public:
  explicit ShapeRecorder(KnownTensors &out) : out_(out) {}
  void on_tensor(int, const char *name, DataType dtype,
                 const std::vector<int64_t> &dims,
                 const void *) noexcept override {
    out_[name] = KnownTensor{dtype, dims, true};
  }

private:
  KnownTensors &out_;
};

class LayerTimes : public Profiler {
public:
  explicit LayerTimes(size_t layers) : times_(layers), enqueue_times_(layers) {}
  void report_layer_time(int index, const char *, float ms) noexcept override {
    if (index >= 0 && static_cast<size_t>(index) < times_.size())
      times_[index].push_back(ms);
  }
  void report_layer_enqueue_time(int index, const char *, float ms) noexcept override {
    if (index >= 0 && static_cast<size_t>(index) < enqueue_times_.size())
      enqueue_times_[index].push_back(ms);
  }
  const std::vector<std::vector<double>> &times() const { return times_; }
  const std::vector<std::vector<double>> &enqueue_times() const { return enqueue_times_; }

private:
  std::vector<std::vector<double>> times_, enqueue_times_;
};

// ---- per-layer figures
// -----------------------------------------------------------------

struct LayerRow {
  int index = 0;
  const LayerDesc *layer = nullptr;
  double median_ms = 0, percent = 0;
  double enqueue_ms = -1;        // median host time in the step's enqueue; -1: not reported
  double flops = -1, bytes = -1; // -1: unknown
  std::string precision;         // "f16", "tf32", ...; "-" when unknown
  double floor_ms = -1;          // roofline time floor; -1: unknown (CPU engines)
  double roofline_percent() const {
    return floor_ms < 0 || median_ms <= 0 ? -1 : 100.0 * floor_ms / median_ms;
  }
};

// ---- roofline
// -------------------------------------------------------------------------

// Peak rates of a GPU arch, the denominators of "% of roofline": a step's time
// floor is max(flops / peak_flops(precision), bytes / memory bandwidth).
struct PeakRates {
  int sm;
  double f16_tflops;  // fp16/bf16 tensor cores, dense (no sparsity)
  double tf32_tflops; // TF32 tensor cores, dense
  double f32_tflops;  // plain fp32 FMA (CUDA cores)
  double mem_tbps;    // device memory bandwidth, TB/s
};

// Where the numbers come from:
// - sm_90 (H100/H200): fp16/bf16 790 TFLOP/s and 4.3 TB/s were measured on our
//   H200 (a large cuBLASLt fp16 GEMM and a device-to-device copy; GPU.md and
//   issue 7, 2026-11-29) and stand below the datasheet's 989 TFLOP/s and
//   4.8 TB/s. TF32 ~400: the datasheet's dense TF32 rate is half the fp16 one
//   (494 vs 989), applied to the measured 790. FP32 ~60: the H100 SXM
//   datasheet's 67 TFLOP/s, rounded down to what sustained FMA loops reach.
// - sm_80 (A100 SXM): NVIDIA's datasheet (fp16 312, tf32 156, fp32 19.5
//   TFLOP/s, HBM2e 2.0 TB/s); not measured by us.
// An arch not listed gets "-" in the roofline column.
constexpr PeakRates kPeaks[] = {
    {90, 790, 400, 60, 4.3},
    {80, 312, 156, 19.5, 2.0},
};

const PeakRates *peaks_for(int sm) {
  for (const PeakRates &p : kPeaks)
    if (p.sm == sm)
      return &p;
  return nullptr;
}

// FLOP/s of `precision` on `p`; 0 when the table has no rate for it.
double peak_flops(const PeakRates &p, const std::string &precision) {
  if (precision == "f16" || precision == "bf16")
    return p.f16_tflops * 1e12;
  if (precision == "tf32")
    return p.tf32_tflops * 1e12;
  if (precision == "f32")
    return p.f32_tflops * 1e12;
  return 0;
}

// A tensor's known shape and type; for weights the builder rewrote (its precision pass
// names a converted weight "<w>/f16" or "/bf16", its layout pass a channels-last conv weight
// "<w>/krsc"), those of the model's weight they came from: a conv's multiply-adds per output
// channel and its element count do not change with the layout. (Without this, FusedConv steps
// of fp16 or channels-last engines had no FLOPs in the profile.)
const KnownTensor *find(const KnownTensors &k, const std::string &name) {
  std::string n = name;
  for (;;) {
    auto it = k.find(n);
    if (it != k.end())
      return &it->second;
    bool stripped = false;
    for (const char *suffix : {"/krsc", "/f16", "/bf16"}) {
      const size_t len = std::char_traits<char>::length(suffix);
      if (n.size() > len && n.compare(n.size() - len, len, suffix) == 0) {
        n.resize(n.size() - len);
        stripped = true;
        break;
      }
    }
    if (!stripped)
      return nullptr;
  }
}

std::string base_op(const std::string &op) {
  auto p = op.rfind("::");
  return p == std::string::npos ? op : op.substr(p + 2);
}

// Multiply-adds counted as 2 FLOPs; bias and activation epilogues are not
// counted.
double layer_flops(const LayerDesc &l, const KnownTensors &k) {
  std::string op = base_op(l.op);
  if (l.outputs.empty())
    return -1;
  const KnownTensor *out = find(k, l.outputs[0]);
  if (!out)
    return -1;
  double out_n = static_cast<double>(numel(out->dims));
  const KnownTensor *a = !l.inputs.empty() ? find(k, l.inputs[0]) : nullptr;
  const KnownTensor *b = l.inputs.size() > 1 ? find(k, l.inputs[1]) : nullptr;
  if (op == "Conv" || op == "FusedConv") {
    // W is [Cout, Cin/group, k...]: each output element takes Cin/group *
    // prod(k) multiply-adds.
    if (!b || b->dims.size() < 3 || b->dims[0] <= 0)
      return -1;
    return 2.0 * out_n * static_cast<double>(numel(b->dims) / b->dims[0]);
  }
  bool gemm = op == "Gemm" || op == "FusedGemm";
  if (!gemm && op != "MatMul" && op != "FusedMatMul")
    return -1;
  // Every output element is a dot product of length K; K comes from A, else
  // from B. Gemm's transposes are not visible through the API, but in 2-D the
  // output dims tell which dim is K; N-D (MatMul, FusedGemm of kind "matmul")
  // never transposes.
  int64_t kdim = -1;
  const auto &od = out->dims;
  bool two_d = gemm && od.size() == 2;
  if (a && !a->dims.empty()) {
    const auto &d = a->dims;
    kdim = two_d && d.size() == 2 ? (d[0] == od[0] ? d[1] : d[0]) : d.back();
  } else if (b && !b->dims.empty()) {
    const auto &d = b->dims;
    if (two_d && d.size() == 2)
      kdim = d[1] == od[1] ? d[0] : d[1];
    else
      kdim = d.size() >= 2 ? d[d.size() - 2] : d[0];
  }
  return kdim < 0 ? -1 : 2.0 * out_n * static_cast<double>(kdim);
}

// Bytes a step reads and writes. `precision` is the step's (layer_precision):
// an fp32 weight known only from the model file counts at 2 bytes in an
// f16/bf16 step, since the builder stores the weights of a reduced-precision
// step in that precision.
double layer_bytes(const LayerDesc &l, const KnownTensors &k,
                   const std::string &precision) {
  bool half = precision == "f16" || precision == "bf16";
  double total = 0;
  for (const auto *list : {&l.inputs, &l.outputs})
    for (const std::string &name : *list) {
      if (name.empty())
        continue; // omitted optional input
      const KnownTensor *t = find(k, name);
      if (!t || dtype_bytes(t->dtype) == 0)
        return -1;
      int64_t size = dtype_bytes(t->dtype);
      if (half && !t->from_run && t->dtype == DataType::kFloat32)
        size = 2;
      total += static_cast<double>(numel(t->dims) * size);
    }
  return total;
}

std::string fmt(double v, int precision) {
  if (v < 0)
    return "-";
  std::ostringstream ss;
  ss << std::fixed << std::setprecision(precision) << v;
  return ss.str();
}

std::string json_escape(const std::string &s) {
  std::string r;
  for (char c : s) {
    if (c == '"' || c == '\\')
      r += '\\', r += c;
    else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      r += buf;
    } else
      r += c;
  }
  return r;
}

std::string json_num(double v) {
  if (v < 0 || !std::isfinite(v))
    return "null";
  std::ostringstream ss;
  ss << std::setprecision(9) << v;
  return ss.str();
}

Status write_times(const std::string &path, const std::vector<Iteration> &its) {
  std::ostringstream ss;
  ss << "[\n";
  for (size_t i = 0; i < its.size(); ++i)
    ss << "  {\"stream\": " << its[i].stream
       << ", \"startMs\": " << json_num(its[i].start_ms)
       << ", \"latencyMs\": " << json_num(its[i].latency_ms)
       << ", \"enqueueMs\": " << json_num(its[i].enqueue_ms)
       << ", \"h2dMs\": " << json_num(its[i].h2d_ms)
       << ", \"computeMs\": " << json_num(its[i].compute_ms)
       << ", \"d2hMs\": " << json_num(its[i].d2h_ms) << "}"
       << (i + 1 < its.size() ? ",\n" : "\n");
  ss << "]\n";
  return write_file(path, ss.str());
}

// The precision a step computes in: the dtype of its first floating-point
// input seen in the run (else from the model file; else its first output's),
// "tf32" for an fp32 step on a TF32 tactic.
std::string layer_precision(const LayerDesc &l, const KnownTensors &k) {
  DataType t = DataType::kUndefined;
  for (bool run_only : {true, false}) {
    for (const std::string &name : l.inputs) {
      const KnownTensor *x = name.empty() ? nullptr : find(k, name);
      if (x && (x->from_run || !run_only) &&
          (x->dtype == DataType::kFloat32 || x->dtype == DataType::kFloat16 ||
           x->dtype == DataType::kBFloat16 || x->dtype == DataType::kFloat64)) {
        t = x->dtype;
        break;
      }
    }
    if (t != DataType::kUndefined)
      break;
  }
  if (t == DataType::kUndefined && !l.outputs.empty())
    if (const KnownTensor *y = find(k, l.outputs[0]))
      t = y->dtype;
  if (t == DataType::kUndefined)
    return "-";
  if (t == DataType::kFloat32 && l.tactic.find(".tf32.") != std::string::npos)
    return "tf32";
  return data_type_name(t);
}

// Time floor in ms of a step on `p`; -1 when no figure is known, or when FLOPs
// are known but the table has no rate for the step's precision.
double floor_ms(const LayerRow &r, const PeakRates &p) {
  double t = -1;
  if (r.bytes >= 0)
    t = r.bytes / (p.mem_tbps * 1e12);
  if (r.flops > 0) {
    double rate = peak_flops(p, r.precision);
    if (rate <= 0)
      return -1;
    t = std::max(t, r.flops / rate);
  }
  return t < 0 ? -1 : t * 1000.0;
}

std::vector<LayerRow> layer_rows(const Engine &engine, const LayerTimes &prof,
                                 const KnownTensors &known,
                                 const PeakRates *peaks) {
  std::vector<LayerRow> rows;
  double total = 0;
  for (size_t i = 0; i < engine.layers().size(); ++i) {
    LayerRow r;
    r.index = static_cast<int>(i);
    r.layer = &engine.layers()[i];
    r.median_ms = median(prof.times()[i]);
    if (!prof.enqueue_times()[i].empty())
      r.enqueue_ms = median(prof.enqueue_times()[i]);
    r.flops = layer_flops(*r.layer, known);
    r.precision = layer_precision(*r.layer, known);
    r.bytes = layer_bytes(*r.layer, known, r.precision);
    if (peaks)
      r.floor_ms = floor_ms(r, *peaks);
    total += r.median_ms;
    rows.push_back(r);
  }
  for (LayerRow &r : rows)
    r.percent = total > 0 ? 100.0 * r.median_ms / total : 0;
  return rows;
}

// What the roofline figures are measured against, for the table and the JSON.
struct RooflineBasis {
  bool gpu = false;
  GpuInfo info;                     // name and arch (gpu engines)
  const PeakRates *peaks = nullptr; // nullptr: CPU engine or an arch not in kPeaks
  std::string why_none;             // why there are no roofline figures
  std::string timing;               // ExecutionContext::profile_timing(): "device: ..." or "host: ..."
};

// TFLOP/s with enough digits to tell small rates apart.
std::string tflops_text(double flops, double s) {
  if (flops < 0 || s <= 0)
    return "-";
  double t = flops / s / 1e12;
  return fmt(t, t < 1 ? 4 : 2);
}

void print_profile(const std::vector<LayerRow> &rows,
                   const RooflineBasis &basis, std::ostream &os) {
  size_t op_w = 4, name_w = 6, tactic_w = 8;
  for (const LayerRow &r : rows) {
    op_w = std::max(op_w, r.layer->op.size() + 2);
    name_w = std::max(name_w, r.layer->name.size() + 2);
    tactic_w = std::max(tactic_w, r.layer->tactic.size() + 2);
  }
  os << "\n=== Profile (median over profiling runs) ===\n";
  os << std::left << std::setw(5) << "step" << std::setw(op_w) << "op"
     << std::setw(name_w) << "name" << std::setw(7) << "fused"
     << std::setw(tactic_w) << "tactic" << std::setw(6) << "prec" << std::setw(7) << "layout"
     << std::right << std::setw(10) << "ms" << std::setw(10) << "host ms" << std::setw(8) << "%"
     << std::setw(12) << "FLOPs" << std::setw(12) << "bytes" << std::setw(10)
     << "TFLOP/s" << std::setw(9) << "GB/s" << std::setw(9) << "roofl%"
     << "\n";
  double total = 0, flops = 0, floor_total = 0, floor_covered_ms = 0;
  for (const LayerRow &r : rows) {
    const LayerDesc &l = *r.layer;
    double s = r.median_ms / 1000.0;
    os << std::left << std::setw(5) << r.index << std::setw(op_w) << l.op
       << std::setw(name_w) << l.name << std::setw(7) << l.origins.size()
       << std::setw(tactic_w) << l.tactic << std::setw(6) << r.precision
       << std::setw(7) << (l.layout.empty() ? "-" : l.layout) << std::right << std::setw(10) << fmt(r.median_ms, 4) << std::setw(10)
       << (r.enqueue_ms < 0 ? "-" : fmt(r.enqueue_ms, 4)) << std::setw(8)
       << fmt(r.percent, 2) << std::setw(12)
       << (r.flops < 0 ? "-" : fmt(r.flops, 0)) << std::setw(12)
       << (r.bytes < 0 ? "-" : fmt(r.bytes, 0)) << std::setw(10)
       << tflops_text(r.flops, s) << std::setw(9)
       << (r.bytes < 0 || s <= 0 ? "-" : fmt(r.bytes / s / 1e9, 2))
       << std::setw(9) << fmt(r.roofline_percent(), 1) << "\n";
    total += r.median_ms;
    if (r.flops > 0)
      flops += r.flops;
    if (r.floor_ms >= 0) {
      floor_total += r.floor_ms;
      floor_covered_ms += r.median_ms;
    }
  }
  os << "total " << fmt(total, 4) << " ms over " << rows.size() << " steps, "
     << fmt(flops, 0)
     << " FLOPs counted (Conv/MatMul/Gemm and their fused forms)\n";
  os << "ms: " << basis.timing << "\nhost ms: "
     << (basis.gpu ? "the enqueue call alone (a step whose host ms exceeds its ms is host-bound "
                     "without a CUDA graph)\n"
                   : "the enqueue call alone (on the CPU: the step's execution)\n");
  if (!basis.peaks) {
    os << "roofline: -" << (basis.why_none.empty() ? "" : " (" + basis.why_none + ")")
       << "\n";
    return;
  }
  const PeakRates &p = *basis.peaks;
  os << "roofline: " << basis.info.name << " (sm_" << basis.info.sm
     << "), peaks f16/bf16 " << p.f16_tflops << ", tf32 " << p.tf32_tflops
     << ", f32 " << p.f32_tflops << " TFLOP/s, memory " << p.mem_tbps
     << " TB/s; roofl% = max(FLOPs/peak, bytes/bandwidth) / time\n";
  os << "roofline floor of the steps with known figures: " << fmt(floor_total, 4)
     << " ms against " << fmt(floor_covered_ms, 4) << " ms measured ("
     << fmt(floor_covered_ms > 0 ? 100.0 * floor_total / floor_covered_ms : -1, 1)
     << "%)\n";
}

Status write_profile(const std::string &path, const std::vector<LayerRow> &rows,
                     int runs, const RooflineBasis &basis) {
  std::ostringstream ss;
  ss << "{\n  \"profilingRuns\": " << runs << ",\n  \"backend\": \"" << (basis.gpu ? "gpu" : "cpu")
     << "\",\n  \"timing\": \"" << json_escape(basis.timing) << "\",\n";
  if (basis.gpu)
    ss << "  \"gpu\": {\"name\": \"" << json_escape(basis.info.name)
       << "\", \"sm\": " << basis.info.sm << "},\n";
  if (basis.peaks)
    ss << "  \"peaks\": {\"f16Tflops\": " << json_num(basis.peaks->f16_tflops)
       << ", \"bf16Tflops\": " << json_num(basis.peaks->f16_tflops)
       << ", \"tf32Tflops\": " << json_num(basis.peaks->tf32_tflops)
       << ", \"f32Tflops\": " << json_num(basis.peaks->f32_tflops)
       << ", \"memoryTBps\": " << json_num(basis.peaks->mem_tbps) << "},\n";
  else
    ss << "  \"peaks\": null,\n";
  ss << "  \"layers\": [\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const LayerRow &r = rows[i];
    const LayerDesc &l = *r.layer;
    double s = r.median_ms / 1000.0;
    ss << "    {\"step\": " << r.index << ", \"op\": \"" << json_escape(l.op)
       << "\", \"name\": \"" << json_escape(l.name) << "\", \"tactic\": \""
       << json_escape(l.tactic) << "\", \"precision\": \""
       << json_escape(r.precision) << "\", \"layout\": \"" << json_escape(l.layout.empty() ? "-" : l.layout)
       << "\", \"origins\": [";
    for (size_t o = 0; o < l.origins.size(); ++o)
      ss << (o ? ", " : "") << "\"" << json_escape(l.origins[o]) << "\"";
    ss << "], \"medianMs\": " << json_num(r.median_ms)
       << ", \"enqueueMs\": " << json_num(r.enqueue_ms)
       << ", \"percent\": " << json_num(r.percent)
       << ", \"flops\": " << json_num(r.flops)
       << ", \"bytes\": " << json_num(r.bytes) << ", \"gflops\": "
       << (r.flops < 0 || s <= 0 ? "null" : json_num(r.flops / s / 1e9))
       << ", \"tflops\": "
       << (r.flops < 0 || s <= 0 ? "null" : json_num(r.flops / s / 1e12))
       << ", \"gbps\": "
       << (r.bytes < 0 || s <= 0 ? "null" : json_num(r.bytes / s / 1e9))
       << ", \"floorMs\": " << json_num(r.floor_ms)
       << ", \"rooflinePercent\": " << json_num(r.roofline_percent()) << "}"
       << (i + 1 < rows.size() ? ",\n" : "\n");
  }
  ss << "  ]\n}\n";
  return write_file(path, ss.str());
}

void print_summary(const BenchmarkOptions &opt,
                   const std::vector<Iteration> &its, double wall_ms,
                   int64_t items_per_query, bool gpu, std::ostream &os) {
  std::vector<double> lat, enq, h2d, gpu_ms, d2h;
  double compute_sum = 0;
  for (const Iteration &i : its) {
    lat.push_back(i.latency_ms), enq.push_back(i.enqueue_ms);
    h2d.push_back(i.h2d_ms), gpu_ms.push_back(i.compute_ms),
        d2h.push_back(i.d2h_ms);
    compute_sum += i.compute_ms;
  }
  Stats l = stats_of(lat, opt.percentiles), e = stats_of(enq, opt.percentiles);
  Stats h = stats_of(h2d, opt.percentiles), g = stats_of(gpu_ms, opt.percentiles),
        d = stats_of(d2h, opt.percentiles);
  double qps = wall_ms > 0 ? its.size() * 1000.0 / wall_ms : 0;
  // Without transfers the queries are pure GPU work: throughput from its time
  // (the streams' compute overlaps, so their time is divided among them).
  bool from_compute = gpu && opt.no_data_transfers && compute_sum > 0;
  if (from_compute)
    qps = its.size() * 1000.0 / (compute_sum / opt.streams);
  auto line = [&](const char *what, const Stats &s) {
    os << what << ": min = " << fmt(s.min, 4) << " ms, max = " << fmt(s.max, 4)
       << " ms, mean = " << fmt(s.mean, 4)
       << " ms, median = " << fmt(s.median, 4) << " ms";
    for (size_t i = 0; i < opt.percentiles.size(); ++i)
      os << ", percentile(" << pct_label(opt.percentiles[i])
         << "%) = " << fmt(s.pct[i], 4) << " ms";
    os << "\n";
  };
  os << "\n=== Performance summary ===\n";
  os << "Throughput: " << fmt(qps, 2) << " qps, "
     << fmt(qps * items_per_query, 2) << " items/s (" << items_per_query
     << " item" << (items_per_query == 1 ? "" : "s") << " per query, "
     << opt.streams << " stream" << (opt.streams == 1 ? "" : "s")
     << (from_compute ? ", from GPU compute time" : "") << ")\n";
  line("Latency", l);
  line("Enqueue Time", e);
  if (gpu) {
    if (opt.no_data_transfers)
      os << "H2D Latency: skipped (--no-data-transfers)\n";
    else
      line("H2D Latency", h);
    line("GPU Compute Time", g);
    if (opt.no_data_transfers)
      os << "D2H Latency: skipped (--no-data-transfers)\n";
    else
      line("D2H Latency", d);
    os << "(latency = H2D + GPU compute + D2H, from CUDA events on the stream)\n";
  } else {
    os << "H2D Latency: 0 ms (CPU engine: no host-device copies)\nGPU Compute "
          "Time: n/a (CPU engine)\n"
          "D2H Latency: 0 ms (CPU engine)\n";
  }
  os << "Total Host Walltime: " << fmt(wall_ms / 1000.0, 4) << " s for "
     << its.size() << " queries\n";
  os << "\n" << std::left << std::setw(16) << "metric (ms)" << std::right;
  for (const char *hd : {"min", "mean", "median"})
    os << std::setw(11) << hd;
  for (double p : opt.percentiles)
    os << std::setw(11) << ("p" + pct_label(p));
  os << std::setw(11) << "max"
     << "\n";
  auto row = [&](const char *what, const Stats &s) {
    os << std::left << std::setw(16) << what << std::right << std::setw(11)
       << fmt(s.min, 4) << std::setw(11) << fmt(s.mean, 4) << std::setw(11)
       << fmt(s.median, 4);
    for (double v : s.pct)
      os << std::setw(11) << fmt(v, 4);
    os << std::setw(11) << fmt(s.max, 4) << "\n";
  };
  auto text_row = [&](const char *what, const char *text) {
    os << std::left << std::setw(16) << what << std::right << std::setw(11)
       << text << "\n";
  };
  row("latency", l);
  row("enqueue", e);
  if (gpu) {
    if (opt.no_data_transfers)
      text_row("H2D", "skipped");
    else
      row("H2D", h);
    row("GPU compute", g);
    if (opt.no_data_transfers)
      text_row("D2H", "skipped");
    else
      row("D2H", d);
  } else {
    text_row("H2D", "0");
    text_row("GPU compute", "n/a");
    text_row("D2H", "0");
  }
}

} // namespace

FlagParse parse_benchmark_flag(const std::vector<std::string> &args, size_t &i,
                               BenchmarkOptions &opt, std::string &err) {
  const std::string &a = args[i];
  static const char *kValued[] = {
      "--warmup",  "--warmup-ms",  "--iterations",   "--duration",
      "--streams", "--percentile", "--export-times", "--export-profile", "--back-to-back"};
  if (a == "--no-data-transfers") {
    opt.no_data_transfers = opt.engine_only_given = true;
    return FlagParse::kOk;
  }
  if (a == "--dump-profile") {
    opt.dump_profile = opt.engine_only_given = true;
    return FlagParse::kOk;
  }
  if (a == "--cuda-graph") {
    opt.cuda_graph = opt.engine_only_given = true;
    return FlagParse::kOk;
  }
  if (std::find(std::begin(kValued), std::end(kValued), a) == std::end(kValued))
    return FlagParse::kNotMine;
  if (i + 1 >= args.size()) {
    err = a + " needs a value";
    return FlagParse::kError;
  }
  const std::string &v = args[++i];
  auto bad = [&](const std::string &what) {
    err = a + " needs " + what + ", got '" + v + "'";
    return FlagParse::kError;
  };
  double x = 0;
  if (a == "--export-times" || a == "--export-profile") {
    if (v.empty())
      return bad("a file name");
    (a == "--export-times" ? opt.export_times : opt.export_profile) = v;
  } else if (a == "--percentile") {
    opt.percentiles.clear();
    std::istringstream ss(v);
    std::string item;
    while (std::getline(ss, item, ','))
      if (!parse_number(item, x) || x < 0 || x > 100)
        return bad("a comma-separated list of numbers in [0, 100]");
      else
        opt.percentiles.push_back(x);
    if (opt.percentiles.empty())
      return bad("a comma-separated list of numbers in [0, 100]");
  } else if (a == "--warmup-ms" || a == "--duration") {
    if (!parse_number(v, x) || x < 0)
      return bad("a number >= 0");
    (a == "--duration" ? opt.duration_s : opt.warmup_ms) = x;
  } else {
    int lo = a == "--warmup" ? 0 : 1;
    if (!parse_number(v, x) || x != std::floor(x) || x < lo || x > 1e9)
      return bad(lo ? "a positive integer" : "an integer >= 0");
    int n = static_cast<int>(x);
    if (a == "--warmup")
      opt.warmup_runs = n;
    else if (a == "--back-to-back")
      opt.back_to_back = n;
    else if (a == "--streams")
      opt.streams = n;
    else
      opt.iterations = n;
  }
  if (a == "--iterations")
    opt.iterations_given = true;
  else
    opt.engine_only_given = true;
  return FlagParse::kOk;
}

void benchmark_help(std::ostream &os) {
  os << "  --iterations N              timed runs per stream (default 10 when "
        "benchmarking; the\n"
        "                              interpreter reports their mean wall "
        "time)\n"
        "  --duration S                run until both --iterations and S "
        "seconds are done\n"
        "  --warmup N                  untimed runs first (default 2)\n"
        "  --warmup-ms MS              keep warming up for at least MS "
        "milliseconds\n"
        "  --streams N                 N contexts on N threads; reports "
        "aggregate throughput\n"
        "  --percentile 50,90,99       latency percentiles to report, each in "
        "[0, 100]\n"
        "  --no-data-transfers         skip host-device copies (no effect on "
        "CPU engines)\n"
        "  --cuda-graph                capture each context's enqueue into a "
        "CUDA graph and replay\n"
        "                              it (cuda engines; prints whether it "
        "replays, and why not)\n"
        "  --export-times FILE.json    every timed iteration's start and "
        "latency\n"
        "  --back-to-back N            also time N queries enqueued with no "
        "synchronize between them\n"
        "                              (two CUDA events, one synchronize): "
        "time per query back to back\n"
        "  --dump-profile              per-layer table: time, share, FLOPs, "
        "bytes, TFLOP/s, GB/s,\n"
        "                              % of the GPU's roofline (max of "
        "FLOPs/peak, bytes/bandwidth)\n"
        "  --export-profile FILE.json  the per-layer table as JSON\n";
}

KnownTensors static_tensor_shapes(const std::string &onnx_path) {
  KnownTensors out;
  auto report = inspect_model(onnx_path);
  if (!report.ok())
    return out;
  auto add = [&](const std::string &text) {
    // "name: f32[2,3,32,32]"; names may hold ": ", so split at the last one.
    auto colon = text.rfind(": ");
    auto open = text.find('[', colon == std::string::npos ? 0 : colon);
    if (colon == std::string::npos || open == std::string::npos ||
        text.back() != ']')
      return;
    std::string dtype = text.substr(colon + 2, open - colon - 2);
    KnownTensor t;
    for (int d = 0; d <= static_cast<int>(DataType::kInt2); ++d)
      if (dtype == data_type_name(static_cast<DataType>(d)))
        t.dtype = static_cast<DataType>(d);
    std::istringstream ss(text.substr(open + 1, text.size() - open - 2));
    std::string dim;
    while (std::getline(ss, dim, ',')) {
      double x = 0;
      if (!parse_number(dim, x) || x < 0)
        return; // symbolic or unknown: the run will tell
      t.dims.push_back(static_cast<int64_t>(x));
    }
    out[text.substr(0, colon)] = t;
  };
  for (const NodeRow &n : report->after.nodes)
    for (const auto *list : {&n.inputs, &n.outputs})
      for (const std::string &t : *list)
        add(t);
  return out;
}

Status run_benchmark(const std::shared_ptr<Engine> &engine,
                     const std::vector<HostTensor> &inputs,
                     const BenchmarkOptions &opt,
                     const KnownTensors &known_static, std::ostream &os) {
  bool gpu = engine->backend() != "cpu";
  if (opt.no_data_transfers && !gpu)
    os << "note: --no-data-transfers has no effect on a CPU engine (inputs and "
          "outputs stay in host memory)\n";
  if (opt.cuda_graph && !gpu)
    os << "warning: --cuda-graph has no effect on a CPU engine (CUDA graphs "
          "need a cuda engine); running without it\n";
  std::vector<StreamRun> runs(static_cast<size_t>(opt.streams));
  for (StreamRun &r : runs) {
    auto ctx = engine->create_execution_context();
    if (!ctx.ok())
      return ctx.status();
    r.ctx = std::move(ctx).value();
    if (Status ps = r.ctx->set_optimization_profile(opt.profile); !ps.ok())
      return ps;
    if (opt.cuda_graph && gpu) {
      Status s = r.ctx->set_cuda_graph_mode(true);
      if (!s.ok())
        return s;
    }
    auto io = IoBuffers::create(*engine, *r.ctx);
    if (!io.ok())
      return io.status();
    r.io = std::move(io).value();
    for (auto &ev : r.events) {
      auto e = GpuEvent::create(r.io->on_device());
      if (!e.ok())
        return e.status();
      ev = std::move(e).value();
    }
    Status s = r.io->upload_all(inputs);
    if (s.ok())
      s = r.io->synchronize();
    if (!s.ok())
      return s;
  }
  // Timed loop.
  std::atomic<int> ready{0};
  std::atomic<bool> go{false}, failed{false};
  Clock::time_point start;
  std::vector<std::thread> threads;
  for (int s = 0; s < opt.streams; ++s)
    threads.emplace_back(stream_loop, s, std::ref(runs[s]), std::cref(opt),
                         std::ref(ready), std::ref(go), &start,
                         std::ref(failed));
  while (ready.load() < opt.streams)
    std::this_thread::yield();
  start = Clock::now();
  go = true;
  for (std::thread &t : threads)
    t.join();
  double wall_ms = ms_between(start, Clock::now());
  std::vector<Iteration> all;
  for (StreamRun &r : runs) {
    if (!r.status.ok())
      return r.status;
    all.insert(all.end(), r.iterations.begin(), r.iterations.end());
  }
  if (opt.cuda_graph && gpu) {
    // The status of each context's last enqueue (the steady state after
    // warm-up); one line for all streams, naming the first reason given.
    std::string why;
    for (StreamRun &r : runs)
      if (why.empty())
        why = r.ctx->cuda_graph_status();
    if (why.empty())
      os << "CUDA graph: replaying\n";
    else
      os << "CUDA graph: not used (" << why << ")\n";
  }
  // What the first query after loading costs (cuDNN/cuBLASLt plans are built on first use).
  if (!runs.empty() && runs[0].first_query_ms >= 0)
    os << "first query: " << std::fixed << std::setprecision(1)
       << runs[0].first_query_ms << " ms (host wall time, includes the tactics' first-use setup)\n";
  std::sort(all.begin(), all.end(), [](const Iteration &a, const Iteration &b) {
    return a.start_ms < b.start_ms;
  });
  int64_t items =
      !inputs.empty() && !inputs[0].shape.empty() ? inputs[0].shape[0] : 1;
  double mean_ms = 0;
  for (const Iteration &i : all)
    mean_ms += i.latency_ms / all.size();
  os << "wall time per run: " << std::fixed << std::setprecision(3) << mean_ms
     << " ms (" << all.size() << " run" << (all.size() == 1 ? "" : "s")
     << ")\n";
  print_summary(opt, all, wall_ms, items, gpu, os);
  if (opt.back_to_back > 0) {
    double sum = 0;
    for (const StreamRun &r : runs)
      sum += r.back_to_back_ms;
    os << "Back-to-back: " << fmt(sum / runs.size(), 4) << " ms per query (" << opt.back_to_back
       << " queries per stream enqueued without a synchronize between them, "
       << (gpu ? "between two CUDA events" : "host clock") << ", median of 5 trials)\n";
  }
  if (!opt.export_times.empty()) {
    Status s = write_times(opt.export_times, all);
    if (!s.ok())
      return s;
  }
  if (!opt.dump_profile && opt.export_profile.empty())
    return Status::Ok();
  // Shapes of every produced tensor, from one listened run (the listener slows
  // every step, so it stays out of the timed runs), over the static ones
  // (weights) and the I/O dims.
  ExecutionContext &ctx = *runs[0].ctx;
  KnownTensors known = known_static;
  ShapeRecorder recorder(known);
  void *stream = runs[0].io->stream();
  ctx.set_tensor_listener(&recorder);
  Status s = ctx.enqueue(stream);
  if (s.ok())
    s = runs[0].io->synchronize();
  ctx.set_tensor_listener(nullptr);
  if (!s.ok())
    return s;
  for (const IoTensorDesc &d : engine->io_tensors()) {
    auto shape = ctx.tensor_shape(d.name);
    if (shape.ok())
      known[d.name] = KnownTensor{d.dtype, *shape, true};
  }
  int prof_runs = std::max(1, std::min(opt.iterations, 100));
  LayerTimes prof(engine->layers().size());
  ctx.set_profiler(&prof);
  for (int i = 0; i < prof_runs && s.ok(); ++i)
    s = ctx.enqueue(stream);
  if (s.ok())
    s = runs[0].io->synchronize();
  ctx.set_profiler(nullptr);
  if (!s.ok())
    return s;
  RooflineBasis basis;
  basis.gpu = gpu;
  basis.timing = ctx.profile_timing();
  if (!gpu) {
    basis.why_none = "CPU engine";
  } else if (auto info = current_gpu(); !info.ok()) {
    basis.why_none = "cannot query the GPU: " + info.status().message();
  } else {
    basis.info = *info;
    basis.peaks = peaks_for(info->sm);
    if (!basis.peaks)
      basis.why_none = "no peak rates for sm_" + std::to_string(info->sm) +
                       " in the table (tools/benchmark.cc)";
  }
  std::vector<LayerRow> rows = layer_rows(*engine, prof, known, basis.peaks);
  if (opt.dump_profile)
    print_profile(rows, basis, os);
  if (!opt.export_profile.empty())
    return write_profile(opt.export_profile, rows, prof_runs, basis);
  return Status::Ok();
}

} // namespace ingot::tools
