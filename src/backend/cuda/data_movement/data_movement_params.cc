// Copyright ingot authors. Apache-2.0.
//
// Host-side helpers of the data-movement family: see data_movement_params.h.
#include "backend/cuda/data_movement/data_movement_params.h"

#include <string>

namespace ingot::backend::cuda::dm {

int64_t node_opset(const ir::Node& n) { return n.owner() ? n.owner()->opset(n.domain()) : 0; }

bool has_input(const std::vector<ir::TensorType>& in, size_t i) {
  return i < in.size() && in[i].dtype != DataType::kUndefined;
}

int32_t element_bytes(DataType t) {
  if (t == DataType::kString || t == DataType::kUndefined || is_sub_byte(t)) return 0;
  const int bits = data_type_bits(t);
  return (bits == 8 || bits == 16 || bits == 32 || bits == 64) ? bits / 8 : 0;
}

bool known_rank_at_most(const ir::Shape& s, size_t max_rank) { return s.rank_known() && s.rank() <= max_rank; }

bool is_index_type(DataType t) { return t == DataType::kInt32 || t == DataType::kInt64; }

bool norm_axis(int64_t a, int64_t rank, int64_t* out) {
  if (a < -rank || a >= rank) return false;
  *out = a < 0 ? a + rank : a;
  return true;
}

bool initializer_ints(const ir::Node& n, size_t i, int64_t* out, size_t max, size_t* count) {
  const ir::Value* v = i < n.inputs().size() ? n.input(i) : nullptr;
  const Tensor* t = v ? v->initializer() : nullptr;
  if (t == nullptr || !is_index_type(t->dtype()) || t->numel() > static_cast<int64_t>(max)) return false;
  for (int64_t k = 0; k < t->numel(); ++k) out[k] = t->get_i64(k);
  *count = static_cast<size_t>(t->numel());
  return true;
}

bool input_present(const ir::Node& n, size_t i) { return i < n.inputs().size() && n.input(i) != nullptr; }

void contiguous_strides(const Shape64& shape, int64_t* strides) {
  int64_t s = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    strides[d] = s;
    s *= shape[d];
  }
}

bool slice_params(const ir::Node& n, int64_t rank, SliceParams* p) {
  size_t ns = 0, ne = 0, na = 0, nst = 0;
  if (node_opset(n) < 10) {
    const ir::Attribute* s = n.attrs().find("starts");
    const ir::Attribute* e = n.attrs().find("ends");
    const ir::Attribute* a = n.attrs().find("axes");
    if (!s || !e || s->ints.size() > static_cast<size_t>(kMaxDims) || e->ints.size() != s->ints.size()) return false;
    ns = ne = s->ints.size();
    for (size_t i = 0; i < ns; ++i) {
      p->starts[i] = s->ints[i];
      p->ends[i] = e->ints[i];
    }
    if (a) {
      if (a->ints.size() != ns) return false;
      for (size_t i = 0; i < ns; ++i) p->axes[i] = a->ints[i];
      na = ns;
    }
  } else {
    if (!initializer_ints(n, 1, p->starts, kMaxDims, &ns) || !initializer_ints(n, 2, p->ends, kMaxDims, &ne) ||
        ne != ns)
      return false;
    if (input_present(n, 3) && (!initializer_ints(n, 3, p->axes, kMaxDims, &na) || na != ns)) return false;
    if (input_present(n, 4) && (!initializer_ints(n, 4, p->steps, kMaxDims, &nst) || nst != ns)) return false;
  }
  p->count = ns;
  bool seen[kMaxDims] = {};
  for (size_t i = 0; i < ns; ++i) {
    if (na == 0) p->axes[i] = static_cast<int64_t>(i);
    if (nst == 0) p->steps[i] = 1;
    if (p->steps[i] == 0 || !norm_axis(p->axes[i], rank, &p->axes[i]) || seen[p->axes[i]]) return false;
    seen[p->axes[i]] = true;
  }
  return true;
}


bool pad_mode(const ir::Node& n, EdgeMode* mode) {
  const ir::Attribute* m = n.attrs().find("mode");
  if (!m || m->s == "constant") *mode = EdgeMode::kConstant;
  else if (m->s == "reflect") *mode = EdgeMode::kReflect;
  else if (m->s == "edge") *mode = EdgeMode::kEdge;
  else if (m->s == "wrap") *mode = EdgeMode::kWrap;
  else return false;
  return true;
}

bool pad_params(const ir::Node& n, int64_t rank, PadParams* p) {
  if (!pad_mode(n, &p->mode)) return false;
  const int64_t opset = node_opset(n);
  int64_t pads[2 * kMaxDims];
  int64_t axes[kMaxDims];
  size_t np = 0, na = 0;
  if (opset < 11) {
    const ir::Attribute* a = n.attrs().find(opset < 2 ? "paddings" : "pads");
    if (!a || a->ints.size() > 2 * static_cast<size_t>(kMaxDims)) return false;
    np = a->ints.size();
    for (size_t i = 0; i < np; ++i) pads[i] = a->ints[i];
    if (n.attrs().get_float("value", 0.f) != 0.f) return false;  // only zero without a value input
  } else if (!initializer_ints(n, 1, pads, 2 * kMaxDims, &np)) {
    return false;
  }
  if (opset >= 18 && input_present(n, 3)) {
    if (!initializer_ints(n, 3, axes, kMaxDims, &na)) return false;
  } else {
    na = static_cast<size_t>(rank);
    for (size_t i = 0; i < na; ++i) axes[i] = static_cast<int64_t>(i);
  }
  if (np != 2 * na) return false;
  for (size_t i = 0; i < na; ++i) {
    int64_t a;
    if (!norm_axis(axes[i], rank, &a)) return false;
    p->begin[a] = pads[i];
    p->end[a] = pads[i + na];
  }
  return true;
}

namespace {

/// A 1-D integer input whose length is known and at most `max` (0 when absent).
bool known_index_vector(const std::vector<ir::TensorType>& in, size_t i, DataType type, int64_t max,
                        int64_t* length) {
  *length = 0;
  if (!has_input(in, i)) return true;
  const ir::Shape& s = in[i].shape;
  if (in[i].dtype != type || !s.rank_known() || s.rank() != 1 || !s[0].is_known()) return false;
  *length = s[0].value();
  return *length <= max;
}

}  // namespace

bool slice_device_params_ok(const ir::Node& n, const std::vector<ir::TensorType>& in) {
  if (node_opset(n) < 10 || !has_input(in, 1) || !has_input(in, 2) || !is_index_type(in[1].dtype)) return false;
  const DataType t = in[1].dtype;
  int64_t ns, ne, na, nst;
  if (!known_index_vector(in, 1, t, kMaxDims, &ns) || !known_index_vector(in, 2, t, kMaxDims, &ne) || ne != ns)
    return false;
  if (!known_index_vector(in, 3, t, kMaxDims, &na) || (has_input(in, 3) && na != ns)) return false;
  return known_index_vector(in, 4, t, kMaxDims, &nst) && (!has_input(in, 4) || nst == ns);
}

bool pad_device_params_ok(const ir::Node& n, const std::vector<ir::TensorType>& in, int64_t rank) {
  EdgeMode mode;
  if (node_opset(n) < 11 || !pad_mode(n, &mode) || !has_input(in, 1)) return false;
  int64_t np, na;
  if (!known_index_vector(in, 1, DataType::kInt64, 2 * kMaxDims, &np)) return false;
  if (node_opset(n) >= 18 && has_input(in, 3)) {
    if (!is_index_type(in[3].dtype) || !known_index_vector(in, 3, in[3].dtype, kMaxDims, &na)) return false;
  } else {
    na = rank;
  }
  return np == 2 * na;
}

bool depth_space_map(const Shape64& x, const Shape64& y, int64_t b, bool to_space, bool crd, IndexMapDesc* d) {
  if (x.size() != 4 || y.size() != 4 || b <= 0) return false;
  const int64_t n = x[0], c = x[1], h = x[2], w = x[3];
  int64_t xs[4];
  contiguous_strides(x, xs);
  int64_t dims[6], strides[6];
  if (to_space) {
    if (c % (b * b) != 0) return false;
    const int64_t cc = c / (b * b);
    if (y[0] != n || y[1] != cc || y[2] != h * b || y[3] != w * b) return false;
    // Channel of x for (cc, b1, b2): DCR (b1 * b + b2) * cc + cc_i; CRD cc_i * b * b + b1 * b + b2.
    const int64_t s_cc = crd ? b * b : 1, s_b1 = crd ? b : b * cc, s_b2 = crd ? 1 : cc;
    const int64_t v_dims[6] = {n, cc, h, b, w, b};
    const int64_t v_strides[6] = {xs[0], s_cc * xs[1], xs[2], s_b1 * xs[1], xs[3], s_b2 * xs[1]};
    for (int i = 0; i < 6; ++i) dims[i] = v_dims[i], strides[i] = v_strides[i];
  } else {
    if (h % b != 0 || w % b != 0) return false;
    if (y[0] != n || y[1] != c * b * b || y[2] != h / b || y[3] != w / b) return false;
    const int64_t dcr_dims[6] = {n, b, b, c, h / b, w / b};
    const int64_t dcr_strides[6] = {xs[0], xs[2], xs[3], xs[1], b * xs[2], b * xs[3]};
    const int64_t crd_dims[6] = {n, c, b, b, h / b, w / b};
    const int64_t crd_strides[6] = {xs[0], xs[1], xs[2], xs[3], b * xs[2], b * xs[3]};
    for (int i = 0; i < 6; ++i) {
      dims[i] = crd ? crd_dims[i] : dcr_dims[i];
      strides[i] = crd ? crd_strides[i] : dcr_strides[i];
    }
  }
  *d = IndexMapDesc();
  d->rank = 6;
  for (int i = 0; i < 6; ++i) {
    d->out_dims[i] = d->in_dims[i] = dims[i];
    d->in_strides[i] = strides[i];
    d->step[i] = 1;
  }
  return true;
}

}  // namespace ingot::backend::cuda::dm
