// Copyright ingot authors. Apache-2.0.
//
// rnn family reference kernels: RNN, GRU, LSTM, computed in double.
//
// Gate orders follow ONNX: GRU W/R/B rows are [z, r, h]; LSTM rows are [i, o, f, c] and
// P is [i, o, f]. B is [Wb | Rb]. Activation parameters (activation_alpha/_beta) are consumed
// in order by the activations that take them (as onnxruntime does); missing ones use the
// function's default. `clip` bounds the inputs of the gate activations. With
// sequence_lens, steps past a batch entry's length produce zeros in Y and Y_h/Y_c hold the
// state after its last valid step (a reverse direction starts at step len-1).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <string>
#include <vector>

#include "backend/cpu/kernels/all_kernels.h"

namespace ingot::cpu {
namespace {

enum class CellKind { kRnn, kGru, kLstm };

enum class ActKind {
  kRelu, kTanh, kSigmoid, kAffine, kLeakyRelu, kThresholdedRelu, kScaledTanh, kHardSigmoid,
  kElu, kSoftsign, kSoftplus
};

struct Activation {
  ActKind kind = ActKind::kTanh;
  double alpha = 0, beta = 0;

  double operator()(double x) const {
    switch (kind) {
      case ActKind::kRelu: return x > 0 ? x : 0;
      case ActKind::kTanh: return std::tanh(x);
      case ActKind::kSigmoid: return x >= 0 ? 1 / (1 + std::exp(-x)) : std::exp(x) / (1 + std::exp(x));
      case ActKind::kAffine: return alpha * x + beta;
      case ActKind::kLeakyRelu: return x >= 0 ? x : alpha * x;
      case ActKind::kThresholdedRelu: return x > alpha ? x : 0;
      case ActKind::kScaledTanh: return alpha * std::tanh(beta * x);
      case ActKind::kHardSigmoid: return std::max(0.0, std::min(1.0, alpha * x + beta));
      case ActKind::kElu: return x >= 0 ? x : alpha * (std::exp(x) - 1);
      case ActKind::kSoftsign: return x / (1 + std::fabs(x));
      case ActKind::kSoftplus: return x > 30 ? x : std::log1p(std::exp(x));
    }
    return x;
  }
};

std::string lower(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

// Parses the activation list into `per_dir * dirs` functions.
Status parse_activations(KernelContext& k, const std::vector<std::string>& defaults, int64_t dirs,
                         std::vector<Activation>* out) {
  const ir::Attributes& a = k.attrs();
  std::vector<std::string> names = a.get_strings("activations", {});
  size_t per_dir = defaults.size();
  if (names.empty()) {
    for (int64_t d = 0; d < dirs; ++d) names.insert(names.end(), defaults.begin(), defaults.end());
  } else if (names.size() == per_dir && dirs == 2) {
    std::vector<std::string> twice = names;
    twice.insert(twice.end(), names.begin(), names.end());
    names = twice;
  }
  if (names.size() != per_dir * static_cast<size_t>(dirs))
    return k.error("expected ", per_dir * static_cast<size_t>(dirs), " activations, got ", names.size());
  std::vector<float> alphas = a.get_floats("activation_alpha", {});
  std::vector<float> betas = a.get_floats("activation_beta", {});
  size_t ai = 0, bi = 0;
  auto take = [](const std::vector<float>& v, size_t* i, double def) {
    return *i < v.size() ? static_cast<double>(v[(*i)++]) : def;
  };
  out->clear();
  for (const std::string& raw : names) {
    std::string n = lower(raw);
    Activation act;
    if (n == "relu") {
      act.kind = ActKind::kRelu;
    } else if (n == "tanh") {
      act.kind = ActKind::kTanh;
    } else if (n == "sigmoid") {
      act.kind = ActKind::kSigmoid;
    } else if (n == "affine") {
      act.kind = ActKind::kAffine;
      act.alpha = take(alphas, &ai, 1.0);
      act.beta = take(betas, &bi, 0.0);
    } else if (n == "leakyrelu") {
      act.kind = ActKind::kLeakyRelu;
      act.alpha = take(alphas, &ai, 0.01);
    } else if (n == "thresholdedrelu") {
      act.kind = ActKind::kThresholdedRelu;
      act.alpha = take(alphas, &ai, 1.0);
    } else if (n == "scaledtanh") {
      act.kind = ActKind::kScaledTanh;
      act.alpha = take(alphas, &ai, 1.0);
      act.beta = take(betas, &bi, 1.0);
    } else if (n == "hardsigmoid") {
      act.kind = ActKind::kHardSigmoid;
      act.alpha = take(alphas, &ai, 0.2);
      act.beta = take(betas, &bi, 0.5);
    } else if (n == "elu") {
      act.kind = ActKind::kElu;
      act.alpha = take(alphas, &ai, 1.0);
    } else if (n == "softsign") {
      act.kind = ActKind::kSoftsign;
    } else if (n == "softplus") {
      act.kind = ActKind::kSoftplus;
    } else {
      return k.unsupported_case("unsupported activation '", raw, "'");
    }
    out->push_back(act);
  }
  return Status::Ok();
}

bool is_float_dtype(DataType t) {
  return t == DataType::kFloat32 || t == DataType::kFloat64 || t == DataType::kFloat16 ||
         t == DataType::kBFloat16;
}

Status run_recurrent(KernelContext& k, CellKind cell) {
  const ir::Attributes& a = k.attrs();
  const int64_t G = cell == CellKind::kRnn ? 1 : cell == CellKind::kGru ? 3 : 4;
  const Tensor& X = *k.input(0);
  const Tensor& W = *k.input(1);
  const Tensor& R = *k.input(2);
  if (!is_float_dtype(X.dtype())) return k.error("X must be a floating-point tensor");

  std::string direction = a.get_string("direction", "forward");
  int64_t dirs;
  if (direction == "forward" || direction == "reverse") {
    dirs = 1;
  } else if (direction == "bidirectional") {
    dirs = 2;
  } else {
    return k.error("unknown direction '", direction, "'");
  }
  const int64_t layout = a.get_int("layout", 0);
  if (layout != 0 && layout != 1) return k.error("layout must be 0 or 1");
  if (X.rank() != 3 || W.rank() != 3 || R.rank() != 3) return k.error("X, W and R must be 3-D");
  const int64_t S = layout == 0 ? X.dim(0) : X.dim(1);
  const int64_t N = layout == 0 ? X.dim(1) : X.dim(0);
  const int64_t I = X.dim(2);
  const int64_t H = R.dim(2);
  if (a.has("hidden_size") && a.get_int("hidden_size", 0) != H)
    return k.error("hidden_size ", a.get_int("hidden_size", 0), " does not match R's ", H);
  if (W.dim(0) != dirs || R.dim(0) != dirs) return k.error("W/R must have ", dirs, " directions");
  if (W.dim(1) != G * H || W.dim(2) != I) return k.error("W has shape ", shape_to_string(W.shape()));
  if (R.dim(1) != G * H) return k.error("R has shape ", shape_to_string(R.shape()));

  const Tensor* B = k.input(3);
  if (B && (B->rank() != 2 || B->dim(0) != dirs || B->dim(1) != 2 * G * H))
    return k.error("B has shape ", shape_to_string(B->shape()), ", expected [", dirs, ",", 2 * G * H, "]");
  const Tensor* SL = k.input(4);
  std::vector<int64_t> lens(static_cast<size_t>(N), S);
  if (SL) {
    if (SL->rank() != 1 || SL->dim(0) != N) return k.error("sequence_lens must have shape [", N, "]");
    for (int64_t b = 0; b < N; ++b) {
      int64_t v = SL->get_i64(b);
      if (v < 0 || v > S) return k.error("sequence_lens[", b, "] = ", v, " outside [0, ", S, "]");
      lens[static_cast<size_t>(b)] = v;
    }
  }
  // State tensors: [dirs, N, H] (layout 0) or [N, dirs, H] (layout 1).
  auto state_index = [&](int64_t d, int64_t b, int64_t h) {
    return layout == 0 ? (d * N + b) * H + h : (b * dirs + d) * H + h;
  };
  auto check_state = [&](const Tensor* t, const char* name) -> Status {
    if (!t) return Status::Ok();
    Shape64 want = layout == 0 ? Shape64{dirs, N, H} : Shape64{N, dirs, H};
    if (t->shape() != want)
      return k.error(name, " has shape ", shape_to_string(t->shape()), ", expected ", shape_to_string(want));
    return Status::Ok();
  };
  const Tensor* H0 = k.input(5);
  const Tensor* C0 = cell == CellKind::kLstm ? k.input(6) : nullptr;
  const Tensor* P = cell == CellKind::kLstm ? k.input(7) : nullptr;
  if (Status s = check_state(H0, "initial_h"); !s.ok()) return s;
  if (Status s = check_state(C0, "initial_c"); !s.ok()) return s;
  if (P && (P->rank() != 2 || P->dim(0) != dirs || P->dim(1) != 3 * H))
    return k.error("P has shape ", shape_to_string(P->shape()), ", expected [", dirs, ",", 3 * H, "]");

  std::vector<std::string> defaults = cell == CellKind::kRnn   ? std::vector<std::string>{"Tanh"}
                                      : cell == CellKind::kGru ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                                               : std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"};
  std::vector<Activation> acts;
  if (Status s = parse_activations(k, defaults, dirs, &acts); !s.ok()) return s;
  const bool has_clip = a.has("clip");
  const double clip = a.get_float("clip", 0.f);
  if (has_clip && clip < 0) return k.error("clip must be non-negative");
  auto clipped = [&](double v) { return has_clip ? std::max(-clip, std::min(clip, v)) : v; };
  const bool linear_before_reset = a.get_int("linear_before_reset", 0) != 0;
  const bool input_forget = a.get_int("input_forget", 0) != 0;

  // Outputs.
  DataType dt = X.dtype();
  Tensor* Y = nullptr;
  Tensor* Yh = nullptr;
  Tensor* Yc = nullptr;
  Shape64 yshape = layout == 0 ? Shape64{S, dirs, N, H} : Shape64{N, S, dirs, H};
  Shape64 hshape = layout == 0 ? Shape64{dirs, N, H} : Shape64{N, dirs, H};
  if (k.has_output(0)) {
    auto r = k.allocate_output(0, dt, yshape);
    if (!r.ok()) return r.status();
    Y = *r;
  }
  if (k.has_output(1)) {
    auto r = k.allocate_output(1, dt, hshape);
    if (!r.ok()) return r.status();
    Yh = *r;
  }
  if (cell == CellKind::kLstm && k.has_output(2)) {
    auto r = k.allocate_output(2, dt, hshape);
    if (!r.ok()) return r.status();
    Yc = *r;
  }

  const std::vector<double> x = X.to_f64_vector();
  const std::vector<double> w = W.to_f64_vector();
  const std::vector<double> rw = R.to_f64_vector();
  const std::vector<double> bias = B ? B->to_f64_vector() : std::vector<double>();
  const std::vector<double> peep = P ? P->to_f64_vector() : std::vector<double>();
  auto x_at = [&](int64_t t, int64_t b) {
    return x.data() + (layout == 0 ? (t * N + b) * I : (b * S + t) * I);
  };
  const size_t per_dir = defaults.size();

  std::vector<double> h(static_cast<size_t>(H)), c(static_cast<size_t>(H)), hn(static_cast<size_t>(H));
  std::vector<double> gx(static_cast<size_t>(G * H)), gh(static_cast<size_t>(G * H));
  for (int64_t d = 0; d < dirs; ++d) {
    const bool reverse = direction == "reverse" || d == 1;
    const double* wd = w.data() + d * G * H * I;
    const double* rd = rw.data() + d * G * H * H;
    const double* wb = B ? bias.data() + d * 2 * G * H : nullptr;
    const double* rb = B ? wb + G * H : nullptr;
    const double* pd = P ? peep.data() + d * 3 * H : nullptr;
    const Activation& f = acts[d * per_dir];
    const Activation& g = per_dir > 1 ? acts[d * per_dir + 1] : f;
    const Activation& hact = per_dir > 2 ? acts[d * per_dir + 2] : f;
    for (int64_t b = 0; b < N; ++b) {
      for (int64_t j = 0; j < H; ++j) {
        h[j] = H0 ? H0->get_f64(state_index(d, b, j)) : 0.0;
        c[j] = C0 ? C0->get_f64(state_index(d, b, j)) : 0.0;
      }
      const int64_t len = lens[static_cast<size_t>(b)];
      for (int64_t s = 0; s < len; ++s) {
        const int64_t t = reverse ? len - 1 - s : s;
        const double* xt = x_at(t, b);
        // gx = W x + Wb, gh = R h + Rb, for every gate row.
        for (int64_t row = 0; row < G * H; ++row) {
          const double* wr = wd + row * I;
          double acc = wb ? wb[row] : 0.0;
          for (int64_t i = 0; i < I; ++i) acc += wr[i] * xt[i];
          gx[row] = acc;
          const double* rr = rd + row * H;
          double acc2 = rb ? rb[row] : 0.0;
          for (int64_t i = 0; i < H; ++i) acc2 += rr[i] * h[i];
          gh[row] = acc2;
        }
        if (cell == CellKind::kRnn) {
          for (int64_t j = 0; j < H; ++j) hn[j] = f(clipped(gx[j] + gh[j]));
        } else if (cell == CellKind::kGru) {
          // Rows: z [0,H), r [H,2H), h [2H,3H).
          std::vector<double> rgate(static_cast<size_t>(H));
          for (int64_t j = 0; j < H; ++j) rgate[j] = f(clipped(gx[H + j] + gh[H + j]));
          for (int64_t j = 0; j < H; ++j) {
            double z = f(clipped(gx[j] + gh[j]));
            double pre;
            if (linear_before_reset) {
              pre = gx[2 * H + j] + rgate[j] * gh[2 * H + j];
            } else {
              // Rh (r * h) + Rbh
              const double* rr = rd + (2 * H + j) * H;
              double acc = rb ? rb[2 * H + j] : 0.0;
              for (int64_t i = 0; i < H; ++i) acc += rr[i] * (rgate[i] * h[i]);
              pre = gx[2 * H + j] + acc;
            }
            double ht = g(clipped(pre));
            hn[j] = (1 - z) * ht + z * h[j];
          }
        } else {
          // Rows: i [0,H), o [H,2H), f [2H,3H), c [3H,4H).
          for (int64_t j = 0; j < H; ++j) {
            double pi = pd ? pd[j] : 0.0, po = pd ? pd[H + j] : 0.0, pf = pd ? pd[2 * H + j] : 0.0;
            double ig = f(clipped(gx[j] + gh[j] + pi * c[j]));
            double fg = input_forget ? 1 - ig : f(clipped(gx[2 * H + j] + gh[2 * H + j] + pf * c[j]));
            double cg = g(clipped(gx[3 * H + j] + gh[3 * H + j]));
            double cn = fg * c[j] + ig * cg;
            double og = f(clipped(gx[H + j] + gh[H + j] + po * cn));
            c[j] = cn;
            hn[j] = og * hact(cn);
          }
        }
        h.swap(hn);
        if (Y) {
          for (int64_t j = 0; j < H; ++j) {
            int64_t idx = layout == 0 ? ((t * dirs + d) * N + b) * H + j : ((b * S + t) * dirs + d) * H + j;
            Y->set_f64(idx, h[j]);
          }
        }
      }
      for (int64_t j = 0; j < H; ++j) {
        if (Yh) Yh->set_f64(state_index(d, b, j), h[j]);
        if (Yc) Yc->set_f64(state_index(d, b, j), c[j]);
      }
    }
  }
  return Status::Ok();
}

}  // namespace

void register_rnn_kernels(KernelRegistry& r) {
  r.add("RNN", [](KernelContext& k) { return run_recurrent(k, CellKind::kRnn); });
  r.add("GRU", [](KernelContext& k) { return run_recurrent(k, CellKind::kGru); });
  r.add("LSTM", [](KernelContext& k) { return run_recurrent(k, CellKind::kLstm); });
}

}  // namespace ingot::cpu
