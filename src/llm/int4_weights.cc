// Copyright ingot authors. Apache-2.0.
#include "llm/int4_weights.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/dtype.h"
#include "core/parallel.h"

namespace ingot::llm {
namespace {

float f16_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return half_bits_to_float(h);
}

/// A zeroed rows x cols matrix in groups of `group`.
Int4Weights zeroed(int64_t rows, int64_t cols, int64_t group) {
  Int4Weights r;
  r.rows = rows;
  r.cols = cols;
  r.group = group;
  r.q.assign(static_cast<size_t>(rows * cols / 2), 0);
  r.scale_min.assign(static_cast<size_t>(2 * rows * (cols / group)), 0.0f);
  return r;
}

/// The little-endian 32-bit word `i` of a packed tensor.
uint32_t word_at(const uint8_t* p, int64_t i) {
  uint32_t w;
  std::memcpy(&w, p + 4 * i, 4);
  return w;
}

/// Packs 32 nibble values (element order) into 16 bytes of this layout.
void pack32(const uint8_t* v, uint8_t* out) {
  for (int i = 0; i < 16; ++i) out[i] = static_cast<uint8_t>(v[2 * i] | (v[2 * i + 1] << 4));
}

Status check_shape(int64_t rows, int64_t cols, int64_t group, const char* what) {
  if (!int4_group_supported(group))
    return invalid_argument(what, ": int4 group size ", group, " (the kernels read groups of 32, 64 and 128)");
  if (rows < 0 || cols <= 0 || cols % group != 0)
    return invalid_argument(what, ": a ", rows, "x", cols, " matrix is not whole groups of ", group, " along its rows");
  return Status::Ok();
}

}  // namespace

bool int4_group_supported(int64_t group) { return group == 32 || group == 64 || group == 128; }

int64_t int4_group_for(std::initializer_list<int64_t> cols) {
  for (int64_t g : {128, 64, 32}) {
    bool all = true;
    for (int64_t c : cols) all = all && c > 0 && c % g == 0;
    if (all) return g;
  }
  return 0;
}

Result<Int4Weights> quantize_int4(const float* w, int64_t rows, int64_t cols, int64_t group) {
  INGOT_RETURN_IF_ERROR(check_shape(rows, cols, group, "quantize_int4"));
  Int4Weights r = zeroed(rows, cols, group);
  const int64_t groups = rows * (cols / group);
  parallel_ranges(groups, [&](int64_t lo, int64_t hi) {
    std::vector<uint8_t> v(static_cast<size_t>(group));
    for (int64_t g = lo; g < hi; ++g) {
      const float* src = w + g * group;  // rows are whole groups: group g of the whole matrix
      float amax = 0.0f;
      for (int64_t i = 0; i < group; ++i) amax = std::max(amax, std::fabs(src[i]));
      const float scale = amax / 7.0f;
      const float inv = amax > 0.0f ? 7.0f / amax : 0.0f;
      for (int64_t i = 0; i < group; ++i)
        v[static_cast<size_t>(i)] =
            static_cast<uint8_t>(static_cast<int>(std::min(std::max(std::nearbyint(src[i] * inv), -8.0f), 7.0f)) + 8);
      for (int64_t i = 0; i < group; i += 32) pack32(v.data() + i, r.q.data() + (g * group + i) / 2);
      r.scale_min[static_cast<size_t>(2 * g)] = scale;
      r.scale_min[static_cast<size_t>(2 * g + 1)] = -8.0f * scale;
    }
  }, int64_t{1} << 12);
  return r;
}

std::vector<float> dequantize_int4(const Int4Weights& w) {
  std::vector<float> out(static_cast<size_t>(w.rows * w.cols));
  parallel_ranges(w.rows * w.cols / 2, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      const int64_t g = 2 * i / w.group;
      const float s = w.scale_min[static_cast<size_t>(2 * g)], m = w.scale_min[static_cast<size_t>(2 * g + 1)];
      const uint8_t b = w.q[static_cast<size_t>(i)];
      out[static_cast<size_t>(2 * i)] = std::fma(static_cast<float>(b & 0xF), s, m);
      out[static_cast<size_t>(2 * i + 1)] = std::fma(static_cast<float>(b >> 4), s, m);
    }
  });
  return out;
}

Result<Int4Weights> int4_from_gguf(const GgufTensor& t) {
  if (t.type != GgmlType::kQ4_0 && t.type != GgmlType::kQ4_1 && t.type != GgmlType::kQ4_K)
    return unsupported("int4 weights from GGUF: tensor '", t.name, "' is ", ggml_type_name(t.type),
                       " (4-bit layouts read as they are: Q4_0, Q4_1, Q4_K)");
  if (t.dims.size() != 2) return invalid_model("int4 weights from GGUF: tensor '", t.name, "' is not 2-D");
  int64_t be = 0, bb = 0;
  ggml_block(t.type, &be, &bb);
  const int64_t cols = t.dims[0], rows = t.dims[1];
  if (cols % be != 0 || t.nbytes != static_cast<uint64_t>(rows * cols / be * bb))
    return invalid_model("int4 weights from GGUF: tensor '", t.name, "' has rows of ", cols, " (not whole ",
                         ggml_type_name(t.type), " blocks)");
  Int4Weights r = zeroed(rows, cols, 32);
  const int64_t blocks = rows * cols / be;
  parallel_ranges(blocks, [&](int64_t lo, int64_t hi) {
    uint8_t v[32];
    for (int64_t b = lo; b < hi; ++b) {
      const uint8_t* src = t.data + b * bb;
      uint8_t* q = r.q.data() + b * be / 2;
      float* sm = r.scale_min.data() + 2 * (b * be / 32);
      if (t.type == GgmlType::kQ4_K) {
        // d, dmin (f16), 12 bytes of 6-bit (scale, min), then four runs of 32 bytes: the low
        // nibbles are sub-block 2c, the high ones sub-block 2c + 1.
        const float d = f16_at(src), dmin = f16_at(src + 2);
        const uint8_t* scales = src + 4;
        const uint8_t* qs = src + 16;
        for (int c = 0; c < 4; ++c, qs += 32) {
          for (int half = 0; half < 2; ++half) {
            const int j = 2 * c + half;
            uint8_t sc, mn;
            ggml_k4_scale_min(j, scales, &sc, &mn);
            for (int l = 0; l < 32; ++l) v[l] = static_cast<uint8_t>(half ? qs[l] >> 4 : qs[l] & 0xF);
            pack32(v, q + 16 * j);
            sm[2 * j] = d * sc;
            sm[2 * j + 1] = -(dmin * mn);
          }
        }
      } else {
        // Q4_0: d, then element j in the low nibble of byte j and j + 16 in its high one; value (q - 8) d.
        // Q4_1: d, m, the same nibbles; value q d + m.
        const bool q41 = t.type == GgmlType::kQ4_1;
        const float d = f16_at(src);
        const uint8_t* qs = src + (q41 ? 4 : 2);
        for (int j = 0; j < 16; ++j) {
          v[j] = qs[j] & 0xF;
          v[j + 16] = static_cast<uint8_t>(qs[j] >> 4);
        }
        pack32(v, q);
        sm[0] = d;
        sm[1] = q41 ? f16_at(src + 2) : -8.0f * d;
      }
    }
  }, int64_t{1} << 12);
  return r;
}

Result<Int4Weights> int4_from_awq(const SafeTensor& qweight, const SafeTensor& qzeros, const SafeTensor& scales,
                                  int64_t group) {
  const std::string& name = qweight.name;
  if (qweight.dtype != DataType::kInt32 || qzeros.dtype != DataType::kInt32 || scales.dtype != DataType::kFloat16)
    return invalid_model("AWQ weights '", name, "': qweight and qzeros must be I32 and scales F16, got ",
                         qweight.dtype_name, ", ", qzeros.dtype_name, " and ", scales.dtype_name);
  if (qweight.shape.size() != 2 || qzeros.shape.size() != 2 || scales.shape.size() != 2)
    return invalid_model("AWQ weights '", name, "': qweight, qzeros and scales must be 2-D");
  const int64_t in = qweight.shape[0], out = qweight.shape[1] * 8;
  if (!int4_group_supported(group) || in % group != 0)
    return unsupported("AWQ weights '", name, "': group_size ", group, " along an input dim of ", in,
                       " (ingot's int4 kernels read groups of 32, 64 and 128)");
  const int64_t groups = in / group;
  if (qzeros.shape != std::vector<int64_t>{groups, out / 8} || scales.shape != std::vector<int64_t>{groups, out} ||
      qweight.nbytes != static_cast<uint64_t>(in * out / 2) || qzeros.nbytes != static_cast<uint64_t>(groups * out / 2) ||
      scales.nbytes != static_cast<uint64_t>(groups * out * 2))
    return invalid_model("AWQ weights '", name, "': qweight [", in, ", ", out / 8, "] needs qzeros [", groups, ", ",
                         out / 8, "] and scales [", groups, ", ", out, "] for groups of ", group);
  Int4Weights r = zeroed(out, in, group);
  // Column n of a packed row sits in word n / 8, nibble kSlot[n % 8] (AWQ's order 0 2 4 6 1 3 5 7).
  static constexpr int kSlot[8] = {0, 4, 1, 5, 2, 6, 3, 7};
  auto nibble = [](const uint8_t* words, int64_t row_words, int64_t row, int64_t n) {
    return static_cast<uint8_t>((word_at(words, row * row_words + n / 8) >> (4 * kSlot[n % 8])) & 0xF);
  };
  parallel_ranges(out, [&](int64_t lo, int64_t hi) {
    for (int64_t n = lo; n < hi; ++n) {
      uint8_t* dst = r.q.data() + n * in / 2;
      for (int64_t k = 0; k < in; ++k)
        dst[k / 2] = static_cast<uint8_t>(dst[k / 2] | (nibble(qweight.data, out / 8, k, n) << (4 * (k % 2))));
      for (int64_t g = 0; g < groups; ++g) {
        const float s = f16_at(scales.data + 2 * (g * out + n));
        const float z = static_cast<float>(nibble(qzeros.data, out / 8, g, n));
        r.scale_min[static_cast<size_t>(2 * (n * groups + g))] = s;
        r.scale_min[static_cast<size_t>(2 * (n * groups + g) + 1)] = -(z * s);
      }
    }
  }, int64_t{1} << 10);
  return r;
}

Result<Int4Weights> int4_from_gptq(const SafeTensor& qweight, const SafeTensor& qzeros, const SafeTensor& scales,
                                   const SafeTensor* g_idx, int64_t group, int zero_offset,
                                   std::vector<int64_t>* input_order) {
  const std::string& name = qweight.name;
  if (qweight.dtype != DataType::kInt32 || qzeros.dtype != DataType::kInt32 || scales.dtype != DataType::kFloat16 ||
      qweight.shape.size() != 2)
    return invalid_model("GPTQ weights '", name, "': qweight and qzeros must be I32 and scales F16, got ",
                         qweight.dtype_name, ", ", qzeros.dtype_name, " and ", scales.dtype_name);
  const int64_t in = qweight.shape[0] * 8, out = qweight.shape[1];
  if (!int4_group_supported(group) || in % group != 0)
    return unsupported("GPTQ weights '", name, "': group_size ", group, " along an input dim of ", in,
                       " (ingot's int4 kernels read groups of 32, 64 and 128)");
  const int64_t groups = in / group;
  if (qzeros.shape != std::vector<int64_t>{groups, out / 8} || scales.shape != std::vector<int64_t>{groups, out} ||
      out % 8 != 0)
    return invalid_model("GPTQ weights '", name, "': qweight [", in / 8, ", ", out, "] needs qzeros [", groups, ", ",
                         out / 8, "] and scales [", groups, ", ", out, "] for groups of ", group);
  // order[j]: the input at column j; the identity unless g_idx is act-order (GPTQ's desc_act: g_idx
  // of a permutation), then the inputs sorted by group, each group whole and in place.
  std::vector<int64_t> order(static_cast<size_t>(in));
  for (int64_t k = 0; k < in; ++k) order[static_cast<size_t>(k)] = k;
  bool act_order = false;
  if (g_idx) {
    if (g_idx->dtype != DataType::kInt32 || g_idx->shape != std::vector<int64_t>{in})
      return invalid_model("GPTQ weights '", name, "': g_idx must be I32 [", in, "]");
    std::vector<int32_t> gi(static_cast<size_t>(in));
    std::memcpy(gi.data(), g_idx->data, static_cast<size_t>(4 * in));
    std::vector<int64_t> members(static_cast<size_t>(groups), 0);
    for (int64_t k = 0; k < in; ++k) {
      const int32_t g = gi[static_cast<size_t>(k)];
      if (g < 0 || g >= groups)
        return invalid_model("GPTQ weights '", name, "': g_idx[", k, "] = ", g, " outside [0, ", groups, ")");
      ++members[static_cast<size_t>(g)];
      act_order = act_order || g != k / group;
    }
    for (int64_t g = 0; g < groups; ++g)
      if (members[static_cast<size_t>(g)] != group)
        return unsupported("GPTQ weights '", name, "': g_idx gives group ", g, " ", members[static_cast<size_t>(g)],
                           " inputs, not group_size ", group);
    if (act_order && !input_order)
      return unsupported("GPTQ weights '", name, "': act-order groups (g_idx is not k / group_size)");
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return gi[static_cast<size_t>(a)] < gi[static_cast<size_t>(b)]; });
  }
  if (input_order) *input_order = act_order ? order : std::vector<int64_t>();
  Int4Weights r = zeroed(out, in, group);
  parallel_ranges(out, [&](int64_t lo, int64_t hi) {
    for (int64_t n = lo; n < hi; ++n) {
      uint8_t* dst = r.q.data() + n * in / 2;
      for (int64_t j = 0; j < in; ++j) {
        const int64_t k = order[static_cast<size_t>(j)];
        const uint32_t v = (word_at(qweight.data, (k / 8) * out + n) >> (4 * (k % 8))) & 0xF;
        dst[j / 2] = static_cast<uint8_t>(dst[j / 2] | (v << (4 * (j % 2))));
      }
      for (int64_t g = 0; g < groups; ++g) {
        const float s = f16_at(scales.data + 2 * (g * out + n));
        const float z =
            static_cast<float>(((word_at(qzeros.data, g * (out / 8) + n / 8) >> (4 * (n % 8))) & 0xF) + zero_offset);
        r.scale_min[static_cast<size_t>(2 * (n * groups + g))] = s;
        r.scale_min[static_cast<size_t>(2 * (n * groups + g) + 1)] = -(z * s);
      }
    }
  }, int64_t{1} << 10);
  return r;
}

Result<Int4Weights> int4_from_compressed(const SafeTensor& packed, const SafeTensor& scale, const SafeTensor* zero_point,
                                         const SafeTensor* shape, int64_t group) {
  const std::string& name = packed.name;
  if (packed.dtype != DataType::kInt32 || packed.shape.size() != 2)
    return invalid_model("compressed-tensors weights '", name, "': weight_packed must be a 2-D I32 tensor");
  const int64_t out = packed.shape[0], in = packed.shape[1] * 8;
  if (shape) {
    if (shape->dtype != DataType::kInt64 || shape->nbytes != 16)
      return invalid_model("compressed-tensors weights '", name, "': weight_shape must hold two I64 values");
    int64_t dims[2];
    std::memcpy(dims, shape->data, 16);
    if (dims[0] != out || dims[1] != in)
      return invalid_model("compressed-tensors weights '", name, "': weight_shape [", dims[0], ", ", dims[1],
                           "] for packed rows of ", out, " x ", in);
  }
  if (!int4_group_supported(group) || in % group != 0)
    return unsupported("compressed-tensors weights '", name, "': group_size ", group, " along an input dim of ", in,
                       " (ingot's int4 kernels read groups of 32, 64 and 128)");
  const int64_t groups = in / group;
  const bool f16 = scale.dtype == DataType::kFloat16, bf16 = scale.dtype == DataType::kBFloat16;
  if ((!f16 && !bf16 && scale.dtype != DataType::kFloat32) || scale.shape != std::vector<int64_t>{out, groups})
    return invalid_model("compressed-tensors weights '", name, "': weight_scale must be F16, BF16 or F32 [", out, ", ",
                         groups, "], got ", scale.dtype_name);
  const int64_t zrows = (out + 7) / 8;
  if (zero_point && (zero_point->dtype != DataType::kInt32 || zero_point->shape != std::vector<int64_t>{zrows, groups}))
    return invalid_model("compressed-tensors weights '", name, "': weight_zero_point must be I32 [", zrows, ", ", groups,
                         "]");
  Int4Weights r = zeroed(out, in, group);
  std::copy_n(packed.data, out * in / 2, r.q.data());  // little-endian words: the nibbles in order
  for (int64_t n = 0; n < out; ++n)
    for (int64_t g = 0; g < groups; ++g) {
      const size_t at = static_cast<size_t>(n * groups + g);
      float s;
      if (f16) {
        s = f16_at(scale.data + 2 * at);
      } else if (bf16) {
        uint16_t b;
        std::memcpy(&b, scale.data + 2 * at, 2);
        s = bfloat16_bits_to_float(b);
      } else {
        std::memcpy(&s, scale.data + 4 * at, 4);
      }
      float z = 8.0f;  // symmetric: zero 0, stored + 8
      if (zero_point) z = static_cast<float>((word_at(zero_point->data, (n / 8) * groups + g) >> (4 * (n % 8))) & 0xF);
      r.scale_min[2 * at] = s;
      r.scale_min[2 * at + 1] = -(z * s);
    }
  return r;
}

Int4Weights permute_int4_rows(const Int4Weights& w, const std::vector<int64_t>& rows) {
  Int4Weights r = w;
  const int64_t qb = w.cols / 2, sm = 2 * (w.cols / w.group);
  for (size_t i = 0; i < rows.size(); ++i) {
    std::copy_n(w.q.data() + rows[i] * qb, qb, r.q.data() + static_cast<int64_t>(i) * qb);
    std::copy_n(w.scale_min.data() + rows[i] * sm, sm, r.scale_min.data() + static_cast<int64_t>(i) * sm);
  }
  return r;
}

Result<Int4Weights> concat_int4_rows(const std::vector<const Int4Weights*>& parts) {
  if (parts.empty() || parts[0] == nullptr) return invalid_argument("concat_int4_rows: no parts");
  Int4Weights r;
  r.cols = parts[0]->cols;
  r.group = parts[0]->group;
  for (const Int4Weights* p : parts) {
    if (p == nullptr || p->cols != r.cols || p->group != r.group)
      return invalid_argument("concat_int4_rows: parts of different row lengths or group sizes");
    r.rows += p->rows;
    r.q.insert(r.q.end(), p->q.begin(), p->q.end());
    r.scale_min.insert(r.scale_min.end(), p->scale_min.begin(), p->scale_min.end());
  }
  return r;
}

}  // namespace ingot::llm
