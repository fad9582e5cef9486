// Copyright ingot authors. Apache-2.0.
//
// The LLM decoder runtime's kernels (backend/cuda/llm/llm_kernels.h, issue 22) against plain CPU
// references written here (the CPU decoder's formulas: rope on adjacent pairs, GQA attention over
// a paged cache), on random never-zero data from fixed seeds: fp16 and bf16, head_dim 64 and 128,
// block sizes 16 and 32, GQA ratios 1 and 4 (8 heads over 2 KV heads among them), several
// sequences of lengths 1, 17, 300 and 1100 (so the split-K path runs) with shuffled,
// non-contiguous block tables. Also: split and unsplit paths agree on long contexts; a whole
// decode step (rope + cache write + attention) captured into a CUDA graph replays to the eager
// result. The workspace arithmetic needs no device.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/llm/llm_kernels.h"
#include "core/dtype.h"
#include "llm/int4_weights.h"
#include "gpu_test_util.h"

namespace ingot::gpu_test {
namespace {

using backend::cuda::FloatType;
using backend::cuda::PagedDecodeParams;
using backend::cuda::RopeKvWriteParams;

constexpr FloatType kTypes[] = {FloatType::kF16, FloatType::kBF16};

const char* type_name(FloatType t) { return t == FloatType::kF16 ? "f16" : "bf16"; }
double tolerance(FloatType t) { return t == FloatType::kF16 ? 2e-3 : 1e-2; }

uint16_t to_bits(FloatType t, float f) {
  return t == FloatType::kF16 ? float_to_half_bits(f) : float_to_bfloat16_bits(f);
}
float from_bits(FloatType t, uint16_t b) {
  return t == FloatType::kF16 ? half_bits_to_float(b) : bfloat16_bits_to_float(b);
}
std::vector<float> to_floats(FloatType t, const std::vector<uint16_t>& bits) {
  std::vector<float> f(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) f[i] = from_bits(t, bits[i]);
  return f;
}
std::vector<uint16_t> from_floats(FloatType t, const std::vector<float>& f) {
  std::vector<uint16_t> bits(f.size());
  for (size_t i = 0; i < f.size(); ++i) bits[i] = to_bits(t, f[i]);
  return bits;
}

/// Values in [-1, -0.05] U [0.05, 1], rounded to t.
std::vector<uint16_t> random_bits(FloatType t, size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> mag(0.05f, 1.0f);
  std::bernoulli_distribution neg(0.5);
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = to_bits(t, neg(rng) ? -mag(rng) : mag(rng));
  return v;
}

/// ||got - want|| / ||want||; infinity when got holds a NaN or infinity.
double normwise_error(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    num += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
    den += static_cast<double>(want[i]) * want[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

template <class V>
DeviceBuffer to_device(const std::vector<V>& host) {
  DeviceBuffer d(host.size() * sizeof(V));
  if (d.valid() && !host.empty()) {
    if (cudaMemcpy(d.get(), host.data(), host.size() * sizeof(V), cudaMemcpyHostToDevice) != cudaSuccess) return {};
  }
  return d;
}

template <class V>
std::vector<V> to_host(const DeviceBuffer& d, size_t n) {
  std::vector<V> host(n);
  EXPECT_EQ(cudaMemcpy(host.data(), d.get(), n * sizeof(V), cudaMemcpyDeviceToHost), cudaSuccess);
  return host;
}

/// Llama-3.1's rotary frequencies (theta 500000, factor 8, low 1, high 4, 8192 original
/// positions), computed as LlamaCpuModel::load does.
std::vector<float> llama3_inv_freq(int head_dim) {
  const double theta = 500000.0, factor = 8.0, low = 1.0, high = 4.0, orig = 8192.0;
  const double kPi = 3.14159265358979323846;
  std::vector<float> f;
  for (int i = 0; i < head_dim / 2; ++i) {
    double freq = std::pow(theta, -2.0 * i / head_dim);
    const double wavelen = 2 * kPi / freq;
    if (wavelen > orig / low) {
      freq /= factor;
    } else if (wavelen >= orig / high) {
      const double smooth = (orig / wavelen - low) / (high - low);
      freq = (1 - smooth) * freq / factor + smooth * freq;
    }
    f.push_back(static_cast<float>(freq));
  }
  return f;
}

/// The CPU decoder's rope(): adjacent pairs of each head rotated by pos * inv_freq[i].
void rope_reference(float* x, int heads, int hd, int64_t pos, const std::vector<float>& inv_freq) {
  for (int h = 0; h < heads; ++h)
    for (int i = 0; i < hd / 2; ++i) {
      const double a = static_cast<double>(pos) * inv_freq[static_cast<size_t>(i)];
      const float c = static_cast<float>(std::cos(a)), s = static_cast<float>(std::sin(a));
      float* p = x + static_cast<int64_t>(h) * hd + 2 * i;
      const float x0 = p[0], x1 = p[1];
      p[0] = x0 * c - x1 * s;
      p[1] = x0 * s + x1 * c;
    }
}

// ---- paged decode problems --------------------------------------------------------------------

struct Shape {
  int heads, kv_heads, head_dim, block_size;
};

std::string describe(FloatType t, const Shape& s) {
  return std::string(type_name(t)) + " heads " + std::to_string(s.heads) + "/" + std::to_string(s.kv_heads) +
         " head_dim " + std::to_string(s.head_dim) + " block_size " + std::to_string(s.block_size);
}

/// Host side of one paged decode call: sequences of `lens`, their blocks shuffled over a cache
/// with spare blocks, block table rows padded with -1 (never read).
struct Problem {
  FloatType type;
  Shape s;
  std::vector<int32_t> lens;
  int num_blocks = 0, max_blocks = 0;
  std::vector<int32_t> tables;  // [B][max_blocks]
  std::vector<uint16_t> q;      // [B][H][D]
  std::vector<uint16_t> k_cache, v_cache;

  int batch() const { return static_cast<int>(lens.size()); }
  int64_t row() const { return static_cast<int64_t>(s.kv_heads) * s.head_dim; }
  /// Flat slot of position p of sequence b.
  int64_t slot(int b, int64_t p) const {
    return static_cast<int64_t>(tables[static_cast<size_t>(b * max_blocks + p / s.block_size)]) * s.block_size +
           p % s.block_size;
  }
};

Problem make_problem(FloatType t, const Shape& s, const std::vector<int32_t>& lens, std::mt19937& rng) {
  Problem pr{t, s, lens};
  std::vector<int> need;
  int total = 0;
  for (int32_t len : lens) {
    need.push_back((len + s.block_size - 1) / s.block_size);
    total += need.back();
    pr.max_blocks = std::max(pr.max_blocks, need.back());
  }
  pr.max_blocks += 1;  // one padding entry per row
  pr.num_blocks = total + 7;
  std::vector<int32_t> ids(static_cast<size_t>(pr.num_blocks));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  pr.tables.assign(static_cast<size_t>(pr.batch() * pr.max_blocks), -1);
  size_t next = 0;
  for (int b = 0; b < pr.batch(); ++b)
    for (int j = 0; j < need[static_cast<size_t>(b)]; ++j) pr.tables[static_cast<size_t>(b * pr.max_blocks + j)] = ids[next++];
  const size_t cache = static_cast<size_t>(pr.num_blocks) * s.block_size * pr.row();
  pr.k_cache = random_bits(t, cache, rng);
  pr.v_cache = random_bits(t, cache, rng);
  pr.q = random_bits(t, static_cast<size_t>(pr.batch()) * s.heads * s.head_dim, rng);
  // Every slot outside the contexts (spare blocks, the rest of a last block) holds NaNs: the
  // kernel must never let what it reads there into a result, not even times a zero weight.
  std::vector<bool> used(static_cast<size_t>(pr.num_blocks) * s.block_size, false);
  for (int b = 0; b < pr.batch(); ++b)
    for (int64_t p = 0; p < pr.lens[static_cast<size_t>(b)]; ++p) used[static_cast<size_t>(pr.slot(b, p))] = true;
  for (size_t slot = 0; slot < used.size(); ++slot)
    if (!used[slot])
      for (int64_t e = 0; e < pr.row(); ++e) {
        pr.k_cache[slot * static_cast<size_t>(pr.row()) + static_cast<size_t>(e)] = 0xFFFF;  // NaN in fp16 and bf16
        pr.v_cache[slot * static_cast<size_t>(pr.row()) + static_cast<size_t>(e)] = 0xFFFF;
      }
  return pr;
}

/// o [B][H][D] in fp64 accumulation over the fp16/bf16 inputs, as the CPU decoder's attention.
std::vector<float> attention_reference(const Problem& pr) {
  const int H = pr.s.heads, D = pr.s.head_dim, group = pr.s.heads / pr.s.kv_heads;
  const std::vector<float> q = to_floats(pr.type, pr.q), kc = to_floats(pr.type, pr.k_cache),
                           vc = to_floats(pr.type, pr.v_cache);
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  std::vector<float> o(q.size(), 0.0f);
  for (int b = 0; b < pr.batch(); ++b) {
    const int64_t len = pr.lens[static_cast<size_t>(b)];
    for (int h = 0; h < H; ++h) {
      const int kvh = h / group;
      const float* qh = q.data() + (static_cast<int64_t>(b) * H + h) * D;
      std::vector<double> sc(static_cast<size_t>(len));
      double mx = -INFINITY;
      for (int64_t j = 0; j < len; ++j) {
        const float* kj = kc.data() + pr.slot(b, j) * pr.row() + kvh * D;
        double dot = 0;
        for (int i = 0; i < D; ++i) dot += static_cast<double>(qh[i]) * kj[i];
        sc[static_cast<size_t>(j)] = dot * scale;
        mx = std::max(mx, sc[static_cast<size_t>(j)]);
      }
      double sum = 0;
      for (double& x : sc) sum += (x = std::exp(x - mx));
      std::vector<double> acc(static_cast<size_t>(D), 0.0);
      for (int64_t j = 0; j < len; ++j) {
        const float* vj = vc.data() + pr.slot(b, j) * pr.row() + kvh * D;
        for (int i = 0; i < D; ++i) acc[static_cast<size_t>(i)] += sc[static_cast<size_t>(j)] / sum * vj[i];
      }
      for (int i = 0; i < D; ++i) o[static_cast<size_t>((static_cast<int64_t>(b) * H + h) * D + i)] = static_cast<float>(acc[static_cast<size_t>(i)]);
    }
  }
  return o;
}

/// Device copies of a problem's tensors.
struct DeviceProblem {
  DeviceBuffer q, k_cache, v_cache, lens, tables, o, workspace;
  PagedDecodeParams params(const Problem& pr, int32_t partition_size) const {
    PagedDecodeParams p;
    p.type = pr.type;
    p.q = q.get();
    p.k_cache = k_cache.get();
    p.v_cache = v_cache.get();
    p.context_lens = static_cast<const int32_t*>(lens.get());
    p.block_tables = static_cast<const int32_t*>(tables.get());
    p.o = o.get();
    p.batch = pr.batch();
    p.num_heads = pr.s.heads;
    p.num_kv_heads = pr.s.kv_heads;
    p.head_dim = pr.s.head_dim;
    p.block_size = pr.s.block_size;
    p.max_blocks_per_seq = pr.max_blocks;
    p.max_context_len = *std::max_element(pr.lens.begin(), pr.lens.end());
    p.partition_size = partition_size;
    return p;
  }
};

DeviceProblem upload_problem(const Problem& pr) {
  DeviceProblem d;
  d.q = to_device(pr.q);
  d.k_cache = to_device(pr.k_cache);
  d.v_cache = to_device(pr.v_cache);
  d.lens = to_device(pr.lens);
  d.tables = to_device(pr.tables);
  d.o = DeviceBuffer(pr.q.size() * sizeof(uint16_t));
  return d;
}

/// Runs the attention with `partition_size` on a fresh stream (`grouped`: a block per KV head's
/// query group); o poisoned (NaN) first.
std::vector<uint16_t> run_attention(const Problem& pr, DeviceProblem& d, int32_t partition_size, bool grouped = false) {
  PagedDecodeParams p = d.params(pr, partition_size);
  p.grouped = grouped;
  const size_t ws = backend::cuda::paged_decode_attention_workspace_bytes(p);
  if (d.workspace.bytes() < ws) d.workspace = DeviceBuffer(ws);
  EXPECT_EQ(cudaMemset(d.o.get(), 0xFF, d.o.bytes()), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cudaStream_t stream = nullptr;
  EXPECT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  EXPECT_EQ(backend::cuda::launch_paged_decode_attention(p, d.workspace.get(), d.workspace.bytes(), stream), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  cudaStreamDestroy(stream);
  return to_host<uint16_t>(d.o, pr.q.size());
}

/// A rope_kv_write call over device buffers (q, k, v may be slices of one fused buffer).
RopeKvWriteParams rope_params(FloatType t, void* q, void* k, const void* v, void* k_cache, void* v_cache,
                              const DeviceBuffer& pos, const DeviceBuffer& slots, const DeviceBuffer& inv_freq, int T,
                              int heads, int kv_heads, int head_dim) {
  RopeKvWriteParams p;
  p.type = t;
  p.q = q;
  p.k = k;
  p.v = v;
  p.k_cache = k_cache;
  p.v_cache = v_cache;
  p.positions = static_cast<const int32_t*>(pos.get());
  p.slot_mapping = static_cast<const int64_t*>(slots.get());
  p.inv_freq = static_cast<const float*>(inv_freq.get());
  p.num_tokens = T;
  p.num_heads = heads;
  p.num_kv_heads = kv_heads;
  p.head_dim = head_dim;
  return p;
}

class CudaLlmKernelsTest : public CudaTest {};

// ---- rope_kv_write ----------------------------------------------------------------------------

TEST_F(CudaLlmKernelsTest, RopeKvWriteMatchesReference) {
  const Shape shapes[] = {{8, 8, 64, 16}, {32, 8, 128, 16}, {8, 2, 128, 32}, {4, 4, 64, 32}};
  std::mt19937 rng(22);
  for (FloatType t : kTypes)
    for (const Shape& s : shapes) {
      SCOPED_TRACE(describe(t, s));
      const int T = 37, num_blocks = 40, D = s.head_dim;
      const int64_t row = static_cast<int64_t>(s.kv_heads) * D;
      std::vector<int32_t> pos(T);
      std::uniform_int_distribution<int32_t> pos_dist(0, 9000);
      for (auto& p : pos) p = pos_dist(rng);
      pos[0] = 0;
      std::vector<int64_t> slots(static_cast<size_t>(num_blocks) * s.block_size);
      std::iota(slots.begin(), slots.end(), int64_t{0});
      std::shuffle(slots.begin(), slots.end(), rng);
      slots.resize(T);
      slots[5] = -1;  // a padding token: no cache write
      const std::vector<float> inv_freq = llama3_inv_freq(D);
      const auto q = random_bits(t, static_cast<size_t>(T) * s.heads * D, rng);
      const auto k = random_bits(t, static_cast<size_t>(T) * row, rng);
      const auto v = random_bits(t, k.size(), rng);
      const auto kc0 = random_bits(t, static_cast<size_t>(num_blocks) * s.block_size * row, rng);
      const auto vc0 = random_bits(t, kc0.size(), rng);
      DeviceBuffer dq = to_device(q), dk = to_device(k), dv = to_device(v), dkc = to_device(kc0), dvc = to_device(vc0),
                   dpos = to_device(pos), dslots = to_device(slots), dfreq = to_device(inv_freq);
      ASSERT_TRUE(dq.valid() && dk.valid() && dv.valid() && dkc.valid() && dvc.valid() && dpos.valid() &&
                  dslots.valid() && dfreq.valid());
      const RopeKvWriteParams p = rope_params(t, dq.get(), dk.get(), dv.get(), dkc.get(), dvc.get(), dpos, dslots, dfreq,
                                              T, s.heads, s.kv_heads, D);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // the uploads landed
      ASSERT_EQ(backend::cuda::launch_rope_kv_write(p, nullptr), cudaSuccess);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const auto q_got = to_host<uint16_t>(dq, q.size()), k_got = to_host<uint16_t>(dk, k.size());
      const auto kc = to_host<uint16_t>(dkc, kc0.size()), vc = to_host<uint16_t>(dvc, vc0.size());

      std::vector<float> q_want = to_floats(t, q), k_want = to_floats(t, k);
      for (int i = 0; i < T; ++i) {
        rope_reference(q_want.data() + static_cast<int64_t>(i) * s.heads * D, s.heads, D, pos[static_cast<size_t>(i)], inv_freq);
        rope_reference(k_want.data() + i * row, s.kv_heads, D, pos[static_cast<size_t>(i)], inv_freq);
      }
      EXPECT_LE(normwise_error(to_floats(t, q_got), q_want), tolerance(t)) << "q";
      EXPECT_LE(normwise_error(to_floats(t, k_got), k_want), tolerance(t)) << "k";

      // The cache holds the rotated k and the v of each token at its slot, and nothing else moved.
      std::vector<uint16_t> kc_want = kc0, vc_want = vc0;
      for (int i = 0; i < T; ++i) {
        const int64_t sl = slots[static_cast<size_t>(i)];
        if (sl < 0) continue;
        std::copy_n(k_got.begin() + i * row, row, kc_want.begin() + sl * row);
        std::copy_n(v.begin() + i * row, row, vc_want.begin() + sl * row);
      }
      EXPECT_TRUE(kc == kc_want) << "k cache";
      EXPECT_TRUE(vc == vc_want) << "v cache";
    }
}

// The decoder's fused form: q, k and v are column slices of one [T][q | k | v] projection output
// (row stride num_heads * D + 2 * num_kv_heads * D), the rotated q goes packed to q_out and the
// slice it came from is left alone; k is rotated in place and, with v, written to the cache.
TEST_F(CudaLlmKernelsTest, RopeKvWriteFromAFusedQkvRow) {
  std::mt19937 rng(41);
  for (FloatType t : kTypes)
    for (const Shape& s : {Shape{8, 2, 128, 16}, Shape{4, 4, 64, 16}}) {
      SCOPED_TRACE(describe(t, s));
      const int T = 29, num_blocks = 4, D = s.head_dim;
      const int64_t nq = static_cast<int64_t>(s.heads) * D, nkv = static_cast<int64_t>(s.kv_heads) * D;
      const int64_t stride = nq + 2 * nkv;
      std::vector<int32_t> pos(T);
      std::uniform_int_distribution<int32_t> pos_dist(0, 5000);
      for (auto& p : pos) p = pos_dist(rng);
      std::vector<int64_t> slots(T);
      std::iota(slots.begin(), slots.end(), int64_t{0});
      std::shuffle(slots.begin(), slots.end(), rng);
      const std::vector<float> inv_freq = llama3_inv_freq(D);
      const auto qkv = random_bits(t, static_cast<size_t>(T * stride), rng);
      const auto q_out0 = random_bits(t, static_cast<size_t>(T * nq), rng);
      const auto kc0 = random_bits(t, static_cast<size_t>(num_blocks) * s.block_size * nkv, rng);
      DeviceBuffer dqkv = to_device(qkv), dqo = to_device(q_out0), dkc = to_device(kc0), dvc = to_device(kc0),
                   dpos = to_device(pos), dslots = to_device(slots), dfreq = to_device(inv_freq);
      ASSERT_TRUE(dqkv.valid() && dqo.valid() && dkc.valid() && dvc.valid());
      RopeKvWriteParams p = rope_params(t, dqkv.get(), static_cast<uint16_t*>(dqkv.get()) + nq,
                                        static_cast<uint16_t*>(dqkv.get()) + nq + nkv, dkc.get(), dvc.get(), dpos,
                                        dslots, dfreq, T, s.heads, s.kv_heads, D);
      p.row_stride = stride;
      p.q_out = dqo.get();
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      ASSERT_EQ(backend::cuda::launch_rope_kv_write(p, nullptr), cudaSuccess);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const auto qkv_got = to_host<uint16_t>(dqkv, qkv.size()), q_got = to_host<uint16_t>(dqo, q_out0.size());
      const auto kc = to_host<uint16_t>(dkc, kc0.size()), vc = to_host<uint16_t>(dvc, kc0.size());
      const std::vector<float> all = to_floats(t, qkv);
      std::vector<float> q_want(static_cast<size_t>(T * nq)), k_want(static_cast<size_t>(T * nkv));
      std::vector<float> k_got(k_want.size()), kc_got(k_want.size()), vc_got(k_want.size()), v_want(k_want.size());
      const std::vector<float> got_all = to_floats(t, qkv_got), kcf = to_floats(t, kc), vcf = to_floats(t, vc);
      for (int i = 0; i < T; ++i) {
        const float* row = all.data() + i * stride;
        std::copy_n(row, nq, q_want.begin() + i * nq);
        std::copy_n(row + nq, nkv, k_want.begin() + i * nkv);
        std::copy_n(row + nq + nkv, nkv, v_want.begin() + i * nkv);
        rope_reference(q_want.data() + i * nq, s.heads, D, pos[static_cast<size_t>(i)], inv_freq);
        rope_reference(k_want.data() + i * nkv, s.kv_heads, D, pos[static_cast<size_t>(i)], inv_freq);
        std::copy_n(got_all.begin() + i * stride + nq, nkv, k_got.begin() + i * nkv);
        const int64_t sl = slots[static_cast<size_t>(i)];
        std::copy_n(kcf.begin() + sl * nkv, nkv, kc_got.begin() + i * nkv);
        std::copy_n(vcf.begin() + sl * nkv, nkv, vc_got.begin() + i * nkv);
        // The q slice is untouched (q_out took the rotation), and so is v.
        for (int64_t j = 0; j < nq; ++j)
          ASSERT_EQ(qkv_got[static_cast<size_t>(i * stride + j)], qkv[static_cast<size_t>(i * stride + j)]);
        for (int64_t j = nq + nkv; j < stride; ++j)
          ASSERT_EQ(qkv_got[static_cast<size_t>(i * stride + j)], qkv[static_cast<size_t>(i * stride + j)]);
      }
      EXPECT_LE(normwise_error(to_floats(t, q_got), q_want), tolerance(t)) << "q_out";
      EXPECT_LE(normwise_error(k_got, k_want), tolerance(t)) << "k in place";
      EXPECT_LE(normwise_error(kc_got, k_want), tolerance(t)) << "k cache";
      EXPECT_EQ(normwise_error(vc_got, v_want), 0.0) << "v cache";
      p.row_stride = stride - 2;  // narrower than q | k | v
      EXPECT_EQ(backend::cuda::launch_rope_kv_write(p, nullptr), cudaErrorInvalidValue);
      p.row_stride = stride + 1;  // odd: pairs would straddle rows
      EXPECT_EQ(backend::cuda::launch_rope_kv_write(p, nullptr), cudaErrorInvalidValue);
    }
}

// The fp8 cache write: the cache holds the rotated k (as the kernel rounds it to the activations'
// type, checked above) / k_scale and v / v_scale in e4m3, bit for bit as the host rounds them.
TEST_F(CudaLlmKernelsTest, RopeKvWriteIntoAnFp8Cache) {
  std::mt19937 rng(59);
  for (FloatType t : kTypes) {
    SCOPED_TRACE(type_name(t));
    const int T = 21, heads = 8, kv_heads = 2, D = 128, num_blocks = 2, bs = 16;
    const int64_t nq = heads * D, nkv = kv_heads * D;
    std::vector<int32_t> pos(T);
    for (int i = 0; i < T; ++i) pos[static_cast<size_t>(i)] = 3 * i + 1;
    std::vector<int64_t> slots(T);
    std::iota(slots.begin(), slots.end(), int64_t{4});
    slots[3] = -1;
    const std::vector<float> inv_freq = llama3_inv_freq(D);
    const auto q = random_bits(t, static_cast<size_t>(T * nq), rng), k = random_bits(t, static_cast<size_t>(T * nkv), rng),
               v = random_bits(t, static_cast<size_t>(T * nkv), rng);
    const std::vector<uint8_t> c0(static_cast<size_t>(num_blocks * bs * nkv), 0x7e);  // 448: untouched slots keep it
    DeviceBuffer dq = to_device(q), dk = to_device(k), dv = to_device(v), dkc = to_device(c0), dvc = to_device(c0),
                 dpos = to_device(pos), dslots = to_device(slots), dfreq = to_device(inv_freq);
    RopeKvWriteParams p = rope_params(t, dq.get(), dk.get(), dv.get(), dkc.get(), dvc.get(), dpos, dslots, dfreq, T,
                                      heads, kv_heads, D);
    p.fp8_cache = true;
    p.k_scale = 0.125f;
    p.v_scale = 2.0f;
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    ASSERT_EQ(backend::cuda::launch_rope_kv_write(p, nullptr), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<float> k_rot = to_floats(t, to_host<uint16_t>(dk, k.size())), vf = to_floats(t, v);
    const auto kc = to_host<uint8_t>(dkc, c0.size()), vc = to_host<uint8_t>(dvc, c0.size());
    std::vector<uint8_t> kc_want = c0, vc_want = c0;
    for (int i = 0; i < T; ++i) {
      const int64_t sl = slots[static_cast<size_t>(i)];
      if (sl < 0) continue;
      for (int64_t j = 0; j < nkv; ++j) {
        kc_want[static_cast<size_t>(sl * nkv + j)] =
            float_to_small_float(k_rot[static_cast<size_t>(i * nkv + j)] * (1.0f / 0.125f), DataType::kFloat8E4M3FN);
        vc_want[static_cast<size_t>(sl * nkv + j)] =
            float_to_small_float(vf[static_cast<size_t>(i * nkv + j)] * (1.0f / 2.0f), DataType::kFloat8E4M3FN);
      }
    }
    EXPECT_TRUE(kc == kc_want) << "k cache";
    EXPECT_TRUE(vc == vc_want) << "v cache";
    p.v_scale = -1.0f;
    EXPECT_EQ(backend::cuda::launch_rope_kv_write(p, nullptr), cudaErrorInvalidValue);
  }
}

// The gated MLP's activation over the fused [rows][gate | up] output, and the bias rows, against
// fp64 references of the same formulas on the same (rounded) inputs.
TEST_F(CudaLlmKernelsTest, SiluMulPackedAndBiasRowsMatchReference) {
  std::mt19937 rng(43);
  for (FloatType t : kTypes)
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 8192}, {37, 1000}, {5, 3}}) {
      SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(cols));
      const auto gu = random_bits(t, static_cast<size_t>(rows * 2 * cols), rng);
      DeviceBuffer dgu = to_device(gu), dout(static_cast<size_t>(rows * cols) * 2);
      ASSERT_TRUE(dgu.valid() && dout.valid());
      ASSERT_EQ(backend::cuda::launch_silu_mul_packed(t, dgu.get(), dout.get(), rows, cols, nullptr), cudaSuccess);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const std::vector<float> in = to_floats(t, gu), got = to_floats(t, to_host<uint16_t>(dout, rows * cols));
      std::vector<float> want(static_cast<size_t>(rows * cols));
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) {
          const double g = in[static_cast<size_t>(r * 2 * cols + c)], u = in[static_cast<size_t>(r * 2 * cols + cols + c)];
          want[static_cast<size_t>(r * cols + c)] = static_cast<float>(g / (1.0 + std::exp(-g)) * u);
        }
      EXPECT_LE(normwise_error(got, want), tolerance(t)) << "silu_mul_packed";

      const auto y0 = random_bits(t, static_cast<size_t>(rows * cols), rng), bias = random_bits(t, cols, rng);
      DeviceBuffer dy = to_device(y0), db = to_device(bias);
      ASSERT_EQ(backend::cuda::launch_add_bias_rows(t, dy.get(), db.get(), rows, cols, nullptr), cudaSuccess);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const std::vector<float> y = to_floats(t, y0), b = to_floats(t, bias),
                               ygot = to_floats(t, to_host<uint16_t>(dy, rows * cols));
      std::vector<float> ywant(y.size());
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c)
          ywant[static_cast<size_t>(r * cols + c)] = y[static_cast<size_t>(r * cols + c)] + b[static_cast<size_t>(c)];
      EXPECT_LE(normwise_error(ygot, ywant), tolerance(t)) << "add_bias_rows";
    }
  // Views one element past a 16-byte boundary (widths a multiple of the 16-byte pack) take the
  // scalar loop; both pointers are shifted so that each case is one the packs must not take.
  for (FloatType t : kTypes)
    for (int shifted : {0, 1}) {
      const int64_t rows = 9, cols = 64;
      std::mt19937 rng2(47);
      const auto gu = random_bits(t, static_cast<size_t>(rows * 2 * cols + 1), rng2);
      DeviceBuffer dgu = to_device(gu), dout(static_cast<size_t>(rows * cols + 1) * 2);
      ASSERT_TRUE(dgu.valid() && dout.valid());
      const auto* in = static_cast<const uint16_t*>(dgu.get()) + (shifted ? 1 : 0);
      auto* out = static_cast<uint16_t*>(dout.get()) + (shifted ? 0 : 1);
      ASSERT_EQ(backend::cuda::launch_silu_mul_packed(t, in, out, rows, cols, nullptr), cudaSuccess);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const std::vector<float> all = to_floats(t, gu);
      const std::vector<float> got_all = to_floats(t, to_host<uint16_t>(dout, static_cast<size_t>(rows * cols + 1)));
      std::vector<float> got(got_all.begin() + (shifted ? 0 : 1), got_all.begin() + (shifted ? 0 : 1) + rows * cols);
      std::vector<float> want(static_cast<size_t>(rows * cols));
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) {
          const double g = all[static_cast<size_t>((shifted ? 1 : 0) + r * 2 * cols + c)],
                       u = all[static_cast<size_t>((shifted ? 1 : 0) + r * 2 * cols + cols + c)];
          want[static_cast<size_t>(r * cols + c)] = static_cast<float>(g / (1.0 + std::exp(-g)) * u);
        }
      EXPECT_LE(normwise_error(got, want), tolerance(t)) << "silu_mul_packed, unaligned " << (shifted ? "input" : "output");
    }
  EXPECT_EQ(backend::cuda::launch_silu_mul_packed(FloatType::kF16, nullptr, nullptr, 2, 4, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(backend::cuda::launch_silu_mul_packed(FloatType::kF32, nullptr, nullptr, 2, 4, nullptr),
            cudaErrorInvalidValue);
}

// ---- paged_decode_attention -------------------------------------------------------------------

TEST_F(CudaLlmKernelsTest, PagedDecodeAttentionMatchesReference) {
  // GQA ratio 1 and 4, the latter as 8 heads over 2 KV heads and as 16 over 4.
  const int heads[][2] = {{4, 4}, {8, 2}, {16, 4}};
  const std::vector<int32_t> lens = {1, 17, 300, 1100, 64};
  std::mt19937 rng(2022);
  for (FloatType t : kTypes)
    for (const auto& hk : heads)
      for (int D : {64, 128})
        for (int bs : {16, 32}) {
          const Shape s{hk[0], hk[1], D, bs};
          SCOPED_TRACE(describe(t, s));
          const Problem pr = make_problem(t, s, lens, rng);
          DeviceProblem d = upload_problem(pr);
          ASSERT_TRUE(d.q.valid() && d.k_cache.valid() && d.v_cache.valid() && d.o.valid());
          ASSERT_GT(backend::cuda::paged_decode_attention_workspace_bytes(d.params(pr, 512)), 0u) << "split path";
          const auto got = run_attention(pr, d, 512);
          EXPECT_LE(normwise_error(to_floats(t, got), attention_reference(pr)), tolerance(t));
        }
}

// An fp8 (e4m3) cache: the caches' values converted on the host with scales 0.5 (K) and 0.25 (V),
// the reference over the dequantized values (e4m3 * scale); split and unsplit.
TEST_F(CudaLlmKernelsTest, PagedDecodeAttentionFromAnFp8Cache) {
  std::mt19937 rng(53);
  for (FloatType t : kTypes)
    for (const Shape& s : {Shape{8, 2, 128, 16}, Shape{4, 4, 64, 32}}) {
      SCOPED_TRACE(describe(t, s));
      Problem pr = make_problem(t, s, {1, 37, 300, 513}, rng);
      const float ks = 0.5f, vs = 0.25f;
      const std::vector<float> kf = to_floats(t, pr.k_cache), vf = to_floats(t, pr.v_cache);
      std::vector<uint8_t> k8(kf.size()), v8(vf.size());
      std::vector<float> kd(kf.size()), vd(vf.size());
      for (size_t i = 0; i < kf.size(); ++i) {
        k8[i] = float_to_small_float(kf[i] / ks, DataType::kFloat8E4M3FN);
        v8[i] = float_to_small_float(vf[i] / vs, DataType::kFloat8E4M3FN);
        kd[i] = small_float_to_float(k8[i], DataType::kFloat8E4M3FN) * ks;
        vd[i] = small_float_to_float(v8[i], DataType::kFloat8E4M3FN) * vs;
      }
      // The reference reads the problem's caches: give it the dequantized values in the problem's type
      // (e4m3 * a power of two is exact in fp16 and bf16 at these magnitudes).
      Problem ref = pr;
      ref.k_cache = from_floats(t, kd);
      ref.v_cache = from_floats(t, vd);
      const std::vector<float> back = to_floats(t, ref.k_cache);
      for (size_t i = 0; i < kd.size(); ++i)
        if (!std::isnan(kd[i])) ASSERT_EQ(back[i], kd[i]) << i;  // NaN: the slots outside the contexts
      const std::vector<float> want = attention_reference(ref);
      DeviceProblem d = upload_problem(pr);
      d.k_cache = to_device(k8);
      d.v_cache = to_device(v8);
      for (bool grouped : {false, true})  // the grouped kernel (a block per KV head's query group) too
        for (int32_t part : {0, 64}) {
        PagedDecodeParams p = d.params(pr, part);
        p.fp8_cache = true;
        p.k_scale = ks;
        p.v_scale = vs;
        p.grouped = grouped;
        const size_t ws = backend::cuda::paged_decode_attention_workspace_bytes(p);
        if (d.workspace.bytes() < ws) d.workspace = DeviceBuffer(ws);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        ASSERT_EQ(backend::cuda::launch_paged_decode_attention(p, d.workspace.get(), d.workspace.bytes(), nullptr),
                  cudaSuccess);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        EXPECT_LE(normwise_error(to_floats(t, to_host<uint16_t>(d.o, pr.q.size())), want), tolerance(t))
            << "partition " << part << (grouped ? " grouped" : "");
        p.k_scale = 0.0f;
        EXPECT_EQ(backend::cuda::launch_paged_decode_attention(p, d.workspace.get(), d.workspace.bytes(), nullptr),
                  cudaErrorInvalidValue);
      }
    }
}

// The grouped kernel (a block per KV head computing its query group): groups of 1 (a lone head in the
// 2-wide form), 2, 4 (Llama-3), 7 (Qwen2-0.5B's 14 over 2, in the 8-wide form) and 8; head_dim 64 and
// 128, unsplit, in parts of 64 (a warp tile and a half-empty one) and 512, against the host
// reference; a group of 9 refused. (PagedDecodeAttentionFromAnFp8Cache runs it on an fp8 cache.)
TEST_F(CudaLlmKernelsTest, PagedDecodeAttentionGroupedMatchesReference) {
  const int heads[][2] = {{4, 4}, {4, 2}, {8, 2}, {14, 2}, {16, 2}};
  const std::vector<int32_t> lens = {1, 17, 300, 1100, 64, 96};
  std::mt19937 rng(4242);
  for (FloatType t : kTypes)
    for (const auto& hk : heads)
      for (int D : {64, 128}) {
        const Shape s{hk[0], hk[1], D, 16};
        SCOPED_TRACE(describe(t, s));
        const Problem pr = make_problem(t, s, lens, rng);
        DeviceProblem d = upload_problem(pr);
        ASSERT_TRUE(d.q.valid() && d.k_cache.valid() && d.v_cache.valid() && d.o.valid());
        const std::vector<float> want = attention_reference(pr);
        for (int32_t partition : {0, 64, 512}) {
          const auto got = to_floats(t, run_attention(pr, d, partition, /*grouped=*/true));
          EXPECT_LE(normwise_error(got, want), tolerance(t)) << "partition " << partition;
        }
      }
  // A group of 9 query heads is more than the kernel holds.
  const Problem big = make_problem(FloatType::kF16, Shape{18, 2, 64, 16}, {5}, rng);
  DeviceProblem d = upload_problem(big);
  PagedDecodeParams p = d.params(big, 0);
  p.grouped = true;
  EXPECT_EQ(backend::cuda::launch_paged_decode_attention(p, nullptr, 0, nullptr), cudaErrorInvalidValue);
  p.grouped = false;
  EXPECT_EQ(backend::cuda::launch_paged_decode_attention(p, nullptr, 0, nullptr), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

TEST_F(CudaLlmKernelsTest, PagedDecodeAttentionShortContextsDoNotSplit) {
  std::mt19937 rng(7);
  for (FloatType t : kTypes) {
    const Shape s{8, 2, 128, 16};
    SCOPED_TRACE(describe(t, s));
    const Problem pr = make_problem(t, s, {1, 2, 31, 33, 200, 512}, rng);
    DeviceProblem d = upload_problem(pr);
    ASSERT_EQ(backend::cuda::paged_decode_attention_workspace_bytes(d.params(pr, 512)), 0u);
    const auto got = run_attention(pr, d, 512);
    EXPECT_LE(normwise_error(to_floats(t, got), attention_reference(pr)), tolerance(t));
  }
}

TEST_F(CudaLlmKernelsTest, PagedDecodeAttentionSplitAndUnsplitAgree) {
  std::mt19937 rng(99);
  for (FloatType t : kTypes)
    for (int D : {64, 128}) {
      const Shape s{8, 2, D, 16};
      SCOPED_TRACE(describe(t, s));
      const Problem pr = make_problem(t, s, {2000, 1537, 513, 512, 1, 4100}, rng);
      DeviceProblem d = upload_problem(pr);
      const auto unsplit = to_floats(t, run_attention(pr, d, 0));
      EXPECT_LE(normwise_error(unsplit, attention_reference(pr)), tolerance(t));
      for (int32_t partition : {128, 512, 1024}) {
        ASSERT_GT(backend::cuda::paged_decode_attention_workspace_bytes(d.params(pr, partition)), 0u);
        const auto split = to_floats(t, run_attention(pr, d, partition));
        EXPECT_LE(normwise_error(split, unsplit), tolerance(t)) << "partition " << partition;
      }
    }
}

// A whole decode step on a stream capture: the new tokens' q/k restored from pristine copies
// (rope rotates in place), rope + cache write, split-K attention. Replays equal the eager run
// bit for bit, and the eager run equals the host reference of the same step.
TEST_F(CudaLlmKernelsTest, DecodeStepCapturedIntoACudaGraph) {
  const FloatType t = FloatType::kF16;
  const Shape s{8, 2, 128, 16};
  std::mt19937 rng(5);
  Problem pr = make_problem(t, s, {33, 700, 1100}, rng);
  const int B = pr.batch(), D = s.head_dim;
  const int64_t row = pr.row();
  const auto k_new = random_bits(t, static_cast<size_t>(B) * row, rng);
  const auto v_new = random_bits(t, k_new.size(), rng);
  std::vector<int32_t> pos(static_cast<size_t>(B));
  std::vector<int64_t> slots(static_cast<size_t>(B));
  for (int b = 0; b < B; ++b) {
    pos[static_cast<size_t>(b)] = pr.lens[static_cast<size_t>(b)] - 1;
    slots[static_cast<size_t>(b)] = pr.slot(b, pos[static_cast<size_t>(b)]);
  }
  const std::vector<float> inv_freq = llama3_inv_freq(D);
  DeviceProblem d = upload_problem(pr);
  DeviceBuffer q_src = to_device(pr.q), k_src = to_device(k_new), dk(k_new.size() * sizeof(uint16_t)),
               dv = to_device(v_new), dpos = to_device(pos), dslots = to_device(slots), dfreq = to_device(inv_freq);
  ASSERT_TRUE(q_src.valid() && k_src.valid() && dk.valid() && dv.valid() && d.o.valid());

  RopeKvWriteParams rp;
  rp.type = t;
  rp.q = d.q.get();
  rp.k = dk.get();
  rp.v = dv.get();
  rp.k_cache = d.k_cache.get();
  rp.v_cache = d.v_cache.get();
  rp.positions = static_cast<const int32_t*>(dpos.get());
  rp.slot_mapping = static_cast<const int64_t*>(dslots.get());
  rp.inv_freq = static_cast<const float*>(dfreq.get());
  rp.num_tokens = B;
  rp.num_heads = s.heads;
  rp.num_kv_heads = s.kv_heads;
  rp.head_dim = D;
  const PagedDecodeParams ap = d.params(pr, 256);
  DeviceBuffer ws(backend::cuda::paged_decode_attention_workspace_bytes(ap));
  ASSERT_GT(ws.bytes(), 0u);
  ASSERT_TRUE(ws.valid());

  // The uploads above ran on the legacy stream, which a non-blocking stream does not wait for.
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  auto step = [&]() {
    const size_t qb = pr.q.size() * sizeof(uint16_t), kb = k_new.size() * sizeof(uint16_t);
    EXPECT_EQ(cudaMemcpyAsync(d.q.get(), q_src.get(), qb, cudaMemcpyDeviceToDevice, stream), cudaSuccess);
    EXPECT_EQ(cudaMemcpyAsync(dk.get(), k_src.get(), kb, cudaMemcpyDeviceToDevice, stream), cudaSuccess);
    EXPECT_EQ(backend::cuda::launch_rope_kv_write(rp, stream), cudaSuccess);
    EXPECT_EQ(backend::cuda::launch_paged_decode_attention(ap, ws.get(), ws.bytes(), stream), cudaSuccess);
  };
  step();
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  const auto eager = to_host<uint16_t>(d.o, pr.q.size());

  // Host reference of the step: rotate q and k, write k/v into the cache, attend.
  Problem ref = pr;
  std::vector<float> qf = to_floats(t, pr.q), kf = to_floats(t, k_new);
  for (int b = 0; b < B; ++b) {
    rope_reference(qf.data() + static_cast<int64_t>(b) * s.heads * D, s.heads, D, pos[static_cast<size_t>(b)], inv_freq);
    rope_reference(kf.data() + b * row, s.kv_heads, D, pos[static_cast<size_t>(b)], inv_freq);
    for (int64_t i = 0; i < row; ++i) {
      ref.k_cache[static_cast<size_t>(slots[static_cast<size_t>(b)] * row + i)] = to_bits(t, kf[static_cast<size_t>(b * row + i)]);
      ref.v_cache[static_cast<size_t>(slots[static_cast<size_t>(b)] * row + i)] = v_new[static_cast<size_t>(b * row + i)];
    }
  }
  for (size_t i = 0; i < qf.size(); ++i) ref.q[i] = to_bits(t, qf[i]);
  EXPECT_LE(normwise_error(to_floats(t, eager), attention_reference(ref)), tolerance(t));

  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  step();
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (int replay = 0; replay < 2; ++replay) {
    ASSERT_EQ(cudaMemsetAsync(d.o.get(), 0xFF, d.o.bytes(), stream), cudaSuccess);
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    EXPECT_TRUE(to_host<uint16_t>(d.o, pr.q.size()) == eager) << "replay " << replay;
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

// Needs no device: the launchers refuse before touching it.
// Dynamic fp8 activations against the host: the scale is amax / 448 exactly, and every element is
// the nearest-even e4m3 of x * (1 / scale) as core/dtype's float_to_small_float rounds it
// (saturating), bit for bit; rounding the value back stays within e4m3's half step.
TEST_F(CudaLlmKernelsTest, Fp8QuantizeDynamicMatchesTheHost) {
  std::mt19937 rng(47);
  for (FloatType t : kTypes)
    for (int64_t n : {int64_t{1}, int64_t{1000}, int64_t{3 * 4096 + 7}, int64_t{1} << 21}) {
      SCOPED_TRACE(std::to_string(n));
      auto x = random_bits(t, static_cast<size_t>(n), rng);
      const std::vector<float> xf0 = to_floats(t, x);
      std::vector<float> xf = xf0;
      DeviceBuffer dx = to_device(x), dy(static_cast<size_t>(n)), ds(4), damax(4);
      ASSERT_TRUE(dx.valid() && dy.valid() && ds.valid() && damax.valid());
      ASSERT_EQ(backend::cuda::launch_fp8_quantize_dynamic(t, dx.get(), n, dy.get(), static_cast<float*>(ds.get()),
                                                            static_cast<unsigned*>(damax.get()), nullptr),
                cudaSuccess);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      float amax = 0.f;
      for (float v : xf) amax = std::max(amax, std::fabs(v));
      const float scale = std::max(amax, 1e-12f) / 448.f, inv = 1.f / scale;
      EXPECT_EQ(to_host<float>(ds, 1)[0], scale);
      const auto y = to_host<uint8_t>(dy, static_cast<size_t>(n));
      int64_t mismatched = 0;
      double err = 0, ref = 0;
      for (int64_t i = 0; i < n; ++i) {
        const uint8_t want = float_to_small_float(xf[static_cast<size_t>(i)] * inv, DataType::kFloat8E4M3FN);
        mismatched += y[static_cast<size_t>(i)] != want;
        const double back = small_float_to_float(y[static_cast<size_t>(i)], DataType::kFloat8E4M3FN) * scale;
        err += (back - xf[static_cast<size_t>(i)]) * (back - xf[static_cast<size_t>(i)]);
        ref += static_cast<double>(xf[static_cast<size_t>(i)]) * xf[static_cast<size_t>(i)];
      }
      EXPECT_EQ(mismatched, 0);
      EXPECT_LE(std::sqrt(err / std::max(ref, 1e-30)), 0.04);  // e4m3: 3 mantissa bits
      // Run again on the same workspace: the amax starts from zero each time (a smaller x gets its own scale).
      std::vector<uint16_t> half(x.size());
      for (size_t i = 0; i < x.size(); ++i)
        half[i] = t == FloatType::kF16 ? float_to_half_bits(xf0[i] * 0.5f) : float_to_bfloat16_bits(xf0[i] * 0.5f);
      DeviceBuffer dh = to_device(half);
      ASSERT_EQ(backend::cuda::launch_fp8_quantize_dynamic(t, dh.get(), n, dy.get(), static_cast<float*>(ds.get()),
                                                            static_cast<unsigned*>(damax.get()), nullptr),
                cudaSuccess);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      EXPECT_EQ(to_host<float>(ds, 1)[0], std::max(amax * 0.5f, 1e-12f) / 448.f);
    }
  EXPECT_EQ(backend::cuda::launch_fp8_quantize_dynamic(FloatType::kF32, nullptr, 4, nullptr, nullptr, nullptr, nullptr),
            cudaErrorInvalidValue);
}

// Greedy sampling on the device against the host's first-maximum, on random rows of vocabulary
// sizes around the real ones (one a thread count's odd remainder), with planted ties (the lower id
// must win wherever the reduction meets them) and the rows the sampler refuses.
// Random GEMV weights [N][K] on the device: the model's type t, or float8 e4m3 (normal, sigma 40, as a
// per-tensor scale of 0.03 expects); *values gets what the kernel reads, unscaled.
DeviceBuffer gemv_weights(FloatType t, bool fp8, int64_t N, int64_t K, std::mt19937& rng, std::vector<float>* values) {
  values->clear();
  if (fp8) {
    std::vector<uint8_t> w8(static_cast<size_t>(N * K));
    std::normal_distribution<float> g(0.0f, 40.0f);
    for (auto& b : w8) {
      b = float_to_small_float(g(rng), DataType::kFloat8E4M3FN);
      values->push_back(small_float_to_float(b, DataType::kFloat8E4M3FN));
    }
    return to_device(w8);
  }
  const auto w = random_bits(t, static_cast<size_t>(N * K), rng);
  *values = to_floats(t, w);
  return to_device(w);
}

// The small-T GEMV's host reference: y[r][n] = scale * sum_k a[r][k] * w[n][k] (+ y0[r][n] when
// y0 is given), in double, then rounded to float. a holds T rows of K activations.
std::vector<float> host_gemv(const std::vector<double>& a, const std::vector<float>& wf, double scale,
                             const std::vector<float>* y0, int64_t T, int64_t K, int64_t N) {
  std::vector<float> y(static_cast<size_t>(T * N));
  for (int64_t r = 0; r < T; ++r)
    for (int64_t n = 0; n < N; ++n) {
      double sum = 0;
      for (int64_t k = 0; k < K; ++k) sum += a[static_cast<size_t>(r * K + k)] * wf[static_cast<size_t>(n * K + k)];
      sum *= scale;
      if (y0) sum += (*y0)[static_cast<size_t>(r * N + n)];
      y[static_cast<size_t>(r * N + n)] = static_cast<float>(sum);
    }
  return y;
}

// The small-T GEMV against a double-precision host product over the same bits: fp16/bf16 and
// e4m3 weights (scale 0.03, a device scalar), 1-8 tokens, K with a partial last warp pass, N not a
// multiple of the CTA's 8 columns, with and without the residual accumulation; what it refuses.
TEST_F(CudaLlmKernelsTest, GemvSmallTMatchesReference) {
  std::mt19937 rng(61);
  for (FloatType t : kTypes)
    for (bool fp8 : {false, true})
      for (int64_t T : {int64_t{1}, int64_t{3}, int64_t{8}})
        for (int64_t K : {int64_t{64}, int64_t{2064}})
          for (int64_t N : {int64_t{1}, int64_t{37}, int64_t{1000}})
            for (bool acc : {false, true}) {
              SCOPED_TRACE(std::string(type_name(t)) + (fp8 ? " fp8" : "") + " T " + std::to_string(T) + " K " +
                           std::to_string(K) + " N " + std::to_string(N) + (acc ? " accumulate" : ""));
              const auto x = random_bits(t, static_cast<size_t>(T * K), rng);
              const auto y0 = random_bits(t, static_cast<size_t>(T * N), rng);
              const std::vector<float> xf = to_floats(t, x), y0f = to_floats(t, y0);
              std::vector<float> wf;  // the weights' values as the kernel sees them (scale applied below)
              DeviceBuffer dw = gemv_weights(t, fp8, N, K, rng, &wf);
              const float scale = fp8 ? 0.03f : 1.0f;
              const std::vector<float> sv = {scale};
              DeviceBuffer dx = to_device(x), dy = to_device(y0), ds = to_device(sv);
              ASSERT_TRUE(dx.valid() && dy.valid() && dw.valid() && ds.valid());
              ASSERT_EQ(backend::cuda::launch_gemv_small_t(t, dx.get(), dw.get(), fp8,
                                                           fp8 ? static_cast<const float*>(ds.get()) : nullptr,
                                                           dy.get(), T, K, N, acc, nullptr),
                        cudaSuccess);
              ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
              const std::vector<double> a(xf.begin(), xf.end());
              const std::vector<float> want = host_gemv(a, wf, scale, acc ? &y0f : nullptr, T, K, N);
              const auto got = to_floats(t, to_host<uint16_t>(dy, static_cast<size_t>(T * N)));
              EXPECT_LE(normwise_error(got, want), tolerance(t));
            }
  DeviceBuffer b(4096);
  auto launch = [&](int64_t T, int64_t K, bool fp8) {
    return backend::cuda::launch_gemv_small_t(FloatType::kF16, b.get(), b.get(), fp8, nullptr, b.get(), T, K, 8,
                                              false, nullptr);
  };
  EXPECT_EQ(launch(9, 64, false), cudaErrorInvalidValue);   // more tokens than the kernel serves
  EXPECT_EQ(launch(1, 12, false), cudaErrorInvalidValue);   // K not a whole number of 16-byte loads
  EXPECT_EQ(launch(1, 24, true), cudaErrorInvalidValue);    // nor for e4m3
  EXPECT_EQ(launch(0, 64, false), cudaSuccess);             // nothing to do
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

// The GEMV's prologues (GemvPrologue): the RMSNorm of each row (norm weight and eps) and the SiLU gate
// of packed gate/up rows, applied as the activations are read, against the same formulas in double on
// the host (unrounded between the prologue and the product, as the kernel computes them); with model-type
// and fp8 weights, accumulating or not. A missing or misaligned norm weight is refused.
TEST_F(CudaLlmKernelsTest, GemvPrologueRmsNormAndSiluMulMatchReference) {
  std::mt19937 rng(67);
  using Pro = backend::cuda::GemvPrologue;
  for (FloatType t : kTypes)
    for (Pro::Kind kind : {Pro::kRmsNorm, Pro::kSiluMul})
      for (bool fp8 : {false, true})
        for (int64_t T : {int64_t{1}, int64_t{3}, int64_t{8}})
          for (int64_t K : {int64_t{64}, int64_t{2064}, int64_t{11776}, int64_t{12304}}) {
            // Shared-memory staging of the prepared activations (T x K fp32 within 46 KB) at T 1 and 3
            // up to K 2064, T 8 at K 64 and T 1 at K 11776 (the largest staged launch: 46 KB of dynamic
            // shared memory beside the static); read per chunk at T 8, K 2064 and at K 12304 for every T.
            if (K == 11776 && T != 1) continue;
            if (K == 12304 && T == 8) continue;  // the path of T 3 at this K, at 8x the host reference's cost
            const int64_t N = T == 3 ? 37 : K >= 11776 ? 256 : 1000;
            const bool acc = T != 1;
            SCOPED_TRACE(std::string(type_name(t)) + (kind == Pro::kRmsNorm ? " rmsnorm" : " silu*up") +
                         (fp8 ? " fp8" : "") + " T " + std::to_string(T) + " K " + std::to_string(K));
            const int64_t pitch = kind == Pro::kSiluMul ? 2 * K : K;
            const auto x = random_bits(t, static_cast<size_t>(T * pitch), rng);
            const auto gamma = random_bits(t, static_cast<size_t>(K), rng);
            const auto y0 = random_bits(t, static_cast<size_t>(T * N), rng);
            const std::vector<float> xf = to_floats(t, x), gf = to_floats(t, gamma), y0f = to_floats(t, y0);
            std::vector<float> wf;
            DeviceBuffer dw = gemv_weights(t, fp8, N, K, rng, &wf);
            const float scale = fp8 ? 0.03f : 1.0f;
            const std::vector<float> sv = {scale};
            DeviceBuffer dx = to_device(x), dy = to_device(y0), ds = to_device(sv), dg = to_device(gamma);
            ASSERT_TRUE(dx.valid() && dy.valid() && dw.valid() && ds.valid() && dg.valid());
            Pro pro;
            pro.kind = kind;
            pro.norm_weight = kind == Pro::kRmsNorm ? dg.get() : nullptr;
            pro.eps = 1e-5f;
            ASSERT_EQ(backend::cuda::launch_gemv_small_t(t, dx.get(), dw.get(), fp8,
                                                         fp8 ? static_cast<const float*>(ds.get()) : nullptr, dy.get(),
                                                         T, K, N, acc, nullptr, pro),
                      cudaSuccess);
            ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
            std::vector<double> a(static_cast<size_t>(T * K));  // the activations as the prologue reads them
            for (int64_t r = 0; r < T; ++r) {
              const float* row = xf.data() + r * pitch;
              double* ar = a.data() + r * K;
              if (kind == Pro::kRmsNorm) {
                double ss = 0;
                for (int64_t k = 0; k < K; ++k) ss += static_cast<double>(row[k]) * row[k];
                const double rstd = 1.0 / std::sqrt(ss / static_cast<double>(K) + 1e-5);
                for (int64_t k = 0; k < K; ++k) ar[k] = row[k] * rstd * gf[static_cast<size_t>(k)];
              } else {
                for (int64_t k = 0; k < K; ++k) {
                  const double g = row[k], u = row[K + k];
                  ar[k] = g / (1.0 + std::exp(-g)) * u;
                }
              }
            }
            const std::vector<float> want = host_gemv(a, wf, scale, acc ? &y0f : nullptr, T, K, N);
            const auto got = to_floats(t, to_host<uint16_t>(dy, static_cast<size_t>(T * N)));
            EXPECT_LE(normwise_error(got, want), tolerance(t));
          }
  DeviceBuffer b(4096);
  Pro norm;
  norm.kind = Pro::kRmsNorm;
  EXPECT_EQ(backend::cuda::launch_gemv_small_t(FloatType::kF16, b.get(), b.get(), false, nullptr, b.get(), 1, 64, 8,
                                               false, nullptr, norm),
            cudaErrorInvalidValue);  // no norm weight
  norm.norm_weight = static_cast<const char*>(b.get()) + 2;
  EXPECT_EQ(backend::cuda::launch_gemv_small_t(FloatType::kF16, b.get(), b.get(), false, nullptr, b.get(), 1, 64, 8,
                                               false, nullptr, norm),
            cudaErrorInvalidValue);  // not 16-byte aligned
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

// One-token GEMVs with K split over 2 or 4 warps a column (launch_gemv_small_t's k_split): model-type,
// fp8 and int4 weights, each prologue, K not a multiple of the split's chunks (2064: 258 chunks over 4
// warps), N leaving a block's last columns empty (1, 37), against the host's double sums. A split
// other than 0, 1, 2 or 4, or a split at more than one token, is refused.
TEST_F(CudaLlmKernelsTest, GemvKSplitMatchesReference) {
  std::mt19937 rng(211);
  using Pro = backend::cuda::GemvPrologue;
  for (FloatType t : kTypes)
    for (int split : {2, 4})
      for (Pro::Kind kind : {Pro::kNone, Pro::kRmsNorm, Pro::kSiluMul})
        for (int w_kind : {0, 1, 2})  // model type, fp8, int4 (groups of 32)
          for (int64_t K : {int64_t{64}, int64_t{2064}, int64_t{8192}}) {
            if ((w_kind == 1 && K % 16 != 0) || (w_kind == 2 && K % 32 != 0)) continue;
            const int64_t N = K == 64 ? 1 : K == 2064 ? 37 : 2048;
            const bool acc = K != 2064;
            SCOPED_TRACE(std::string(type_name(t)) + " split " + std::to_string(split) + " prologue " +
                         std::to_string(static_cast<int>(kind)) + (w_kind == 1 ? " fp8" : w_kind == 2 ? " int4" : "") +
                         " K " + std::to_string(K) + " N " + std::to_string(N));
            const int64_t pitch = kind == Pro::kSiluMul ? 2 * K : K;
            const auto x = random_bits(t, static_cast<size_t>(pitch), rng);
            const auto gamma = random_bits(t, static_cast<size_t>(K), rng);
            const auto y0 = random_bits(t, static_cast<size_t>(N), rng);
            const std::vector<float> xf = to_floats(t, x), gf = to_floats(t, gamma), y0f = to_floats(t, y0);
            std::vector<float> wf;  // the weights' values as the kernel reads them
            DeviceBuffer dw, dq, dsm;
            if (w_kind == 2) {
              std::normal_distribution<float> g(0.0f, 0.05f);
              std::vector<float> w(static_cast<size_t>(N * K));
              for (float& v : w) v = g(rng);
              auto rtn = llm::quantize_int4(w.data(), N, K, 32);
              ASSERT_TRUE(rtn.ok()) << rtn.status().to_string();
              wf = llm::dequantize_int4(*rtn);
              dq = to_device(rtn->q);
              dsm = to_device(rtn->scale_min);
              ASSERT_TRUE(dq.valid() && dsm.valid());
            } else {
              dw = gemv_weights(t, w_kind == 1, N, K, rng, &wf);
              ASSERT_TRUE(dw.valid());
            }
            const float scale = w_kind == 1 ? 0.03f : 1.0f;
            const std::vector<float> sv = {scale};
            DeviceBuffer dx = to_device(x), dy = to_device(y0), ds = to_device(sv), dg = to_device(gamma);
            ASSERT_TRUE(dx.valid() && dy.valid() && ds.valid() && dg.valid());
            Pro pro;
            pro.kind = kind;
            pro.norm_weight = kind == Pro::kRmsNorm ? dg.get() : nullptr;
            pro.eps = 1e-5f;
            if (w_kind == 2)
              ASSERT_EQ(backend::cuda::launch_gemv_small_t_int4(t, dx.get(), static_cast<const uint8_t*>(dq.get()),
                                                                static_cast<const float*>(dsm.get()), dy.get(), 1, K, N,
                                                                32, acc, nullptr, pro, split),
                        cudaSuccess);
            else
              ASSERT_EQ(backend::cuda::launch_gemv_small_t(t, dx.get(), dw.get(), w_kind == 1,
                                                           w_kind == 1 ? static_cast<const float*>(ds.get()) : nullptr,
                                                           dy.get(), 1, K, N, acc, nullptr, pro, split),
                        cudaSuccess);
            ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
            std::vector<double> a(static_cast<size_t>(K));  // the activations as the GEMV reads them
            double rstd = 1.0;
            if (kind == Pro::kRmsNorm) {
              double ss = 0;
              for (int64_t k = 0; k < K; ++k) ss += static_cast<double>(xf[k]) * xf[k];
              rstd = 1.0 / std::sqrt(ss / static_cast<double>(K) + 1e-5);
            }
            for (int64_t k = 0; k < K; ++k) {
              const double g = xf[static_cast<size_t>(k)];
              a[static_cast<size_t>(k)] = kind == Pro::kSiluMul ? g / (1.0 + std::exp(-g)) * xf[static_cast<size_t>(K + k)]
                                          : kind == Pro::kRmsNorm ? g * rstd * gf[static_cast<size_t>(k)]
                                                                  : g;
            }
            const std::vector<float> want = host_gemv(a, wf, scale, acc ? &y0f : nullptr, 1, K, N);
            const auto got = to_floats(t, to_host<uint16_t>(dy, static_cast<size_t>(N)));
            EXPECT_LE(normwise_error(got, want), tolerance(t));
          }
  DeviceBuffer b(4096);
  auto launch = [&](int64_t T, int split) {
    return backend::cuda::launch_gemv_small_t(FloatType::kF16, b.get(), b.get(), false, nullptr, b.get(), T, 64, 8,
                                              false, nullptr, {}, split);
  };
  EXPECT_EQ(launch(1, 3), cudaErrorInvalidValue);   // not a divisor of the block's warps
  EXPECT_EQ(launch(1, 8), cudaErrorInvalidValue);
  EXPECT_EQ(launch(1, -1), cudaErrorInvalidValue);
  EXPECT_EQ(launch(2, 2), cudaErrorInvalidValue);   // split forms serve one token
  EXPECT_EQ(launch(2, 1), cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

// W4A16, groups of 32 and 128 (llm_kernels.h's layout): the device quantizer against the host's
// (llm::quantize_int4, whose rounding rules are CPU-tested in int4_weights_test) bit for bit; then the
// dequantizer exactly and the GEMV against the dequantized weights in double, on those weights and on
// asymmetric ones (random nibbles, scales and mins, as a Q4_1 or Q4_K checkpoint holds).
TEST_F(CudaLlmKernelsTest, Int4WeightsQuantizeDequantizeAndGemv) {
  std::mt19937 rng(404);
  for (int64_t G : {int64_t{32}, int64_t{128}})
    for (int64_t K : {G, 5 * G})
      for (int64_t N : {int64_t{1}, int64_t{37}, int64_t{1000}}) {
        SCOPED_TRACE("group " + std::to_string(G) + " K " + std::to_string(K) + " N " + std::to_string(N));
        std::normal_distribution<float> g(0.0f, 0.05f);
        std::vector<float> w(static_cast<size_t>(N * K));
        for (float& v : w) v = g(rng);
        for (int64_t k = 0; k < G; ++k) w[static_cast<size_t>(k)] = 0.0f;  // a group of zeros: scale 0
        auto rtn = llm::quantize_int4(w.data(), N, K, G);
        ASSERT_TRUE(rtn.ok()) << rtn.status().to_string();
        DeviceBuffer dw = to_device(w), dq(static_cast<size_t>(N * K / 2)),
                     ds(rtn->scale_min.size() * sizeof(float));
        ASSERT_TRUE(dw.valid() && dq.valid() && ds.valid());
        ASSERT_EQ(backend::cuda::launch_int4_quantize(static_cast<const float*>(dw.get()), N, K, G,
                                                      static_cast<uint8_t*>(dq.get()), static_cast<float*>(ds.get()),
                                                      nullptr),
                  cudaSuccess);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        EXPECT_EQ(to_host<uint8_t>(dq, rtn->q.size()), rtn->q);
        EXPECT_EQ(to_host<float>(ds, rtn->scale_min.size()), rtn->scale_min);
        llm::Int4Weights asym = *rtn;
        std::uniform_int_distribution<int> byte(0, 255);
        std::uniform_real_distribution<float> scale(0.001f, 0.01f), mn(-0.05f, 0.05f);
        for (uint8_t& b : asym.q) b = static_cast<uint8_t>(byte(rng));
        for (size_t i = 0; i < asym.scale_min.size(); i += 2) {
          asym.scale_min[i] = scale(rng);
          asym.scale_min[i + 1] = mn(rng);
        }
        for (const llm::Int4Weights* set : {&*rtn, &asym}) {
          SCOPED_TRACE(set == &asym ? "asymmetric" : "round-to-nearest");
          const std::vector<float> deq = llm::dequantize_int4(*set);
          DeviceBuffer sq = to_device(set->q), ssm = to_device(set->scale_min);
          const auto* q = static_cast<const uint8_t*>(sq.get());
          const auto* sm = static_cast<const float*>(ssm.get());
          for (FloatType t : kTypes) {
            SCOPED_TRACE(type_name(t));
            // Dequantized: each value q * scale + min (one rounding in fp32) rounded once to t.
            DeviceBuffer dd(static_cast<size_t>(N * K) * 2);
            ASSERT_EQ(backend::cuda::launch_int4_dequantize(t, q, sm, N, K, G, dd.get(), nullptr), cudaSuccess);
            ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
            const auto dense = to_floats(t, to_host<uint16_t>(dd, static_cast<size_t>(N * K)));
            const auto want_dense = to_floats(t, from_floats(t, deq));
            size_t bad = 0;
            for (size_t i = 0; i < deq.size(); ++i) bad += dense[i] != want_dense[i];
            EXPECT_EQ(bad, 0u);
            // With the SiLU-gate prologue too (packed gate/up rows of 2K; at these K its activations
            // are staged in shared memory for every T).
            for (int64_t T : {int64_t{1}, int64_t{3}, int64_t{8}})
              for (bool acc : {false, true})
                for (bool silu : {false, true}) {
                SCOPED_TRACE("T " + std::to_string(T) + (acc ? " accumulate" : "") + (silu ? " silu*up" : ""));
                const int64_t pitch = silu ? 2 * K : K;
                const auto x = random_bits(t, static_cast<size_t>(T * pitch), rng);
                const auto y0 = random_bits(t, static_cast<size_t>(T * N), rng);
                const std::vector<float> xf = to_floats(t, x), y0f = to_floats(t, y0);
                std::vector<double> a(static_cast<size_t>(T * K));  // the activations as the GEMV reads them
                for (int64_t r = 0; r < T; ++r)
                  for (int64_t k = 0; k < K; ++k) {
                    const double g = xf[static_cast<size_t>(r * pitch + k)];
                    a[static_cast<size_t>(r * K + k)] =
                        silu ? g / (1.0 + std::exp(-g)) * xf[static_cast<size_t>(r * pitch + K + k)] : g;
                  }
                DeviceBuffer dx = to_device(x), dy = to_device(y0);
                backend::cuda::GemvPrologue pro;
                if (silu) pro.kind = backend::cuda::GemvPrologue::kSiluMul;
                ASSERT_EQ(backend::cuda::launch_gemv_small_t_int4(t, dx.get(), q, sm, dy.get(), T, K, N, G, acc, nullptr,
                                                                  pro),
                          cudaSuccess);
                ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
                std::vector<float> want(static_cast<size_t>(T * N));
                for (int64_t r = 0; r < T; ++r)
                  for (int64_t n = 0; n < N; ++n) {
                    double sum = acc ? y0f[static_cast<size_t>(r * N + n)] : 0.0;
                    for (int64_t k = 0; k < K; ++k)
                      sum += a[static_cast<size_t>(r * K + k)] * deq[static_cast<size_t>(n * K + k)];
                    want[static_cast<size_t>(r * N + n)] = static_cast<float>(sum);
                  }
                const auto got = to_floats(t, to_host<uint16_t>(dy, static_cast<size_t>(T * N)));
                EXPECT_LE(normwise_error(got, want), tolerance(t));
              }
          }
        }
      }
  DeviceBuffer b(4096);
  const auto* bq = static_cast<const uint8_t*>(b.get());
  const auto* bf = static_cast<const float*>(b.get());
  EXPECT_EQ(backend::cuda::launch_gemv_small_t_int4(FloatType::kF16, b.get(), bq, bf, b.get(), 1, 64, 8, 128, false,
                                                    nullptr),
            cudaErrorInvalidValue);  // K not a whole number of groups
  EXPECT_EQ(backend::cuda::launch_gemv_small_t_int4(FloatType::kF16, b.get(), bq, bf, b.get(), 1, 96, 8, 48, false,
                                                    nullptr),
            cudaErrorInvalidValue);  // a group size the kernel does not read
  EXPECT_EQ(backend::cuda::launch_int4_quantize(bf, 2, 100, 32, static_cast<uint8_t*>(b.get()),
                                                static_cast<float*>(b.get()), nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(backend::cuda::launch_int4_dequantize(FloatType::kF16, bq, bf, 2, 64, 16, b.get(), nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

// The W4A16 tensor-core GEMM (int4_gemm.cu) against the host's dequantized weights, each rounded to the
// model's type as the kernel's fp32 dequantization rounds it, in double: asymmetric groups (random
// nibbles, scales and mins) of 32 and 128; token counts around its 8-token tiles and beyond one block
// column (100); K with a partial last chunk (160 = 128 + 32) and long enough to split (2048, 8192); N
// around its 128-row blocks. Each shape runs twice on one workspace: the split launches must leave it
// zeroed, or the second result would differ. sm_count 1 never splits K; the device's count splits
// the small-N shapes.
TEST_F(CudaLlmKernelsTest, Int4GemmFollowsTheDequantizedWeights) {
  int sms = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
  std::mt19937 rng(4404);
  struct Shape {
    int64_t T, K, N;
  };
  const Shape shapes[] = {{9, 160, 37},   {16, 2048, 128}, {17, 256, 300},  {33, 2048, 1},
                          {64, 8192, 96}, {100, 640, 257}, {5, 2048, 2048}, {64, 1024, 1000}};
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(0.001f, 0.01f), mn(-0.05f, 0.05f);
  for (int64_t G : {int64_t{32}, int64_t{128}})
    for (const Shape& sh : shapes) {
      if (sh.K % G != 0) continue;
      llm::Int4Weights w;
      w.rows = sh.N;
      w.cols = sh.K;
      w.group = G;
      w.q.resize(static_cast<size_t>(sh.N * sh.K / 2));
      for (uint8_t& b : w.q) b = static_cast<uint8_t>(byte(rng));
      w.scale_min.resize(static_cast<size_t>(2 * sh.N * (sh.K / G)));
      for (size_t i = 0; i < w.scale_min.size(); i += 2) {
        w.scale_min[i] = scale(rng);
        w.scale_min[i + 1] = mn(rng);
      }
      const std::vector<float> deq = llm::dequantize_int4(w);
      DeviceBuffer dq = to_device(w.q), dsm = to_device(w.scale_min);
      ASSERT_TRUE(dq.valid() && dsm.valid());
      for (FloatType t : kTypes) {
        const std::vector<float> wt = to_floats(t, from_floats(t, deq));  // the weights the tensor cores take
        for (int sm_count : {1, sms})
          for (bool acc : {false, true}) {
            SCOPED_TRACE(std::string(type_name(t)) + " group " + std::to_string(G) + " T " + std::to_string(sh.T) +
                         " K " + std::to_string(sh.K) + " N " + std::to_string(sh.N) + " sm_count " +
                         std::to_string(sm_count) + (acc ? " accumulate" : ""));
            const auto x = random_bits(t, static_cast<size_t>(sh.T * sh.K), rng);
            const auto y0 = random_bits(t, static_cast<size_t>(sh.T * sh.N), rng);
            const std::vector<float> xf = to_floats(t, x), y0f = to_floats(t, y0);
            std::vector<float> want(static_cast<size_t>(sh.T * sh.N));
            for (int64_t r = 0; r < sh.T; ++r)
              for (int64_t n = 0; n < sh.N; ++n) {
                double sum = acc ? y0f[static_cast<size_t>(r * sh.N + n)] : 0.0;
                for (int64_t k = 0; k < sh.K; ++k)
                  sum += static_cast<double>(xf[static_cast<size_t>(r * sh.K + k)]) *
                         wt[static_cast<size_t>(n * sh.K + k)];
                want[static_cast<size_t>(r * sh.N + n)] = static_cast<float>(sum);
              }
            const size_t ws_bytes = backend::cuda::int4_gemm_workspace_bytes(sh.T, sh.K, sh.N, G, sm_count);
            DeviceBuffer dws(ws_bytes), dx = to_device(x);
            ASSERT_TRUE(dws.valid() && dx.valid());
            ASSERT_EQ(cudaMemset(dws.get(), 0, ws_bytes), cudaSuccess);
            for (int rep = 0; rep < 2; ++rep) {
              SCOPED_TRACE(rep == 0 ? "first launch" : "second launch on the same workspace");
              DeviceBuffer dy = to_device(y0);
              ASSERT_TRUE(dy.valid());
              ASSERT_EQ(backend::cuda::launch_int4_gemm(t, dx.get(), static_cast<const uint8_t*>(dq.get()),
                                                        static_cast<const float*>(dsm.get()), dy.get(), sh.T, sh.K,
                                                        sh.N, G, acc, ws_bytes ? dws.get() : nullptr, ws_bytes,
                                                        sm_count, nullptr),
                        cudaSuccess);
              ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
              const auto got = to_floats(t, to_host<uint16_t>(dy, static_cast<size_t>(sh.T * sh.N)));
              EXPECT_LE(normwise_error(got, want), tolerance(t));
            }
            if (ws_bytes) {
              const auto left = to_host<uint8_t>(dws, ws_bytes);
              EXPECT_EQ(static_cast<size_t>(std::count(left.begin(), left.end(), uint8_t{0})), ws_bytes)
                  << "the workspace is not zero again";
            }
          }
      }
    }
  // Bad arguments are refused before anything runs.
  DeviceBuffer b(4096);
  const auto* bq = static_cast<const uint8_t*>(b.get());
  const auto* bf = static_cast<const float*>(b.get());
  auto launch = [&](int64_t T, int64_t K, int64_t N, int64_t G, void* ws, size_t ws_bytes, int sm_count) {
    return backend::cuda::launch_int4_gemm(FloatType::kF16, b.get(), bq, bf, b.get(), T, K, N, G, false, ws, ws_bytes,
                                           sm_count, nullptr);
  };
  EXPECT_EQ(launch(16, 96, 8, 64, nullptr, 0, 1), cudaErrorInvalidValue);    // K not a whole number of groups
  EXPECT_EQ(launch(16, 96, 8, 48, nullptr, 0, 1), cudaErrorInvalidValue);    // a group size the kernel lacks
  EXPECT_EQ(launch(16, 2048, 1, 32, nullptr, 0, 132), cudaErrorInvalidValue);  // would split K, no workspace
  EXPECT_EQ(launch(16, 2048, 1, 32, nullptr, 0, 0), cudaErrorInvalidValue);  // no multiprocessor count
  EXPECT_EQ(launch(0, 2048, 8, 32, nullptr, 0, 1), cudaSuccess);             // nothing to do
  EXPECT_EQ(backend::cuda::launch_int4_gemm(FloatType::kF32, b.get(), bq, bf, b.get(), 1, 64, 8, 32, false, nullptr,
                                            0, 1, nullptr),
            cudaErrorInvalidValue);  // fp32 activations
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

TEST_F(CudaLlmKernelsTest, LogitsArgmaxTakesTheFirstMaximum) {
  std::mt19937 rng(20261206);
  std::normal_distribution<float> n01(0.0f, 3.0f);
  for (int64_t vocab : {int64_t{1}, int64_t{7}, int64_t{1000}, int64_t{32000}, int64_t{128256 + 5}}) {
    const int64_t rows = 9;
    std::vector<float> x(static_cast<size_t>(rows * vocab));
    for (float& v : x) v = n01(rng);
    std::vector<int32_t> want(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) {
      float* row = x.data() + r * vocab;
      std::uniform_int_distribution<int64_t> at(0, vocab - 1);
      if (r == 1 || r == 2) {  // a tie of two (or, for vocab 1, one) at the top: ids far apart
        const int64_t a = at(rng), b = at(rng);
        row[a] = row[b] = 100.0f;
      }
      if (r == 3) row[vocab - 1] = 50.0f;                           // the last id
      if (r == 4) {  // -inf all but one
        std::fill(row, row + vocab, -INFINITY);
        row[at(rng)] = -1e30f;
      }
      want[static_cast<size_t>(r)] =
          static_cast<int32_t>(std::max_element(row, row + vocab) - row);  // the first of the largest
    }
    float* r5 = x.data() + 5 * vocab;
    r5[vocab / 2] = NAN;
    want[5] = backend::cuda::kArgmaxNonFinite;
    float* r6 = x.data() + 6 * vocab;
    r6[0] = INFINITY;
    want[6] = backend::cuda::kArgmaxNonFinite;
    float* r7 = x.data() + 7 * vocab;
    std::fill(r7, r7 + vocab, -INFINITY);
    want[7] = backend::cuda::kArgmaxAllMasked;
    DeviceBuffer dx = to_device(x), dout(static_cast<size_t>(rows) * sizeof(int32_t));
    ASSERT_TRUE(dx.valid() && dout.valid());
    ASSERT_EQ(backend::cuda::launch_logits_argmax(static_cast<const float*>(dx.get()), rows, vocab,
                                                  static_cast<int32_t*>(dout.get()), nullptr),
              cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(to_host<int32_t>(dout, static_cast<size_t>(rows)), want) << "vocab " << vocab;
  }
  EXPECT_EQ(backend::cuda::launch_logits_argmax(nullptr, 1, 10, nullptr, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(backend::cuda::launch_logits_argmax(nullptr, 0, 10, nullptr, nullptr), cudaSuccess);
  EXPECT_EQ(backend::cuda::launch_logits_argmax(nullptr, 1, 0, nullptr, nullptr), cudaErrorInvalidValue);
}

TEST(CudaLlmKernelsParams, RefusesWhatItDoesNotServe) {
  PagedDecodeParams p;
  p.batch = 1;
  p.num_heads = 8;
  p.num_kv_heads = 3;  // does not divide
  p.head_dim = 128;
  p.block_size = 16;
  EXPECT_EQ(backend::cuda::launch_paged_decode_attention(p, nullptr, 0, nullptr), cudaErrorInvalidValue);
  p.num_kv_heads = 2;
  p.head_dim = 96;
  EXPECT_EQ(backend::cuda::launch_paged_decode_attention(p, nullptr, 0, nullptr), cudaErrorInvalidValue);
  p.head_dim = 128;
  p.type = FloatType::kF32;
  EXPECT_EQ(backend::cuda::launch_paged_decode_attention(p, nullptr, 0, nullptr), cudaErrorInvalidValue);
  RopeKvWriteParams r;
  r.num_tokens = 1;
  r.head_dim = 63;
  EXPECT_EQ(backend::cuda::launch_rope_kv_write(r, nullptr), cudaErrorInvalidValue);
}

// Needs no device: the split decision and the workspace size are host arithmetic.
TEST(CudaLlmKernelsWorkspace, SizeArithmetic) {
  PagedDecodeParams p;
  p.batch = 3;
  p.num_heads = 8;
  p.head_dim = 128;
  p.max_context_len = 1100;
  p.partition_size = 512;
  EXPECT_EQ(backend::cuda::paged_decode_attention_partitions(p), 3);
  EXPECT_EQ(backend::cuda::paged_decode_attention_workspace_bytes(p), size_t{3} * 8 * 3 * (128 + 2) * 4);
  p.head_dim = 64;
  p.max_context_len = 1024;  // exactly two partitions
  EXPECT_EQ(backend::cuda::paged_decode_attention_partitions(p), 2);
  EXPECT_EQ(backend::cuda::paged_decode_attention_workspace_bytes(p), size_t{3} * 8 * 2 * (64 + 2) * 4);
  p.max_context_len = 512;  // fits one partition: no split, no workspace
  EXPECT_EQ(backend::cuda::paged_decode_attention_partitions(p), 1);
  EXPECT_EQ(backend::cuda::paged_decode_attention_workspace_bytes(p), 0u);
  p.max_context_len = 100000;
  p.partition_size = 0;  // never split
  EXPECT_EQ(backend::cuda::paged_decode_attention_partitions(p), 1);
  EXPECT_EQ(backend::cuda::paged_decode_attention_workspace_bytes(p), 0u);
  p.partition_size = 256;
  p.batch = 0;
  EXPECT_EQ(backend::cuda::paged_decode_attention_workspace_bytes(p), 0u);
}

// Needs no device: the automatic split-K partition (the decoder's default) is host arithmetic: 512
// positions over the parts a (sequence, head) pair needs for about two blocks per multiprocessor,
// rounded up to 16, at least 64; 512 once the pairs fill the GPU.
TEST(CudaLlmKernelsWorkspace, AutoDecodePartition) {
  using backend::cuda::auto_decode_partition;
  // Batch 1, 32 heads, 132 SMs: 264 blocks wanted, 9 parts a pair; 512 / 9 -> 57 -> 64 (the floor).
  EXPECT_EQ(auto_decode_partition(1, 32, 132), 64);
  PagedDecodeParams p;
  p.batch = 1;
  p.num_heads = 32;
  p.max_context_len = 256;
  p.partition_size = 64;
  EXPECT_EQ(backend::cuda::paged_decode_attention_partitions(p), 4);  // 128 blocks instead of 32
  p.max_context_len = 4096;                                          // a decode graph's bound
  EXPECT_EQ(backend::cuda::paged_decode_attention_partitions(p), 64);
  EXPECT_EQ(auto_decode_partition(4, 32, 132), 176);  // 128 pairs: 3 parts, 512 / 3 -> 171 -> 176
  EXPECT_EQ(auto_decode_partition(8, 32, 132), 256);  // 256 pairs: 2 parts
  EXPECT_EQ(auto_decode_partition(9, 32, 132), 512);  // 288 pairs fill 264 blocks
  EXPECT_EQ(auto_decode_partition(64, 32, 132), 512);
  EXPECT_EQ(auto_decode_partition(1, 8, 132), 64);    // 33 parts: 512 / 33 -> 16, then the floor
  EXPECT_EQ(auto_decode_partition(0, 32, 132), 64);   // no pairs: counted as one
  EXPECT_EQ(auto_decode_partition(1, 32, 0), 512);    // SM count unknown (0): one SM, which 32 pairs fill
}

}  // namespace
}  // namespace ingot::gpu_test
