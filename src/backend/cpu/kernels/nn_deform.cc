// Copyright ingot authors. Apache-2.0.
//
// DeformConv (2-D): each kernel tap samples the input bilinearly at its regular position plus
// a learned offset (zeros outside the image), scaled by the optional mask. Computed in double.
#include <cmath>
#include <vector>

#include "backend/cpu/kernel_util.h"
#include "backend/cpu/kernels/all_kernels.h"

namespace ingot::cpu {

namespace {

double bilinear(const std::vector<double>& x, int64_t base, int64_t H, int64_t W, double h, double w) {
  if (!(h > -1.0 && h < static_cast<double>(H) && w > -1.0 && w < static_cast<double>(W))) return 0.0;
  double h0f = std::floor(h), w0f = std::floor(w);
  int64_t h0 = static_cast<int64_t>(h0f), w0 = static_cast<int64_t>(w0f);
  double lh = h - h0f, lw = w - w0f;
  auto at = [&](int64_t hh, int64_t ww) -> double {
    if (hh < 0 || hh >= H || ww < 0 || ww >= W) return 0.0;
    return x[base + hh * W + ww];
  };
  return (1 - lh) * (1 - lw) * at(h0, w0) + (1 - lh) * lw * at(h0, w0 + 1) + lh * (1 - lw) * at(h0 + 1, w0) +
         lh * lw * at(h0 + 1, w0 + 1);
}

Status deform_conv_kernel(KernelContext& k) {
  const Tensor& xt = *k.input(0);
  const Tensor& wt = *k.input(1);
  const Tensor& ot = *k.input(2);
  Tensor& y = k.output(0);
  if (xt.rank() != 4 || wt.rank() != 4 || ot.rank() != 4 || y.rank() != 4)
    return k.unsupported_case("only 2-D DeformConv is implemented");
  int64_t group = k.attrs().get_int("group", 1), og = k.attrs().get_int("offset_group", 1);
  int64_t N = xt.dim(0), C = xt.dim(1), H = xt.dim(2), W = xt.dim(3);
  int64_t M = wt.dim(0), Cg = wt.dim(1), KH = wt.dim(2), KW = wt.dim(3);
  int64_t OH = y.dim(2), OW = y.dim(3);
  if (group <= 0 || og <= 0 || Cg * group != C || M % group != 0 || C % og != 0)
    return k.error("channels do not fit group / offset_group");
  if (ot.dim(0) != N || ot.dim(1) != og * KH * KW * 2 || ot.dim(2) != OH || ot.dim(3) != OW)
    return k.error("offset shape ", shape_to_string(ot.shape()), " does not match");
  Shape64 strides = k.attrs().get_ints("strides", {1, 1});
  Shape64 dil = k.attrs().get_ints("dilations", {1, 1});
  Shape64 pads = k.attrs().get_ints("pads", {0, 0, 0, 0});
  if (strides.size() != 2 || dil.size() != 2 || pads.size() != 4) return k.error("bad window attributes");
  std::vector<double> x = xt.to_f64_vector(), w = wt.to_f64_vector(), off = ot.to_f64_vector();
  std::vector<double> mask, bias;
  if (k.has_input(4)) {
    mask = k.input(4)->to_f64_vector();
    if (static_cast<int64_t>(mask.size()) != N * og * KH * KW * OH * OW) return k.error("mask size mismatch");
  }
  if (k.has_input(3)) {
    bias = k.input(3)->to_f64_vector();
    if (static_cast<int64_t>(bias.size()) != M) return k.error("bias size mismatch");
  }
  int64_t Mg = M / group, Cog = C / og;
  std::vector<double> out(static_cast<size_t>(N * M * OH * OW), 0.0);
  // Sampled columns per (n): cols[c, kh, kw, oh, ow].
  std::vector<double> cols(static_cast<size_t>(C * KH * KW * OH * OW));
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t c = 0; c < C; ++c) {
      int64_t g = c / Cog;
      for (int64_t kh = 0; kh < KH; ++kh)
        for (int64_t kw = 0; kw < KW; ++kw)
          for (int64_t oh = 0; oh < OH; ++oh)
            for (int64_t ow = 0; ow < OW; ++ow) {
              int64_t kk = kh * KW + kw;
              int64_t obase = ((n * og + g) * KH * KW + kk) * 2;
              double dh = off[((obase + 0) * OH + oh) * OW + ow];
              double dw = off[((obase + 1) * OH + oh) * OW + ow];
              double h = static_cast<double>(oh * strides[0] - pads[0] + kh * dil[0]) + dh;
              double ww = static_cast<double>(ow * strides[1] - pads[1] + kw * dil[1]) + dw;
              double v = bilinear(x, (n * C + c) * H * W, H, W, h, ww);
              if (!mask.empty()) v *= mask[(((n * og + g) * KH * KW + kk) * OH + oh) * OW + ow];
              cols[(((c * KH + kh) * KW + kw) * OH + oh) * OW + ow] = v;
            }
    }
    int64_t K = Cg * KH * KW, P = OH * OW;
    for (int64_t m = 0; m < M; ++m) {
      int64_t g = m / Mg;
      double* yo = out.data() + (n * M + m) * P;
      if (!bias.empty())
        for (int64_t p = 0; p < P; ++p) yo[p] = bias[m];
      for (int64_t kk = 0; kk < K; ++kk) {
        double wv = w[m * K + kk];
        const double* cr = cols.data() + (g * K + kk) * P;
        for (int64_t p = 0; p < P; ++p) yo[p] += wv * cr[p];
      }
    }
  }
  if (y.numel() != static_cast<int64_t>(out.size())) return k.error("output size mismatch");
  for (int64_t i = 0; i < y.numel(); ++i) y.set_f64(i, out[i]);
  return Status::Ok();
}

}  // namespace

void register_nn_deform_kernels(KernelRegistry& r) { r.add("DeformConv", deform_conv_kernel); }

}  // namespace ingot::cpu
