// Copyright ingot authors. Apache-2.0.
//
// Group-wise 4-bit weights (issue 22's W4A16 projections), as the GPU decoder stores and reads
// them (backend/cuda/llm/llm_kernels.h states the same layout for its kernels):
//   - a matrix [rows][cols] (a projection's [out][in]) in groups of `group` consecutive elements of
//     a row (group 32, 64 or 128; cols a multiple of it);
//   - nibbles q [rows][cols / 2]: element k in the low nibble of byte k / 2 when k is even, the
//     high nibble when odd, each an unsigned 0..15;
//   - per group a (scale, min) pair of floats, [rows][cols / group][2]:  w = q * scale + min.
// One form holds every 4-bit checkpoint layout without loss: symmetric round-to-nearest (min =
// -8 scale), GGUF's Q4_0 ((q - 8) d), Q4_1 (q d + m) and Q4_K (sub-blocks of 32: q (d sc) - dmin m),
// and AWQ/GPTQ's zero points ((q - z) s = q s - z s). The GPU decoder uploads these bytes as they
// are, so a Q4 GGUF runs on the weights llama.cpp runs, not on a second rounding of them.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "core/status.h"
#include "llm/gguf.h"
#include "llm/safetensors.h"

namespace ingot::llm {

struct Int4Weights {
  int64_t rows = 0, cols = 0, group = 0;
  std::vector<uint8_t> q;        ///< rows * cols / 2 bytes
  std::vector<float> scale_min;  ///< rows * (cols / group) (scale, min) pairs
  bool empty() const { return q.empty(); }
};

/// The group sizes the GPU kernels read (each a whole number of 16-byte nibble loads).
bool int4_group_supported(int64_t group);
/// The largest supported group (128, 64, 32) dividing every one of `cols`; 0 when none does.
int64_t int4_group_for(std::initializer_list<int64_t> cols);

/// Symmetric round-to-nearest per group: scale = amax / 7, q = clamp(rint(w * 7 / amax), -8, 7) + 8
/// (nearest even), min = -8 scale; a group of zeros has scale 0 and min 0. The GPU's load-time
/// quantizer (launch_int4_quantize) gives the same bytes. kInvalidArgument for an unsupported
/// group or cols not a multiple of it.
Result<Int4Weights> quantize_int4(const float* w, int64_t rows, int64_t cols, int64_t group);
/// The floats the weights stand for: q * scale + min in one rounding (fma), as the GPU's dequantizer
/// and GEMV compute it. (With fp16 scales, as checkpoints store them, the product is exact and an
/// fma equals a multiply then an add; with round-to-nearest's fp32 scales it is not: the H100 run
/// of session 33 found 1-99 of 160,000 fp16 values one ulp apart when the host rounded twice.)
std::vector<float> dequantize_int4(const Int4Weights& w);
/// A GGUF tensor of type Q4_0, Q4_1 or Q4_K in this form (group 32), value for value what
/// dequantize() gives; kUnsupported for another type, kInvalidModel for a shape that is not 2-D.
Result<Int4Weights> int4_from_gguf(const GgufTensor& t);
/// An AutoAWQ "gemm" checkpoint's projection (transformers' and vLLM's AWQ format): qweight int32
/// [in][out / 8] and qzeros int32 [in / group][out / 8], eight 4-bit values a word in AWQ's order
/// (nibble i holds column 8c + (0, 2, 4, 6, 1, 3, 5, 7)[i]), scales fp16 [in / group][out]; the
/// weight is (q - zero) * scale, here scale and min = -zero * scale (exact). kInvalidModel for
/// shapes or types that do not agree, kUnsupported for a group the kernels do not read.
Result<Int4Weights> int4_from_awq(const SafeTensor& qweight, const SafeTensor& qzeros, const SafeTensor& scales,
                                  int64_t group);
/// An AutoGPTQ / GPTQModel checkpoint's projection: qweight int32 [in / 8][out], eight 4-bit values
/// of consecutive inputs a word from the low bits; qzeros int32 [in / group][out / 8], packed along
/// out, each the zero point minus `zero_offset` (1 in the "gptq" v1 format, 0 in "gptq_v2");
/// scales fp16 [in / group][out]; g_idx int32 [in] (optional): input k's group, each group
/// `group` inputs. The weight is (q - zero) * scale. With g_idx k / group, the columns are the
/// inputs and *input_order is cleared. With act-order (desc_act: g_idx of a permutation), the
/// columns are the inputs sorted by group (column j is input (*input_order)[j], so the groups are
/// whole runs, as this form needs); without input_order that is kUnsupported. A g_idx outside the
/// groups is kInvalidModel, one with groups of other sizes kUnsupported.
Result<Int4Weights> int4_from_gptq(const SafeTensor& qweight, const SafeTensor& qzeros, const SafeTensor& scales,
                                   const SafeTensor* g_idx, int64_t group, int zero_offset,
                                   std::vector<int64_t>* input_order = nullptr);
/// A compressed-tensors "pack-quantized" projection (llm-compressor's W4A16, vLLM's format):
/// weight_packed int32 [out][in / 8], eight values a word from the low bits, each a signed 4-bit
/// value + 8 (so its bytes are this form's nibbles); weight_scale [out][in / group] (F16, BF16 or
/// F32); weight_zero_point (asymmetric only) int32 [ceil(out / 8)][in / group], packed the same
/// way along out; weight_shape int64 {out, in}. The weight is (q - zero) * scale: here min =
/// -(zero + 8) * scale, -8 scale without zero points. Shapes that do not agree are kInvalidModel.
Result<Int4Weights> int4_from_compressed(const SafeTensor& packed, const SafeTensor& scale, const SafeTensor* zero_point,
                                         const SafeTensor* shape, int64_t group);
/// The rows of `rows` (new row r = old row rows[r]), nibbles and group pairs together.
Int4Weights permute_int4_rows(const Int4Weights& w, const std::vector<int64_t>& rows);
/// The rows of `parts` one after the other (the decoder's fused Q/K/V and gate/up projections);
/// the parts must share cols and group.
Result<Int4Weights> concat_int4_rows(const std::vector<const Int4Weights*>& parts);

}  // namespace ingot::llm
