// Copyright ingot authors. Apache-2.0.
//
// The cuda attention family (flash and generic kernels) against the CPU reference: ingot::Attention
// and ai.onnx Attention (opset 23), 4-D and 3-D, GQA, odd sequence lengths (1, 7, 77, 130, ...),
// no mask / boolean / additive masks broadcast from every rank, a short mask (hidden tail
// keys), fully masked rows, is_causal, explicit and default scale, in fp32, fp16 and bf16, with
// random data in [-1, 1] kept away from zero.
//
// The reference runs on the same inputs converted exactly to fp32 (the reference kernel rounds
// its intermediates to the input type, which for fp16/bf16 is noisier than our kernels' fp32
// softmax); tolerances then reflect only the kernels' own rounding: fp32 1e-5 relative, fp16
// 5e-3 and bf16 2e-2 (P is rounded to the input type before P V on tensor cores). Outputs are
// poisoned with NaN before each run, so unwritten elements fail.
//
// Also: supports() decisions and name round trips (host only), a misaligned view falling back
// to the generic kernel, CUDA-graph capture, a bad mask shape reported as an error, and the
// BERT-base timing (s128, batch 1 and 64, fp16) printed in microseconds per call.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backend/cuda/core/cuda_tactics.h"
#include "gpu_test_util.h"

namespace ingot::gpu_test {
namespace {

using backend::Tactic;
using backend::cuda::attention_family;
#if defined(INGOT_WITH_CUDNN) && defined(INGOT_WITH_CUDNN_FRONTEND)
using backend::cuda::cudnn_sdpa_family;
#endif

enum class MaskKind { kNone, kBool, kAdditive };

struct Case {
  int rank = 4;  ///< 4: [B, H, S, D]; 3: [B, S, H*D]
  int64_t batch = 1, q_heads = 1, kv_heads = 1, q_len = 1, kv_len = 1, head_size = 64;
  MaskKind mask = MaskKind::kNone;
  Shape64 mask_shape;  ///< right-aligned against [B, Hq, Sq, Sk]
  bool causal = false;
  float scale = 0;    ///< 0: attribute absent (1/sqrt(D))
  bool onnx = false;  ///< ai.onnx Attention instead of ingot::Attention
  /// Masks: fraction of hidden keys, and rows of query 0 hidden entirely.
  bool hide_first_row = false;
  /// ingot::Attention {qkv_packed = 1}: one [B, S, 3*H*D] input (rank 3, Hq = Hkv, Sq = Sk).
  bool packed = false;
  /// ingot::Attention's strided views (attention_strided_views) as PyTorch's seq-first
  /// nn.MultiheadAttention leaves them: Q, K, V inside one [S, B, 3*H*D] projection, Y written
  /// into out_proj's [S*B, H*D] input (Hq = Hkv, Sq = Sk).
  bool views = false;
  /// ingot::Attention {mask_batch_period}: the mask's batch entries repeat every this many (Swin).
  int64_t mask_period = 0;

  std::string describe() const {
    std::ostringstream os;
    os << (onnx ? "Attention" : "ingot::Attention") << " rank " << rank << " B" << batch << " Hq" << q_heads << " Hkv"
       << kv_heads << " Sq" << q_len << " Sk" << kv_len << " D" << head_size << " mask "
       << (mask == MaskKind::kNone ? "none" : mask == MaskKind::kBool ? "bool" : "add") << shape_to_string(mask_shape)
       << (causal ? " causal" : "") << (scale != 0 ? " scale" : "") << (hide_first_row ? " hidden-row" : "")
       << (packed ? " packed-qkv" : "") << (views ? " strided-views" : "")
       << (mask_period ? " mask-period " + std::to_string(mask_period) : "");
    return os.str();
  }
  Shape64 q_shape() const {
    return rank == 4 ? Shape64{batch, q_heads, q_len, head_size} : Shape64{batch, q_len, q_heads * head_size};
  }
  Shape64 qkv_shape() const { return {batch, q_len, 3 * q_heads * head_size}; }
  Shape64 kv_shape() const {
    return rank == 4 ? Shape64{batch, kv_heads, kv_len, head_size} : Shape64{batch, kv_len, kv_heads * head_size};
  }
};

std::string type_text(DataType t, const Shape64& s) {
  std::string r = std::string(data_type_name(t)) + "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? "," : "") + std::to_string(s[i]);
  return r + "]";
}

/// The one-node graph of a case with Q/K/V of type `t` (and a float mask of type `t`).
std::string graph_text(const Case& c, DataType t) {
  std::ostringstream os;
  os << "graph g {\n  opset \"\" 23\n  opset \"ingot\" 1\n";
  if (c.packed) {
    os << "  input %qkv: " << type_text(t, c.qkv_shape()) << "\n";
  } else if (c.views) {
    os << "  input %p: " << type_text(t, {c.q_len, c.batch, 3 * c.q_heads * c.head_size}) << "\n";
  } else {
    os << "  input %q: " << type_text(t, c.q_shape()) << "\n";
    os << "  input %k: " << type_text(t, c.kv_shape()) << "\n";
    os << "  input %v: " << type_text(t, c.kv_shape()) << "\n";
  }
  if (c.mask != MaskKind::kNone)
    os << "  input %m: " << type_text(c.mask == MaskKind::kBool ? DataType::kBool : t, c.mask_shape) << "\n";
  std::vector<std::string> attrs;
  if (c.causal) attrs.push_back("is_causal=1");
  if (c.packed) attrs.push_back("qkv_packed=1");
  if (c.mask_period) attrs.push_back("mask_batch_period=" + std::to_string(c.mask_period));
  if (c.views) {
    const int64_t e = c.q_heads * c.head_size, row = c.batch * 3 * e;
    auto ints = [](const char* name, std::vector<int64_t> v) {
      std::string r = std::string(name) + "=[";
      for (size_t i = 0; i < v.size(); ++i) r += (i ? ", " : "") + std::to_string(v[i]);
      return r + "]";
    };
    attrs.push_back(ints("view_dims", {c.batch, c.q_heads, c.q_heads, c.q_len, c.q_len, c.head_size}));
    attrs.push_back(ints("q_view", {0, 3 * e, c.head_size, row}));
    attrs.push_back(ints("k_view", {e, 3 * e, c.head_size, row}));
    attrs.push_back(ints("v_view", {2 * e, 3 * e, c.head_size, row}));
    attrs.push_back(ints("y_view", {0, e, c.head_size, c.batch * e}));
    attrs.push_back(ints("y_shape", {c.q_len * c.batch, e}));
  }
  if (c.rank == 3) {
    attrs.push_back("q_num_heads=" + std::to_string(c.q_heads));
    attrs.push_back("kv_num_heads=" + std::to_string(c.kv_heads));
  }
  if (c.scale != 0) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "scale=%.6e", c.scale);
    attrs.push_back(buf);
  }
  os << "  %y = " << (c.onnx ? "Attention" : "ingot::Attention");
  if (!attrs.empty()) {
    os << " {";
    for (size_t i = 0; i < attrs.size(); ++i) os << (i ? ", " : "") << attrs[i];
    os << "}";
  }
  os << (c.packed ? "(%qkv, _, _" : c.views ? "(%p, %p, %p" : "(%q, %k, %v") << (c.mask != MaskKind::kNone ? ", %m" : "") << ") @attn\n  output %y\n}\n";
  return os.str();
}

/// The same values as fp32 (exact for fp16/bf16); bool and fp32 tensors are returned as they are.
Tensor to_f32(const Tensor& t) {
  if (t.dtype() == DataType::kBool || t.dtype() == DataType::kFloat32) return t;
  Tensor r = Tensor::zeros(DataType::kFloat32, t.shape()).value();
  for (int64_t i = 0; i < t.numel(); ++i) r.set_f64(i, t.get_f64(i));
  return r;
}

Tolerance attention_tolerance(DataType t) {
  switch (t) {
    case DataType::kFloat32: return {1e-5, 2e-6};
    case DataType::kFloat16: return {5e-3, 2e-3};
    default: return {2e-2, 1e-2};
  }
}

class CudaAttentionTest : public CudaTest {
 protected:
  std::mt19937 rng_{20261130};

  /// Q, K, V in [-1, 1] away from zero; the mask: bool with ~30% hidden, or additive in
  /// [-2, 0] with ~20% at -10000 (BERT's padding value) and ~5% at -inf.
  std::vector<Tensor> make_inputs(const Case& c, DataType t) {
    std::vector<Tensor> in;
    if (c.packed) {
      in = {random_tensor(t, c.qkv_shape(), rng_, -1, 1), Tensor(), Tensor()};
    } else if (c.views) {
      Tensor p = random_tensor(t, {c.q_len, c.batch, 3 * c.q_heads * c.head_size}, rng_, -1, 1);
      in = {p, p, p};
    } else {
      in = {random_tensor(t, c.q_shape(), rng_, -1, 1), random_tensor(t, c.kv_shape(), rng_, -1, 1),
            random_tensor(t, c.kv_shape(), rng_, -1, 1)};
    }
    if (c.mask == MaskKind::kNone) return in;
    Tensor m = Tensor::zeros(c.mask == MaskKind::kBool ? DataType::kBool : t, c.mask_shape).value();
    std::uniform_real_distribution<double> u(0, 1);
    const int64_t row = c.mask_shape.empty() ? 1 : c.mask_shape.back();
    for (int64_t i = 0; i < m.numel(); ++i) {
      const double r = u(rng_);
      const bool first_row = i < row;
      if (c.mask == MaskKind::kBool) {
        m.set_f64(i, (c.hide_first_row && first_row) || r < 0.3 ? 0 : 1);
      } else if ((c.hide_first_row && first_row) || r < 0.05) {
        m.set_f64(i, -std::numeric_limits<double>::infinity());
      } else {
        m.set_f64(i, r < 0.25 ? -10000.0 : -2.0 * u(rng_));
      }
    }
    in.push_back(m);
    return in;
  }

  static std::unique_ptr<Tactic> create_any(const std::string& name) {
#if defined(INGOT_WITH_CUDNN) && defined(INGOT_WITH_CUDNN_FRONTEND)
    if (name == "cuda.cudnn.sdpa") return cudnn_sdpa_family().create(name, {});
#endif
    return attention_family().create(name, {});
  }

  /// Runs `tactic_name` (or the family's first candidate, which must be `tactic_name`) on a case
  /// in type `t` and compares with the fp32 reference.
  void check(const Case& c, DataType t, const std::string& tactic_name, bool first_candidate) {
    SCOPED_TRACE(c.describe() + " " + data_type_name(t) + " " + tactic_name);
    auto g = parse_graph(graph_text(c, t));
    ASSERT_TRUE(g.ok()) << g.status().to_string() << "\n" << graph_text(c, t);
    const ir::Node& node = *(*g)->nodes()[0];
    std::unique_ptr<Tactic> tactic;
    if (first_candidate) {
      auto cands = attention_family().candidates(node, input_types(node));
      ASSERT_FALSE(cands.empty()) << "family refused the node";
      EXPECT_EQ(cands[0]->name(), tactic_name);
      tactic = std::move(cands[0]);
    } else {
      tactic = create_any(tactic_name);
      ASSERT_NE(tactic, nullptr);
      ASSERT_TRUE(tactic->supports(node, input_types(node)));
    }
    std::vector<Tensor> in = make_inputs(c, t);
    auto got = run_tactic(*tactic, node, in);
    ASSERT_TRUE(got.ok()) << got.status().to_string();

    auto g32 = parse_graph(graph_text(c, DataType::kFloat32));
    ASSERT_TRUE(g32.ok()) << g32.status().to_string();
    std::vector<Tensor> in32;
    for (const Tensor& x : in) in32.push_back(x.defined() ? to_f32(x) : x);
    auto want = run_reference(*(*g32)->nodes()[0], in32);
    ASSERT_TRUE(want.ok()) << want.status().to_string();
    EXPECT_TRUE(all_close(to_f32((*got)[0]), (*want)[0], attention_tolerance(t)));
  }

  /// The short-sequence kernel where it applies (as first candidate; head sizes 32 and 64, up to
  /// 128 keys), the flash kernel where it applies, the generic one for every type.
  void check_all_types(const Case& c) {
    for (DataType t : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16}) {
      const bool flash = t != DataType::kFloat32 && (c.head_size == 32 || c.head_size == 64 || c.head_size == 80 ||
                                                     c.head_size == 96 || c.head_size == 128);
      const bool short_offered = flash && (c.head_size == 32 || c.head_size == 64) && c.kv_len <= 128;
      check(c, t,
            short_offered ? "cuda.attention.flash_short"
            : flash       ? "cuda.attention.flash"
                          : "cuda.attention.generic",
            true);
      if (short_offered) check(c, t, "cuda.attention.flash", false);
      if (flash) check(c, t, "cuda.attention.generic", false);
    }
  }
};

Case make_case(int rank, int64_t b, int64_t hq, int64_t hkv, int64_t sq, int64_t sk, int64_t d) {
  Case c;
  c.rank = rank;
  c.batch = b;
  c.q_heads = hq;
  c.kv_heads = hkv;
  c.q_len = sq;
  c.kv_len = sk;
  c.head_size = d;
  return c;
}

// BERT-base's attention at sequence 128: 12 heads of 64, [B, S, H*D] inputs (packed: Q, K and V in
// one [B, S, 3*H*D] tensor), the padding mask as an additive [B, 1, 1, S] bias, scale 1/8.
Case bert_case(int64_t batch, bool packed) {
  Case c = make_case(3, batch, 12, 12, 128, 128, 64);
  c.packed = packed;
  c.mask = MaskKind::kAdditive;
  c.mask_shape = {batch, 1, 1, 128};
  c.scale = 0.125f;
  return c;
}

TEST_F(CudaAttentionTest, BertShapedPaddingMask3D) { check_all_types(bert_case(2, false)); }

// Q, K and V read in place from one projection's [B, S, 3*H*D] output (fuse_qkv_projection).
TEST_F(CudaAttentionTest, PackedQkv) {
  const Case bert = bert_case(2, true);
  check_all_types(bert);
  Case odd = make_case(3, 3, 3, 3, 77, 77, 32);
  odd.packed = true;
  check_all_types(odd);
  odd.mask = MaskKind::kBool;
  odd.mask_shape = {3, 1, 77, 77};
  check_all_types(odd);
#if defined(INGOT_WITH_CUDNN) && defined(INGOT_WITH_CUDNN_FRONTEND)
  for (DataType t : {DataType::kFloat16, DataType::kBFloat16}) {
    auto g = parse_graph(graph_text(bert, t));
    ASSERT_TRUE(g.ok());
    const ir::Node& node = *(*g)->nodes()[0];
    ASSERT_FALSE(cudnn_sdpa_family().candidates(node, input_types(node)).empty())
        << "cuDNN SDPA not offered for packed BERT attention in " << data_type_name(t);
    check(bert, t, "cuda.cudnn.sdpa", false);
  }
#endif
}

// Strided views (ViT's nn.MultiheadAttention after attention_strided_views): Q/K/V read from a
// seq-first packed projection, Y written seq-first for out_proj; ViT-B's 197 tokens x 12 heads of
// 64 at batch 2, and an odd one with a mask.
TEST_F(CudaAttentionTest, StridedViews) {
  Case vit = make_case(4, 2, 12, 12, 197, 197, 64);
  vit.views = true;
  check_all_types(vit);
  Case odd = make_case(4, 3, 3, 3, 77, 77, 32);
  odd.views = true;
  odd.mask = MaskKind::kAdditive;
  odd.mask_shape = {3, 1, 1, 77};
  check_all_types(odd);
#if defined(INGOT_WITH_CUDNN) && defined(INGOT_WITH_CUDNN_FRONTEND)
  for (DataType t : {DataType::kFloat16, DataType::kBFloat16}) {
    auto g = parse_graph(graph_text(vit, t));
    ASSERT_TRUE(g.ok());
    const ir::Node& node = *(*g)->nodes()[0];
    ASSERT_FALSE(cudnn_sdpa_family().candidates(node, input_types(node)).empty())
        << "cuDNN SDPA not offered for strided-view attention in " << data_type_name(t);
    check(vit, t, "cuda.cudnn.sdpa", false);
  }
#endif
}

// Grids of hundreds of CTAs (BERT-like batches and head counts): a partial last query tile, fewer
// keys than queries, a broadcast mask, packed inputs, GQA with causal masking and a bool mask,
// head sizes 64/32/128.
TEST_F(CudaAttentionTest, LargeGrids) {
  Case c = make_case(3, 22, 12, 12, 130, 100, 64);
  c.mask = MaskKind::kAdditive;
  c.mask_shape = {22, 1, 1, 100};
  c.scale = 0.125f;
  check_all_types(c);
  Case packed = bert_case(22, true);
  packed.scale = 0;  // the default scale, 1/sqrt(D): no attribute
  check_all_types(packed);
  Case gqa = make_case(4, 12, 24, 8, 200, 200, 32);
  gqa.causal = true;
  gqa.mask = MaskKind::kBool;
  gqa.mask_shape = {12, 1, 200, 200};
  check_all_types(gqa);
  check_all_types(make_case(4, 18, 16, 16, 129, 64, 128));
}

// Heads enough (>= 2 per SM) for flash_short's persistent form, which each CTA runs over a run of
// heads with the next head's K and V loading: masks shared by every row (none, additive, bool),
// partial query tiles, fewer than 128 keys, grouped K/V heads, head sizes 64 and 32.
TEST_F(CudaAttentionTest, ShortKernelOverManyHeads) {
  check_all_types(bert_case(30, false));
  check_all_types(bert_case(30, true));
  check_all_types(make_case(4, 30, 12, 12, 70, 128, 32));  // no mask, 2 tiles, the last partial
  Case gqa = make_case(4, 25, 12, 4, 200, 97, 64);         // 4 query tiles, 97 keys, 3 heads per K/V
  gqa.mask = MaskKind::kBool;
  gqa.mask_shape = {25, 1, 1, 97};
  check_all_types(gqa);
  Case one_head_mask = make_case(4, 300, 1, 1, 64, 128, 64);  // a [B, 1, 1, S] mask, 300 heads
  one_head_mask.mask = MaskKind::kAdditive;
  one_head_mask.mask_shape = {300, 1, 1, 128};
  check_all_types(one_head_mask);
}

TEST_F(CudaAttentionTest, OddLengthsNoMask) {
  check_all_types(make_case(4, 1, 2, 2, 1, 7, 64));
  check_all_types(make_case(4, 2, 3, 3, 77, 130, 32));
  check_all_types(make_case(4, 1, 1, 1, 1, 1, 128));
  check_all_types(make_case(3, 2, 4, 1, 7, 1, 80));  // GQA, a single key
  check_all_types(make_case(4, 1, 2, 2, 130, 77, 96));
}

TEST_F(CudaAttentionTest, BoolMasks) {
  Case c = make_case(4, 2, 3, 3, 77, 130, 64);
  c.mask = MaskKind::kBool;
  c.mask_shape = {2, 1, 77, 130};
  check_all_types(c);
  c.mask_shape = {130};  // one row for every query
  check_all_types(c);
  c.mask_shape = {3, 77, 130};
  c.hide_first_row = true;  // query 0 of head 0 sees no key: zeros
  check_all_types(c);
}

TEST_F(CudaAttentionTest, AdditiveMasksEveryRank) {
  for (const Shape64& ms : {Shape64{1, 1, 1, 70}, Shape64{2, 1, 65, 70}, Shape64{65, 70}, Shape64{2, 4, 65, 70}}) {
    Case c = make_case(4, 2, 4, 2, 65, 70, 64);
    c.mask = MaskKind::kAdditive;
    c.mask_shape = ms;
    check_all_types(c);
  }
  Case c = make_case(3, 1, 2, 2, 9, 33, 128);
  c.mask = MaskKind::kAdditive;
  c.mask_shape = {9, 33};
  c.hide_first_row = true;
  check_all_types(c);
}

// Swin-T's shifted windows: 49 positions per window, heads of 32, the window mask (plus the
// relative-position bias) per window, the batch holding images x windows (mask_batch_period).
TEST_F(CudaAttentionTest, WindowMaskRepeatsOverTheBatch) {
  for (const Shape64& ms : {Shape64{4, 3, 49, 49}, Shape64{4, 1, 49, 49}}) {
    Case c = make_case(4, 12, 3, 3, 49, 49, 32);
    c.mask = MaskKind::kAdditive;
    c.mask_shape = ms;
    c.mask_period = 4;
    check_all_types(c);
#if defined(INGOT_WITH_CUDNN) && defined(INGOT_WITH_CUDNN_FRONTEND)
    auto g = parse_graph(graph_text(c, DataType::kFloat16));
    ASSERT_TRUE(g.ok());
    const ir::Node& node = *(*g)->nodes()[0];
    EXPECT_TRUE(cudnn_sdpa_family().candidates(node, input_types(node)).empty())
        << "cuDNN's bias cannot repeat over the batch";
#endif
  }
  Case c = make_case(3, 6, 2, 2, 49, 49, 64);  // 3-D, 3 images of 2 windows
  c.mask = MaskKind::kAdditive;
  c.mask_shape = {2, 2, 49, 49};
  c.mask_period = 2;
  check_all_types(c);
}

TEST_F(CudaAttentionTest, ShortMaskHidesTheTailKeys) {
  Case c = make_case(4, 1, 2, 2, 5, 100, 64);
  c.mask = MaskKind::kBool;
  c.mask_shape = {5, 70};  // keys 70.. hidden
  check_all_types(c);
  c.mask = MaskKind::kAdditive;
  check_all_types(c);
}

TEST_F(CudaAttentionTest, Causal) {
  for (Case c : {make_case(4, 1, 2, 2, 130, 130, 64), make_case(4, 2, 4, 1, 77, 140, 32),
                 make_case(3, 1, 3, 3, 140, 65, 96), make_case(4, 1, 1, 1, 1, 9, 80)}) {
    c.causal = true;
    check_all_types(c);
  }
  Case c = make_case(4, 1, 2, 2, 66, 66, 128);
  c.causal = true;
  c.mask = MaskKind::kAdditive;
  c.mask_shape = {1, 2, 1, 66};
  check_all_types(c);
}

TEST_F(CudaAttentionTest, OnnxAttentionAndScales) {
  Case c = make_case(4, 2, 4, 2, 33, 47, 64);
  c.onnx = true;
  check_all_types(c);
  c.scale = 0.37f;
  c.mask = MaskKind::kBool;
  c.mask_shape = {2, 4, 33, 47};
  check_all_types(c);
  c = make_case(3, 1, 6, 3, 20, 31, 32);
  c.onnx = true;
  c.causal = true;
  c.scale = 1.5f;
  check_all_types(c);
}

TEST_F(CudaAttentionTest, GenericHeadSizes) {
  for (int64_t d : {1, 8, 40, 100, 127}) check_all_types(make_case(4, 1, 2, 1, 19, 45, d));
  Case c = make_case(3, 2, 2, 2, 13, 70, 24);
  c.mask = MaskKind::kAdditive;
  c.mask_shape = {2, 1, 1, 70};
  check_all_types(c);
}

TEST_F(CudaAttentionTest, RandomShapes) {
  std::mt19937 shapes(77);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(shapes); };
  const int64_t dims[] = {32, 64, 80, 96, 128, 48};
  for (int n = 0; n < 14; ++n) {
    const int64_t hkv = pick(1, 3);
    Case c = make_case(pick(0, 1) ? 4 : 3, pick(1, 3), hkv * pick(1, 3), hkv, pick(1, 140), pick(1, 140),
                       dims[pick(0, 5)]);
    c.causal = pick(0, 3) == 0;
    c.onnx = pick(0, 3) == 0;
    if (pick(0, 1)) c.scale = static_cast<float>(pick(5, 60)) / 100.0f;
    const int64_t mk = pick(0, 2);
    if (mk != 0) {
      c.mask = mk == 1 ? MaskKind::kBool : MaskKind::kAdditive;
      const int64_t full[4] = {c.batch, c.q_heads, c.q_len, c.kv_len};
      const int rank = static_cast<int>(pick(1, 4));
      for (int i = 4 - rank; i < 4; ++i) c.mask_shape.push_back(i < 3 && pick(0, 1) ? 1 : full[i]);
    }
    check_all_types(c);
  }
}

/// Copies `host` to device memory at `offset` bytes past a 256-byte aligned allocation.
Result<Tensor> upload_at_offset(const Tensor& host, size_t offset) {
  INGOT_ASSIGN_OR_RETURN(Tensor raw, device_alloc(DataType::kUInt8, {static_cast<int64_t>(host.nbytes() + offset)}));
  char* p = static_cast<char*>(raw.mutable_raw()) + offset;
  INGOT_RETURN_IF_ERROR(cuda_status(cudaMemcpy(p, host.raw(), host.nbytes(), cudaMemcpyHostToDevice), "cudaMemcpy"));
  INGOT_RETURN_IF_ERROR(cuda_status(cudaDeviceSynchronize(), "cudaDeviceSynchronize"));  // before the tactics' streams
  auto keep = std::make_shared<Tensor>(raw);
  return Tensor::borrow(host.dtype(), host.shape(), p, std::shared_ptr<const void>(keep, keep->raw()));
}

TEST_F(CudaAttentionTest, MisalignedViewsTakeTheGenericKernel) {
  Case c = make_case(4, 1, 2, 2, 17, 40, 64);
  auto g = parse_graph(graph_text(c, DataType::kFloat16));
  ASSERT_TRUE(g.ok());
  const ir::Node& node = *(*g)->nodes()[0];
  std::vector<Tensor> host = make_inputs(c, DataType::kFloat16);
  std::vector<Tensor> dev;
  for (size_t i = 0; i < host.size(); ++i) {
    auto d = upload_at_offset(host[i], i == 1 ? 2 : 0);  // K off by one element
    ASSERT_TRUE(d.ok()) << d.status().to_string();
    dev.push_back(*d);
  }
  auto y = device_alloc(DataType::kFloat16, c.q_shape());
  ASSERT_TRUE(y.ok());
  ASSERT_TRUE(poison(*y).ok());
  std::vector<Tensor> outs = {*y};
  backend::StepIO io;
  io.node = &node;
  io.inputs = {&dev[0], &dev[1], &dev[2]};
  io.outputs = &outs;
  auto tactic = attention_family().create("cuda.attention.flash", {});
  Status st = tactic->enqueue(io);
  ASSERT_TRUE(st.ok()) << st.to_string();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  auto got = download(outs[0]);
  ASSERT_TRUE(got.ok());
  std::vector<Tensor> in32;
  for (const Tensor& x : host) in32.push_back(to_f32(x));
  auto g32 = parse_graph(graph_text(c, DataType::kFloat32));
  ASSERT_TRUE(g32.ok());
  auto want = run_reference(*(*g32)->nodes()[0], in32);
  ASSERT_TRUE(want.ok());
  EXPECT_TRUE(all_close(to_f32(*got), (*want)[0], attention_tolerance(DataType::kFloat16)));
}

TEST_F(CudaAttentionTest, BadMaskShapeIsAnError) {
  Case c = make_case(4, 1, 2, 2, 5, 9, 64);
  c.mask = MaskKind::kBool;
  c.mask_shape = {5, 9};
  auto g = parse_graph(graph_text(c, DataType::kFloat16));
  ASSERT_TRUE(g.ok());
  const ir::Node& node = *(*g)->nodes()[0];
  std::vector<Tensor> in = make_inputs(c, DataType::kFloat16);
  in[3] = random_tensor(DataType::kBool, {3, 9}, rng_, 0, 1);  // 3 rows for 5 queries
  auto got = run_tactic(*attention_family().create("cuda.attention.flash", {}), node, in);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().to_string().find("attn_mask"), std::string::npos) << got.status().to_string();
  EXPECT_NE(got.status().to_string().find("attn"), std::string::npos);
}

TEST_F(CudaAttentionTest, EnqueueCapturesIntoCudaGraph) {
  Case c = make_case(3, 2, 12, 12, 128, 128, 64);
  c.mask = MaskKind::kAdditive;
  c.mask_shape = {2, 1, 1, 128};
  auto g = parse_graph(graph_text(c, DataType::kFloat16));
  ASSERT_TRUE(g.ok());
  const ir::Node& node = *(*g)->nodes()[0];
  std::vector<Tensor> host = make_inputs(c, DataType::kFloat16);
  std::vector<Tensor> dev;
  std::vector<const Tensor*> ptrs;
  for (const Tensor& h : host) {
    auto d = upload(h);
    ASSERT_TRUE(d.ok());
    dev.push_back(*d);
  }
  for (const Tensor& d : dev) ptrs.push_back(&d);
  auto y = device_alloc(DataType::kFloat16, c.q_shape());
  ASSERT_TRUE(y.ok());
  std::vector<Tensor> outs = {*y};
  auto tactic = attention_family().create("cuda.attention.flash", {});
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  backend::StepIO io;
  io.node = &node;
  io.inputs = ptrs;
  io.outputs = &outs;
  io.stream = stream;
  ASSERT_TRUE(tactic->enqueue(io).ok());
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  auto plain = download(outs[0]);
  ASSERT_TRUE(plain.ok());
  ASSERT_TRUE(poison(outs[0]).ok());
  {
    const Status st = capture_and_replay(*tactic, io);
    ASSERT_TRUE(st.ok()) << st.to_string();
  }
  auto replay = download(outs[0]);
  ASSERT_TRUE(replay.ok());
  EXPECT_EQ(std::memcmp(plain->raw(), replay->raw(), plain->nbytes()), 0) << "graph replay differs from enqueue";
  cudaStreamDestroy(stream);
}

// BERT-base self-attention (12 heads, s128, D 64, fp16): 3-D with the [B,1,1,S] padding mask
// (what recognize_attention makes of BERT) and 4-D without a mask. Per call: CUDA events around
// each enqueue, median of 50 after 10 warm-up calls (includes the launch on an idle stream).
// Back to back: events around 50 enqueues, the mean (the kernel time once launches overlap,
// as in a CUDA graph). Prints; never fails on speed.
TEST_F(CudaAttentionTest, TimingBertBase) {
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  cudaEvent_t start, stop;
  ASSERT_EQ(cudaEventCreate(&start), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&stop), cudaSuccess);
  for (int64_t batch : {1, 64}) {
    // BERT as its engines run it (Q, K, V packed in one [B, S, 3*H*D] input, read in place, and
    // a [B, 1, 1, S] additive mask), the same unpacked, and 4-D without a mask.
    for (int form = 0; form < 3; ++form) {
      const bool bert_form = form < 2;
      Case c = bert_case(batch, form == 0);
      if (!bert_form) {
        c.rank = 4;
        c.mask = MaskKind::kNone;
        c.mask_shape.clear();
      }
      auto g = parse_graph(graph_text(c, DataType::kFloat16));
      ASSERT_TRUE(g.ok());
      const ir::Node& node = *(*g)->nodes()[0];
      std::vector<Tensor> host = make_inputs(c, DataType::kFloat16);
      std::vector<Tensor> dev;
      std::vector<const Tensor*> ptrs;
      for (const Tensor& h : host) {
        auto d = upload(h);
        ASSERT_TRUE(d.ok());
        dev.push_back(*d);
      }
      for (const Tensor& d : dev) ptrs.push_back(&d);
      auto y = device_alloc(DataType::kFloat16, c.q_shape());
      ASSERT_TRUE(y.ok());
      std::vector<Tensor> outs = {*y};
      for (const char* name :
           {"cuda.attention.flash_short", "cuda.attention.flash", "cuda.attention.generic", "cuda.cudnn.sdpa"}) {
        auto tactic = create_any(name);
        if (!tactic) continue;  // built without cudnn-frontend
        if (!tactic->supports(node, input_types(node))) continue;
        DeviceBuffer ws(std::max<uint64_t>(tactic->workspace_bytes(node, {}), 1));
        backend::StepIO io;
        io.node = &node;
        io.inputs = ptrs;
        io.outputs = &outs;
        io.stream = stream;
        io.workspace = ws.get();
        for (int i = 0; i < 10; ++i) ASSERT_TRUE(tactic->enqueue(io).ok());
        std::vector<float> us;
        for (int i = 0; i < 50; ++i) {
          ASSERT_EQ(cudaEventRecord(start, stream), cudaSuccess);
          ASSERT_TRUE(tactic->enqueue(io).ok());
          ASSERT_EQ(cudaEventRecord(stop, stream), cudaSuccess);
          ASSERT_EQ(cudaEventSynchronize(stop), cudaSuccess);
          float ms = 0;
          ASSERT_EQ(cudaEventElapsedTime(&ms, start, stop), cudaSuccess);
          us.push_back(ms * 1000.0f);
        }
        std::sort(us.begin(), us.end());
        ASSERT_EQ(cudaEventRecord(start, stream), cudaSuccess);
        for (int i = 0; i < 50; ++i) ASSERT_TRUE(tactic->enqueue(io).ok());
        ASSERT_EQ(cudaEventRecord(stop, stream), cudaSuccess);
        ASSERT_EQ(cudaEventSynchronize(stop), cudaSuccess);
        float total_ms = 0;
        ASSERT_EQ(cudaEventElapsedTime(&total_ms, start, stop), cudaSuccess);
        const double med = us[us.size() / 2], b2b = total_ms * 1000.0 / 50;
        const double flops = 4.0 * batch * 12 * 128 * 128 * 64;
        std::printf("[timing] %-22s BERT-base s128 b%-3lld fp16 %s: %7.2f us/call median (min %.2f), "
                    "%7.2f us back to back, %.1f TFLOP/s\n",
                    name, static_cast<long long>(batch), form == 0 ? "packed + mask" : bert_form ? "3-D + mask" : "4-D no mask",
                    med, us.front(),
                    b2b, flops / (b2b * 1e-6) / 1e12);
      }
    }
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaStreamDestroy(stream);
}

#if defined(INGOT_WITH_CUDNN) && defined(INGOT_WITH_CUDNN_FRONTEND)
// cuDNN's fused SDPA (another tactic for the same nodes, timed against ours by the builder)
// against the reference, where cuDNN offers a plan; BERT's form must be offered.
TEST_F(CudaAttentionTest, CudnnSdpaMatchesTheReference) {
  const Case bert = bert_case(2, false);
  Case causal = make_case(4, 1, 2, 2, 130, 130, 64);
  causal.causal = true;
  Case masked = make_case(4, 2, 4, 2, 65, 70, 64);  // GQA, a full mask
  masked.mask = MaskKind::kAdditive;
  masked.mask_shape = {2, 4, 65, 70};
  int offered = 0, cases = 0;
  const std::vector<Case> all = {bert, causal, masked, make_case(4, 2, 3, 3, 77, 130, 32),
                                 make_case(4, 1, 2, 2, 130, 77, 128)};
  for (size_t i = 0; i < all.size(); ++i)
    for (DataType t : {DataType::kFloat16, DataType::kBFloat16}) {
      const Case& c = all[i];
      ++cases;
      auto g = parse_graph(graph_text(c, t));
      ASSERT_TRUE(g.ok());
      const ir::Node& node = *(*g)->nodes()[0];
      if (cudnn_sdpa_family().candidates(node, input_types(node)).empty()) {
        EXPECT_NE(i, 0u) << "cuDNN SDPA not offered for BERT's attention in " << data_type_name(t);
        continue;
      }
      ++offered;
      check(c, t, "cuda.cudnn.sdpa", false);
    }
  std::printf("[ cudnn.sdpa ] offered in %d of %d cases\n", offered, cases);
}
#endif

// ---- host-only tests (no device needed) ---------------------------------------------------

class CudaAttentionFamilyTest : public CudaAttentionTest {
 protected:
  void SetUp() override {}

  std::vector<std::string> candidates(const std::string& text) {
    auto g = parse_graph(text);
    EXPECT_TRUE(g.ok()) << g.status().to_string() << "\n" << text;
    if (!g.ok()) return {};
    const ir::Node& node = *(*g)->nodes().back();
    std::vector<std::string> names;
    for (auto& t : attention_family().candidates(node, input_types(node))) names.push_back(t->name());
    return names;
  }
};

TEST_F(CudaAttentionFamilyTest, ChoosesFlashForHalfTypesAndKnownHeadSizes) {
  using V = std::vector<std::string>;
  const V all = {"cuda.attention.flash_short", "cuda.attention.flash", "cuda.attention.generic"};
  const V both = {"cuda.attention.flash", "cuda.attention.generic"};
  const V generic = {"cuda.attention.generic"};
  EXPECT_EQ(candidates(graph_text(make_case(4, 1, 12, 12, 128, 128, 64), DataType::kFloat16)), all);
  EXPECT_EQ(candidates(graph_text(make_case(4, 1, 12, 12, 128, 129, 64), DataType::kFloat16)), both);  // 129 keys
  EXPECT_EQ(candidates(graph_text(make_case(3, 1, 12, 4, 128, 128, 128), DataType::kBFloat16)), both);  // D 128
  EXPECT_EQ(candidates(graph_text(make_case(4, 1, 12, 12, 128, 128, 64), DataType::kFloat32)), generic);
  EXPECT_EQ(candidates(graph_text(make_case(4, 1, 2, 2, 8, 8, 48), DataType::kFloat16)), generic);
  EXPECT_EQ(candidates(graph_text(make_case(4, 1, 2, 2, 8, 8, 256), DataType::kFloat16)), V{});
  // Symbolic batch and sequence lengths are fine; the head size must be known.
  const std::string sym =
      "graph g {\n  opset \"ingot\" 1\n  input %q: f16[b,12,s,64]\n  input %k: f16[b,12,t,64]\n"
      "  input %v: f16[b,12,t,64]\n  %y = ingot::Attention(%q, %k, %v) @a\n  output %y\n}\n";
  EXPECT_EQ(candidates(sym), all);  // an unknown key count: flash_short falls back past 128
  const std::string unknown_d =
      "graph g {\n  opset \"ingot\" 1\n  input %q: f16[b,12,s,d]\n  input %k: f16[b,12,t,d]\n"
      "  input %v: f16[b,12,t,d]\n  %y = ingot::Attention(%q, %k, %v) @a\n  output %y\n}\n";
  EXPECT_EQ(candidates(unknown_d), V{});
}

TEST_F(CudaAttentionFamilyTest, RefusesWhatTheKernelsCannotDo) {
  const std::string head = "graph g {\n  opset \"\" 23\n  input %q: f16[1,2,8,64]\n  input %k: f16[1,2,8,64]\n"
                           "  input %v: f16[1,2,8,64]\n";
  auto graph = [&](const std::string& extra_inputs, const std::string& node) {
    return head + extra_inputs + "  " + node + "\n  output %y\n}\n";
  };
  // Past key/value (a KV cache) and the extra outputs.
  EXPECT_TRUE(candidates(graph("  input %pk: f16[1,2,3,64]\n  input %pv: f16[1,2,3,64]\n",
                               "%y = Attention(%q, %k, %v, _, %pk, %pv) @a"))
                  .empty());
  EXPECT_TRUE(candidates(graph("", "%y, %pk, %pv = Attention(%q, %k, %v) @a")).empty());
  EXPECT_TRUE(candidates(graph("", "%y, _, _, %qk = Attention(%q, %k, %v) @a")).empty());
  EXPECT_TRUE(candidates(graph("", "%y = Attention {softcap=30.0}(%q, %k, %v) @a")).empty());
  EXPECT_TRUE(candidates(graph("", "%y = Attention {left_window_size=4}(%q, %k, %v) @a")).empty());
  // V's head size unlike Q's.
  EXPECT_TRUE(candidates("graph g {\n  opset \"\" 23\n  input %q: f16[1,2,8,64]\n  input %k: f16[1,2,8,64]\n"
                         "  input %v: f16[1,2,8,32]\n  %y = Attention(%q, %k, %v) @a\n  output %y\n}\n")
                  .empty());
  // Not attention at all.
  EXPECT_TRUE(candidates("graph g {\n  opset \"\" 17\n  input %x: f16[4]\n  %y = Relu(%x) @r\n  output %y\n}\n")
                  .empty());
  // What it takes: a plain opset-23 Attention.
  EXPECT_FALSE(candidates(graph("", "%y = Attention(%q, %k, %v) @a")).empty());
}

TEST_F(CudaAttentionFamilyTest, CreateRebuildsTacticsByName) {
  auto f = attention_family();
  EXPECT_EQ(f.name, "attention");
  for (const std::string name : {"cuda.attention.flash_short", "cuda.attention.flash", "cuda.attention.generic"}) {
    auto t = f.create(name, {});
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(t->name(), name);
    EXPECT_TRUE(t->serialize().empty());
  }
  for (const std::string bad : {"cuda.attention.", "cuda.attention.flash2", "cuda.elementwise.softmax"})
    EXPECT_EQ(f.create(bad, {}), nullptr) << bad;
}

}  // namespace
}  // namespace ingot::gpu_test
