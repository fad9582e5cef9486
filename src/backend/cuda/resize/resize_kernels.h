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

/// Source coordinate of output position y along dim `d`; sets `extrapolate` for
/// tf_crop_and_resize positions outside the input.
INGOT_RESIZE_HD double source_coord(const ResizeDesc& p, int d, double y, bool& extrapolate) {
  extrapolate = false;
  const double scale = p.scale[d];
  const double in_w = static_cast<double>(p.in[d]);
  const double out_w = mul(scale, in_w);  // the fractional output width, as the spec defines it
  switch (p.coord) {
    case ResizeCoord::kAlignCorners:
      return out_w == 1 ? 0.0 : mul(y, in_w - 1) / (out_w - 1);
    case ResizeCoord::kAsymmetric:
      return y / scale;
    case ResizeCoord::kTfCropAndResize: {
      const float r0 = static_cast<float>(p.roi_start[d]), r1 = static_cast<float>(p.roi_end[d]);
      const double extent = static_cast<float>(r1 - r0);
      const double start = static_cast<float>(r0 * static_cast<float>(p.in[d] - 1));
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
      const double adjustment = static_cast<double>(p.out[d]) / out_w;
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
INGOT_RESIZE_HD double raw_coeff(const ResizeDesc& p, const AxisTaps& t, int32_t j) {
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
INGOT_RESIZE_HD double tap_weight(const ResizeDesc& p, int d, const AxisTaps& t, int32_t j) {
  double c = raw_coeff(p, t, j);
  if (p.antialias) c /= t.sum1;
  if (p.exclude_outside) {
    const int64_t i = t.first + j;
    if (i < 0 || i >= p.in[d]) c = 0;
    if (t.sum2 != 0) c /= t.sum2;
  }
  return c;
}

INGOT_RESIZE_HD AxisTaps axis_taps(const ResizeDesc& p, int d, int64_t y) {
  AxisTaps t;
  const double x = source_coord(p, d, static_cast<double>(y), t.extrapolate);
  // Prefer the pixel on the left of x: ratio in (0, 1].
  const double fl = std::floor(x);
  int64_t base = static_cast<int64_t>(fl);
  double ratio = x - fl;
  if (ratio == 0) {
    base -= 1;
    ratio = 1;
  }
  t.ratio = ratio;
  const int64_t in_len = p.in[d];
  if (p.mode == ResizeMode::kNearest) {
    int64_t pick = base + 1;
    if (ratio != 1) {
      switch (p.nearest) {
        case ResizeNearest::kRoundPreferFloor: pick = ratio <= 0.5 ? base : base + 1; break;
        case ResizeNearest::kRoundPreferCeil: pick = ratio < 0.5 ? base : base + 1; break;
        case ResizeNearest::kFloor: pick = base; break;
        case ResizeNearest::kCeil: pick = base + 1; break;
        case ResizeNearest::kSimple: pick = p.scale[d] < 1 ? base + 1 : base; break;
      }
    }
    t.zero = p.exclude_outside && (pick < 0 || pick >= in_len);
    t.pick = clamp_index(pick, in_len);
    return t;
  }
  if (!p.antialias) {
    t.n = p.mode == ResizeMode::kLinear ? 2 : 4;
  } else {
    t.aa_scale = p.scale[d] < 1.0 ? p.scale[d] : 1.0;
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
      const AxisTaps t = axis_taps(p, d, o[d]);
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
    taps[na] = axis_taps(p, d, o[d]);
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
      const double wk = tap_weight(p, d, taps[k], j[k]);
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

/// Whether resize_element_inner2 computes this desc: only the last two dims may be resized
/// (images, NCHW: the spatial dims), without antialias (at most 4 taps per axis).
INGOT_RESIZE_HD bool inner2_applies(const ResizeDesc& p) {
  if (p.rank < 2 || p.antialias) return false;
  for (int d = 0; d + 2 < p.rank; ++d)
    if (p.resized[d]) return false;
  return true;
}

/// resize_element for a desc inner2_applies() accepts: the same taps, weights, products and
/// summation order, so the same double, with the index split into (plane, h, w) by two
/// divisions in `Index` (32-bit where the output fits) instead of a 64-bit division per dim, and
/// the two axes' taps looped directly. The outer dims are copied, so a plane starts at
/// plane * in[h] * in[w] in the contiguous input.
template <class Index, class Load>
INGOT_RESIZE_HD double resize_element_inner2(const ResizeDesc& p, Index index, Load&& load) {
  const int hd = p.rank - 2, wd = p.rank - 1;
  const Index ow = index % static_cast<Index>(p.out[wd]);
  index /= static_cast<Index>(p.out[wd]);
  const Index oh = index % static_cast<Index>(p.out[hd]);
  const Index plane = index / static_cast<Index>(p.out[hd]);
  int64_t off0 = static_cast<int64_t>(plane) * p.in[hd] * p.in[wd];
  const int64_t o[2] = {static_cast<int64_t>(oh), static_cast<int64_t>(ow)};
  if (p.mode == ResizeMode::kNearest) {
    bool extrapolate = false, zero = false;
    for (int k = 0; k < 2; ++k) {
      const int d = hd + k;
      if (!p.resized[d]) {
        off0 += o[k] * p.in_stride[d];
        continue;
      }
      const AxisTaps t = axis_taps(p, d, o[k]);
      if (t.extrapolate) extrapolate = true;
      else if (t.zero) zero = true;
      else off0 += t.pick * p.in_stride[d];
    }
    if (extrapolate) return p.extrapolation;
    if (zero) return 0.0;
    return load(off0);
  }
  AxisTaps taps[2];
  int dims[2];
  int na = 0;
  for (int k = 0; k < 2; ++k) {
    const int d = hd + k;
    if (!p.resized[d]) {
      off0 += o[k] * p.in_stride[d];
      continue;
    }
    taps[na] = axis_taps(p, d, o[k]);
    if (taps[na].extrapolate) return p.extrapolation;
    dims[na++] = d;
  }
  if (na == 0) return 0.0 + load(off0);  // as resize_element's one-tap sum: -0 becomes +0
  double w0[4], w1[4] = {1, 1, 1, 1};
  int64_t i0[4], i1[4] = {0, 0, 0, 0};
  for (int32_t j = 0; j < taps[0].n; ++j) {
    w0[j] = tap_weight(p, dims[0], taps[0], j);
    i0[j] = clamp_index(taps[0].first + j, p.in[dims[0]]) * p.in_stride[dims[0]];
  }
  const int32_t n1 = na == 2 ? taps[1].n : 1;
  for (int32_t j = 0; na == 2 && j < n1; ++j) {
    w1[j] = tap_weight(p, dims[1], taps[1], j);
    i1[j] = clamp_index(taps[1].first + j, p.in[dims[1]]) * p.in_stride[dims[1]];
  }
  double acc = 0;
  for (int32_t a = 0; a < taps[0].n; ++a)
    for (int32_t b = 0; b < n1; ++b) {
      // As resize_element: w = 1 * w0 (* w1), zero-weight taps not read.
      if (w0[a] == 0 || (na == 2 && w1[b] == 0)) continue;
      const double w = na == 2 ? mul(mul(1.0, w0[a]), w1[b]) : mul(1.0, w0[a]);
      acc += mul(w, load(off0 + i0[a] + i1[b]));
    }
  return acc;
}

}  // namespace resize_math
}  // namespace ingot::backend::cuda
