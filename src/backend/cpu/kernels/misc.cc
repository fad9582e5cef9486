// Copyright ingot authors. Apache-2.0.
//
// Reference kernels: DFT, STFT, window functions, MelWeightMatrix, NonMaxSuppression, Det.
// String ops, TfIdfVectorizer and ai.onnx.ml kernels are in misc_strings.cc.
#include <algorithm>
#include <cmath>
#include <complex>

#include "backend/cpu/kernels/all_kernels.h"

namespace ingot::cpu {

void register_misc_string_kernels(KernelRegistry& r);  // misc_strings.cc

namespace {

using cd = std::complex<double>;
constexpr double kPi = 3.14159265358979323846;

// e^{sign * 2*pi*i * k*t / n} with the phase reduced mod n for accuracy.
cd twiddle(int64_t k, int64_t t, int64_t n, double sign) {
  int64_t p = static_cast<int64_t>((static_cast<unsigned __int128>(k) * static_cast<unsigned __int128>(t)) % n);
  double a = sign * 2.0 * kPi * static_cast<double>(p) / static_cast<double>(n);
  return cd(std::cos(a), std::sin(a));
}

// Transforms the sequence `x` (length L, zero-padded/truncated to n). Forward: out_len bins.
// Inverse: complex (1/n) sum; `hermitian` rebuilds the full spectrum from a one-sided one.
std::vector<cd> dft_1d(const std::vector<cd>& x, int64_t n, int64_t out_len, bool inverse, bool hermitian) {
  std::vector<cd> in(n, cd(0, 0));
  if (hermitian) {
    for (int64_t k = 0; k <= n / 2; ++k)
      if (k < static_cast<int64_t>(x.size())) in[k] = x[k];
    for (int64_t k = n / 2 + 1; k < n; ++k) in[k] = std::conj(in[n - k]);
  } else {
    for (int64_t t = 0; t < n && t < static_cast<int64_t>(x.size()); ++t) in[t] = x[t];
  }
  std::vector<cd> out(out_len);
  double sign = inverse ? 1.0 : -1.0;
  for (int64_t k = 0; k < out_len; ++k) {
    cd acc(0, 0);
    for (int64_t t = 0; t < n; ++t)
      if (in[t] != cd(0, 0)) acc += in[t] * twiddle(k, t, n, sign);
    out[k] = inverse ? acc / static_cast<double>(n) : acc;
  }
  return out;
}

Status run_dft(KernelContext& k) {
  const Tensor& x = *k.input(0);
  int64_t r = static_cast<int64_t>(x.rank());
  bool inverse = k.attrs().get_int("inverse", 0) != 0;
  bool onesided = k.attrs().get_int("onesided", 0) != 0;
  int64_t axis = k.opset() >= 20 ? (k.has_input(2) ? k.input(2)->get_i64(0) : -2) : k.attrs().get_int("axis", 1);
  if (axis < 0) axis += r;
  if (r < 2 || axis < 0 || axis >= r - 1) return k.error("axis out of range for input of rank ", r);
  int64_t c_in = x.dim(r - 1);
  if (c_in != 1 && c_in != 2) return k.error("the last dim must be 1 or 2, got ", c_in);
  int64_t len = x.dim(axis);
  int64_t n = k.has_input(1) ? k.input(1)->get_i64(0) : ((inverse && onesided) ? 2 * (len - 1) : len);
  if (n < 1) return k.error("dft_length must be positive, got ", n);
  int64_t out_len = (!inverse && onesided) ? n / 2 + 1 : n;
  int64_t c_out = (inverse && onesided) ? 1 : 2;
  Shape64 oshape = x.shape();
  oshape[axis] = out_len;
  oshape[r - 1] = c_out;
  INGOT_ASSIGN_OR_RETURN(Tensor * y, k.allocate_output(0, x.dtype(), oshape));
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= x.dim(i);
  for (int64_t i = axis + 1; i < r - 1; ++i) inner *= x.dim(i);
  std::vector<cd> seq(len);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      for (int64_t t = 0; t < len; ++t) {
        int64_t base = ((o * len + t) * inner + i) * c_in;
        seq[t] = cd(x.get_f64(base), c_in == 2 ? x.get_f64(base + 1) : 0.0);
      }
      std::vector<cd> res = dft_1d(seq, n, out_len, inverse, inverse && onesided);
      for (int64_t t = 0; t < out_len; ++t) {
        int64_t base = ((o * out_len + t) * inner + i) * c_out;
        y->set_f64(base, res[t].real());
        if (c_out == 2) y->set_f64(base + 1, res[t].imag());
      }
    }
  return Status::Ok();
}

Status run_stft(KernelContext& k) {
  const Tensor& x = *k.input(0);
  if (x.rank() != 3 || (x.dim(2) != 1 && x.dim(2) != 2))
    return k.error("signal must be [batch, length, 1 or 2], got ", shape_to_string(x.shape()));
  int64_t step = k.input(1)->get_i64(0);
  if (step < 1) return k.error("frame_step must be positive, got ", step);
  const Tensor* window = k.has_input(2) ? k.input(2) : nullptr;
  int64_t fl = k.has_input(3) ? k.input(3)->get_i64(0) : (window ? window->numel() : x.dim(1));
  if (window && window->numel() != fl)
    return k.error("window has ", window->numel(), " elements but frame_length is ", fl);
  if (fl < 1 || fl > x.dim(1)) return k.error("frame_length ", fl, " out of range for signal length ", x.dim(1));
  bool onesided = k.attrs().get_int("onesided", 1) != 0;
  int64_t batch = x.dim(0), len = x.dim(1), c_in = x.dim(2);
  int64_t frames = 1 + (len - fl) / step;
  int64_t bins = onesided ? fl / 2 + 1 : fl;
  INGOT_ASSIGN_OR_RETURN(Tensor * y, k.allocate_output(0, x.dtype(), {batch, frames, bins, 2}));
  std::vector<cd> seq(fl);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t f = 0; f < frames; ++f) {
      for (int64_t t = 0; t < fl; ++t) {
        int64_t base = (b * len + f * step + t) * c_in;
        double w = window ? window->get_f64(t) : 1.0;
        seq[t] = cd(x.get_f64(base) * w, c_in == 2 ? x.get_f64(base + 1) * w : 0.0);
      }
      std::vector<cd> res = dft_1d(seq, fl, bins, false, false);
      for (int64_t q = 0; q < bins; ++q) {
        int64_t base = ((b * frames + f) * bins + q) * 2;
        y->set_f64(base, res[q].real());
        y->set_f64(base + 1, res[q].imag());
      }
    }
  return Status::Ok();
}

// kind: 0 Hann, 1 Hamming, 2 Blackman.
KernelFn window_kernel(int kind) {
  return [kind](KernelContext& k) -> Status {
    int64_t size = k.input(0)->get_i64(0);
    if (size < 0) return k.error("size must be non-negative, got ", size);
    DataType dt = static_cast<DataType>(k.attrs().get_int("output_datatype", 1));
    bool periodic = k.attrs().get_int("periodic", 1) != 0;
    INGOT_ASSIGN_OR_RETURN(Tensor * y, k.allocate_output(0, dt, {size}));
    double n = static_cast<double>(periodic ? size : size - 1);
    for (int64_t i = 0; i < size; ++i) {
      double a = 2.0 * kPi * static_cast<double>(i) / n;
      double v = 0;
      if (kind == 0) v = 0.5 - 0.5 * std::cos(a);
      else if (kind == 1) v = 25.0 / 46.0 - (21.0 / 46.0) * std::cos(a);
      else v = 0.42 - 0.5 * std::cos(a) + 0.08 * std::cos(2 * a);
      y->set_f64(i, v);
    }
    return Status::Ok();
  };
}

Status run_mel(KernelContext& k) {
  int64_t mel = k.input(0)->get_i64(0);
  int64_t dft = k.input(1)->get_i64(0);
  double rate = k.input(2)->get_f64(0);
  double lo = k.input(3)->get_f64(0), hi = k.input(4)->get_f64(0);
  if (mel < 1 || dft < 1 || rate <= 0) return k.error("num_mel_bins, dft_length and sample_rate must be positive");
  DataType dt = static_cast<DataType>(k.attrs().get_int("output_datatype", 1));
  int64_t nbins = dft / 2 + 1;
  INGOT_ASSIGN_OR_RETURN(Tensor * y, k.allocate_output(0, dt, {nbins, mel}));
  // Mel points evenly spaced between the edges, mapped back to spectrogram bins.
  auto to_mel = [](double hz) { return 2595.0 * std::log10(1.0 + hz / 700.0); };
  double lo_mel = to_mel(lo), hi_mel = to_mel(hi);
  double step = (hi_mel - lo_mel) / static_cast<double>(mel + 2);
  std::vector<int64_t> pts(mel + 2);
  for (int64_t i = 0; i < mel + 2; ++i) {
    double hz = 700.0 * std::expm1((static_cast<double>(i) * step + lo_mel) / 2595.0 * std::log(10.0));
    pts[i] = static_cast<int64_t>(std::floor(static_cast<double>(dft + 1) * hz / rate));
  }
  std::vector<double> w(nbins * mel, 0.0);
  auto set = [&](int64_t j, int64_t i, double v) -> Status {
    if (j < 0 || j >= nbins) return k.error("mel band edge ", j, " falls outside the ", nbins, " spectrogram bins");
    w[j * mel + i] = v;
    return Status::Ok();
  };
  for (int64_t i = 0; i < mel; ++i) {
    int64_t l = pts[i], c = pts[i + 1], h = pts[i + 2];
    if (c == l) {
      INGOT_RETURN_IF_ERROR(set(c, i, 1.0));
    } else {
      for (int64_t j = l; j <= c; ++j) INGOT_RETURN_IF_ERROR(set(j, i, double(j - l) / double(c - l)));
    }
    if (h > c)
      for (int64_t j = c; j < h; ++j) INGOT_RETURN_IF_ERROR(set(j, i, double(h - j) / double(h - c)));
  }
  for (int64_t i = 0; i < nbins * mel; ++i) y->set_f64(i, w[i]);
  return Status::Ok();
}

// True when box a and box b overlap by more than `thr` IoU.
bool suppress(const double* a, const double* b, bool center, double thr) {
  double ax0, ax1, ay0, ay1, bx0, bx1, by0, by1;
  if (!center) {
    ay0 = std::min(a[0], a[2]), ay1 = std::max(a[0], a[2]);
    ax0 = std::min(a[1], a[3]), ax1 = std::max(a[1], a[3]);
    by0 = std::min(b[0], b[2]), by1 = std::max(b[0], b[2]);
    bx0 = std::min(b[1], b[3]), bx1 = std::max(b[1], b[3]);
  } else {
    ax0 = a[0] - a[2] / 2, ax1 = a[0] + a[2] / 2, ay0 = a[1] - a[3] / 2, ay1 = a[1] + a[3] / 2;
    bx0 = b[0] - b[2] / 2, bx1 = b[0] + b[2] / 2, by0 = b[1] - b[3] / 2, by1 = b[1] + b[3] / 2;
  }
  double ix = std::min(ax1, bx1) - std::max(ax0, bx0);
  double iy = std::min(ay1, by1) - std::max(ay0, by0);
  if (ix <= 0 || iy <= 0) return false;
  double inter = ix * iy;
  double area_a = (ax1 - ax0) * (ay1 - ay0), area_b = (bx1 - bx0) * (by1 - by0);
  double uni = area_a + area_b - inter;
  if (area_a <= 0 || area_b <= 0 || uni <= 0) return false;
  return inter / uni > thr;
}

Status run_nms(KernelContext& k) {
  const Tensor& boxes = *k.input(0);
  const Tensor& scores = *k.input(1);
  if (boxes.rank() != 3 || boxes.dim(2) != 4) return k.error("boxes must be [batches, boxes, 4]");
  if (scores.rank() != 3 || scores.dim(0) != boxes.dim(0) || scores.dim(2) != boxes.dim(1))
    return k.error("scores ", shape_to_string(scores.shape()), " do not match boxes ", shape_to_string(boxes.shape()));
  int64_t max_out = k.has_input(2) && k.input(2)->numel() > 0 ? k.input(2)->get_i64(0) : 0;
  double iou = k.has_input(3) && k.input(3)->numel() > 0 ? k.input(3)->get_f64(0) : 0.0;
  bool has_score_thr = k.has_input(4) && k.input(4)->numel() > 0;
  double score_thr = has_score_thr ? k.input(4)->get_f64(0) : 0.0;
  bool center = k.attrs().get_int("center_point_box", 0) != 0;
  if (iou < 0 || iou > 1) return k.error("iou_threshold must be in [0, 1], got ", iou);
  int64_t nb = boxes.dim(0), nbox = boxes.dim(1), nc = scores.dim(1);
  std::vector<double> bx = boxes.to_f64_vector(), sc = scores.to_f64_vector();
  std::vector<int64_t> sel;
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t c = 0; c < nc; ++c) {
      const double* s = &sc[(b * nc + c) * nbox];
      std::vector<int64_t> cand;
      for (int64_t i = 0; i < nbox; ++i)
        if (!has_score_thr || s[i] > score_thr) cand.push_back(i);
      std::stable_sort(cand.begin(), cand.end(), [&](int64_t i, int64_t j) { return s[i] > s[j]; });
      std::vector<int64_t> kept;
      for (int64_t i : cand) {
        if (static_cast<int64_t>(kept.size()) >= max_out) break;
        bool ok = true;
        for (int64_t j : kept)
          if (suppress(&bx[(b * nbox + i) * 4], &bx[(b * nbox + j) * 4], center, iou)) {
            ok = false;
            break;
          }
        if (ok) {
          kept.push_back(i);
          sel.insert(sel.end(), {b, c, i});
        }
      }
    }
  int64_t n = static_cast<int64_t>(sel.size()) / 3;
  INGOT_ASSIGN_OR_RETURN(Tensor * y, k.allocate_output(0, DataType::kInt64, {n, 3}));
  std::copy(sel.begin(), sel.end(), y->mutable_data<int64_t>());
  return Status::Ok();
}

Status run_det(KernelContext& k) {
  const Tensor& x = *k.input(0);
  if (x.rank() < 2 || x.dim(x.rank() - 1) != x.dim(x.rank() - 2))
    return k.error("input must be [..., M, M], got ", shape_to_string(x.shape()));
  int64_t m = x.dim(x.rank() - 1);
  Shape64 oshape(x.shape().begin(), x.shape().end() - 2);
  INGOT_ASSIGN_OR_RETURN(Tensor * y, k.allocate_output(0, x.dtype(), oshape));
  int64_t count = shape_numel(oshape);
  std::vector<double> a(m * m);
  for (int64_t b = 0; b < count; ++b) {
    for (int64_t i = 0; i < m * m; ++i) a[i] = x.get_f64(b * m * m + i);
    // LU decomposition with partial pivoting.
    double det = 1.0;
    for (int64_t col = 0; col < m; ++col) {
      int64_t piv = col;
      for (int64_t r = col + 1; r < m; ++r)
        if (std::fabs(a[r * m + col]) > std::fabs(a[piv * m + col])) piv = r;
      if (a[piv * m + col] == 0.0) {
        det = 0.0;
        break;
      }
      if (piv != col) {
        for (int64_t j = 0; j < m; ++j) std::swap(a[col * m + j], a[piv * m + j]);
        det = -det;
      }
      double p = a[col * m + col];
      det *= p;
      for (int64_t r = col + 1; r < m; ++r) {
        double f = a[r * m + col] / p;
        for (int64_t j = col; j < m; ++j) a[r * m + j] -= f * a[col * m + j];
      }
    }
    y->set_f64(b, det);
  }
  return Status::Ok();
}

}  // namespace

void register_misc_kernels(KernelRegistry& r) {
  r.add("DFT", run_dft);
  r.add("STFT", run_stft);
  r.add("HannWindow", window_kernel(0));
  r.add("HammingWindow", window_kernel(1));
  r.add("BlackmanWindow", window_kernel(2));
  r.add("MelWeightMatrix", run_mel);
  r.add("NonMaxSuppression", run_nms);
  r.add("Det", run_det);
  register_misc_string_kernels(r);
}

}  // namespace ingot::cpu
