// Copyright ingot authors. Apache-2.0.
#include "llm/cpu_decoder.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <utility>

#include "core/hash_uniform.h"
#include "core/parallel.h"

namespace ingot::llm {

KvStore::KvStore(const LlamaConfig& c, int64_t num_blocks, int32_t block_size)
    : num_blocks_(num_blocks), block_size_(block_size), row_(c.num_kv_heads * c.head_dim),
      layer_stride_(num_blocks * block_size * c.num_kv_heads * c.head_dim),
      k_(static_cast<size_t>(c.num_layers * layer_stride_)), v_(k_.size()) {}

float* KvStore::k(int64_t layer, int64_t block, int64_t slot) {
  return k_.data() + layer * layer_stride_ + (block * block_size_ + slot) * row_;
}
float* KvStore::v(int64_t layer, int64_t block, int64_t slot) {
  return v_.data() + layer * layer_stride_ + (block * block_size_ + slot) * row_;
}

namespace {

/// "FORMAT: tensor 'NAME' has WHAT [ got ], the config says [ want ]".
Status shape_mismatch(const char* format, const std::string& name, const char* what, const std::vector<int64_t>& got,
                      const std::vector<int64_t>& want) {
  std::string g, w;
  for (int64_t d : got) g += std::to_string(d) + " ";
  for (int64_t d : want) w += std::to_string(d) + " ";
  return invalid_model(format, ": tensor '", name, "' has ", what, " [ ", g, "], the config says [ ", w, "]");
}

/// A tensor as floats with the expected shape (ggml order: dims[0] is a row's length).
Result<std::vector<float>> weight(const GgufFile& f, const std::string& name, std::vector<int64_t> dims,
                                  bool optional = false) {
  const GgufTensor* t = f.tensor(name);
  if (t == nullptr) {
    if (optional) return std::vector<float>();
    return invalid_model("GGUF: tensor '", name, "' is missing");
  }
  if (t->dims != dims) return shape_mismatch("GGUF", name, "dims", t->dims, dims);
  return dequantize(*t);
}

/// y[t][o] = sum_i w[o][i] * x[t][i] (+ b[o]) for T rows of x.
void matmul(const float* x, int64_t T, int64_t in, const std::vector<float>& w, const std::vector<float>& b,
            int64_t out, float* y) {
  for (int64_t o = 0; o < out; ++o) {
    const float* wr = w.data() + o * in;
    for (int64_t t = 0; t < T; ++t) {
      const float* xr = x + t * in;
      float acc = 0.f;
      for (int64_t i = 0; i < in; ++i) acc += wr[i] * xr[i];
      y[t * out + o] = acc + (b.empty() ? 0.f : b[static_cast<size_t>(o)]);
    }
  }
}

void rms_norm(const float* x, int64_t T, int64_t d, const std::vector<float>& g, double eps, float* y) {
  for (int64_t t = 0; t < T; ++t) {
    double ss = 0;
    for (int64_t i = 0; i < d; ++i) ss += static_cast<double>(x[t * d + i]) * x[t * d + i];
    const float scale = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(d) + eps));
    for (int64_t i = 0; i < d; ++i) y[t * d + i] = x[t * d + i] * scale * g[static_cast<size_t>(i)];
  }
}

/// Rotates adjacent pairs (x[2i], x[2i+1]) of each head by pos * inv_freq[i] (GGUF's layout).
void rope(float* x, int64_t heads, int64_t hd, int64_t pos, const std::vector<float>& inv_freq) {
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < hd / 2; ++i) {
      const double a = static_cast<double>(pos) * inv_freq[static_cast<size_t>(i)];
      const float c = static_cast<float>(std::cos(a)), s = static_cast<float>(std::sin(a));
      float* p = x + h * hd + 2 * i;
      const float x0 = p[0], x1 = p[1];
      p[0] = x0 * c - x1 * s;
      p[1] = x0 * s + x1 * c;
    }
}

/// A projection's 4-bit blocks when the file stores it as Q4_0, Q4_1 or Q4_K (else left empty).
Status keep_q4(const GgufFile& f, const std::string& name, Int4Weights* out) {
  const GgufTensor* t = f.tensor(name);
  if (t == nullptr || (t->type != GgmlType::kQ4_0 && t->type != GgmlType::kQ4_1 && t->type != GgmlType::kQ4_K))
    return Status::Ok();
  INGOT_ASSIGN_OR_RETURN(*out, int4_from_gguf(*t));
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<LlamaCpuModel>> LlamaCpuModel::load(const GgufFile& f, bool keep_int4) {
  auto m = std::unique_ptr<LlamaCpuModel>(new LlamaCpuModel());
  INGOT_ASSIGN_OR_RETURN(m->config_, llama_config_from_gguf(f));
  const LlamaConfig& c = m->config_;
  const int64_t d = c.hidden_size, hd = c.head_dim, nq = c.num_heads * hd, nkv = c.num_kv_heads * hd;
  const int64_t ff = c.intermediate_size;
  INGOT_ASSIGN_OR_RETURN(m->embed_, weight(f, "token_embd.weight", {d, c.vocab_size}));
  INGOT_ASSIGN_OR_RETURN(m->out_norm_, weight(f, "output_norm.weight", {d}));
  INGOT_ASSIGN_OR_RETURN(m->lm_head_, weight(f, "output.weight", {d, c.vocab_size}, /*optional=*/true));
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    Layer L;
    INGOT_ASSIGN_OR_RETURN(L.attn_norm, weight(f, p + "attn_norm.weight", {d}));
    INGOT_ASSIGN_OR_RETURN(L.wq, weight(f, p + "attn_q.weight", {d, nq}));
    INGOT_ASSIGN_OR_RETURN(L.wk, weight(f, p + "attn_k.weight", {d, nkv}));
    INGOT_ASSIGN_OR_RETURN(L.wv, weight(f, p + "attn_v.weight", {d, nkv}));
    INGOT_ASSIGN_OR_RETURN(L.bq, weight(f, p + "attn_q.bias", {nq}, true));
    INGOT_ASSIGN_OR_RETURN(L.bk, weight(f, p + "attn_k.bias", {nkv}, true));
    INGOT_ASSIGN_OR_RETURN(L.bv, weight(f, p + "attn_v.bias", {nkv}, true));
    INGOT_ASSIGN_OR_RETURN(L.wo, weight(f, p + "attn_output.weight", {nq, d}));
    INGOT_ASSIGN_OR_RETURN(L.ffn_norm, weight(f, p + "ffn_norm.weight", {d}));
    INGOT_ASSIGN_OR_RETURN(L.w_gate, weight(f, p + "ffn_gate.weight", {d, ff}));
    INGOT_ASSIGN_OR_RETURN(L.w_up, weight(f, p + "ffn_up.weight", {d, ff}));
    INGOT_ASSIGN_OR_RETURN(L.w_down, weight(f, p + "ffn_down.weight", {ff, d}));
    if (keep_int4) {
      Layer::Int4& q = L.int4;
      for (auto [name, dst] : {std::pair<const char*, Int4Weights*>{"attn_q", &q.wq}, {"attn_k", &q.wk},
                               {"attn_v", &q.wv}, {"attn_output", &q.wo}, {"ffn_gate", &q.w_gate},
                               {"ffn_up", &q.w_up}, {"ffn_down", &q.w_down}})
        INGOT_RETURN_IF_ERROR(keep_q4(f, p + name + ".weight", dst));
    }
    m->layers_.push_back(std::move(L));
  }
  INGOT_RETURN_IF_ERROR(m->init_rope());
  return m;
}

Result<std::unique_ptr<LlamaCpuModel>> LlamaCpuModel::random(const LlamaConfig& config, uint64_t seed) {
  const LlamaConfig& c = config;
  if (c.vocab_size <= 0 || c.hidden_size <= 0 || c.intermediate_size <= 0 || c.num_layers <= 0 || c.num_heads <= 0 ||
      c.num_kv_heads <= 0 || c.num_heads % c.num_kv_heads != 0 || c.head_dim <= 0 || c.head_dim % 2 != 0)
    return invalid_argument("LlamaCpuModel::random: a config with positive sizes, num_kv_heads dividing num_heads "
                            "and an even head_dim is needed");
  auto m = std::unique_ptr<LlamaCpuModel>(new LlamaCpuModel());
  m->config_ = c;
  // Uniform in [-a, a] with a = 0.02 * sqrt(3): standard deviation 0.02. Element i of tensor k is a
  // hash of (seed, k, i) (splitmix64), so the tensors fill in parallel and the same seed gives the
  // same weights on any machine (a 1B-parameter model in seconds, not a minute).
  uint64_t tensor = 0;
  // (core/hash_uniform.h: the GPU decoder's create_random fills the same values on the device.)
  auto fill = [&](int64_t n, float center, float a) {
    std::vector<float> v(static_cast<size_t>(n));
    const uint64_t base = hash_uniform_base(seed, ++tensor);
    auto work = [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i)
        v[static_cast<size_t>(i)] = hash_uniform(base, static_cast<uint64_t>(i), center, a);
    };
    parallel_ranges(n, work);
    return v;
  };
  const float a = 0.02f * std::sqrt(3.0f);
  const int64_t d = c.hidden_size, nq = c.num_heads * c.head_dim, nkv = c.num_kv_heads * c.head_dim;
  const int64_t ff = c.intermediate_size;
  m->embed_ = fill(c.vocab_size * d, 0.f, a);
  m->out_norm_ = fill(d, 1.f, 0.1f);
  if (!c.tie_word_embeddings) m->lm_head_ = fill(c.vocab_size * d, 0.f, a);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    Layer L;
    L.attn_norm = fill(d, 1.f, 0.1f);
    L.wq = fill(nq * d, 0.f, a);
    L.wk = fill(nkv * d, 0.f, a);
    L.wv = fill(nkv * d, 0.f, a);
    if (c.attention_bias) {
      L.bq = fill(nq, 0.f, a);
      L.bk = fill(nkv, 0.f, a);
      L.bv = fill(nkv, 0.f, a);
    }
    L.wo = fill(d * nq, 0.f, a);
    L.ffn_norm = fill(d, 1.f, 0.1f);
    L.w_gate = fill(ff * d, 0.f, a);
    L.w_up = fill(ff * d, 0.f, a);
    L.w_down = fill(d * ff, 0.f, a);
    m->layers_.push_back(std::move(L));
  }
  INGOT_RETURN_IF_ERROR(m->init_rope());
  return m;
}

Result<std::unique_ptr<LlamaCpuModel>> LlamaCpuModel::without_weights(const LlamaConfig& config) {
  auto m = std::unique_ptr<LlamaCpuModel>(new LlamaCpuModel());
  m->config_ = config;
  INGOT_RETURN_IF_ERROR(m->init_rope());
  return m;
}

Status LlamaCpuModel::quantize_int4_in_place(int64_t group) {
  const LlamaConfig& c = config_;
  const int64_t d = c.hidden_size, nq = c.num_heads * c.head_dim, ff = c.intermediate_size;
  if (!int4_group_supported(group) || int4_group_for({d, nq, ff}) < group)
    return invalid_argument("int4 weights: groups of ", group, " do not divide the projections' input dims (", d, ", ",
                            nq, ", ", ff, "); groups of 32, 64 or 128 that do are needed");
  const int64_t held = int4_group();
  if (held != 0 && held != group)
    return invalid_argument("int4 weights: the model holds 4-bit blocks in groups of ", held, ", not ", group);
  for (Layer& L : layers_) {
    Layer::Int4& q = L.int4;
    for (auto [w, p, in] : {std::tuple<std::vector<float>*, Int4Weights*, int64_t>{&L.wq, &q.wq, d}, {&L.wk, &q.wk, d},
                            {&L.wv, &q.wv, d}, {&L.wo, &q.wo, nq}, {&L.w_gate, &q.w_gate, d},
                            {&L.w_up, &q.w_up, d}, {&L.w_down, &q.w_down, ff}}) {
      if (!p->empty()) continue;  // a checkpoint's own blocks, already the floats' values
      INGOT_ASSIGN_OR_RETURN(*p, quantize_int4(w->data(), static_cast<int64_t>(w->size()) / in, in, group));
      *w = dequantize_int4(*p);
    }
  }
  return Status::Ok();
}

int64_t LlamaCpuModel::int4_group(bool fallback) const {
  for (const Layer& L : layers_)
    for (const Int4Weights* p : {&L.int4.wq, &L.int4.wk, &L.int4.wv, &L.int4.wo, &L.int4.w_gate, &L.int4.w_up,
                                 &L.int4.w_down})
      if (!p->empty()) return p->group;
  if (!fallback) return 0;
  const LlamaConfig& c = config_;
  return int4_group_for({c.hidden_size, c.num_heads * c.head_dim, c.intermediate_size});
}

bool LlamaCpuModel::all_int4() const {
  for (const Layer& L : layers_)
    for (const Int4Weights* p : {&L.int4.wq, &L.int4.wk, &L.int4.wv, &L.int4.wo, &L.int4.w_gate, &L.int4.w_up,
                                 &L.int4.w_down})
      if (p->empty()) return false;
  return !layers_.empty();
}

void LlamaCpuModel::drop_int4() {
  for (Layer& L : layers_) L.int4 = {};
}

void LlamaCpuModel::release_weights() {
  embed_ = {};
  out_norm_ = {};
  lm_head_ = {};
  layers_ = {};
}

namespace {

/// A Hugging Face tensor as floats with the expected shape (row-major, [out][in] for projections).
Result<std::vector<float>> hf_weight(const SafetensorsModel& w, const std::string& name, std::vector<int64_t> shape,
                                     bool optional = false) {
  const SafeTensor* t = w.find(name);
  if (t == nullptr) {
    if (optional) return std::vector<float>();
    return invalid_model("safetensors: tensor '", name, "' is missing");
  }
  if (t->shape != shape) return shape_mismatch("safetensors", name, "shape", t->shape, shape);
  return to_floats(*t);
}

/// The row order that takes `heads` heads of `hd` rows from Hugging Face's rotate-half order
/// (pairs i, i + hd/2) into adjacent pairs (2i, 2i + 1): new row `to` is old row rows[to].
std::vector<int64_t> rotate_half_rows(int64_t heads, int64_t hd) {
  std::vector<int64_t> rows(static_cast<size_t>(heads * hd));
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < hd / 2; ++i)
      for (int64_t half = 0; half < 2; ++half) rows[static_cast<size_t>(h * hd + 2 * i + half)] = h * hd + i + half * (hd / 2);
  return rows;
}

/// Rows of `heads` heads of `hd` rows each (row length `cols`; cols 1 for a bias) into adjacent pairs.
std::vector<float> rotate_half_to_pairs(const std::vector<float>& w, int64_t heads, int64_t hd, int64_t cols) {
  if (w.empty()) return w;
  std::vector<float> out(w.size());
  const std::vector<int64_t> rows = rotate_half_rows(heads, hd);
  for (size_t to = 0; to < rows.size(); ++to)
    std::copy_n(w.data() + rows[to] * cols, cols, out.data() + static_cast<int64_t>(to) * cols);
  return out;
}

/// A projection [out][in] of a Hugging Face checkpoint: `prefix`.weight as floats, or the 4-bit
/// blocks of a quantized checkpoint (*int4; AWQ's and GPTQ's qweight/qzeros/scales, compressed-tensors'
/// weight_packed/weight_scale/weight_zero_point/weight_shape) and their values as floats. A
/// projection the quantizer left out (its "ignore" / modules_to_not_convert) keeps its .weight.
Status hf_projection(const SafetensorsModel& w, const LlamaConfig& c, const std::string& prefix, int64_t out, int64_t in,
                     std::vector<float>* floats, Int4Weights* int4) {
  const std::string& method = c.quantization.method;
  const bool awq = method == "awq", gptq = method == "gptq", ct = method == "compressed-tensors";
  const SafeTensor* packed =
      awq || gptq ? w.find(prefix + ".qweight") : ct ? w.find(prefix + ".weight_packed") : nullptr;
  std::vector<int64_t> order;  // GPTQ act-order: input of each column (int4_from_gptq)
  if (!packed) {
    INGOT_ASSIGN_OR_RETURN(*floats, hf_weight(w, prefix + ".weight", {out, in}));
    return Status::Ok();
  }
  if (awq) {
    const SafeTensor* qz = w.find(prefix + ".qzeros");
    const SafeTensor* sc = w.find(prefix + ".scales");
    if (!qz || !sc) return invalid_model("safetensors: AWQ projection '", prefix, "' needs qweight, qzeros and scales");
    INGOT_ASSIGN_OR_RETURN(*int4, int4_from_awq(*packed, *qz, *sc, c.quantization.group_size));
  } else if (gptq) {
    const SafeTensor* qz = w.find(prefix + ".qzeros");
    const SafeTensor* sc = w.find(prefix + ".scales");
    if (!qz || !sc) return invalid_model("safetensors: GPTQ projection '", prefix, "' needs qweight, qzeros and scales");
    const int zero_offset = c.quantization.checkpoint_format == "gptq_v2" ? 0 : 1;
    const SafeTensor* g_idx = w.find(prefix + ".g_idx");
    if (c.quantization.desc_act && !g_idx)
      return invalid_model("safetensors: GPTQ projection '", prefix, "' has no g_idx, and config.json says desc_act");
    INGOT_ASSIGN_OR_RETURN(*int4, int4_from_gptq(*packed, *qz, *sc, g_idx, c.quantization.group_size, zero_offset,
                                                 &order));
  } else {
    const SafeTensor* sc = w.find(prefix + ".weight_scale");
    const SafeTensor* zp = w.find(prefix + ".weight_zero_point");
    if (!sc) return invalid_model("safetensors: compressed-tensors projection '", prefix, "' has no weight_scale");
    if (!c.quantization.symmetric && !zp)
      return invalid_model("safetensors: asymmetric compressed-tensors projection '", prefix,
                           "' has no weight_zero_point");
    INGOT_ASSIGN_OR_RETURN(*int4, int4_from_compressed(*packed, *sc, c.quantization.symmetric ? nullptr : zp,
                                                       w.find(prefix + ".weight_shape"), c.quantization.group_size));
  }
  if (int4->rows != out || int4->cols != in)
    return shape_mismatch("safetensors", packed->name, "unpacked shape", {int4->rows, int4->cols}, {out, in});
  *floats = dequantize_int4(*int4);
  if (!order.empty()) {
    // GPTQ act-order: the blocks' columns are the inputs in group order (int4_from_gptq). The int4
    // kernels read the inputs in place, so this projection runs as its exact floats, put back in
    // input order (and the model as fp16/bf16: LlamaCpuModel::all_int4 is false).
    const std::vector<float> sorted = std::move(*floats);
    floats->assign(sorted.size(), 0.0f);
    for (int64_t n = 0; n < out; ++n)
      for (int64_t j = 0; j < in; ++j)
        (*floats)[static_cast<size_t>(n * in + order[static_cast<size_t>(j)])] = sorted[static_cast<size_t>(n * in + j)];
    *int4 = {};
  }
  return Status::Ok();
}

/// Which quantized checkpoints load_hf reads: none; AutoAWQ's 4-bit "gemm" packing with zero
/// points (transformers' and vLLM's AWQ); AutoGPTQ / GPTQModel 4-bit (v1 and v2 zero points; act-order
/// ones as their exact floats); compressed-tensors "pack-quantized" 4-bit integer
/// weights in groups, activations unquantized (llm-compressor's W4A16, GPTQ- or RTN-made). Anything
/// else would read packed integers or unscaled codes as weights, so it is refused by name.
Status check_hf_quantization(const LlamaConfig& c) {
  const LlamaConfig::Quantization& q = c.quantization;
  if (q.method.empty()) return Status::Ok();
  if (q.method == "awq") {
    if (q.bits != 4 || !q.zero_point || (!q.version.empty() && q.version != "gemm"))
      return unsupported("config.json: AWQ with bits ", q.bits, ", zero_point ", q.zero_point ? "true" : "false",
                         ", version '", q.version, "' (ingot reads 4 bits, zero points, gemm packing)");
    return Status::Ok();
  }
  if (q.method == "gptq") {
    const std::string& f = q.checkpoint_format;
    if (q.bits != 4 || (!f.empty() && f != "gptq" && f != "gptq_v2"))
      return unsupported("config.json: GPTQ with bits ", q.bits, ", checkpoint_format '", f,
                         "' (ingot reads 4 bits, gptq or gptq_v2)");
    return Status::Ok();
  }
  if (q.method == "compressed-tensors") {
    if (q.format != "pack-quantized" || q.groups != 1 || q.bits != 4 || q.type != "int" || q.strategy != "group" ||
        q.activations || q.actorder == "group")
      return unsupported("config.json: compressed-tensors format '", q.format, "' with ", q.groups, " config group(s) of ",
                         q.bits, "-bit ", q.type, " weights, strategy '", q.strategy, "', actorder '", q.actorder,
                         "', activations ", q.activations ? "quantized" : "not quantized",
                         " (ingot reads pack-quantized: one group of 4-bit int weights by group, activations not "
                         "quantized, no group act-order)");
    return Status::Ok();
  }
  return unsupported("config.json: quantization_config quant_method '", q.method,
                     "' (ingot reads AWQ gemm, GPTQ and compressed-tensors pack-quantized W4A16 checkpoints; dequantize "
                     "others to fp16/bf16 first)");
}

}  // namespace

Result<std::unique_ptr<LlamaCpuModel>> LlamaCpuModel::load_hf(const LlamaConfig& config, const SafetensorsModel& w) {
  INGOT_RETURN_IF_ERROR(check_hf_quantization(config));
  auto m = std::unique_ptr<LlamaCpuModel>(new LlamaCpuModel());
  m->config_ = config;
  const LlamaConfig& c = m->config_;
  const int64_t d = c.hidden_size, hd = c.head_dim, H = c.num_heads, Hkv = c.num_kv_heads;
  const int64_t nq = H * hd, nkv = Hkv * hd, ff = c.intermediate_size;
  INGOT_ASSIGN_OR_RETURN(m->embed_, hf_weight(w, "model.embed_tokens.weight", {c.vocab_size, d}));
  INGOT_ASSIGN_OR_RETURN(m->out_norm_, hf_weight(w, "model.norm.weight", {d}));
  INGOT_ASSIGN_OR_RETURN(m->lm_head_, hf_weight(w, "lm_head.weight", {c.vocab_size, d}, /*optional=*/true));
  if (m->lm_head_.empty() && !c.tie_word_embeddings)
    return invalid_model("safetensors: 'lm_head.weight' is missing and config.json does not tie the embeddings");
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    Layer L;
    INGOT_ASSIGN_OR_RETURN(L.attn_norm, hf_weight(w, p + "input_layernorm.weight", {d}));
    Layer::Int4& q4 = L.int4;
    INGOT_RETURN_IF_ERROR(hf_projection(w, c, p + "self_attn.q_proj", nq, d, &L.wq, &q4.wq));
    INGOT_RETURN_IF_ERROR(hf_projection(w, c, p + "self_attn.k_proj", nkv, d, &L.wk, &q4.wk));
    INGOT_RETURN_IF_ERROR(hf_projection(w, c, p + "self_attn.v_proj", nkv, d, &L.wv, &q4.wv));
    INGOT_ASSIGN_OR_RETURN(L.bq, hf_weight(w, p + "self_attn.q_proj.bias", {nq}, true));
    INGOT_ASSIGN_OR_RETURN(L.bk, hf_weight(w, p + "self_attn.k_proj.bias", {nkv}, true));
    INGOT_ASSIGN_OR_RETURN(L.bv, hf_weight(w, p + "self_attn.v_proj.bias", {nkv}, true));
    INGOT_RETURN_IF_ERROR(hf_projection(w, c, p + "self_attn.o_proj", d, nq, &L.wo, &q4.wo));
    INGOT_ASSIGN_OR_RETURN(L.ffn_norm, hf_weight(w, p + "post_attention_layernorm.weight", {d}));
    INGOT_RETURN_IF_ERROR(hf_projection(w, c, p + "mlp.gate_proj", ff, d, &L.w_gate, &q4.w_gate));
    INGOT_RETURN_IF_ERROR(hf_projection(w, c, p + "mlp.up_proj", ff, d, &L.w_up, &q4.w_up));
    INGOT_RETURN_IF_ERROR(hf_projection(w, c, p + "mlp.down_proj", d, ff, &L.w_down, &q4.w_down));
    L.wq = rotate_half_to_pairs(L.wq, H, hd, d);
    L.wk = rotate_half_to_pairs(L.wk, Hkv, hd, d);
    if (!q4.wq.empty()) q4.wq = permute_int4_rows(q4.wq, rotate_half_rows(H, hd));
    if (!q4.wk.empty()) q4.wk = permute_int4_rows(q4.wk, rotate_half_rows(Hkv, hd));
    L.bq = rotate_half_to_pairs(L.bq, H, hd, 1);
    L.bk = rotate_half_to_pairs(L.bk, Hkv, hd, 1);
    m->layers_.push_back(std::move(L));
  }
  INGOT_RETURN_IF_ERROR(m->init_rope());
  return m;
}

// Rotary frequencies, with Llama-3's scaling of the long wavelengths.
Status LlamaCpuModel::init_rope() {
  const LlamaConfig& c = config_;
  const int64_t hd = c.head_dim;
  inv_freq_.clear();
  for (int64_t i = 0; i < hd / 2; ++i) {
    double freq = std::pow(c.rope_theta, -2.0 * static_cast<double>(i) / static_cast<double>(hd));
    if (c.rope_scaling == "llama3") {
      const double kPi = 3.14159265358979323846;
      const double wavelen = 2 * kPi / freq, orig = static_cast<double>(c.rope_original_max_positions);
      const double low_wl = orig / c.rope_low_freq_factor, high_wl = orig / c.rope_high_freq_factor;
      if (wavelen > low_wl) {
        freq /= c.rope_factor;
      } else if (wavelen >= high_wl) {
        const double smooth = (orig / wavelen - c.rope_low_freq_factor) / (c.rope_high_freq_factor - c.rope_low_freq_factor);
        freq = (1 - smooth) * freq / c.rope_factor + smooth * freq;
      }
    } else if (c.rope_scaling != "none") {
      return unsupported("rope scaling '", c.rope_scaling, "' in the CPU decoder");
    }
    inv_freq_.push_back(static_cast<float>(freq));
  }
  return Status::Ok();
}

Result<std::vector<float>> LlamaCpuModel::forward(const std::vector<int32_t>& tokens, int64_t start, int64_t count,
                                                  const std::vector<int32_t>& block_table, KvStore* kv) const {
  if (!has_weights())
    return invalid_argument("forward: this model's weights live on the GPU decoder only (released, or never loaded)");
  const LlamaConfig& c = config_;
  const int64_t d = c.hidden_size, hd = c.head_dim, H = c.num_heads, Hkv = c.num_kv_heads;
  const int64_t nq = H * hd, nkv = Hkv * hd, ff = c.intermediate_size, T = count;
  const int64_t bs = kv->block_size();
  if (start < 0 || count < 1 || start + count > static_cast<int64_t>(tokens.size()))
    return invalid_argument("forward: tokens [", start, ", ", start + count, ") outside a sequence of ",
                            tokens.size());
  if (static_cast<int64_t>(block_table.size()) * bs < start + count)
    return invalid_argument("forward: the block table holds ", block_table.size() * static_cast<size_t>(bs),
                            " positions, ", start + count, " needed");
  for (int32_t b : block_table)
    if (b < 0 || b >= kv->num_blocks()) return invalid_argument("forward: block ", b, " outside the KV store");
  std::vector<float> x(static_cast<size_t>(T * d)), h(x.size()), q(static_cast<size_t>(T * nq)),
      k(static_cast<size_t>(T * nkv)), v(k.size()), att(static_cast<size_t>(T * nq)),
      g(static_cast<size_t>(T * ff)), u(g.size()), tmp(x.size());
  for (int64_t t = 0; t < T; ++t) {
    const int32_t id = tokens[static_cast<size_t>(start + t)];
    if (id < 0 || id >= c.vocab_size) return invalid_argument("forward: token id ", id, " outside the vocabulary");
    std::copy_n(embed_.data() + static_cast<int64_t>(id) * d, d, x.data() + t * d);
  }
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  std::vector<float> scores(static_cast<size_t>(start + T));
  for (size_t l = 0; l < layers_.size(); ++l) {
    const Layer& L = layers_[l];
    rms_norm(x.data(), T, d, L.attn_norm, c.rms_norm_eps, h.data());
    matmul(h.data(), T, d, L.wq, L.bq, nq, q.data());
    matmul(h.data(), T, d, L.wk, L.bk, nkv, k.data());
    matmul(h.data(), T, d, L.wv, L.bv, nkv, v.data());
    for (int64_t t = 0; t < T; ++t) {
      const int64_t pos = start + t;
      rope(q.data() + t * nq, H, hd, pos, inv_freq_);
      rope(k.data() + t * nkv, Hkv, hd, pos, inv_freq_);
      const int64_t blk = block_table[static_cast<size_t>(pos / bs)], slot = pos % bs;
      std::copy_n(k.data() + t * nkv, nkv, kv->k(static_cast<int64_t>(l), blk, slot));
      std::copy_n(v.data() + t * nkv, nkv, kv->v(static_cast<int64_t>(l), blk, slot));
    }
    // Causal grouped-query attention over the cache.
    for (int64_t t = 0; t < T; ++t) {
      const int64_t pos = start + t;
      for (int64_t hh = 0; hh < H; ++hh) {
        const int64_t kvh = hh / (H / Hkv);
        const float* qh = q.data() + t * nq + hh * hd;
        float mx = -INFINITY;
        for (int64_t j = 0; j <= pos; ++j) {
          const float* kj = kv->k(static_cast<int64_t>(l), block_table[static_cast<size_t>(j / bs)], j % bs) + kvh * hd;
          float s = 0.f;
          for (int64_t i = 0; i < hd; ++i) s += qh[i] * kj[i];
          scores[static_cast<size_t>(j)] = s * scale;
          mx = std::max(mx, scores[static_cast<size_t>(j)]);
        }
        double sum = 0;
        for (int64_t j = 0; j <= pos; ++j) {
          scores[static_cast<size_t>(j)] = std::exp(scores[static_cast<size_t>(j)] - mx);
          sum += scores[static_cast<size_t>(j)];
        }
        float* out = att.data() + t * nq + hh * hd;
        std::fill_n(out, hd, 0.f);
        for (int64_t j = 0; j <= pos; ++j) {
          const float w = static_cast<float>(scores[static_cast<size_t>(j)] / sum);
          const float* vj = kv->v(static_cast<int64_t>(l), block_table[static_cast<size_t>(j / bs)], j % bs) + kvh * hd;
          for (int64_t i = 0; i < hd; ++i) out[i] += w * vj[i];
        }
      }
    }
    matmul(att.data(), T, nq, L.wo, {}, d, tmp.data());
    for (size_t i = 0; i < x.size(); ++i) x[i] += tmp[i];
    rms_norm(x.data(), T, d, L.ffn_norm, c.rms_norm_eps, h.data());
    matmul(h.data(), T, d, L.w_gate, {}, ff, g.data());
    matmul(h.data(), T, d, L.w_up, {}, ff, u.data());
    for (size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1.f + std::exp(-g[i])) * u[i];
    matmul(g.data(), T, ff, L.w_down, {}, d, tmp.data());
    for (size_t i = 0; i < x.size(); ++i) x[i] += tmp[i];
  }
  std::vector<float> last(static_cast<size_t>(d));
  rms_norm(x.data() + (T - 1) * d, 1, d, out_norm_, c.rms_norm_eps, last.data());
  std::vector<float> logits(static_cast<size_t>(c.vocab_size));
  matmul(last.data(), 1, d, lm_head_.empty() ? embed_ : lm_head_, {}, c.vocab_size, logits.data());
  return logits;
}

}  // namespace ingot::llm
