// Copyright ingot authors. Apache-2.0.
#include "ir/shape.h"

namespace ingot::ir {

std::string Dim::to_string() const {
  if (is_known()) return std::to_string(value_);
  if (is_symbol()) return symbol_;
  return "?";
}

Shape Shape::from_concrete(const Shape64& dims) {
  std::vector<Dim> d;
  d.reserve(dims.size());
  for (int64_t v : dims) d.emplace_back(v);
  return Shape(std::move(d));
}

bool Shape::is_concrete() const {
  if (!rank_known_) return false;
  for (const Dim& d : dims_)
    if (!d.is_known()) return false;
  return true;
}

Shape64 Shape::concrete() const {
  Shape64 s;
  s.reserve(dims_.size());
  for (const Dim& d : dims_) s.push_back(d.value());
  return s;
}

std::string Shape::to_string() const {
  if (!rank_known_) return "[*]";
  std::string s = "[";
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (i) s += ",";
    s += dims_[i].to_string();
  }
  return s + "]";
}

Result<Shape> broadcast_shapes(const Shape& a, const Shape& b) {
  if (!a.rank_known() || !b.rank_known()) return Shape::unknown_rank();
  size_t rank = std::max(a.rank(), b.rank());
  std::vector<Dim> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const Dim one(1);
    const Dim& da = i < rank - a.rank() ? one : a[i - (rank - a.rank())];
    const Dim& db = i < rank - b.rank() ? one : b[i - (rank - b.rank())];
    if (da == db) {
      out[i] = da;
    } else if (da.is_known() && da.value() == 1) {
      out[i] = db;
    } else if (db.is_known() && db.value() == 1) {
      out[i] = da;
    } else if (da.is_known() && db.is_known()) {
      return invalid_model("shapes ", a.to_string(), " and ", b.to_string(),
                           " do not broadcast (dim ", i, ": ", da.value(), " vs ", db.value(), ")");
    } else if (da.is_known()) {
      out[i] = da;  // the other is symbolic/unknown: it must equal da (or be 1 and broadcast)
    } else if (db.is_known()) {
      out[i] = db;
    } else {
      out[i] = Dim::unknown();
    }
  }
  return Shape(std::move(out));
}

Result<Shape64> broadcast_shapes(const Shape64& a, const Shape64& b) {
  size_t rank = std::max(a.size(), b.size());
  Shape64 out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da == db || db == 1) {
      out[i] = da;
    } else if (da == 1) {
      out[i] = db;
    } else {
      return invalid_argument("shapes ", shape_to_string(a), " and ", shape_to_string(b),
                              " do not broadcast (dim ", i, ": ", da, " vs ", db, ")");
    }
  }
  return out;
}

Result<int64_t> normalize_axis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return invalid_model("axis ", axis, " is outside [", -rank, ", ", rank, ")");
  return axis < 0 ? axis + rank : axis;
}

std::vector<size_t> channels_last_perm(size_t n) {
  std::vector<size_t> p = {0};
  for (size_t i = 2; i < n; ++i) p.push_back(i);
  p.push_back(1);
  return p;
}

std::vector<size_t> channels_first_perm(size_t n) {
  std::vector<size_t> p = {0, n - 1};
  for (size_t i = 1; i + 1 < n; ++i) p.push_back(i);
  return p;
}

Shape permute_shape(const Shape& in, const std::vector<size_t>& perm) {
  if (!in.rank_known() || in.rank() != perm.size()) return in;
  std::vector<Dim> d;
  for (size_t p : perm) d.push_back(in.dims()[p]);
  return Shape(d);
}

}  // namespace ingot::ir
