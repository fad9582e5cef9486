// Copyright ingot authors. Apache-2.0.
//
// lower_patchify_conv: a convolution whose windows tile the image without overlap or gaps
// (kernel == stride, no padding, no dilation, one group: ViT/DeiT's 16x16 patch embedding,
// Swin's and ConvNeXt's 4x4 stems) is a GEMM over the patches.
//
//   Conv(x [N,C,H,W], w [K,C,kh,kw], b)
//     -> p = Reshape(Transpose(Reshape(x, [N,C,H/kh,kh,W/kw,kw]), [0,2,4,1,3,5]), [N,H/kh,W/kw,C*kh*kw])
//        y = Transpose(Add(MatMul(p, w' [C*kh*kw, K]), b), [0,3,1,2])
//
// The one Transpose of x gathers each patch's C*kh*kw values into a row; the GEMM then runs at
// tensor-core speed (fuse_conv_gemm folds the bias into its epilogue). Why: on the H100 the
// patch convolution of DeiT-S at batch 1 (x [1,3,224,224], 16x16 stride 16 to 384 channels, 116
// MFLOP) took 62 us in cuDNN's best plan, 13% of the model, and torch.compile's cuDNN call 50 us
// (session 34's profile); as a [196 x 768] x [768 x 384] GEMM it is a few microseconds. The
// Transpose back to NCHW at the end usually cancels against the model's own flatten + transpose
// (ViT) or the channels-last layout that follows (ConvNeXt).
//
// Left alone: a weight that is not a constant; C, H or W not known, or H, W not multiples of the
// kernel; auto_pad other than NOTSET/VALID; any pad, dilation or group; kernel != stride; a
// kernel of one pixel (a 1x1 conv is already a GEMM for every backend); and input channels in
// whole 16-byte vectors (C % 8 == 0, ConvNeXt's 2x2 downsampling convs on 96-384 channels). A
// channels-last conv over those reads each window's C values as contiguous vectors: it is the
// same GEMM without the gather, and it stays inside the channels-last region around it. Lowered
// there (session 34 to 37), ConvNeXt-T's three downsamplings each became a gather, two copies
// and a GEMM: on the H100 (census 2026-12-07) its b64 time rose from 3.49 to 4.12 ms against
// session 33 and its b1 engine went channels-first with 47 Transposes. What pays is the image
// stem, C = 3, where a conv pads each pixel's channels to a vector.
#include <memory>
#include <string>
#include <vector>

#include "passes/pass.h"
#include "passes/pattern_util.h"

namespace ingot::passes {

std::unique_ptr<Pass> make_lower_patchify_conv();

namespace {

using ir::Graph;
using ir::Node;
using ir::Value;

constexpr const char* kName = "lower_patchify_conv";

class LowerPatchifyConv final : public Pass {
 public:
  const char* name() const override { return kName; }

  Result<bool> run(Graph& g, PassContext& ctx) override {
    std::vector<Node*> convs;
    for (const auto& n : g.nodes())
      if (n->domain().empty() && n->op_type() == "Conv") convs.push_back(n.get());
    int lowered = 0;
    for (Node* n : convs) {
      INGOT_ASSIGN_OR_RETURN(bool done, lower(g, n));
      lowered += done;
    }
    if (lowered) {
      INGOT_RETURN_IF_ERROR(g.topological_sort());
      ctx.note(kName, std::to_string(lowered) + " patch convolution(s) run as a transpose and a GEMM");
    }
    return lowered > 0;
  }

 private:
  Value* step(Graph& g, const std::string& op, std::vector<Value*> ins, ir::Attributes attrs, const Value* like,
              ir::Shape shape, const std::string& suffix, const Node* origin) {
    Value* out = g.add_value(unique_value_name(g, like->name() + suffix, "."), like->dtype(), std::move(shape));
    Node* s = g.add_node(op, std::move(ins), {out}, std::move(attrs), origin->name() + suffix);
    s->absorb_origins(*origin);
    return out;
  }

  Result<bool> lower(Graph& g, Node* n) {
    Value* x = n->input(0);
    Value* w = n->input(1);
    Value* b = n->inputs().size() > 2 ? n->input(2) : nullptr;
    Value* y = n->output(0);
    if (!x || !w || !y || n->outputs().size() != 1 || !x->shape().rank_known() || x->shape().rank() != 4 ||
        !y->shape().rank_known() || y->shape().rank() != 4)
      return false;
    auto wt = constant_value(w);
    if (!wt || wt->rank() != 4 || !is_float(wt->dtype()) || wt->dtype() != x->dtype()) return false;
    if (b && !constant_value(b)) return false;
    const ir::Attributes& a = n->attrs();
    const std::string pad = a.get_string("auto_pad", "NOTSET");
    if (pad != "NOTSET" && pad != "VALID") return false;
    if (a.get_int("group", 1) != 1) return false;
    const int64_t K = wt->shape()[0], C = wt->shape()[1], kh = wt->shape()[2], kw = wt->shape()[3];
    if (kh * kw <= 1) return false;
    const std::vector<int64_t> strides = a.get_ints("strides", {1, 1}), dil = a.get_ints("dilations", {1, 1});
    const std::vector<int64_t> pads = a.get_ints("pads", {0, 0, 0, 0});
    if (strides != std::vector<int64_t>{kh, kw} || dil != std::vector<int64_t>{1, 1}) return false;
    for (int64_t p : pads)
      if (p != 0) return false;
    const ir::Shape& xs = x->shape();
    for (size_t i = 1; i < 4; ++i)
      if (!xs[i].is_known()) return false;
    const int64_t H = xs[2].value(), W = xs[3].value();
    if (xs[1].value() != C || H % kh != 0 || W % kw != 0) return false;
    if (C % 8 == 0) return false;  // whole channel vectors: the channels-last conv is this GEMM
    const int64_t Ho = H / kh, Wo = W / kw;
    const ir::Dim N = xs[0];

    // w [K, C, kh, kw] -> [C*kh*kw, K] (row-major patches: c, then i, then j).
    auto flat = wt->reshaped({K, C * kh * kw});
    if (!flat.ok()) return flat.status();
    auto wk = permute_dims(*flat, {1, 0});
    if (!wk.ok()) return wk.status();
    Value* wm = make_initializer(g, w->name() + ".patches", std::move(*wk));

    ir::Attributes perm6, perm4;
    perm6.set_ints("perm", {0, 2, 4, 1, 3, 5});
    perm4.set_ints("perm", {0, 3, 1, 2});
    Value* x6 = step(g, "Reshape", {x, make_int64s(g, x->name() + ".patch_shape", {0, C, Ho, kh, Wo, kw})}, {}, x,
                     ir::Shape({N, ir::Dim(C), ir::Dim(Ho), ir::Dim(kh), ir::Dim(Wo), ir::Dim(kw)}), "/patch_view", n);
    Value* xt = step(g, "Transpose", {x6}, perm6, x,
                     ir::Shape({N, ir::Dim(Ho), ir::Dim(Wo), ir::Dim(C), ir::Dim(kh), ir::Dim(kw)}), "/patch_gather", n);
    Value* p = step(g, "Reshape", {xt, make_int64s(g, x->name() + ".patch_rows", {0, Ho, Wo, C * kh * kw})}, {}, x,
                    ir::Shape({N, ir::Dim(Ho), ir::Dim(Wo), ir::Dim(C * kh * kw)}), "/patch_rows", n);
    const ir::Shape nhwc({N, ir::Dim(Ho), ir::Dim(Wo), ir::Dim(K)});
    Value* mm = step(g, "MatMul", {p, wm}, {}, y, nhwc, "/patch_gemm", n);
    if (b) mm = step(g, "Add", {mm, b}, {}, y, nhwc, "/patch_bias", n);
    Value* out = step(g, "Transpose", {mm}, perm4, y, y->shape(), "/patch_nchw", n);
    INGOT_RETURN_IF_ERROR(replace_value(g, y, out));
    INGOT_RETURN_IF_ERROR(g.remove_node(n));
    return true;
  }
};

}  // namespace

std::unique_ptr<Pass> make_lower_patchify_conv() { return std::make_unique<LowerPatchifyConv>(); }

}  // namespace ingot::passes
