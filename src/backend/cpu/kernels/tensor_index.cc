// Copyright ingot authors. Apache-2.0.
//
// Shape and data-movement kernels (part 2): gather/scatter, pad, depth/space rearrangement,
// one-hot, data-dependent outputs (NonZero, TopK, Compress, Unique) and friends.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "backend/cpu/kernel_util.h"
#include "backend/cpu/kernels/all_kernels.h"

namespace ingot::cpu {

// From tensor.cc.
int tensor_elem_bytes(DataType t);
void tensor_copy_elem(const Tensor& src, int64_t si, Tensor& dst, int64_t di);
void tensor_copy_range(const Tensor& src, int64_t si, Tensor& dst, int64_t di, int64_t n);
void tensor_strided_copy(const Tensor& src, int64_t offset, const Shape64& out_shape, const Shape64& strides,
                         Tensor& dst);

namespace {

Status norm_axis(KernelContext& k, int64_t* axis, int64_t rank) {
  if (*axis < -rank || *axis >= rank) return k.error("axis ", *axis, " out of range for rank ", rank);
  if (*axis < 0) *axis += rank;
  return Status::Ok();
}

// Index `v` normalized against size `n`, or an error.
Status norm_index(KernelContext& k, int64_t* v, int64_t n) {
  if (*v < -n || *v >= n) return k.error("index ", *v, " out of range for axis of size ", n);
  if (*v < 0) *v += n;
  return Status::Ok();
}

// -1 / 0 / 1 comparison of two elements of the same tensor (any ordered dtype).
int cmp_elem(const Tensor& a, int64_t i, const Tensor& b, int64_t j) {
  DataType t = a.dtype();
  if (t == DataType::kString) {
    int c = a.strings()[i].compare(b.strings()[j]);
    return c < 0 ? -1 : c > 0;
  }
  if (t == DataType::kUInt64) {
    uint64_t x = a.data<uint64_t>()[i], y = b.data<uint64_t>()[j];
    return x < y ? -1 : x > y;
  }
  if (is_float(t)) {
    double x = a.get_f64(i), y = b.get_f64(j);
    return x < y ? -1 : x > y;
  }
  int64_t x = a.get_i64(i), y = b.get_i64(j);
  return x < y ? -1 : x > y;
}

Status gather(KernelContext& k) {
  const Tensor &x = *k.input(0), &ind = *k.input(1);
  int64_t r = static_cast<int64_t>(x.rank());
  int64_t axis = k.attrs().get_int("axis", 0);
  INGOT_RETURN_IF_ERROR(norm_axis(k, &axis, r));
  Shape64 out(x.shape().begin(), x.shape().begin() + axis);
  out.insert(out.end(), ind.shape().begin(), ind.shape().end());
  out.insert(out.end(), x.shape().begin() + axis + 1, x.shape().end());
  INGOT_ASSIGN_OR_RETURN(Tensor * y, k.allocate_output(0, x.dtype(), out));
  int64_t outer = 1, inner = 1, n = x.dim(axis), m = ind.numel();
  for (int64_t i = 0; i < axis; ++i) outer *= x.dim(i);
  for (int64_t i = axis + 1; i < r; ++i) inner *= x.dim(i);
  std::vector<int64_t> idx = tensor_to_i64(ind);
  for (auto& v : idx) INGOT_RETURN_IF_ERROR(norm_index(k, &v, n));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < m; ++j) tensor_copy_range(x, (o * n + idx[j]) * inner, *y, (o * m + j) * inner, inner);
  return Status::Ok();
}

// Flat data offset of the element addressed by indices element `i` along `axis`.
struct ElementsMap {
  Shape64 ishape, dstrides;
  int64_t axis, n;
};

Status gather_elements(KernelContext& k) {
  const Tensor &x = *k.input(0), &ind = *k.input(1);
  int64_t r = static_cast<int64_t>(x.rank());
  if (static_cast<int64_t>(ind.rank()) != r) return k.error("data and indices ranks differ");
  int64_t axis = k.attrs().get_int("axis", 0);
  INGOT_RETURN_IF_ERROR(norm_axis(k, &axis, r));
  INGOT_ASSIGN_OR_RETURN(Tensor * y, k.allocate_output(0, x.dtype(), ind.shape()));
  Shape64 ds = shape_strides(x.shape());
  std::vector<int64_t> idx = tensor_to_i64(ind);
  for (int64_t i = 0; i < ind.numel(); ++i) {
    Shape64 c = unravel_index(i, ind.shape());
    int64_t v = idx[i];
    INGOT_RETURN_IF_ERROR(norm_index(k, &v, x.dim(axis)));
    c[axis] = v;
    for (int64_t d = 0; d < r; ++d)
      if (c[d] >= x.dim(d)) return k.error("indices shape exceeds data shape at dim ", d);
    tensor_copy_elem(x, ravel_index(c, ds), *y, i);
  }
  return Status::Ok();
}

enum class Red { kNone, kAdd, kMul, kMax, kMin };

Result<Red> parse_reduction(KernelContext& k) {
  std::string s = k.attrs().get_string("reduction", "none");
  if (s == "none") return Red::kNone;
  if (s == "add") return Red::kAdd;
  if (s == "mul") return Red::kMul;
  if (s == "max") return Red::kMax;
  if (s == "min") return Red::kMin;
  return k.error("unknown reduction '", s, "'");
}

void reduce_into(Tensor& dst, int64_t di, const Tensor& src, int64_t si, Red red) {
  if (red == Red::kNone) return tensor_copy_elem(src, si, dst, di);
  DataType t = dst.dtype();
  if (is_float(t)) {
    double a = dst.get_f64(di), b = src.get_f64(si);
    double v = red == Red::kAdd ? a + b : red == Red::kMul ? a * b : red == Red::kMax ? std::max(a, b) : std::min(a, b);
    dst.set_f64(di, v);
  } else if (t == DataType::kUInt64) {
    uint64_t a = dst.data<uint64_t>()[di], b = src.data<uint64_t>()[si];
    uint64_t v = red == Red::kAdd ? a + b : red == Red::kMul ? a * b : red == Red::kMax ? std::max(a, b) : std::min(a, b);
    dst.mutable_data<uint64_t>()[di] = v;
  } else {
    int64_t a = dst.get_i64(di), b = src.get_i64(si);
    int64_t v = red == Red::kAdd ? static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b))
              : red == Red::kMul ? static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b))
              : red == Red::kMax ? std::max(a, b) : std::min(a, b);
    if (t == DataType::kBool && red == Red::kAdd) v = (a || b);
    dst.set_i64(di, v);
  }
}

Status scatter_elements(KernelContext& k) {
  const Tensor &x = *k.input(0), &ind = *k.input(1), &upd = *k.input(2);
  int64_t r = static_cast<int64_t>(x.rank());
  if (static_cast<int64_t>(ind.rank()) != r || ind.shape() != upd.shape())
    return k.error("indices and updates must have the data's rank and equal shapes");
  int64_t axis = k.attrs().get_int("axis", 0);
  INGOT_RETURN_IF_ERROR(norm_axis(k, &axis, r));
  INGOT_ASSIGN_OR_RETURN(Red red, parse_reduction(k));
  k.output(0) = x.clone();
  Tensor& y = k.output(0);
  Shape64 ds = shape_strides(x.shape());
  std::vector<int64_t> idx = tensor_to_i64(ind);
  for (int64_t i = 0; i < ind.numel(); ++i) {
    Shape64 c = unravel_index(i, ind.shape());
    int64_t v = idx[i];
    INGOT_RETURN_IF_ERROR(norm_index(k, &v, x.dim(axis)));
    c[axis] = v;
    for (int64_t d = 0; d < r; ++d)
      if (c[d] >= x.dim(d)) return k.error("indices shape exceeds data shape at dim ", d);
    reduce_into(y, ravel_index(c, ds), upd, i, red);
  }
  return Status::Ok();
}

// Shared by GatherND / ScatterND: data offset of index tuple `t` (of `last` entries) within
// the dims [b, b+last) of `x`.
Status nd_offset(KernelContext& k, const Tensor& x, const std::vector<int64_t>& idx, int64_t t, int64_t last,
                 int64_t b, const Shape64& xs, int64_t* off) {
  *off = 0;
  for (int64_t j = 0; j < last; ++j) {
    int64_t v = idx[t * last + j];
    INGOT_RETURN_IF_ERROR(norm_index(k, &v, x.dim(b + j)));
    *off += v * xs[b + j];
  }
  return Status::Ok();
}

Status gather_nd(KernelContext& k) {
  const Tensor &x = *k.input(0), &ind = *k.input(1);
  int64_t r = static_cast<int64_t>(x.rank()), q = static_cast<int64_t>(ind.rank());
  int64_t b = k.attrs().get_int("batch_dims", 0);
  if (r < 1 || q < 1 || b < 0 || b >= std::min(r, q)) return k.error("bad ranks or batch_dims");
  int64_t last = ind.dim(q - 1);
  if (last < 1 || last > r - b) return k.error("indices last dim ", last, " out of range");
  for (int64_t i = 0; i < b; ++i)
    if (x.dim(i) != ind.dim(i)) return k.error("batch dims of data and indices differ");
  Shape64 out(ind.shape().begin(), ind.shape().end() - 1);
  out.insert(out.end(), x.shape().begin() + b + last, x.shape().end());
  INGOT_ASSIGN_OR_RETURN(Tensor * y, k.allocate_output(0, x.dtype(), out));
  int64_t nb = 1, per = 1, slice = 1;
  for (int64_t i = 0; i < b; ++i) nb *= x.dim(i);
  for (int64_t i = b; i < q - 1; ++i) per *= ind.dim(i);
  for (int64_t i = b + last; i < r; ++i) slice *= x.dim(i);
  Shape64 xs = shape_strides(x.shape());
  int64_t bstride = b > 0 ? xs[b - 1] : 0;
  std::vector<int64_t> idx = tensor_to_i64(ind);
  for (int64_t bi = 0; bi < nb; ++bi)
    for (int64_t t = 0; t < per; ++t) {
      int64_t off;
      INGOT_RETURN_IF_ERROR(nd_offset(k, x, idx, bi * per + t, last, b, xs, &off));
      tensor_copy_range(x, bi * bstride + off, *y, (bi * per + t) * slice, slice);
    }
  return Status::Ok();
}

Status scatter_nd(KernelContext& k) {
  const Tensor &x = *k.input(0), &ind = *k.input(1), &upd = *k.input(2);
  int64_t r = static_cast<int64_t>(x.rank()), q = static_cast<int64_t>(ind.rank());
  if (q < 1) return k.error("indices must have rank >= 1");
  int64_t last = ind.dim(q - 1);
  if (last > r) return k.error("indices last dim ", last, " exceeds data rank ", r);
  Shape64 ushape(ind.shape().begin(), ind.shape().end() - 1);
  ushape.insert(ushape.end(), x.shape().begin() + last, x.shape().end());
  if (ushape != upd.shape())
    return k.error("updates shape ", shape_to_string(upd.shape()), " should be ", shape_to_string(ushape));
  INGOT_ASSIGN_OR_RETURN(Red red, parse_reduction(k));
  k.output(0) = x.clone();
  Tensor& y = k.output(0);
  int64_t n = 1, slice = 1;
  for (int64_t i = 0; i < q - 1; ++i) n *= ind.dim(i);
  for (int64_t i = last; i < r; ++i) slice *= x.dim(i);
  Shape64 xs = shape_strides(x.shape());
  std::vector<int64_t> idx = tensor_to_i64(ind);
  for (int64_t t = 0; t < n; ++t) {
    int64_t off;
    INGOT_RETURN_IF_ERROR(nd_offset(k, x, idx, t, last, 0, xs, &off));
    for (int64_t e = 0; e < slice; ++e) reduce_into(y, off + e, upd, t * slice + e, red);
  }
  return Status::Ok();
}

Status tensor_scatter(KernelContext& k) {
  const Tensor &x = *k.input(0), &upd = *k.input(1);
  int64_t r = static_cast<int64_t>(x.rank());
  int64_t axis = k.attrs().get_int("axis", -2);
  INGOT_RETURN_IF_ERROR(norm_axis(k, &axis, r));
  if (axis == 0) return k.error("axis must not be the batch axis 0");
  std::string mode = k.attrs().get_string("mode", "linear");
  if (mode != "linear" && mode != "circular") return k.error("unknown mode '", mode, "'");
  if (upd.rank() != x.rank()) return k.error("update rank differs from past_cache rank");
  for (int64_t i = 0; i < r; ++i)
    if (i == axis ? upd.dim(i) > x.dim(i) : upd.dim(i) != x.dim(i))
      return k.error("update shape ", shape_to_string(upd.shape()), " incompatible with cache ", shape_to_string(x.shape()));
  std::vector<int64_t> wi(x.dim(0), 0);
  if (k.has_input(2)) {
    wi = tensor_to_i64(*k.input(2));
    if (static_cast<int64_t>(wi.size()) != x.dim(0)) return k.error("write_indices must have one entry per batch");
  }
  k.output(0) = x.clone();
  Tensor& y = k.output(0);
  int64_t outer = 1, inner = 1, smax = x.dim(axis), s = upd.dim(axis);
  for (int64_t i = 0; i < axis; ++i) outer *= x.dim(i);
  for (int64_t i = axis + 1; i < r; ++i) inner *= x.dim(i);
  int64_t per_batch = outer / std::max<int64_t>(1, x.dim(0));
  for (int64_t o = 0; o < outer; ++o) {
    int64_t batch = per_batch ? o / per_batch : 0;
    for (int64_t j = 0; j < s; ++j) {
      int64_t d = wi[batch] + j;
      if (mode == "circular") d = ((d % smax) + smax) % smax;
      if (d < 0 || d >= smax) return k.error("write position ", d, " out of range for axis size ", smax);
      tensor_copy_range(upd, (o * s + j) * inner, y, (o * smax + d) * inner, inner);
    }
  }
  return Status::Ok();
}

// Output coordinate -> input coordinate per axis (-1: fill) for Pad / CenterCropPad.
Status map_copy(KernelContext& k, const Tensor& x, Tensor& y, const std::vector<std::vector<int64_t>>& maps) {
  int64_t n = y.numel();
  size_t r = y.rank();
  Shape64 xs = shape_strides(x.shape()), idx(r, 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t off = 0;
    bool inside = true;
    for (size_t d = 0; d < r; ++d) {
      int64_t v = maps[d][idx[d]];
      if (v < 0) { inside = false; break; }
      off += v * xs[d];
    }
    if (inside) tensor_copy_elem(x, off, y, i);
    for (size_t d = r; d-- > 0;) {
      if (++idx[d] < y.dim(d)) break;
      idx[d] = 0;
    }
  }
  (void)k;
  return Status::Ok();
}

Status pad(KernelContext& k) {
  const Tensor& x = *k.input(0);
  int64_t r = static_cast<int64_t>(x.rank());
  std::string mode = k.attrs().get_string("mode", "constant");
  std::vector<int64_t> pads;
  if (k.opset() < 2) pads = k.attrs().get_ints("paddings");
  else if (k.opset() < 11) pads = k.attrs().get_ints("pads");
  else if (k.has_input(1)) pads = tensor_to_i64(*k.input(1));
  else return k.error("input 'pads' is required");
  std::vector<int64_t> axes;
  if (k.opset() >= 18 && k.has_input(3)) axes = tensor_to_i64(*k.input(3));
  else for (int64_t i = 0; i < r; ++i) axes.push_back(i);
  int64_t na = static_cast<int64_t>(axes.size());
  if (static_cast<int64_t>(pads.size()) != 2 * na) return k.error("pads has ", pads.size(), " entries, expected ", 2 * na);
  std::vector<int64_t> begin(r, 0), end(r, 0);
  for (int64_t i = 0; i < na; ++i) {
    int64_t a = axes[i];
    INGOT_RETURN_IF_ERROR(norm_axis(k, &a, r));
    begin[a] = pads[i];
    end[a] = pads[i + na];
  }
  Shape64 out = x.shape();
  for (int64_t d = 0; d < r; ++d) {
    out[d] += begin[d] + end[d];
    if (out[d] < 0) return k.error("pads make axis ", d, " negative");
  }
  INGOT_ASSIGN_OR_RETURN(Tensor * y, k.allocate_output(0, x.dtype(), out));
  std::vector<std::vector<int64_t>> maps(r);
  for (int64_t d = 0; d < r; ++d) {
    int64_t n = x.dim(d);
    for (int64_t o = 0; o < out[d]; ++o) {
      int64_t i = o - begin[d];
      if (i < 0 || i >= n) {
        if (mode == "constant") i = -1;
        else if (n == 0) return k.error("cannot ", mode, "-pad an empty axis");
        else if (mode == "edge") i = std::clamp<int64_t>(i, 0, n - 1);
        else if (mode == "wrap") i = ((i % n) + n) % n;
        else if (mode == "reflect") {
          if (n == 1) { i = 0; }
          else {
            int64_t p = 2 * (n - 1);
            i = ((i % p) + p) % p;
            if (i >= n) i = p - i;
          }
        } else {
          return k.error("unknown mode '", mode, "'");
        }
      }
      maps[d].push_back(i);
    }
  }
  if (mode == "constant") {
    bool have = false;
    double v = 0;
    const Tensor* cv = nullptr;
    if (k.opset() < 11) { v = k.attrs().get_float("value", 0.f); have = true; }
    else if (k.has_input(2) && k.input(2)->numel() > 0) cv = k.input(2);
    if (cv && cv->dtype() == x.dtype()) {
      for (int64_t i = 0; i < y->numel(); ++i) tensor_copy_elem(*cv, 0, *y, i);
    } else if (cv || (have && v != 0)) {
      if (cv) v = cv->get_f64(0);
      for (int64_t i = 0; i < y->numel(); ++i) y->set_f64(i, v);
    }
  }
  return map_copy(k, x, *y, maps);
}

Status center_crop_pad(KernelContext& k) {
  const Tensor& x = *k.input(0);
  int64_t r = static_cast<int64_t>(x.rank());
  std::vector<int64_t> shape = tensor_to_i64(*k.input(1));
  std::vector<int64_t> axes = k.attrs().get_ints("axes");
  if (!k.attrs().has("axes"))
    for (int64_t i = 0; i < r; ++i) axes.push_back(i);
  if (shape.size() != axes.size()) return k.error("shape has ", shape.size(), " entries for ", axes.size(), " axes");
  Shape64 out = x.shape();
  for (size_t i = 0; i < axes.size(); ++i) {
    INGOT_RETURN_IF_ERROR(norm_axis(k, &axes[i], r));
    if (shape[i] < 0) return k.error("negative target size");
    out[axes[i]] = shape[i];
  }
  INGOT_ASSIGN_OR_RETURN(Tensor * y, k.allocate_output(0, x.dtype(), out));
  std::vector<std::vector<int64_t>> maps(r);
  for (int64_t d = 0; d < r; ++d) {
    int64_t n = x.dim(d), m = out[d];
    int64_t shift = m <= n ? (n - m) / 2 : -((m - n) / 2);
    for (int64_t o = 0; o < m; ++o) {
      int64_t i = o + shift;
      maps[d].push_back(i >= 0 && i < n ? i : -1);
    }
  }
  return map_copy(k, x, *y, maps);
}

Status depth_to_space(KernelContext& k) {
  const Tensor& x = *k.input(0);
  if (x.rank() != 4) return k.error("input must be 4-D");
  int64_t b = k.attrs().get_int("blocksize", 0);
  int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3);
  if (b <= 0 || c % (b * b) != 0) return k.error("channels ", c, " not divisible by blocksize^2");
  int64_t cc = c / (b * b);
  std::string mode = k.attrs().get_string("mode", "DCR");
  // Output viewed as [n, cc, h, b1, w, b2]; source element of (n, cc, h, b1, w, b2).
  Shape64 xs = shape_strides(x.shape());
  int64_t sc_cc, sc_b1, sc_b2;
  if (mode == "DCR") { sc_b1 = b * cc; sc_b2 = cc; sc_cc = 1; }
  else if (mode == "CRD") { sc_cc = b * b; sc_b1 = b; sc_b2 = 1; }
  else return k.error("unknown mode '", mode, "'");
  INGOT_ASSIGN_OR_RETURN(Tensor * y, k.allocate_output(0, x.dtype(), {n, cc, h * b, w * b}));
  tensor_strided_copy(x, 0, {n, cc, h, b, w, b},
                      {xs[0], sc_cc * xs[1], xs[2], sc_b1 * xs[1], xs[3], sc_b2 * xs[1]}, *y);
  return Status::Ok();
}

Status space_to_depth(KernelContext& k) {
  const Tensor& x = *k.input(0);
  if (x.rank() != 4) return k.error("input must be 4-D");
  int64_t b = k.attrs().get_int("blocksize", 0);
  int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3);
  if (b <= 0 || h % b != 0 || w % b != 0) return k.error("spatial dims not divisible by blocksize");
  Shape64 xs = shape_strides(x.shape());
  INGOT_ASSIGN_OR_RETURN(Tensor * y, k.allocate_output(0, x.dtype(), {n, c * b * b, h / b, w / b}));
  std::string mode = k.attrs().get_string("mode", "DCR");
  if (mode == "DCR")  // output viewed as [n, b1, b2, c, h', w']
    tensor_strided_copy(x, 0, {n, b, b, c, h / b, w / b},
                        {xs[0], xs[2], xs[3], xs[1], b * xs[2], b * xs[3]}, *y);
  else if (mode == "CRD")  // output viewed as [n, c, b1, b2, h', w']
    tensor_strided_copy(x, 0, {n, c, b, b, h / b, w / b},
                        {xs[0], xs[1], xs[2], xs[3], b * xs[2], b * xs[3]}, *y);
  else
    return k.error("unknown mode '", mode, "'");
  return Status::Ok();
}

Status onehot(KernelContext& k) {
  const Tensor &ind = *k.input(0), &dep = *k.input(1), &vals = *k.input(2);
  if (dep.numel() != 1) return k.error("depth must have one element");
  if (vals.numel() != 2) return k.error("values must have two elements");
  int64_t depth = is_float(dep.dtype()) ? static_cast<int64_t>(dep.get_f64(0)) : dep.get_i64(0);
  if (depth < 1) return k.error("depth must be positive");
  int64_t r = static_cast<int64_t>(ind.rank()) + 1;
  int64_t axis = k.attrs().get_int("axis", -1);
  INGOT_RETURN_IF_ERROR(norm_axis(k, &axis, r));
  Shape64 out = ind.shape();
  out.insert(out.begin() + axis, depth);
  INGOT_ASSIGN_OR_RETURN(Tensor * y, k.allocate_output(0, vals.dtype(), out));
  for (int64_t i = 0; i < y->numel(); ++i) tensor_copy_elem(vals, 0, *y, i);
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= ind.dim(i);
  for (int64_t i = axis; i < r - 1; ++i) inner *= ind.dim(i);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < inner; ++j) {
      int64_t f = o * inner + j;
      int64_t v = is_float(ind.dtype()) ? static_cast<int64_t>(ind.get_f64(f)) : ind.get_i64(f);
      if (v < 0) v += depth;
      if (v < 0 || v >= depth) continue;
      tensor_copy_elem(vals, 1, *y, (o * depth + v) * inner + j);
    }
  return Status::Ok();
}

Status nonzero(KernelContext& k) {
  const Tensor& x = *k.input(0);
  std::vector<int64_t> hits;
  for (int64_t i = 0; i < x.numel(); ++i) {
    bool nz = x.dtype() == DataType::kString ? !x.strings()[i].empty()
            : is_float(x.dtype()) ? x.get_f64(i) != 0 : x.get_i64(i) != 0;
    if (nz) hits.push_back(i);
  }
  int64_t r = static_cast<int64_t>(x.rank()), n = static_cast<int64_t>(hits.size());
  INGOT_ASSIGN_OR_RETURN(Tensor * y, k.allocate_output(0, DataType::kInt64, {r, n}));
  int64_t* p = y->mutable_data<int64_t>();
  for (int64_t j = 0; j < n; ++j) {
    Shape64 c = unravel_index(hits[j], x.shape());
    for (int64_t d = 0; d < r; ++d) p[d * n + j] = c[d];
  }
  return Status::Ok();
}

Status topk(KernelContext& k) {
  const Tensor& x = *k.input(0);
  int64_t r = static_cast<int64_t>(x.rank());
  int64_t axis = k.attrs().get_int("axis", -1);
  INGOT_RETURN_IF_ERROR(norm_axis(k, &axis, r));
  int64_t kk;
  if (k.opset() < 10) {
    kk = k.attrs().get_int("k", 0);
  } else {
    if (!k.has_input(1) || k.input(1)->numel() != 1) return k.error("K must be given with one element");
    kk = k.input(1)->get_i64(0);
  }
  int64_t n = x.dim(axis);
  if (kk < 0 || kk > n) return k.error("k ", kk, " out of range for axis size ", n);
  bool largest = k.attrs().get_int("largest", 1) != 0;
  Shape64 out = x.shape();
  out[axis] = kk;
  INGOT_ASSIGN_OR_RETURN(Tensor * v, k.allocate_output(0, x.dtype(), out));
  INGOT_ASSIGN_OR_RETURN(Tensor * ix, k.allocate_output(1, DataType::kInt64, out));
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= x.dim(i);
  for (int64_t i = axis + 1; i < r; ++i) inner *= x.dim(i);
  std::vector<int64_t> ord(n);
  bool fl = is_float(x.dtype());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < inner; ++j) {
      int64_t base = o * n * inner + j;
      std::iota(ord.begin(), ord.end(), 0);
      auto before = [&](int64_t a, int64_t b) {
        int64_t ia = base + a * inner, ib = base + b * inner;
        if (fl) {  // NaN sorts as the largest value
          double va = x.get_f64(ia), vb = x.get_f64(ib);
          bool na = std::isnan(va), nb = std::isnan(vb);
          if (na || nb) return largest ? (na && !nb) : (!na && nb);
        }
        int c = cmp_elem(x, ia, x, ib);
        return largest ? c > 0 : c < 0;
      };
      std::stable_sort(ord.begin(), ord.end(), before);
      for (int64_t t = 0; t < kk; ++t) {
        int64_t d = o * kk * inner + t * inner + j;
        tensor_copy_elem(x, base + ord[t] * inner, *v, d);
        ix->set_i64(d, ord[t]);
      }
    }
  return Status::Ok();
}

Status trilu(KernelContext& k) {
  const Tensor& x = *k.input(0);
  if (x.rank() < 2) return k.error("input must have rank >= 2");
  int64_t kk = 0;
  if (k.has_input(1)) {
    if (k.input(1)->numel() != 1) return k.error("k must have one element");
    kk = k.input(1)->get_i64(0);
  }
  bool upper = k.attrs().get_int("upper", 1) != 0;
  INGOT_ASSIGN_OR_RETURN(Tensor * y, k.allocate_output(0, x.dtype(), x.shape()));
  int64_t h = x.dim(x.rank() - 2), w = x.dim(x.rank() - 1);
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t col = i % w, row = (i / w) % h;
    if (upper ? col - row >= kk : col - row <= kk) tensor_copy_elem(x, i, *y, i);
  }
  return Status::Ok();
}

Status eyelike(KernelContext& k) {
  const Tensor& x = *k.input(0);
  if (x.rank() != 2) return k.error("input must be 2-D");
  DataType dt = x.dtype();
  if (k.attrs().has("dtype")) dt = static_cast<DataType>(k.attrs().get_int("dtype", 1));
  if (dt == DataType::kString) return k.error("dtype string is not allowed");
  int64_t kk = k.attrs().get_int("k", 0);
  INGOT_ASSIGN_OR_RETURN(Tensor * y, k.allocate_output(0, dt, x.shape()));
  for (int64_t i = 0; i < x.dim(0); ++i) {
    int64_t j = i + kk;
    if (j >= 0 && j < x.dim(1)) y->set_f64(i * x.dim(1) + j, 1.0);
  }
  return Status::Ok();
}

Status reverse_sequence(KernelContext& k) {
  const Tensor &x = *k.input(0), &lens_t = *k.input(1);
  if (x.rank() < 2) return k.error("input must have rank >= 2");
  int64_t ba = k.attrs().get_int("batch_axis", 1), ta = k.attrs().get_int("time_axis", 0);
  if ((ba != 0 && ba != 1) || (ta != 0 && ta != 1) || ba == ta) return k.error("bad batch_axis/time_axis");
  std::vector<int64_t> lens = tensor_to_i64(lens_t);
  int64_t nb = x.dim(ba), nt = x.dim(ta);
  if (static_cast<int64_t>(lens.size()) != nb) return k.error("sequence_lens must have ", nb, " entries");
  for (int64_t l : lens)
    if (l < 0 || l > nt) return k.error("sequence length ", l, " out of range [0, ", nt, "]");
  INGOT_ASSIGN_OR_RETURN(Tensor * y, k.allocate_output(0, x.dtype(), x.shape()));
  Shape64 xs = shape_strides(x.shape());
  int64_t inner = xs[1];
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t t = 0; t < nt; ++t) {
      int64_t src_t = t < lens[b] ? lens[b] - 1 - t : t;
      int64_t dst = b * xs[ba] + t * xs[ta], src = b * xs[ba] + src_t * xs[ta];
      tensor_copy_range(x, src, *y, dst, inner);
    }
  return Status::Ok();
}

Status compress(KernelContext& k) {
  const Tensor &x = *k.input(0), &cond = *k.input(1);
  bool has_axis = k.attrs().has("axis");
  int64_t axis = 0, outer = 1, inner = 1, n = x.numel();
  Shape64 out;
  if (has_axis) {
    axis = k.attrs().get_int("axis", 0);
    INGOT_RETURN_IF_ERROR(norm_axis(k, &axis, static_cast<int64_t>(x.rank())));
    n = x.dim(axis);
    for (int64_t i = 0; i < axis; ++i) outer *= x.dim(i);
    for (size_t i = axis + 1; i < x.rank(); ++i) inner *= x.dim(i);
  }
  if (cond.numel() > n) return k.error("condition has ", cond.numel(), " entries for an axis of ", n);
  std::vector<int64_t> keep;
  for (int64_t i = 0; i < cond.numel(); ++i)
    if (cond.get_i64(i) != 0) keep.push_back(i);
  int64_t m = static_cast<int64_t>(keep.size());
  if (has_axis) { out = x.shape(); out[axis] = m; } else { out = {m}; }
  INGOT_ASSIGN_OR_RETURN(Tensor * y, k.allocate_output(0, x.dtype(), out));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < m; ++j) tensor_copy_range(x, (o * n + keep[j]) * inner, *y, (o * m + j) * inner, inner);
  return Status::Ok();
}

Status unique(KernelContext& k) {
  const Tensor& x = *k.input(0);
  bool sorted = k.attrs().get_int("sorted", 1) != 0;
  bool has_axis = k.attrs().has("axis");
  int64_t axis = 0, outer = 1, inner = 1, n = x.numel();
  if (has_axis) {
    axis = k.attrs().get_int("axis", 0);
    INGOT_RETURN_IF_ERROR(norm_axis(k, &axis, static_cast<int64_t>(x.rank())));
    n = x.dim(axis);
    for (int64_t i = 0; i < axis; ++i) outer *= x.dim(i);
    for (size_t i = axis + 1; i < x.rank(); ++i) inner *= x.dim(i);
  }
  // Slice s is every (o, s, j); compare lexicographically in (o, j) order.
  auto cmp = [&](int64_t a, int64_t b) {
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j = 0; j < inner; ++j) {
        int c = cmp_elem(x, (o * n + a) * inner + j, x, (o * n + b) * inner + j);
        if (c) return c;
      }
    return 0;
  };
  std::vector<int64_t> ord(n);
  std::iota(ord.begin(), ord.end(), 0);
  std::stable_sort(ord.begin(), ord.end(), [&](int64_t a, int64_t b) { return cmp(a, b) < 0; });
  // Groups of equal slices; representative = first occurrence (stable sort keeps it first).
  std::vector<int64_t> first, counts, inverse(n);
  std::vector<int64_t> group_of_sorted(n);
  for (int64_t i = 0; i < n; ++i) {
    if (i == 0 || cmp(ord[i - 1], ord[i]) != 0) { first.push_back(ord[i]); counts.push_back(0); }
    group_of_sorted[i] = static_cast<int64_t>(first.size()) - 1;
    counts.back()++;
  }
  int64_t u = static_cast<int64_t>(first.size());
  std::vector<int64_t> pos(u);  // output position of each group
  std::iota(pos.begin(), pos.end(), 0);
  if (!sorted) {
    std::vector<int64_t> g(u);
    std::iota(g.begin(), g.end(), 0);
    std::sort(g.begin(), g.end(), [&](int64_t a, int64_t b) { return first[a] < first[b]; });
    for (int64_t i = 0; i < u; ++i) pos[g[i]] = i;
  }
  std::vector<int64_t> out_first(u), out_counts(u);
  for (int64_t gi = 0; gi < u; ++gi) { out_first[pos[gi]] = first[gi]; out_counts[pos[gi]] = counts[gi]; }
  for (int64_t i = 0; i < n; ++i) inverse[ord[i]] = pos[group_of_sorted[i]];
  Shape64 yshape = {u};
  if (has_axis) { yshape = x.shape(); yshape[axis] = u; }
  INGOT_ASSIGN_OR_RETURN(Tensor * y, k.allocate_output(0, x.dtype(), yshape));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t s = 0; s < u; ++s) tensor_copy_range(x, (o * n + out_first[s]) * inner, *y, (o * u + s) * inner, inner);
  auto emit = [&](size_t i, const std::vector<int64_t>& v) -> Status {
    if (!k.has_output(i)) return Status::Ok();
    INGOT_ASSIGN_OR_RETURN(Tensor * t, k.allocate_output(i, DataType::kInt64, {static_cast<int64_t>(v.size())}));
    std::copy(v.begin(), v.end(), t->mutable_data<int64_t>());
    return Status::Ok();
  };
  INGOT_RETURN_IF_ERROR(emit(1, out_first));
  INGOT_RETURN_IF_ERROR(emit(2, inverse));
  return emit(3, out_counts);
}

}  // namespace

void register_tensor_index_kernels(KernelRegistry& r) {
  r.add("Gather", gather);
  r.add("GatherElements", gather_elements);
  r.add("GatherND", gather_nd);
  r.add("ScatterElements", scatter_elements);
  r.add("Scatter", scatter_elements);
  r.add("ScatterND", scatter_nd);
  r.add("TensorScatter", tensor_scatter);
  r.add("Pad", pad);
  r.add("CenterCropPad", center_crop_pad);
  r.add("DepthToSpace", depth_to_space);
  r.add("SpaceToDepth", space_to_depth);
  r.add("OneHot", onehot);
  r.add("NonZero", nonzero);
  r.add("TopK", topk);
  r.add("Trilu", trilu);
  r.add("EyeLike", eyelike);
  r.add("ReverseSequence", reverse_sequence);
  r.add("Compress", compress);
  r.add("Unique", unique);
}

}  // namespace ingot::cpu
