// Copyright ingot authors. Apache-2.0.
//
// The resize tactic family of the cuda backend (host side): ONNX Resize, opsets 10 to 19 as the
// CPU reference runs them, for f32/f16/bf16 tensors of rank 1 to 8: nearest (every
// nearest_mode), linear and cubic over any set of axes (separable: the product of the per-axis
// taps), cubic_coeff_a, exclude_outside, antialias, every coordinate_transformation_mode
// (tf_crop_and_resize with extrapolation_value), `axes` and keep_aspect_ratio_policy.
//
// The output geometry must be known on the host: scales as an initializer, or sizes as an
// initializer, or computed sizes with the stretch policy (then the output shape the runtime
// propagated is the sizes). Refused, with the reason in resize_params_for's error (the host
// fallback runs them): computed scales, computed sizes with another policy, a computed roi
// under tf_crop_and_resize, other dtypes, rank above 8.
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/core/cuda_tactics.h"
#include "backend/cuda/resize/resize_kernels.h"

namespace ingot::backend::cuda {
namespace {

constexpr char kTacticName[] = "cuda.resize";

// The params are ResizeParams' bytes: no padding may hide uninitialized bytes in an engine.
static_assert(sizeof(ResizeParams) == 64 + 5 * 8 * kMaxResizeDims, "ResizeParams must have no padding");

int64_t opset_of(const ir::Node& n) { return n.owner() ? n.owner()->opset(n.domain()) : 0; }


/// The string attribute `name`, or nullptr when the node does not have it.
const std::string* string_attr(const ir::Node& n, const char* name) {
  const ir::Attribute* a = n.attrs().find(name);
  return a ? &a->s : nullptr;
}

enum class Source { kAbsent, kHost, kComputed };

/// Whether optional input i is absent (missing, or known to be empty), an initializer, or
/// computed. Sets `host` for an initializer.
Source input_source(const ir::Node& n, const std::vector<ir::TensorType>& in, size_t i, const Tensor** host) {
  *host = nullptr;
  const ir::Value* v = n.input(i);
  if (v == nullptr) return Source::kAbsent;
  if (const Tensor* t = v->initializer()) {
    if (t->numel() == 0) return Source::kAbsent;
    *host = t;
    return Source::kHost;
  }
  const ir::Shape& s = i < in.size() ? in[i].shape : v->shape();
  if (s.rank_known() && s.rank() == 1 && s[0].is_known() && s[0].value() == 0) return Source::kAbsent;
  return Source::kComputed;
}

}  // namespace

Status resize_params_for(const ir::Node& node, const std::vector<ir::TensorType>& in, ResizeParams* p) {
  *p = ResizeParams();
  if (node.op_type() != "Resize" || !(node.domain().empty() || node.domain() == "ai.onnx"))
    return unsupported(node.describe(), ": not an ONNX Resize");
  const int64_t opset = opset_of(node);
  if (opset < 10) return unsupported(node.describe(), ": Resize needs opset >= 10, the node's opset is ", opset);
  if (in.empty() || in[0].dtype == DataType::kUndefined) return unsupported(node.describe(), ": input X has no type");
  FloatType ft;
  if (!to_float_type(in[0].dtype, &ft))
    return unsupported(node.describe(), ": input X is ", data_type_name(in[0].dtype),
                       "; the cuda resize kernels take f32, f16 or bf16");
  if (!node.output(0) || node.output(0)->dtype() != in[0].dtype)
    return unsupported(node.describe(), ": output Y must exist and have X's type");
  if (!in[0].shape.rank_known()) return unsupported(node.describe(), ": input X has an unknown rank");
  const int64_t rank = static_cast<int64_t>(in[0].shape.rank());
  if (rank < 1 || rank > kMaxResizeDims)
    return unsupported(node.describe(), ": input X has rank ", rank, "; the cuda resize kernels take 1 to ",
                       kMaxResizeDims);
  p->rank = static_cast<int32_t>(rank);

  const std::string* mode = string_attr(node, "mode");
  if (!mode || *mode == "nearest") p->mode = ResizeMode::kNearest;
  else if (*mode == "linear") p->mode = ResizeMode::kLinear;
  else if (*mode == "cubic" && opset >= 11) p->mode = ResizeMode::kCubic;
  else return unsupported(node.describe(), ": mode '", *mode, "' is not supported at opset ", opset);

  size_t roi_idx = 0, scales_idx = 1, sizes_idx = 0;  // 0: no such input
  if (opset < 11) {
    p->coord = ResizeCoord::kAsymmetric;
    p->nearest = ResizeNearest::kSimple;
  } else {
    roi_idx = 1;
    scales_idx = 2;
    sizes_idx = 3;
    const std::string* ctm = string_attr(node, "coordinate_transformation_mode");
    if (!ctm || *ctm == "half_pixel") p->coord = ResizeCoord::kHalfPixel;
    else if (*ctm == "half_pixel_symmetric") p->coord = ResizeCoord::kHalfPixelSymmetric;
    else if (*ctm == "pytorch_half_pixel") p->coord = ResizeCoord::kPytorchHalfPixel;
    else if (*ctm == "align_corners") p->coord = ResizeCoord::kAlignCorners;
    else if (*ctm == "asymmetric") p->coord = ResizeCoord::kAsymmetric;
    else if (*ctm == "tf_crop_and_resize") p->coord = ResizeCoord::kTfCropAndResize;
    else if (*ctm == "tf_half_pixel_for_nn") p->coord = ResizeCoord::kTfHalfPixelForNN;
    else return unsupported(node.describe(), ": coordinate_transformation_mode '", *ctm, "' is not supported");
    const std::string* nm = string_attr(node, "nearest_mode");
    if (!nm || *nm == "round_prefer_floor") p->nearest = ResizeNearest::kRoundPreferFloor;
    else if (*nm == "round_prefer_ceil") p->nearest = ResizeNearest::kRoundPreferCeil;
    else if (*nm == "floor") p->nearest = ResizeNearest::kFloor;
    else if (*nm == "ceil") p->nearest = ResizeNearest::kCeil;
    else return unsupported(node.describe(), ": nearest_mode '", *nm, "' is not supported");
    p->cubic_a = node.attrs().get_float("cubic_coeff_a", -0.75f);
    p->exclude_outside = node.attrs().get_int("exclude_outside", 0) != 0;
    p->antialias = node.attrs().get_int("antialias", 0) != 0;
    p->extrapolation = node.attrs().get_float("extrapolation_value", 0.0f);
  }

  // Axes: the attribute (opset 18+) or every dim.
  if (const ir::Attribute* a = node.attrs().find("axes")) {
    if (a->ints.empty() || a->ints.size() > static_cast<size_t>(rank))
      return unsupported(node.describe(), ": axes has ", a->ints.size(), " values for rank ", rank);
    for (int64_t v : a->ints) {
      if (v < -rank || v >= rank)
        return unsupported(node.describe(), ": axes value ", v, " out of range for rank ", rank);
      const int64_t ax = v < 0 ? v + rank : v;
      for (int32_t k = 0; k < p->num_axes; ++k)
        if (p->axes[k] == ax) return unsupported(node.describe(), ": axes has duplicate value ", v);
      p->axes[p->num_axes++] = ax;
    }
  } else {
    for (int64_t i = 0; i < rank; ++i) p->axes[p->num_axes++] = i;
  }
  const size_t na = static_cast<size_t>(p->num_axes);

  const std::string* policy = string_attr(node, "keep_aspect_ratio_policy");
  if (!policy || *policy == "stretch") p->policy = ResizePolicy::kStretch;
  else if (*policy == "not_larger") p->policy = ResizePolicy::kNotLarger;
  else if (*policy == "not_smaller") p->policy = ResizePolicy::kNotSmaller;
  else return unsupported(node.describe(), ": keep_aspect_ratio_policy '", *policy, "' is not supported");

  const Tensor* scales = nullptr;
  const Tensor* sizes = nullptr;
  const Source sc = input_source(node, in, scales_idx, &scales);
  const Source sz = sizes_idx ? input_source(node, in, sizes_idx, &sizes) : Source::kAbsent;
  if (sc != Source::kAbsent && sz != Source::kAbsent)
    return unsupported(node.describe(), ": only one of 'scales' and 'sizes' may be given");
  if (sc == Source::kComputed)
    return unsupported(node.describe(), ": input 'scales' is computed at run time; the cuda resize tactic needs it as "
                       "an initializer (its values cannot be recovered from the output shape)");
  if (sc == Source::kHost) {
    if (scales->numel() != static_cast<int64_t>(na))
      return unsupported(node.describe(), ": input 'scales' has ", scales->numel(), " values, expected ", na);
    if (!is_float(scales->dtype())) return unsupported(node.describe(), ": input 'scales' must be float");
    p->source = ResizeSource::kScales;
    for (size_t i = 0; i < na; ++i) {
      const double s = static_cast<double>(static_cast<float>(scales->get_f64(static_cast<int64_t>(i))));
      if (!(s > 0)) return unsupported(node.describe(), ": scales must be positive, got ", s);
      p->scales[i] = s;
    }
  } else if (sz == Source::kHost) {
    if (sizes->numel() != static_cast<int64_t>(na))
      return unsupported(node.describe(), ": input 'sizes' has ", sizes->numel(), " values, expected ", na);
    p->source = ResizeSource::kSizes;
    for (size_t i = 0; i < na; ++i) {
      p->sizes[i] = sizes->get_i64(static_cast<int64_t>(i));
      if (p->sizes[i] < 0) return unsupported(node.describe(), ": sizes must be non-negative, got ", p->sizes[i]);
    }
  } else if (sz == Source::kComputed) {
    if (p->policy != ResizePolicy::kStretch)
      return unsupported(node.describe(), ": input 'sizes' is computed at run time and keep_aspect_ratio_policy is not "
                         "'stretch'; the cuda resize tactic needs sizes as an initializer then");
    p->source = ResizeSource::kSizesFromOutput;
  } else {
    return unsupported(node.describe(), ": one of 'scales' and 'sizes' must be given");
  }

  if (p->coord == ResizeCoord::kTfCropAndResize) {
    const Tensor* roi = nullptr;
    const Source rs = input_source(node, in, roi_idx, &roi);
    if (rs == Source::kAbsent)
      return unsupported(node.describe(), ": tf_crop_and_resize needs a non-empty 'roi' input");
    if (rs == Source::kComputed)
      return unsupported(node.describe(),
                         ": input 'roi' is computed at run time; the cuda resize tactic needs it as an initializer");
    if (roi->numel() != static_cast<int64_t>(2 * na))
      return unsupported(node.describe(), ": input 'roi' has ", roi->numel(), " values, expected ", 2 * na);
    p->has_roi = 1;
    for (size_t i = 0; i < na; ++i) {
      p->roi_start[i] = static_cast<float>(roi->get_f64(static_cast<int64_t>(i)));
      p->roi_end[i] = static_cast<float>(roi->get_f64(static_cast<int64_t>(na + i)));
    }
  }
  return Status::Ok();
}

Status resize_desc_for(const ResizeParams& p, const Shape64& x, const Shape64& y, ResizeDesc* d) {
  *d = ResizeDesc();
  const int64_t r = static_cast<int64_t>(x.size());
  if (r != p.rank || y.size() != x.size())
    return invalid_argument("Resize: input rank ", r, " / output rank ", y.size(), " differ from the node's rank ",
                            p.rank);
  d->rank = p.rank;
  d->mode = p.mode;
  d->coord = p.coord;
  d->nearest = p.nearest;
  d->exclude_outside = p.exclude_outside != 0;
  d->antialias = p.antialias != 0;
  d->cubic_a = p.cubic_a;
  d->extrapolation = p.extrapolation;
  int64_t want[kMaxResizeDims];
  bool listed[kMaxResizeDims] = {};
  for (int64_t i = 0; i < r; ++i) {
    d->in[i] = x[i];
    d->scale[i] = 1.0;
    d->roi_start[i] = 0.0;
    d->roi_end[i] = 1.0;
    want[i] = x[i];
  }
  const int32_t na = p.num_axes;
  for (int32_t k = 0; k < na; ++k) {
    const int64_t a = p.axes[k];
    if (a < 0 || a >= r) return invalid_argument("Resize: axis ", a, " out of range for rank ", r);
    listed[a] = true;
    switch (p.source) {
      case ResizeSource::kScales:
        d->scale[a] = p.scales[k];
        want[a] = static_cast<int64_t>(std::floor(p.scales[k] * static_cast<double>(x[a])));
        break;
      case ResizeSource::kSizes:
      case ResizeSource::kSizesFromOutput: {
        const int64_t size = p.source == ResizeSource::kSizes ? p.sizes[k] : y[a];
        if (x[a] == 0) return invalid_argument("Resize: cannot resize an empty axis ", a, " to size ", size);
        want[a] = size;
        d->scale[a] = static_cast<double>(size) / static_cast<double>(x[a]);
        break;
      }
    }
    if (p.has_roi) {
      d->roi_start[a] = p.roi_start[k];
      d->roi_end[a] = p.roi_end[k];
    }
  }
  if (p.source != ResizeSource::kScales && p.policy != ResizePolicy::kStretch && na > 0) {
    double s = d->scale[p.axes[0]];
    for (int32_t k = 0; k < na; ++k) {
      const double sk = d->scale[p.axes[k]];
      s = p.policy == ResizePolicy::kNotLarger ? std::min(s, sk) : std::max(s, sk);
    }
    for (int32_t k = 0; k < na; ++k) {
      const int64_t a = p.axes[k];
      d->scale[a] = s;
      want[a] = static_cast<int64_t>(s * static_cast<double>(x[a]) + 0.5);
    }
  }
  int64_t in_numel = 1, out_numel = 1;
  for (int64_t i = 0; i < r; ++i) {
    if (want[i] != y[i])
      return invalid_argument("Resize: output ", shape_to_string(y),
                              " is not the shape the scales/sizes give for input ", shape_to_string(x), " (dim ", i,
                              " should be ", want[i], ")");
    d->out[i] = y[i];
    in_numel *= x[i];
    out_numel *= y[i];
  }
  if (in_numel == 0 && out_numel > 0)
    return invalid_argument("Resize: cannot resize an empty input to a non-empty output");
  int64_t stride = 1;
  for (int64_t i = r - 1; i >= 0; --i) {
    d->in_stride[i] = stride;
    stride *= x[i];
    // The reference's identity test: scale 1 (to 1e-9), same length, trivial roi.
    const bool trivial_roi =
        !p.has_roi || (std::fabs(d->roi_start[i]) <= 1e-9 && std::fabs(d->roi_end[i] - 1.0) <= 1e-9);
    const bool identity = std::fabs(d->scale[i] - 1.0) <= 1e-9 && y[i] == x[i] && trivial_roi;
    d->resized[i] = listed[i] && !identity;
  }
  return Status::Ok();
}

namespace {

class ResizeTactic final : public Tactic {
 public:
  explicit ResizeTactic(const ResizeParams& p) : params_(p) {}

  std::string name() const override { return kTacticName; }

  bool supports(const ir::Node& node, const std::vector<ir::TensorType>& in) const override {
    ResizeParams p;
    return resize_params_for(node, in, &p).ok();
  }

  uint64_t workspace_bytes(const ir::Node&, const std::vector<Shape64>&) const override { return 0; }

  Status enqueue(StepIO& io) const override {
    if (io.node == nullptr || io.outputs == nullptr || io.outputs->empty() || !(*io.outputs)[0].defined() ||
        io.inputs.empty() || io.inputs[0] == nullptr)
      return internal_error("cuda.resize: step without a node, input X or a defined output Y");
    const Tensor& x = *io.inputs[0];
    Tensor& y = (*io.outputs)[0];
    FloatType t;
    if (!to_float_type(x.dtype(), &t) || y.dtype() != x.dtype())
      return internal_error(io.node->describe(), ": input X (", data_type_name(x.dtype()), ") / output Y (",
                            data_type_name(y.dtype()), ") do not match the tactic");
    ResizeDesc d;
    Status st = resize_desc_for(params_, x.shape(), y.shape(), &d);
    if (!st.ok()) return Status(st.code(), io.node->describe() + ": " + st.message());
    const cudaError_t err = launch_resize(t, x.raw(), y.mutable_raw(), d, static_cast<cudaStream_t>(io.stream));
    if (err != cudaSuccess)
      return internal_error(io.node->describe(), ": ", kTacticName, " launch failed: ", cudaGetErrorString(err));
    return Status::Ok();
  }

  std::vector<uint8_t> serialize() const override {
    std::vector<uint8_t> out(sizeof(ResizeParams));
    std::memcpy(out.data(), &params_, sizeof(ResizeParams));
    return out;
  }

 private:
  ResizeParams params_;
};

}  // namespace

TacticFamily resize_family() {
  TacticFamily f;
  f.name = "resize";
  f.candidates = [](const ir::Node& node, const std::vector<ir::TensorType>& inputs) {
    std::vector<std::unique_ptr<Tactic>> out;
    ResizeParams p;
    if (resize_params_for(node, inputs, &p).ok()) out.push_back(std::make_unique<ResizeTactic>(p));
    return out;
  };
  f.create = [](const std::string& name, const std::vector<uint8_t>& params) -> std::unique_ptr<Tactic> {
    if (name != kTacticName) return nullptr;
    ResizeParams p;
    if (params.size() != sizeof(ResizeParams)) return nullptr;
    std::memcpy(&p, params.data(), sizeof(ResizeParams));
    if (p.version != ResizeParams().version || p.rank < 1 || p.rank > kMaxResizeDims || p.num_axes < 0 ||
        p.num_axes > p.rank)
      return nullptr;
    return std::make_unique<ResizeTactic>(p);
  };
  return f;
}

}  // namespace ingot::backend::cuda
