// Copyright ingot authors. Apache-2.0.
//
// Shape and data-movement kernels (part 1): constants, reshapes, transpose, concat/split,
// slice, expand/tile, constant-of-shape, range. Part 2 is tensor_index.cc. Data movement is
// dtype-agnostic: elements are copied as bytes (strings and packed sub-byte types element by
// element), so every dtype works alike.
#include <cmath>
#include <cstring>
#include <random>

#include "backend/cpu/kernel_util.h"
#include "backend/cpu/kernels/all_kernels.h"
#include "ir/op_registry.h"
#include "ir/ops/tensor_shared.h"

namespace ingot::cpu {

// Shared with tensor_index.cc (declared there; the family has no header).
int tensor_elem_bytes(DataType t) {
  int bits = data_type_bits(t);
  return bits > 0 && bits % 8 == 0 ? bits / 8 : 0;
}

void tensor_copy_elem(const Tensor& src, int64_t si, Tensor& dst, int64_t di) {
  DataType t = src.dtype();
  if (t == DataType::kString) {
    dst.mutable_strings()[di] = src.strings()[si];
  } else if (int b = tensor_elem_bytes(t)) {
    std::memcpy(static_cast<uint8_t*>(dst.mutable_raw()) + di * b, static_cast<const uint8_t*>(src.raw()) + si * b, b);
  } else if (is_float(t)) {
    dst.set_f64(di, src.get_f64(si));
  } else {
    dst.set_i64(di, src.get_i64(si));
  }
}

void tensor_copy_range(const Tensor& src, int64_t si, Tensor& dst, int64_t di, int64_t n) {
  if (n <= 0) return;
  int b = tensor_elem_bytes(src.dtype());
  if (b && src.dtype() != DataType::kString) {
    std::memcpy(static_cast<uint8_t*>(dst.mutable_raw()) + di * b, static_cast<const uint8_t*>(src.raw()) + si * b,
                static_cast<size_t>(n) * b);
    return;
  }
  for (int64_t i = 0; i < n; ++i) tensor_copy_elem(src, si + i, dst, di + i);
}

// dst (contiguous, numel = prod(out_shape)) [i...] = src[offset + sum(i_k * strides_k)].
void tensor_strided_copy(const Tensor& src, int64_t offset, const Shape64& out_shape, const Shape64& strides,
                         Tensor& dst) {
  int64_t n = shape_numel(out_shape);
  if (n == 0) return;
  size_t r = out_shape.size();
  Shape64 idx(r, 0);
  int64_t so = offset;
  int b = src.dtype() == DataType::kString ? 0 : tensor_elem_bytes(src.dtype());
  const uint8_t* sp = static_cast<const uint8_t*>(src.raw());
  uint8_t* dp = static_cast<uint8_t*>(dst.mutable_raw());
  for (int64_t i = 0; i < n; ++i) {
    if (b == 4) std::memcpy(dp + i * 4, sp + so * 4, 4);
    else if (b) std::memcpy(dp + i * b, sp + so * b, b);
    else tensor_copy_elem(src, so, dst, i);
    for (size_t d = r; d-- > 0;) {
      so += strides[d];
      if (++idx[d] < out_shape[d]) break;
      so -= strides[d] * out_shape[d];
      idx[d] = 0;
    }
  }
}

namespace {

Status need_output(KernelContext& k, size_t i) {
  if (!k.output(i).defined()) return k.error("output ", i, " shape could not be inferred");
  return Status::Ok();
}

// Output 0 shares input 0's data with the pre-inferred shape.
Status reshape_like(KernelContext& k) {
  INGOT_RETURN_IF_ERROR(need_output(k, 0));
  auto r = k.input(0)->reshaped(k.output(0).shape());
  if (!r.ok()) return k.error(r.status().message());
  k.output(0) = std::move(r).value();
  return Status::Ok();
}

Tensor constant_value(const ir::Attributes& a) {
  if (const Tensor* v = a.get_tensor("value")) return v->clone();
  if (a.has("value_float")) return Tensor::from_vector(DataType::kFloat32, {}, std::vector<float>{a.get_float("value_float", 0)});
  if (a.has("value_floats")) {
    auto f = a.get_floats("value_floats");
    return Tensor::from_vector(DataType::kFloat32, {static_cast<int64_t>(f.size())}, f);
  }
  if (a.has("value_int")) return Tensor::from_vector(DataType::kInt64, {}, std::vector<int64_t>{a.get_int("value_int", 0)});
  if (a.has("value_ints")) {
    auto v = a.get_ints("value_ints");
    return Tensor::from_vector(DataType::kInt64, {static_cast<int64_t>(v.size())}, v);
  }
  if (a.has("value_string")) return Tensor::from_strings({}, {a.get_string("value_string", "")});
  if (a.has("value_strings")) {
    auto s = a.get_strings("value_strings");
    return Tensor::from_strings({static_cast<int64_t>(s.size())}, s);
  }
  return Tensor();
}

Status dropout(KernelContext& k) {
  const Tensor& x = *k.input(0);
  double ratio = 0.5;
  bool training = false;
  if (k.opset() < 12) {
    ratio = k.attrs().get_float("ratio", 0.5f);
    // Opsets 1-6 default to training (is_test=0), but an inference runtime runs them in
    // test mode like every other engine does; only opset 12+'s explicit training_mode trains.
    training = false;
  } else {
    if (k.has_input(1)) ratio = k.input(1)->get_f64(0);
    if (k.has_input(2)) training = k.input(2)->get_i64(0) != 0;
  }
  if (ratio < 0 || ratio >= 1) {
    if (training) return k.error("ratio must be in [0, 1), got ", ratio);
  }
  Tensor& y = k.output(0);
  bool drop = training && ratio > 0;
  if (!drop) {
    y = x;
    if (k.has_output(1)) {
      Tensor& m = k.output(1);
      for (int64_t i = 0; i < m.numel(); ++i) m.set_i64(i, 1);
    }
    return Status::Ok();
  }
  std::mt19937_64 rng(static_cast<uint64_t>(k.attrs().get_int("seed", 0)));
  std::uniform_real_distribution<double> u(0.0, 1.0);
  double scale = 1.0 / (1.0 - ratio);
  for (int64_t i = 0; i < x.numel(); ++i) {
    bool keep = u(rng) >= ratio;
    y.set_f64(i, keep ? x.get_f64(i) * scale : 0.0);
    if (k.has_output(1)) k.output(1).set_i64(i, keep ? 1 : 0);
  }
  return Status::Ok();
}

Status transpose(KernelContext& k) {
  const Tensor& x = *k.input(0);
  size_t r = x.rank();
  std::vector<int64_t> perm = k.attrs().get_ints("perm");
  if (!k.attrs().has("perm"))
    for (size_t i = r; i-- > 0;) perm.push_back(static_cast<int64_t>(i));
  if (perm.size() != r) return k.error("perm has ", perm.size(), " entries for rank ", r);
  Shape64 st = shape_strides(x.shape()), out_shape, strides;
  for (int64_t p : perm) {
    if (p < 0) p += static_cast<int64_t>(r);
    if (p < 0 || p >= static_cast<int64_t>(r)) return k.error("bad perm");
    out_shape.push_back(x.dim(p));
    strides.push_back(st[p]);
  }
  INGOT_RETURN_IF_ERROR(need_output(k, 0));
  tensor_strided_copy(x, 0, out_shape, strides, k.output(0));
  return Status::Ok();
}

Status concat(KernelContext& k) {
  INGOT_RETURN_IF_ERROR(need_output(k, 0));
  Tensor& y = k.output(0);
  int64_t r = static_cast<int64_t>(y.rank());
  int64_t axis = k.attrs().get_int("axis", 1);
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r) return k.error("axis out of range");
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= y.dim(i);
  for (int64_t i = axis + 1; i < r; ++i) inner *= y.dim(i);
  int64_t out_row = y.dim(axis) * inner, off = 0;
  for (size_t j = 0; j < k.num_inputs(); ++j) {
    const Tensor* x = k.input(j);
    if (!x) continue;
    if (static_cast<int64_t>(x->rank()) != r) return k.error("input ", j, " has rank ", x->rank(), ", expected ", r);
    int64_t row = x->dim(axis) * inner;
    for (int64_t o = 0; o < outer; ++o) tensor_copy_range(*x, o * row, y, o * out_row + off, row);
    off += row;
  }
  return Status::Ok();
}

Status split(KernelContext& k) {
  const Tensor& x = *k.input(0);
  int64_t r = static_cast<int64_t>(x.rank());
  int64_t axis = k.attrs().get_int("axis", 0);
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r) return k.error("axis out of range");
  bool has_split = false;
  std::vector<int64_t> sp;
  if (k.opset() < 13) {
    has_split = k.attrs().has("split");
    sp = k.attrs().get_ints("split");
  } else if (k.has_input(1)) {
    has_split = true;
    sp = tensor_to_i64(*k.input(1));
  }
  int64_t num = static_cast<int64_t>(k.num_outputs());
  bool uneven = !has_split && k.opset() >= 18;
  if (uneven) num = k.attrs().get_int("num_outputs", num);
  auto sizes = ir::tensor_split_sizes(x.dim(axis), k.opset(), has_split, sp, num, uneven);
  if (!sizes.ok()) return k.error(sizes.status().message());
  if (sizes->size() != k.num_outputs()) return k.error("split gives ", sizes->size(), " parts for ", k.num_outputs(), " outputs");
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= x.dim(i);
  for (int64_t i = axis + 1; i < r; ++i) inner *= x.dim(i);
  int64_t in_row = x.dim(axis) * inner, off = 0;
  for (size_t j = 0; j < k.num_outputs(); ++j) {
    Shape64 s = x.shape();
    s[axis] = (*sizes)[j];
    int64_t row = s[axis] * inner;
    if (k.has_output(j)) {
      INGOT_ASSIGN_OR_RETURN(Tensor * y, k.allocate_output(j, x.dtype(), s));
      for (int64_t o = 0; o < outer; ++o) tensor_copy_range(x, o * in_row + off, *y, o * row, row);
    }
    off += row;
  }
  return Status::Ok();
}

Status slice(KernelContext& k) {
  const Tensor& x = *k.input(0);
  int64_t r = static_cast<int64_t>(x.rank());
  if (k.opset() >= 10 && (!k.has_input(1) || !k.has_input(2))) return k.error("starts and ends are required");
  std::vector<const Tensor*> ins;
  for (size_t i = 0; i < k.num_inputs(); ++i) ins.push_back(k.input(i));
  std::vector<int64_t> starts, ends, axes, steps;
  bool known = true;
  Status st = ir::tensor_slice_params(nullptr, k.opset(), k.attrs(), ins, r, &starts, &ends, &axes, &steps, &known);
  if (!st.ok()) return k.error(st.message());
  Shape64 xs = shape_strides(x.shape()), out_shape = x.shape(), strides = xs;
  int64_t offset = 0;
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = axes[i], s, e, n;
    ir::tensor_slice_range(x.dim(a), starts[i], ends[i], steps[i], &s, &e, &n);
    out_shape[a] = n;
    strides[a] = xs[a] * steps[i];
    if (n > 0) offset += s * xs[a];
  }
  INGOT_ASSIGN_OR_RETURN(Tensor * y, k.allocate_output(0, x.dtype(), out_shape));
  tensor_strided_copy(x, offset, out_shape, strides, *y);
  return Status::Ok();
}

Status expand(KernelContext& k) {
  const Tensor& x = *k.input(0);
  INGOT_RETURN_IF_ERROR(need_output(k, 0));
  Tensor& y = k.output(0);
  size_t r = y.rank();
  if (x.rank() > r) return k.error("input rank exceeds output rank");
  Shape64 xs = shape_strides(x.shape()), strides(r, 0);
  size_t off = r - x.rank();
  for (size_t i = 0; i < x.rank(); ++i) {
    if (x.dim(i) == y.dim(off + i)) strides[off + i] = xs[i];
    else if (x.dim(i) != 1) return k.error("cannot expand ", shape_to_string(x.shape()), " to ", shape_to_string(y.shape()));
  }
  tensor_strided_copy(x, 0, y.shape(), strides, y);
  return Status::Ok();
}

Status tile(KernelContext& k) {
  const Tensor& x = *k.input(0);
  std::vector<int64_t> rep = tensor_to_i64(*k.input(1));
  if (rep.size() != x.rank()) return k.error("repeats has ", rep.size(), " entries for rank ", x.rank());
  Shape64 xs = shape_strides(x.shape()), shape, strides, out;
  for (size_t i = 0; i < x.rank(); ++i) {
    if (rep[i] < 0) return k.error("negative repeat ", rep[i]);
    shape.push_back(rep[i]);
    strides.push_back(0);
    shape.push_back(x.dim(i));
    strides.push_back(xs[i]);
    out.push_back(rep[i] * x.dim(i));
  }
  INGOT_ASSIGN_OR_RETURN(Tensor * y, k.allocate_output(0, x.dtype(), out));
  tensor_strided_copy(x, 0, shape, strides, *y);
  return Status::Ok();
}

Status constant_of_shape(KernelContext& k) {
  std::vector<int64_t> shape = tensor_to_i64(*k.input(0));
  for (int64_t d : shape)
    if (d < 0) return k.error("negative dim ", d);
  const Tensor* v = k.attrs().get_tensor("value");
  DataType dt = v ? v->dtype() : DataType::kFloat32;
  INGOT_ASSIGN_OR_RETURN(Tensor * y, k.allocate_output(0, dt, shape));
  if (v) {
    if (v->numel() != 1) return k.error("value must have one element");
    for (int64_t i = 0; i < y->numel(); ++i) tensor_copy_elem(*v, 0, *y, i);
  }
  return Status::Ok();
}

Status range(KernelContext& k) {
  const Tensor &s = *k.input(0), &l = *k.input(1), &d = *k.input(2);
  if (s.numel() != 1 || l.numel() != 1 || d.numel() != 1) return k.error("start, limit and delta must be scalars");
  DataType dt = s.dtype();
  if (is_float(dt)) {
    double st = s.get_f64(0), de = d.get_f64(0);
    if (de == 0) return k.error("delta is 0");
    double cnt = std::ceil((l.get_f64(0) - st) / de);
    if (!std::isfinite(cnt)) return k.error("range length is not finite");
    int64_t n = std::max<int64_t>(0, static_cast<int64_t>(cnt));
    INGOT_ASSIGN_OR_RETURN(Tensor * y, k.allocate_output(0, dt, {n}));
    for (int64_t i = 0; i < n; ++i) y->set_f64(i, st + static_cast<double>(i) * de);
  } else {
    int64_t st = s.get_i64(0), de = d.get_i64(0);
    if (de == 0) return k.error("delta is 0");
    double cnt = std::ceil(static_cast<double>(l.get_i64(0) - st) / static_cast<double>(de));
    int64_t n = std::max<int64_t>(0, static_cast<int64_t>(cnt));
    INGOT_ASSIGN_OR_RETURN(Tensor * y, k.allocate_output(0, dt, {n}));
    for (int64_t i = 0; i < n; ++i) y->set_i64(i, st + i * de);
  }
  return Status::Ok();
}

}  // namespace

void register_tensor_index_kernels(KernelRegistry& r);

void register_tensor_kernels(KernelRegistry& r) {
  r.add("Constant", [](KernelContext& k) -> Status {
    Tensor t = constant_value(k.attrs());
    if (!t.defined()) return k.error("no value attribute");
    k.output(0) = t;
    return Status::Ok();
  });
  r.add("Identity", [](KernelContext& k) -> Status {
    k.output(0) = *k.input(0);
    return Status::Ok();
  });
  r.add("Dropout", dropout);
  r.add("Shape", [](KernelContext& k) -> Status {
    const Tensor& x = *k.input(0);
    int64_t r = static_cast<int64_t>(x.rank());
    int64_t s = k.attrs().get_int("start", 0), e = k.attrs().get_int("end", r);
    if (s < 0) s += r;
    if (e < 0) e += r;
    s = std::clamp<int64_t>(s, 0, r);
    e = std::clamp<int64_t>(e, 0, r);
    int64_t n = std::max<int64_t>(0, e - s);
    INGOT_ASSIGN_OR_RETURN(Tensor * y, k.allocate_output(0, DataType::kInt64, {n}));
    for (int64_t i = 0; i < n; ++i) y->set_i64(i, x.dim(s + i));
    return Status::Ok();
  });
  r.add("Size", [](KernelContext& k) -> Status {
    INGOT_ASSIGN_OR_RETURN(Tensor * y, k.allocate_output(0, DataType::kInt64, {}));
    y->set_i64(0, k.input(0)->numel());
    return Status::Ok();
  });
  for (const char* op : {"Reshape", "Flatten", "Squeeze", "Unsqueeze"}) r.add(op, reshape_like);
  r.add("Transpose", transpose);
  r.add("Concat", concat);
  r.add("Split", split);
  r.add("Slice", slice);
  r.add("Expand", expand);
  r.add("Tile", tile);
  r.add("ConstantOfShape", constant_of_shape);
  r.add("Range", range);
  register_tensor_index_kernels(r);
}

}  // namespace ingot::cpu
