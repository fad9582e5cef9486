// Copyright ingot authors. Apache-2.0.
//
// Conv, ConvTranspose, DeformConv and Col2Im. Conv is im2col + a blocked GEMM per (image,
// group); ConvTranspose is GEMM + col2im. f32/f16/bf16 compute in float, f64 in double.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backend/cpu/kernel_util.h"
#include "backend/cpu/kernels/all_kernels.h"

namespace ingot::cpu {

namespace nn_internal {
const float* as_f32(const Tensor& t, std::vector<float>& tmp);
const double* as_f64(const Tensor& t, std::vector<double>& tmp);
void store(Tensor& t, const float* v);
void store(Tensor& t, const double* v);
void gemm(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb, float* C,
          int64_t ldc);
void gemm(int64_t M, int64_t N, int64_t K, const double* A, int64_t lda, const double* B, int64_t ldb,
          double* C, int64_t ldc);
}  // namespace nn_internal

namespace {

using nn_internal::gemm;
using nn_internal::store;

const float* view(const Tensor& t, std::vector<float>& tmp) { return nn_internal::as_f32(t, tmp); }
const double* view(const Tensor& t, std::vector<double>& tmp) { return nn_internal::as_f64(t, tmp); }

struct Window {
  size_t nsp = 0;
  Shape64 in, out, kernel, strides, dilations, pad_begin;
};

// Window geometry of a forward conv from attributes and the (already inferred) output shape.
Status conv_window(KernelContext& k, const Shape64& x, const Shape64& w, const Shape64& y, Window* win) {
  size_t nsp = x.size() - 2;
  win->nsp = nsp;
  win->in.assign(x.begin() + 2, x.end());
  win->out.assign(y.begin() + 2, y.end());
  win->kernel = k.attrs().has("kernel_shape") ? k.attrs().get_ints("kernel_shape") : Shape64(w.begin() + 2, w.end());
  win->strides = k.attrs().get_ints("strides", Shape64(nsp, 1));
  win->dilations = k.attrs().get_ints("dilations", Shape64(nsp, 1));
  Shape64 pads = k.attrs().get_ints("pads", Shape64(2 * nsp, 0));
  if (win->kernel.size() != nsp || win->strides.size() != nsp || win->dilations.size() != nsp ||
      pads.size() != 2 * nsp)
    return k.error("window attributes do not match the spatial rank ", nsp);
  for (size_t i = 0; i < nsp; ++i)
    if (w[i + 2] != win->kernel[i]) return k.error("kernel_shape does not match W");
  std::string ap = k.attrs().get_string("auto_pad", "NOTSET");
  win->pad_begin.assign(nsp, 0);
  for (size_t i = 0; i < nsp; ++i) {
    if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
      int64_t dk = (win->kernel[i] - 1) * win->dilations[i] + 1;
      int64_t total = std::max<int64_t>(0, (win->out[i] - 1) * win->strides[i] + dk - win->in[i]);
      win->pad_begin[i] = ap == "SAME_UPPER" ? total / 2 : total - total / 2;
    } else if (ap != "VALID") {
      win->pad_begin[i] = pads[i];
    }
  }
  return Status::Ok();
}

// cols[(c, kpos), opos] = x[c, opos*s - p + kpos*d] (0 outside), for `channels` channels.
template <class T>
void im2col(const T* x, int64_t channels, const Window& w, T* cols) {
  size_t nsp = w.nsp;
  int64_t in_sz = shape_numel(w.in), out_sz = shape_numel(w.out), k_sz = shape_numel(w.kernel);
  // Per-dim table: coord[d][kk * out_d + o] = input coordinate or -1.
  std::vector<std::vector<int64_t>> coord(nsp);
  for (size_t d = 0; d < nsp; ++d) {
    coord[d].resize(static_cast<size_t>(w.kernel[d] * w.out[d]));
    for (int64_t kk = 0; kk < w.kernel[d]; ++kk)
      for (int64_t o = 0; o < w.out[d]; ++o) {
        int64_t c = o * w.strides[d] - w.pad_begin[d] + kk * w.dilations[d];
        coord[d][kk * w.out[d] + o] = (c >= 0 && c < w.in[d]) ? c : -1;
      }
  }
  Shape64 in_st = shape_strides(w.in);
  std::vector<int64_t> kidx(nsp, 0), oidx(nsp, 0);
  for (int64_t kp = 0; kp < k_sz; ++kp) {
    // offsets of all output positions for this kernel position
    for (int64_t c = 0; c < channels; ++c) {
      const T* xc = x + c * in_sz;
      T* row = cols + (c * k_sz + kp) * out_sz;
      if (nsp == 2) {
        const int64_t* c0 = coord[0].data() + kidx[0] * w.out[0];
        const int64_t* c1 = coord[1].data() + kidx[1] * w.out[1];
        int64_t W1 = w.out[1];
        for (int64_t o0 = 0; o0 < w.out[0]; ++o0) {
          T* r = row + o0 * W1;
          int64_t i0 = c0[o0];
          if (i0 < 0) {
            std::fill(r, r + W1, T(0));
            continue;
          }
          const T* xr = xc + i0 * w.in[1];
          for (int64_t o1 = 0; o1 < W1; ++o1) {
            int64_t i1 = c1[o1];
            r[o1] = i1 < 0 ? T(0) : xr[i1];
          }
        }
        continue;
      }
      std::fill(oidx.begin(), oidx.end(), 0);
      for (int64_t o = 0; o < out_sz; ++o) {
        int64_t off = 0;
        bool ok = true;
        for (size_t d = 0; d < nsp; ++d) {
          int64_t ci = coord[d][kidx[d] * w.out[d] + oidx[d]];
          if (ci < 0) {
            ok = false;
            break;
          }
          off += ci * in_st[d];
        }
        row[o] = ok ? xc[off] : T(0);
        for (size_t d = nsp; d-- > 0;) {
          if (++oidx[d] < w.out[d]) break;
          oidx[d] = 0;
        }
      }
    }
    for (size_t d = nsp; d-- > 0;) {
      if (++kidx[d] < w.kernel[d]) break;
      kidx[d] = 0;
    }
  }
}

template <class T>
Status conv_typed(KernelContext& k) {
  const Tensor& x = *k.input(0);
  const Tensor& wt = *k.input(1);
  Tensor& y = k.output(0);
  if (x.rank() < 3 || wt.rank() != x.rank() || y.rank() != x.rank()) return k.error("bad ranks");
  int64_t group = k.attrs().get_int("group", 1);
  int64_t N = x.dim(0), C = x.dim(1), M = wt.dim(0);
  if (group <= 0 || C % group != 0 || M % group != 0 || wt.dim(1) * group != C)
    return k.error("channels ", C, " / W ", shape_to_string(wt.shape()), " do not fit group ", group);
  Window win;
  INGOT_RETURN_IF_ERROR(conv_window(k, x.shape(), wt.shape(), y.shape(), &win));
  int64_t Cg = C / group, Mg = M / group;
  int64_t in_sz = shape_numel(win.in), out_sz = shape_numel(win.out), k_sz = shape_numel(win.kernel);
  std::vector<T> tx, tw, tb;
  const T* px = view(x, tx);
  const T* pw = view(wt, tw);
  const T* pb = nullptr;
  if (k.has_input(2)) {
    if (k.input(2)->numel() != M) return k.error("bias must have ", M, " elements");
    pb = view(*k.input(2), tb);
  }
  std::vector<T> out(static_cast<size_t>(N * M * out_sz), T(0));
  bool pointwise = k_sz == 1;
  for (size_t d = 0; d < win.nsp; ++d)
    pointwise = pointwise && win.strides[d] == 1 && win.pad_begin[d] == 0 && win.in[d] == win.out[d];
  std::vector<T> cols;
  if (!pointwise) cols.resize(static_cast<size_t>(Cg * k_sz * out_sz));
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t g = 0; g < group; ++g) {
      const T* xg = px + (n * C + g * Cg) * in_sz;
      const T* B = xg;
      if (!pointwise) {
        im2col(xg, Cg, win, cols.data());
        B = cols.data();
      }
      T* yg = out.data() + (n * M + g * Mg) * out_sz;
      if (pb)
        for (int64_t m = 0; m < Mg; ++m) std::fill(yg + m * out_sz, yg + (m + 1) * out_sz, pb[g * Mg + m]);
      gemm(Mg, out_sz, Cg * k_sz, pw + g * Mg * Cg * k_sz, Cg * k_sz, B, out_sz, yg, out_sz);
    }
  }
  if (y.numel() != static_cast<int64_t>(out.size())) return k.error("output size mismatch");
  store(y, out.data());
  return Status::Ok();
}

Status conv_kernel(KernelContext& k) {
  if (k.input(0)->dtype() == DataType::kFloat64) return conv_typed<double>(k);
  return conv_typed<float>(k);
}

// ---------------------------------------------------------------------------------------
// ConvTranspose

template <class T>
Status conv_transpose_typed(KernelContext& k) {
  const Tensor& x = *k.input(0);
  const Tensor& wt = *k.input(1);
  Tensor& y = k.output(0);
  if (x.rank() < 3 || wt.rank() != x.rank() || y.rank() != x.rank()) return k.error("bad ranks");
  size_t nsp = x.rank() - 2;
  int64_t group = k.attrs().get_int("group", 1);
  int64_t N = x.dim(0), C = x.dim(1);
  if (group <= 0 || wt.dim(0) != C || C % group != 0) return k.error("W does not match input channels / group");
  int64_t Mg = wt.dim(1), M = Mg * group, Cg = C / group;
  if (y.dim(1) != M) return k.error("output channel mismatch");
  Shape64 in(x.shape().begin() + 2, x.shape().end()), out(y.shape().begin() + 2, y.shape().end());
  Shape64 kernel = k.attrs().has("kernel_shape") ? k.attrs().get_ints("kernel_shape")
                                                 : Shape64(wt.shape().begin() + 2, wt.shape().end());
  Shape64 strides = k.attrs().get_ints("strides", Shape64(nsp, 1));
  Shape64 dil = k.attrs().get_ints("dilations", Shape64(nsp, 1));
  Shape64 opad = k.attrs().get_ints("output_padding", Shape64(nsp, 0));
  std::string ap = k.attrs().get_string("auto_pad", "NOTSET");
  bool has_pads = k.attrs().has("pads");
  Shape64 pads = k.attrs().get_ints("pads", Shape64(2 * nsp, 0));
  if (kernel.size() != nsp || strides.size() != nsp || dil.size() != nsp || opad.size() != nsp ||
      pads.size() != 2 * nsp)
    return k.error("window attributes do not match the spatial rank ", nsp);
  for (size_t d = 0; d < nsp; ++d)
    if (kernel[d] != wt.dim(d + 2)) return k.error("kernel_shape does not match W");
  Shape64 pb(nsp, 0);
  bool derive = ap == "SAME_UPPER" || ap == "SAME_LOWER" || (!has_pads && k.attrs().has("output_shape") && ap != "VALID");
  for (size_t d = 0; d < nsp; ++d) {
    if (derive) {
      int64_t total = strides[d] * (in[d] - 1) + opad[d] + (kernel[d] - 1) * dil[d] + 1 - out[d];
      int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);  // floor division
      pb[d] = ap == "SAME_UPPER" ? half : total - half;
    } else if (ap != "VALID") {
      pb[d] = pads[d];
    }
  }
  int64_t in_sz = shape_numel(in), out_sz = shape_numel(out), k_sz = shape_numel(kernel);
  std::vector<T> tx, tw, tb;
  const T* px = view(x, tx);
  const T* pw = view(wt, tw);
  const T* pbias = nullptr;
  if (k.has_input(2)) {
    if (k.input(2)->numel() != M) return k.error("bias must have ", M, " elements");
    pbias = view(*k.input(2), tb);
  }
  // W_g is [Cg, Mg*k_sz]; we need cols = W_g^T [Mg*k_sz, Cg] x X_g [Cg, in_sz].
  std::vector<std::vector<T>> wgt(static_cast<size_t>(group));
  int64_t R = Mg * k_sz;
  for (int64_t g = 0; g < group; ++g) {
    wgt[g].resize(static_cast<size_t>(R * Cg));
    const T* wg = pw + g * Cg * R;
    for (int64_t c = 0; c < Cg; ++c)
      for (int64_t r = 0; r < R; ++r) wgt[g][r * Cg + c] = wg[c * R + r];
  }
  std::vector<T> out_v(static_cast<size_t>(N * M * out_sz), T(0));
  std::vector<T> cols(static_cast<size_t>(R * in_sz));
  Shape64 out_st = shape_strides(out);
  std::vector<int64_t> kidx(nsp), iidx(nsp);
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t g = 0; g < group; ++g) {
      std::fill(cols.begin(), cols.end(), T(0));
      gemm(R, in_sz, Cg, wgt[g].data(), Cg, px + (n * C + g * Cg) * in_sz, in_sz, cols.data(), in_sz);
      for (int64_t m = 0; m < Mg; ++m) {
        T* ym = out_v.data() + (n * M + g * Mg + m) * out_sz;
        if (pbias) std::fill(ym, ym + out_sz, pbias[g * Mg + m]);
        std::fill(kidx.begin(), kidx.end(), 0);
        for (int64_t kp = 0; kp < k_sz; ++kp) {
          const T* crow = cols.data() + (m * k_sz + kp) * in_sz;
          std::fill(iidx.begin(), iidx.end(), 0);
          for (int64_t i = 0; i < in_sz; ++i) {
            int64_t off = 0;
            bool ok = true;
            for (size_t d = 0; d < nsp; ++d) {
              int64_t o = iidx[d] * strides[d] - pb[d] + kidx[d] * dil[d];
              if (o < 0 || o >= out[d]) {
                ok = false;
                break;
              }
              off += o * out_st[d];
            }
            if (ok) ym[off] += crow[i];
            for (size_t d = nsp; d-- > 0;) {
              if (++iidx[d] < in[d]) break;
              iidx[d] = 0;
            }
          }
          for (size_t d = nsp; d-- > 0;) {
            if (++kidx[d] < kernel[d]) break;
            kidx[d] = 0;
          }
        }
      }
    }
  }
  if (y.numel() != static_cast<int64_t>(out_v.size())) return k.error("output size mismatch");
  store(y, out_v.data());
  return Status::Ok();
}

Status conv_transpose_kernel(KernelContext& k) {
  if (k.input(0)->dtype() == DataType::kFloat64) return conv_transpose_typed<double>(k);
  return conv_transpose_typed<float>(k);
}

// ---------------------------------------------------------------------------------------
// Col2Im: input [N, C*prod(block), L] → image [N, C, image...], summing overlapping blocks.

Status col2im_kernel(KernelContext& k) {
  const Tensor& x = *k.input(0);
  Shape64 img = tensor_to_i64(*k.input(1)), blk = tensor_to_i64(*k.input(2));
  Tensor& y = k.output(0);
  size_t nsp = img.size();
  if (blk.size() != nsp || x.rank() != 3) return k.error("image_shape and block_shape must have equal length");
  Shape64 strides = k.attrs().get_ints("strides", Shape64(nsp, 1));
  Shape64 dil = k.attrs().get_ints("dilations", Shape64(nsp, 1));
  Shape64 pads = k.attrs().get_ints("pads", Shape64(2 * nsp, 0));
  if (strides.size() != nsp || dil.size() != nsp || pads.size() != 2 * nsp)
    return k.error("attributes do not match the spatial rank ", nsp);
  int64_t k_sz = shape_numel(blk), img_sz = shape_numel(img);
  if (k_sz <= 0 || x.dim(1) % k_sz != 0) return k.error("input dim 1 is not a multiple of the block size");
  int64_t N = x.dim(0), C = x.dim(1) / k_sz, L = x.dim(2);
  Shape64 nblocks(nsp);
  int64_t expect_l = 1;
  for (size_t d = 0; d < nsp; ++d) {
    nblocks[d] = (img[d] + pads[d] + pads[d + nsp] - dil[d] * (blk[d] - 1) - 1) / strides[d] + 1;
    expect_l *= nblocks[d];
  }
  if (expect_l != L) return k.error("input has ", L, " blocks, expected ", expect_l);
  std::vector<double> tx;
  const double* px = nn_internal::as_f64(x, tx);
  std::vector<double> out(static_cast<size_t>(N * C * img_sz), 0.0);
  Shape64 img_st = shape_strides(img);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t kp = 0; kp < k_sz; ++kp) {
        Shape64 kidx = unravel_index(kp, blk);
        const double* row = px + ((n * C + c) * k_sz + kp) * L;
        double* yo = out.data() + (n * C + c) * img_sz;
        for (int64_t l = 0; l < L; ++l) {
          Shape64 bidx = unravel_index(l, nblocks);
          int64_t off = 0;
          bool ok = true;
          for (size_t d = 0; d < nsp && ok; ++d) {
            int64_t p = bidx[d] * strides[d] - pads[d] + kidx[d] * dil[d];
            ok = p >= 0 && p < img[d];
            off += p * img_st[d];
          }
          if (ok) yo[off] += row[l];
        }
      }
  if (y.numel() != static_cast<int64_t>(out.size())) return k.error("output size mismatch");
  store(y, out.data());
  return Status::Ok();
}

}  // namespace

void register_nn_deform_kernels(KernelRegistry& r);

void register_nn_conv_kernels(KernelRegistry& r) {
  r.add("Conv", conv_kernel);
  r.add("ConvTranspose", conv_transpose_kernel);
  r.add("Col2Im", col2im_kernel);
  register_nn_deform_kernels(r);
}

}  // namespace ingot::cpu
