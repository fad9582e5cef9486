// Copyright ingot authors. Apache-2.0.
//
// The resize family's device code interface (resize_kernels.cu) and the per-element arithmetic
// it runs. ONNX Resize is computed directly, one thread per output element: each resized axis
// gives the element a source coordinate and taps (index, weight) exactly as the CPU reference
// (src/backend/cpu/kernels/image.cc) computes them, in double, and the taps of all resized axes
// are combined as a product (the reference's separable passes give the same sum). The math
// below is __host__ __device__ so the tests can replay a kernel's arithmetic on the host,
// without a GPU, against the reference.
//
// Values are f32/f16/bf16 (FloatType); they are read into double, accumulated in double (the
// reference's precision: cubic lobes cancel, and fp32 accumulation would miss the fp32
// tolerance on small outputs) and rounded once on store, through float as the reference does.
#pragma once

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "backend/cuda/pointwise/elementwise_kernels.h"
#include "core/status.h"
#include "core/tensor.h"

namespace ingot::ir {
class Node;
struct TensorType;
}  // namespace ingot::ir

#if defined(__CUDACC__)
#define INGOT_RESIZE_HD __host__ __device__ __forceinline__
#else
#define INGOT_RESIZE_HD inline
#endif

namespace ingot::backend::cuda {

constexpr int kMaxResizeDims = 8;

enum class ResizeMode : int32_t { kNearest = 0, kLinear = 1, kCubic = 2 };
enum class ResizeCoord : int32_t {
  kHalfPixel = 0,
  kHalfPixelSymmetric,
  kPytorchHalfPixel,
  kAlignCorners,
  kAsymmetric,
  kTfCropAndResize,
  kTfHalfPixelForNN,
};
enum class ResizeNearest : int32_t { kRoundPreferFloor = 0, kRoundPreferCeil, kFloor, kCeil, kSimple };

/// Everything one Resize launch needs, resolved on the host (scales from sizes, aspect-ratio
/// policy, roi per dim). Passed by value as a kernel parameter.
struct ResizeDesc {
  int32_t rank = 0;
  ResizeMode mode = ResizeMode::kNearest;
  ResizeCoord coord = ResizeCoord::kHalfPixel;
  ResizeNearest nearest = ResizeNearest::kRoundPreferFloor;
  bool exclude_outside = false;
  bool antialias = false;
  double cubic_a = -0.75;
  double extrapolation = 0.0;
  int64_t in[kMaxResizeDims] = {};
  int64_t out[kMaxResizeDims] = {};
  int64_t in_stride[kMaxResizeDims] = {};  ///< row-major element strides of the input
  /// False for a dim that is copied (not in `axes`, or the reference's identity test holds).
  bool resized[kMaxResizeDims] = {};
  double scale[kMaxResizeDims] = {};
  double roi_start[kMaxResizeDims] = {};  ///< tf_crop_and_resize only
  double roi_end[kMaxResizeDims] = {};
};

/// Launches Resize: x has desc.in dims, y desc.out dims, both contiguous, of type `t`.
cudaError_t launch_resize(FloatType t, const void* x, void* y, const ResizeDesc& desc, cudaStream_t stream);

// ---- Host side (resize_tactics.cc). ----

/// Where the output geometry comes from.
enum class ResizeSource : int32_t {
  kScales = 0,          ///< scales, an initializer (recorded below)
  kSizes = 1,           ///< sizes, an initializer (recorded below)
  kSizesFromOutput = 2  ///< sizes computed at run time, stretch policy: the output shape is the sizes
};
enum class ResizePolicy : int32_t { kStretch = 0, kNotLarger = 1, kNotSmaller = 2 };

/// A Resize node's attributes and host-known inputs, checked and parsed once when the tactic is
/// chosen, and recorded in the engine (the tactic's params), so enqueue reads no attribute and
/// allocates nothing. Per-axis arrays follow `axes` (normalized).
struct ResizeParams {
  uint32_t version = 1;
  int32_t rank = 0;
  ResizeMode mode = ResizeMode::kNearest;
  ResizeCoord coord = ResizeCoord::kHalfPixel;
  ResizeNearest nearest = ResizeNearest::kRoundPreferFloor;
  int32_t exclude_outside = 0;
  int32_t antialias = 0;
  ResizePolicy policy = ResizePolicy::kStretch;
  ResizeSource source = ResizeSource::kScales;
  int32_t has_roi = 0;
  double cubic_a = -0.75;
  double extrapolation = 0.0;
  int32_t num_axes = 0;
  int32_t reserved = 0;  ///< keeps the struct free of padding (its bytes are the engine's params)
  int64_t axes[kMaxResizeDims] = {};
  double scales[kMaxResizeDims] = {};  ///< kScales: each the float value, widened
  int64_t sizes[kMaxResizeDims] = {};  ///< kSizes
  double roi_start[kMaxResizeDims] = {};
  double roi_end[kMaxResizeDims] = {};
};

/// Checks a Resize node against what the kernel does and parses it; the error says why a node
/// is refused (the host fallback then runs it). `inputs` are the input types supports() sees.
Status resize_params_for(const ir::Node& node, const std::vector<ir::TensorType>& inputs, ResizeParams* params);
/// The launch description for these run-time shapes: scales/sizes, aspect-ratio policy, roi
/// and the identity test, exactly as the reference resolves them; an error when `y` is not the
/// shape they give or the input is empty and the output is not.
Status resize_desc_for(const ResizeParams& params, const Shape64& x, const Shape64& y, ResizeDesc* desc);

// ---- The per-element arithmetic (the reference's, step for step). ----

namespace resize_math {

/// Products that feed a sum are kept unfused on the device (no FMA contraction), so a source
/// coordinate lands on the same double the reference computes and nearest picks agree.
INGOT_RESIZE_HD double mul(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}

/// One resized axis' geometry. The functions below take it by value instead of an index into
/// ResizeDesc's arrays: a kernel that indexes a by-value parameter array with a run-time index
/// gets the whole parameter copied to local memory per thread (the image kernel ran at ~1/100 of
/// the memory bound that way: 3.1 ms for a [16,21,40,40] -> [16,21,320,320] upsample).
struct AxisGeom {
  double scale = 1;
  int64_t in = 0, out = 0;
  double roi_start = 0, roi_end = 0;
};

INGOT_RESIZE_HD AxisGeom axis_geom(const ResizeDesc& p, int d) {
  AxisGeom g;
  g.scale = p.scale[d];
  g.in = p.in[d];
  g.out = p.out[d];
  g.roi_start = p.roi_start[d];
  g.roi_end = p.roi_end[d];
  return g;
}

/// Source coordinate of output position y along an axis; sets `extrapolate` for
/// tf_crop_and_resize positions outside the input. `Rule` is ResizeDesc or Inner2Desc (the
/// mode fields).
template <class Rule>
INGOT_RESIZE_HD double source_coord(const Rule& p, const AxisGeom& g, double y, bool& extrapolate) {
  extrapolate = false;
  const double scale = g.scale;
  const double in_w = static_cast<double>(g.in);
  const double out_w = mul(scale, in_w);  // the fractional output width, as the spec defines it
  switch (p.coord) {
    case ResizeCoord::kAlignCorners:
      return out_w == 1 ? 0.0 : mul(y, in_w - 1) / (out_w - 1);
    case ResizeCoord::kAsymmetric:
      return y / scale;
    case ResizeCoord::kTfCropAndResize: {
      const float r0 = static_cast<float>(g.roi_start), r1 = static_cast<float>(g.roi_end);
      const double extent = static_cast<float>(r1 - r0);
      const double start = static_cast<float>(r0 * static_cast<float>(g.in - 1));
      double x = out_w == 1 ? mul(extent, in_w - 1) / 2 : mul(mul(y, extent), in_w - 1) / (out_w - 1);
      x = x + start;
      extrapolate = x < 0 || x > in_w - 1;
      return x;
    }
    case ResizeCoord::kPytorchHalfPixel:
      return out_w == 1 ? -0.5 : (y + 0.5) / scale - 0.5;
    case ResizeCoord::kHalfPixel:
      return (y + 0.5) / scale - 0.5;
    case ResizeCoord::kHalfPixelSymmetric: {
      const double adjustment = static_cast<double>(g.out) / out_w;
      const double center = in_w / 2;
      const double offset = mul(center, 1 - adjustment);
      return offset + (y + 0.5) / scale - 0.5;
    }
    case ResizeCoord::kTfHalfPixelForNN:
      return (y + 0.5) / scale;
  }
  return 0.0;
}

INGOT_RESIZE_HD double cubic_kernel(double x, double a) {
  x = std::fabs(x);
  if (x <= 1) return mul(mul(mul(a + 2, x) - (a + 3), x), x) + 1;
  if (x < 2) return mul(mul(mul(a, x) - mul(5, a), x) + mul(8, a), x) - mul(4, a);
  return 0.0;
}

INGOT_RESIZE_HD int64_t clamp_index(int64_t i, int64_t len) { return i < 0 ? 0 : (i >= len ? len - 1 : i); }

/// The taps of one output position along one resized dim, described compactly: tap j reads
/// source index clamp(first + j) with weight weight(j).
struct AxisTaps {
  bool extrapolate = false;
  bool zero = false;    ///< nearest with exclude_outside picked a position outside the input
  int64_t pick = 0;     ///< nearest: the (clamped) source index
  int64_t first = 0;    ///< linear/cubic: source index of tap 0 before clamping
  int32_t n = 0;        ///< linear/cubic: number of taps
  int64_t aa_start = 0; ///< antialias: kernel offset of tap 0
  double ratio = 0;     ///< in (0, 1]
  double aa_scale = 1;  ///< antialias: min(scale, 1)
  double sum1 = 1;      ///< antialias: normalization of the raw coefficients
  double sum2 = 0;      ///< exclude_outside: renormalization (0: none)
};

/// Coefficient of tap j before any normalization.
template <class Rule>
INGOT_RESIZE_HD double raw_coeff(const Rule& p, const AxisTaps& t, int32_t j) {
  if (!p.antialias) {
    if (p.mode == ResizeMode::kLinear) return j == 0 ? 1 - t.ratio : t.ratio;
    switch (j) {
      case 0: return cubic_kernel(t.ratio + 1, p.cubic_a);
      case 1: return cubic_kernel(t.ratio, p.cubic_a);
      case 2: return cubic_kernel(1 - t.ratio, p.cubic_a);
      default: return cubic_kernel(2 - t.ratio, p.cubic_a);
    }
  }
  const double arg = mul(static_cast<double>(t.aa_start + j) - t.ratio, t.aa_scale);
  if (p.mode == ResizeMode::kLinear) {
    double c = 1 - std::fabs(arg);
    c = c < 0.0 ? 0.0 : c;
    return c > 1.0 ? 1.0 : c;
  }
  return cubic_kernel(arg, p.cubic_a);
}

/// Weight of tap j after the antialias normalization and exclude_outside's renormalization.
template <class Rule>
INGOT_RESIZE_HD double tap_weight(const Rule& p, const AxisGeom& g, const AxisTaps& t, int32_t j) {
  double c = raw_coeff(p, t, j);
  if (p.antialias) c /= t.sum1;
  if (p.exclude_outside) {
    const int64_t i = t.first + j;
    if (i < 0 || i >= g.in) c = 0;
    if (t.sum2 != 0) c /= t.sum2;
  }
  return c;
}

template <class Rule>
INGOT_RESIZE_HD AxisTaps axis_taps(const Rule& p, const AxisGeom& g, int64_t y) {
  AxisTaps t;
  const double x = source_coord(p, g, static_cast<double>(y), t.extrapolate);
  // Prefer the pixel on the left of x: ratio in (0, 1].
  const double fl = std::floor(x);
  int64_t base = static_cast<int64_t>(fl);
  double ratio = x - fl;
  if (ratio == 0) {
    base -= 1;
    ratio = 1;
  }
  t.ratio = ratio;
  const int64_t in_len = g.in;
  if (p.mode == ResizeMode::kNearest) {
    int64_t pick = base + 1;
    if (ratio != 1) {
      switch (p.nearest) {
        case ResizeNearest::kRoundPreferFloor: pick = ratio <= 0.5 ? base : base + 1; break;
        case ResizeNearest::kRoundPreferCeil: pick = ratio < 0.5 ? base : base + 1; break;
        case ResizeNearest::kFloor: pick = base; break;
        case ResizeNearest::kCeil: pick = base + 1; break;
        case ResizeNearest::kSimple: pick = g.scale < 1 ? base + 1 : base; break;
      }
    }
    t.zero = p.exclude_outside && (pick < 0 || pick >= in_len);
    t.pick = clamp_index(pick, in_len);
    return t;
  }
  if (!p.antialias) {
    t.n = p.mode == ResizeMode::kLinear ? 2 : 4;
  } else {
    t.aa_scale = g.scale < 1.0 ? g.scale : 1.0;
    const double support = p.mode == ResizeMode::kLinear ? 1.0 : 2.0;
    t.aa_start = static_cast<int64_t>(std::floor(-support / t.aa_scale)) + 1;
    t.n = static_cast<int32_t>(2 - 2 * t.aa_start);
    double sum = 0;
    for (int32_t j = 0; j < t.n; ++j) sum += raw_coeff(p, t, j);
    t.sum1 = sum;
  }
  t.first = base + 1 - t.n / 2;
  if (p.exclude_outside) {
    double sum = 0;
    for (int32_t j = 0; j < t.n; ++j) {
      const int64_t i = t.first + j;
      if (i < 0 || i >= in_len) continue;
      double c = raw_coeff(p, t, j);
      if (p.antialias) c /= t.sum1;
      sum += c;
    }
    t.sum2 = sum;
  }
  return t;
}

/// Output element `index` (row-major over desc.out), as a double before the store's rounding.
/// `load(offset)` returns input element `offset` as a double.
template <class Load>
INGOT_RESIZE_HD double resize_element(const ResizeDesc& p, int64_t index, Load&& load) {
  int64_t o[kMaxResizeDims];
  for (int d = p.rank - 1; d >= 0; --d) {
    o[d] = index % p.out[d];
    index /= p.out[d];
  }
  int64_t base_off = 0;
  if (p.mode == ResizeMode::kNearest) {
    bool extrapolate = false, zero = false;
    for (int d = 0; d < p.rank; ++d) {
      if (!p.resized[d]) {
        base_off += o[d] * p.in_stride[d];
        continue;
      }
      const AxisTaps t = axis_taps(p, axis_geom(p, d), o[d]);
      if (t.extrapolate) extrapolate = true;
      else if (t.zero) zero = true;
      else base_off += t.pick * p.in_stride[d];
    }
    if (extrapolate) return p.extrapolation;
    if (zero) return 0.0;
    return load(base_off);
  }
  AxisTaps taps[kMaxResizeDims];
  int dims[kMaxResizeDims];
  int na = 0;
  for (int d = 0; d < p.rank; ++d) {
    if (!p.resized[d]) {
      base_off += o[d] * p.in_stride[d];
      continue;
    }
    taps[na] = axis_taps(p, axis_geom(p, d), o[d]);
    // An extrapolated position fills the whole line with the value; later passes of the
    // reference average equal values, which keeps it.
    if (taps[na].extrapolate) return p.extrapolation;
    dims[na++] = d;
  }
  int32_t j[kMaxResizeDims] = {};
  double acc = 0;
  for (;;) {
    double w = 1;
    int64_t off = base_off;
    bool skip = false;
    for (int k = 0; k < na; ++k) {
      const int d = dims[k];
      const double wk = tap_weight(p, axis_geom(p, d), taps[k], j[k]);
      skip = skip || wk == 0;  // as the reference: zero-weight taps are not read
      w = mul(w, wk);
      off += clamp_index(taps[k].first + j[k], p.in[d]) * p.in_stride[d];
    }
    // Unfused, like the reference's sum: with one resized axis the result is bit-identical.
    if (!skip) acc += mul(w, load(off));
    int k = na - 1;
    while (k >= 0 && ++j[k] == taps[k].n) j[k--] = 0;
    if (k < 0) break;
  }
  return acc;
}

/// Whether the image kernel (resize_element_inner2) computes this desc: only the last two dims
/// may be resized (images, NCHW: the spatial dims), without antialias (2 taps per axis for
/// linear, 4 for cubic: a count the kernel knows at compile time).
INGOT_RESIZE_HD bool inner2_applies(const ResizeDesc& p) {
  if (p.rank < 2 || p.antialias) return false;
  for (int d = 0; d + 2 < p.rank; ++d)
    if (p.resized[d]) return false;
  return true;
}

/// The image kernel's parameter: the mode fields and the two inner axes as scalars (no array a
/// run-time index could reach, see AxisGeom).
struct Inner2Desc {
  ResizeMode mode = ResizeMode::kNearest;
  ResizeCoord coord = ResizeCoord::kHalfPixel;
  ResizeNearest nearest = ResizeNearest::kRoundPreferFloor;
  bool exclude_outside = false;
  bool antialias = false;  ///< always false here (inner2_applies); read by the shared helpers
  bool resized_h = false, resized_w = false;
  double cubic_a = -0.75;
  double extrapolation = 0.0;
  AxisGeom h, w;
};

/// The Inner2Desc of a desc inner2_applies() accepts.
INGOT_RESIZE_HD Inner2Desc inner2_desc(const ResizeDesc& p) {
  Inner2Desc q;
  q.mode = p.mode;
  q.coord = p.coord;
  q.nearest = p.nearest;
  q.exclude_outside = p.exclude_outside;
  q.antialias = p.antialias;
  q.resized_h = p.resized[p.rank - 2];
  q.resized_w = p.resized[p.rank - 1];
  q.cubic_a = p.cubic_a;
  q.extrapolation = p.extrapolation;
  q.h = axis_geom(p, p.rank - 2);
  q.w = axis_geom(p, p.rank - 1);
  return q;
}

/// What one output position (oh, ow) of the image kernel reads, the same for every plane: the
/// taps of both axes combined (their products formed once), or a constant.
template <int kTaps>
struct Inner2Taps {
  static constexpr int kN = kTaps > 0 ? kTaps * kTaps : 1;
  enum State : int32_t { kRead = 0, kExtrapolate = 1, kZero = 2 } state = kRead;
  int32_t count = 0;    ///< products in w/off: kTaps^2 (both axes resized), kTaps (one), 1 (none / nearest)
  double w[kN] = {};    ///< w[k] = 1 * w_h (* w_w), as resize_element forms it; 0: not read
  int64_t off[kN] = {}; ///< offset of tap k within a plane
};

/// The taps of output position (oh, ow) for a desc inner2_applies() accepts, with kTaps taps per
/// resized axis (0: nearest, 2: linear, 4: cubic; it must match q.mode): the same taps, weights
/// and products as resize_element, in loops of a compile-time length (unrolled: registers, no stack).
template <int kTaps>
INGOT_RESIZE_HD Inner2Taps<kTaps> inner2_taps(const Inner2Desc& q, int64_t oh, int64_t ow) {
  Inner2Taps<kTaps> r;
  const int64_t row = q.w.in;  // the h axis' input stride
  if (kTaps == 0) {
    bool extrapolate = false, zero = false;
    int64_t off = 0;
    if (!q.resized_h) {
      off += oh * row;
    } else {
      const AxisTaps t = axis_taps(q, q.h, oh);
      if (t.extrapolate) extrapolate = true;
      else if (t.zero) zero = true;
      else off += t.pick * row;
    }
    if (!q.resized_w) {
      off += ow;
    } else {
      const AxisTaps t = axis_taps(q, q.w, ow);
      if (t.extrapolate) extrapolate = true;
      else if (t.zero) zero = true;
      else off += t.pick;
    }
    r.state = extrapolate ? Inner2Taps<kTaps>::kExtrapolate : zero ? Inner2Taps<kTaps>::kZero : Inner2Taps<kTaps>::kRead;
    r.count = 1;
    r.w[0] = 1;
    r.off[0] = off;
    return r;
  }
  constexpr int kA = kTaps > 0 ? kTaps : 1;
  // h's taps in (w0, i0), w's in (w1, i1): fixed roles, so every index is a compile-time one.
  double w0[kA], w1[kA];
  int64_t i0[kA], i1[kA];
  int64_t base = 0;
  if (q.resized_h) {
    const AxisTaps t = axis_taps(q, q.h, oh);
    if (t.extrapolate) {
      r.state = Inner2Taps<kTaps>::kExtrapolate;
      return r;
    }
    for (int j = 0; j < kA; ++j) {
      w0[j] = tap_weight(q, q.h, t, j);
      i0[j] = clamp_index(t.first + j, q.h.in) * row;
    }
  } else {
    base += oh * row;
  }
  if (q.resized_w) {
    const AxisTaps t = axis_taps(q, q.w, ow);
    if (t.extrapolate) {
      r.state = Inner2Taps<kTaps>::kExtrapolate;
      return r;
    }
    for (int j = 0; j < kA; ++j) {
      w1[j] = tap_weight(q, q.w, t, j);
      i1[j] = clamp_index(t.first + j, q.w.in);
    }
  } else {
    base += ow;
  }
  // The products as resize_element forms them: w = 1 * w_h (* w_w), unfused; a zero weight
  // (either factor) marks a tap that is not read.
  if (q.resized_h && q.resized_w) {
    for (int a = 0; a < kA; ++a)
      for (int b = 0; b < kA; ++b) {
        const bool skip = w0[a] == 0 || w1[b] == 0;
        r.w[a * kA + b] = skip ? 0.0 : mul(mul(1.0, w0[a]), w1[b]);
        r.off[a * kA + b] = base + i0[a] + i1[b];
      }
    r.count = kA * kA;
  } else if (q.resized_h || q.resized_w) {
    for (int a = 0; a < kA; ++a) {
      const double wa = q.resized_h ? w0[a] : w1[a];
      r.w[a] = wa == 0 ? 0.0 : mul(1.0, wa);
      r.off[a] = base + (q.resized_h ? i0[a] : i1[a]);
    }
    r.count = kA;
  } else {
    r.count = 1;
    r.w[0] = 1;
    r.off[0] = base;
  }
  return r;
}

/// The value at a position with taps `t` in the plane starting at input offset `plane_off`, as
/// a double before the store's rounding: resize_element's sum, term for term.
template <int kTaps, class Load>
INGOT_RESIZE_HD double inner2_value(const Inner2Desc& q, const Inner2Taps<kTaps>& t, int64_t plane_off, Load&& load) {
  if (t.state == Inner2Taps<kTaps>::kExtrapolate) return q.extrapolation;
  if (t.state == Inner2Taps<kTaps>::kZero) return 0.0;
  if (kTaps == 0) return load(plane_off + t.off[0]);
  double acc = 0;
  if (t.count == 1) return acc + load(plane_off + t.off[0]);  // no axis resized: -0 becomes +0, as the sum does
  for (int k = 0; k < Inner2Taps<kTaps>::kN; ++k)
    if (k < t.count && t.w[k] != 0) acc += mul(t.w[k], load(plane_off + t.off[k]));
  return acc;
}

/// resize_element for a desc inner2_applies() accepts, through inner2_taps and inner2_value
/// (the host replay's entry: the kernel computes the taps once per position and applies them to
/// every plane), with the tap count q.mode gives. The outer dims are copied, so a plane starts
/// at plane * in_h * in_w in the contiguous input.
template <class Load>
INGOT_RESIZE_HD double resize_element_inner2(const Inner2Desc& q, int64_t index, Load&& load) {
  const int64_t ow = index % q.w.out;
  index /= q.w.out;
  const int64_t oh = index % q.h.out;
  const int64_t plane_off = index / q.h.out * q.h.in * q.w.in;
  switch (q.mode) {
    case ResizeMode::kNearest: return inner2_value(q, inner2_taps<0>(q, oh, ow), plane_off, load);
    case ResizeMode::kLinear: return inner2_value(q, inner2_taps<2>(q, oh, ow), plane_off, load);
    default: return inner2_value(q, inner2_taps<4>(q, oh, ow), plane_off, load);
  }
}

}  // namespace resize_math
}  // namespace ingot::backend::cuda
