// Copyright ingot authors. Apache-2.0.
//
// nn family kernels: MatMul, Gemm, Einsum, plus the typed helpers (buffer access, a blocked
// GEMM) used by nn_conv.cc and nn_pool.cc. Floating types compute in float (f32, f16, bf16)
// or double (f64); integer types in int64 with wrap-around on store.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cpu/kernel_util.h"
#include "backend/cpu/kernels/all_kernels.h"

namespace ingot::ir {
std::string einsum_parse(const std::string& equation, const std::vector<size_t>& ranks,
                         std::vector<std::vector<int>>* in_labels, std::vector<int>* out_labels,
                         int* num_ellipsis);
}  // namespace ingot::ir

namespace ingot::cpu {

void register_nn_conv_kernels(KernelRegistry& r);
void register_nn_pool_kernels(KernelRegistry& r);

namespace nn_internal {

const float* as_f32(const Tensor& t, std::vector<float>& tmp) {
  if (t.dtype() == DataType::kFloat32) return t.data<float>();
  tmp.resize(static_cast<size_t>(t.numel()));
  if (t.dtype() == DataType::kFloat16) {
    const Float16* p = t.data<Float16>();
    for (int64_t i = 0; i < t.numel(); ++i) tmp[i] = static_cast<float>(p[i]);
  } else if (t.dtype() == DataType::kBFloat16) {
    const BFloat16* p = t.data<BFloat16>();
    for (int64_t i = 0; i < t.numel(); ++i) tmp[i] = static_cast<float>(p[i]);
  } else {
    for (int64_t i = 0; i < t.numel(); ++i) tmp[i] = static_cast<float>(t.get_f64(i));
  }
  return tmp.data();
}

const double* as_f64(const Tensor& t, std::vector<double>& tmp) {
  if (t.dtype() == DataType::kFloat64) return t.data<double>();
  tmp.resize(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) tmp[i] = t.get_f64(i);
  return tmp.data();
}

void store(Tensor& t, const float* v) {
  if (t.dtype() == DataType::kFloat32) {
    std::memcpy(t.mutable_data<float>(), v, sizeof(float) * static_cast<size_t>(t.numel()));
  } else if (t.dtype() == DataType::kFloat16) {
    Float16* p = t.mutable_data<Float16>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = Float16(v[i]);
  } else if (t.dtype() == DataType::kBFloat16) {
    BFloat16* p = t.mutable_data<BFloat16>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] = BFloat16(v[i]);
  } else {
    for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, v[i]);
  }
}

void store(Tensor& t, const double* v) {
  if (t.dtype() == DataType::kFloat64) {
    std::memcpy(t.mutable_data<double>(), v, sizeof(double) * static_cast<size_t>(t.numel()));
  } else {
    for (int64_t i = 0; i < t.numel(); ++i) t.set_f64(i, v[i]);
  }
}

namespace {

// C[M,N] += A[M,K] * B[K,N]; all row-major with leading dims lda, ldb, ldc.
template <class T>
void gemm_acc(int64_t M, int64_t N, int64_t K, const T* A, int64_t lda, const T* B, int64_t ldb, T* C,
              int64_t ldc) {
  constexpr int64_t kTileN = 256;
  int64_t i = 0;
  for (int64_t j0 = 0; j0 < N; j0 += kTileN) {
    int64_t jn = std::min(N - j0, kTileN);
    for (i = 0; i + 4 <= M; i += 4) {
      T* c0 = C + i * ldc + j0;
      T* c1 = c0 + ldc;
      T* c2 = c1 + ldc;
      T* c3 = c2 + ldc;
      const T* a0 = A + i * lda;
      const T* a1 = a0 + lda;
      const T* a2 = a1 + lda;
      const T* a3 = a2 + lda;
      for (int64_t k = 0; k < K; ++k) {
        const T* b = B + k * ldb + j0;
        T v0 = a0[k], v1 = a1[k], v2 = a2[k], v3 = a3[k];
        for (int64_t j = 0; j < jn; ++j) {
          T bj = b[j];
          c0[j] += v0 * bj;
          c1[j] += v1 * bj;
          c2[j] += v2 * bj;
          c3[j] += v3 * bj;
        }
      }
    }
    for (; i < M; ++i) {
      T* c0 = C + i * ldc + j0;
      const T* a0 = A + i * lda;
      for (int64_t k = 0; k < K; ++k) {
        const T* b = B + k * ldb + j0;
        T v0 = a0[k];
        if (v0 == T(0)) continue;
        for (int64_t j = 0; j < jn; ++j) c0[j] += v0 * b[j];
      }
    }
  }
}

}  // namespace

void gemm(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb, float* C,
          int64_t ldc) {
  gemm_acc<float>(M, N, K, A, lda, B, ldb, C, ldc);
}
void gemm(int64_t M, int64_t N, int64_t K, const double* A, int64_t lda, const double* B, int64_t ldb,
          double* C, int64_t ldc) {
  gemm_acc<double>(M, N, K, A, lda, B, ldb, C, ldc);
}
void gemm(int64_t M, int64_t N, int64_t K, const int64_t* A, int64_t lda, const int64_t* B, int64_t ldb,
          int64_t* C, int64_t ldc) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t k = 0; k < K; ++k) {
      uint64_t a = static_cast<uint64_t>(A[i * lda + k]);
      for (int64_t j = 0; j < N; ++j)
        C[i * ldc + j] = static_cast<int64_t>(static_cast<uint64_t>(C[i * ldc + j]) +
                                              a * static_cast<uint64_t>(B[k * ldb + j]));
    }
}

}  // namespace nn_internal

namespace {

using nn_internal::as_f32;
using nn_internal::as_f64;
using nn_internal::gemm;
using nn_internal::store;

enum class Compute { kFloat, kDouble, kInt };

Compute compute_type(DataType t) {
  if (t == DataType::kFloat64) return Compute::kDouble;
  if (is_integer(t)) return Compute::kInt;
  return Compute::kFloat;
}

// Typed view of a tensor's contents for compute type T.
template <class T>
struct Buf {
  std::vector<T> tmp;
  const T* p = nullptr;
};
void load(const Tensor& t, Buf<float>& b) { b.p = as_f32(t, b.tmp); }
void load(const Tensor& t, Buf<double>& b) { b.p = as_f64(t, b.tmp); }
void load(const Tensor& t, Buf<int64_t>& b) {
  b.tmp = t.to_i64_vector();
  b.p = b.tmp.data();
}
void store_any(Tensor& t, const std::vector<float>& v) { store(t, v.data()); }
void store_any(Tensor& t, const std::vector<double>& v) { store(t, v.data()); }
void store_any(Tensor& t, const std::vector<int64_t>& v) {
  for (int64_t i = 0; i < t.numel(); ++i) t.set_i64(i, v[i]);
}

// Transposed copy of a rows x cols matrix.
template <class T>
std::vector<T> transposed(const T* a, int64_t rows, int64_t cols) {
  std::vector<T> t(static_cast<size_t>(rows * cols));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) t[j * rows + i] = a[i * cols + j];
  return t;
}

template <class T>
Status matmul_typed(KernelContext& k) {
  const Tensor& a = *k.input(0);
  const Tensor& b = *k.input(1);
  Tensor& y = k.output(0);
  Shape64 as = a.shape(), bs = b.shape();
  if (as.empty() || bs.empty()) return k.error("MatMul operands must have rank >= 1");
  if (as.size() == 1) as.insert(as.begin(), 1);
  if (bs.size() == 1) bs.push_back(1);
  int64_t M = as[as.size() - 2], K = as.back(), N = bs.back();
  if (bs[bs.size() - 2] != K) return k.error("inner dimensions differ");
  Shape64 abatch(as.begin(), as.end() - 2), bbatch(bs.begin(), bs.end() - 2);
  auto ob = ir::broadcast_shapes(abatch, bbatch);
  if (!ob.ok()) return k.error(ob.status().message());
  int64_t nb = shape_numel(*ob);
  if (y.numel() != nb * M * N) return k.error("output size mismatch");
  Buf<T> A, B;
  load(a, A);
  load(b, B);
  std::vector<T> out(static_cast<size_t>(nb * M * N), T(0));
  BroadcastIndexer ia(*ob, abatch), ib(*ob, bbatch);
  for (int64_t bi = 0; bi < nb; ++bi) {
    gemm(M, N, K, A.p + ia(bi) * M * K, K, B.p + ib(bi) * K * N, N, out.data() + bi * M * N, N);
  }
  store_any(y, out);
  return Status::Ok();
}

Status matmul_kernel(KernelContext& k) {
  switch (compute_type(k.input(0)->dtype())) {
    case Compute::kDouble: return matmul_typed<double>(k);
    case Compute::kInt: return matmul_typed<int64_t>(k);
    default: return matmul_typed<float>(k);
  }
}

template <class T>
Status gemm_typed(KernelContext& k) {
  const Tensor& a = *k.input(0);
  const Tensor& b = *k.input(1);
  Tensor& y = k.output(0);
  if (a.rank() != 2 || b.rank() != 2) return k.error("A and B must be 2-D");
  bool ta = k.attrs().get_int("transA", 0) != 0, tb = k.attrs().get_int("transB", 0) != 0;
  double alpha = k.attrs().get_float("alpha", 1.0f), beta = k.attrs().get_float("beta", 1.0f);
  int64_t M = ta ? a.dim(1) : a.dim(0), K = ta ? a.dim(0) : a.dim(1);
  int64_t N = tb ? b.dim(0) : b.dim(1), KB = tb ? b.dim(1) : b.dim(0);
  if (K != KB) return k.error("inner dimensions differ");
  Buf<T> A, B;
  load(a, A);
  load(b, B);
  std::vector<T> at, bt;
  const T* pa = A.p;
  const T* pb = B.p;
  if (ta) {
    at = transposed(A.p, K, M);
    pa = at.data();
  }
  if (tb) {
    bt = transposed(B.p, N, K);
    pb = bt.data();
  }
  std::vector<T> out(static_cast<size_t>(M * N), T(0));
  gemm(M, N, K, pa, K, pb, N, out.data(), N);
  if (alpha != 1.0)
    for (T& v : out) v = static_cast<T>(alpha * static_cast<double>(v));
  if (k.has_input(2) && beta != 0.0) {
    const Tensor& c = *k.input(2);
    auto cb = ir::broadcast_shapes(Shape64{M, N}, c.shape());
    if (!cb.ok() || *cb != Shape64{M, N}) return k.error("C ", shape_to_string(c.shape()), " does not broadcast to [", M, ",", N, "]");
    Buf<T> C;
    load(c, C);
    BroadcastIndexer ic(Shape64{M, N}, c.shape());
    for (int64_t i = 0; i < M * N; ++i)
      out[i] = static_cast<T>(static_cast<double>(out[i]) + beta * static_cast<double>(C.p[ic(i)]));
  }
  if (y.numel() != M * N) return k.error("output size mismatch");
  store_any(y, out);
  return Status::Ok();
}

Status gemm_kernel(KernelContext& k) {
  switch (compute_type(k.input(0)->dtype())) {
    case Compute::kDouble: return gemm_typed<double>(k);
    case Compute::kInt: return gemm_typed<int64_t>(k);
    default: return gemm_typed<float>(k);
  }
}

// ---------------------------------------------------------------------------------------
// Einsum: a direct loop over every label combination (output labels outer, contracted inner).

template <class T>
Status einsum_typed(KernelContext& k, const std::vector<std::vector<int>>& in_labels,
                    const std::vector<int>& out_labels, int num_labels) {
  size_t n_in = k.num_inputs();
  std::vector<int64_t> size(static_cast<size_t>(num_labels), 1);
  std::vector<bool> seen(static_cast<size_t>(num_labels), false);
  for (size_t i = 0; i < n_in; ++i) {
    const Tensor& t = *k.input(i);
    for (size_t j = 0; j < in_labels[i].size(); ++j) {
      int l = in_labels[i][j];
      int64_t d = t.dim(j);
      if (!seen[l] || size[l] == 1) {
        size[l] = d;
      } else if (d != 1 && d != size[l]) {
        return k.error("dimension ", d, " of input ", i, " does not match ", size[l]);
      }
      seen[l] = true;
    }
  }
  // Loop order: output labels, then the remaining (contracted) labels.
  std::vector<int> order = out_labels;
  std::vector<bool> in_out(static_cast<size_t>(num_labels), false);
  for (int l : out_labels) in_out[l] = true;
  for (int l = 0; l < num_labels; ++l)
    if (seen[l] && !in_out[l]) order.push_back(l);
  size_t nl = order.size();
  size_t n_out_l = out_labels.size();
  // strides[i][p]: stride of input i for loop position p (sum for repeated labels; 0 when broadcast).
  std::vector<std::vector<int64_t>> strides(n_in, std::vector<int64_t>(nl, 0));
  std::vector<Buf<T>> bufs(n_in);
  for (size_t i = 0; i < n_in; ++i) {
    const Tensor& t = *k.input(i);
    load(t, bufs[i]);
    Shape64 st = shape_strides(t.shape());
    for (size_t j = 0; j < in_labels[i].size(); ++j) {
      if (t.dim(j) == 1) continue;
      size_t p = std::find(order.begin(), order.end(), in_labels[i][j]) - order.begin();
      strides[i][p] += st[j];
    }
  }
  int64_t n_outer = 1, n_inner = 1;
  for (size_t p = 0; p < nl; ++p) (p < n_out_l ? n_outer : n_inner) *= size[order[p]];
  Tensor& y = k.output(0);
  if (y.numel() != n_outer) return k.error("output size mismatch");
  std::vector<T> out(static_cast<size_t>(n_outer), T(0));
  if (n_inner == 0 || n_outer == 0) {
    store_any(y, out);
    return Status::Ok();
  }
  std::vector<int64_t> idx(nl, 0), off(n_in, 0);
  for (int64_t o = 0; o < n_outer; ++o) {
    T acc = T(0);
    for (int64_t in = 0; in < n_inner; ++in) {
      T prod = T(1);
      for (size_t i = 0; i < n_in; ++i) prod *= bufs[i].p[off[i]];
      acc += prod;
      // advance inner odometer (positions n_out_l..nl-1); carries into outer positions at the end
      for (size_t p = nl; p-- > n_out_l;) {
        for (size_t i = 0; i < n_in; ++i) off[i] += strides[i][p];
        if (++idx[p] < size[order[p]]) break;
        for (size_t i = 0; i < n_in; ++i) off[i] -= strides[i][p] * idx[p];
        idx[p] = 0;
      }
    }
    out[o] = acc;
    for (size_t p = n_out_l; p-- > 0;) {
      for (size_t i = 0; i < n_in; ++i) off[i] += strides[i][p];
      if (++idx[p] < size[order[p]]) break;
      for (size_t i = 0; i < n_in; ++i) off[i] -= strides[i][p] * idx[p];
      idx[p] = 0;
    }
  }
  store_any(y, out);
  return Status::Ok();
}

Status einsum_kernel(KernelContext& k) {
  std::vector<size_t> ranks;
  for (size_t i = 0; i < k.num_inputs(); ++i) {
    if (!k.has_input(i)) return k.error("Einsum input ", i, " is missing");
    ranks.push_back(k.input(i)->rank());
  }
  std::vector<std::vector<int>> in_labels;
  std::vector<int> out_labels;
  int ell = 0;
  std::string err = ir::einsum_parse(k.attrs().get_string("equation", ""), ranks, &in_labels, &out_labels, &ell);
  if (!err.empty()) return k.error(err);
  int nl = 52 + ell;
  switch (compute_type(k.input(0)->dtype())) {
    case Compute::kDouble: return einsum_typed<double>(k, in_labels, out_labels, nl);
    case Compute::kInt: return einsum_typed<int64_t>(k, in_labels, out_labels, nl);
    default: return einsum_typed<float>(k, in_labels, out_labels, nl);
  }
}

}  // namespace

void register_nn_kernels(KernelRegistry& r) {
  r.add("MatMul", matmul_kernel);
  r.add("Gemm", gemm_kernel);
  r.add("Einsum", einsum_kernel);
  register_nn_conv_kernels(r);
  register_nn_pool_kernels(r);
}

}  // namespace ingot::cpu
