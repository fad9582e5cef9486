// Copyright ingot authors. Apache-2.0.
//
// Launchers for the elementwise family's device code (elementwise_kernels.cu for pointwise ops,
// elementwise_row_kernels.cu for Softmax, LayerNormalization and Transpose). Plain C++ so the
// host side (elementwise_tactics.cc) compiles with the host compiler; every launcher enqueues
// on `stream`, never synchronizes, and returns cudaGetLastError() after its launch.
//
// Floats are stored as f32/f16/bf16 and computed in fp32, rounding once on store. Shapes are
// described by at most kMaxDims dims with element strides; a broadcast dim has stride 0.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace ingot::backend::cuda {

constexpr int kMaxDims = 6;

enum class FloatType : int32_t { kF32 = 0, kF16 = 1, kBF16 = 2 };

enum class UnaryOp : int32_t {
  kIdentity = 0,  // also Cast (input and output types differ)
  kRelu,
  kSigmoid,
  kTanh,
  kExp,
  kLog,
  kSqrt,
  kAbs,
  kNeg,
  kReciprocal,
  kErf,
  kGelu,         // 0.5 x (1 + erf(x / sqrt 2))
  kGeluTanh,     // approximate="tanh"
  kLeakyRelu,    // alpha
  kHardSigmoid,  // max(0, min(1, alpha x + beta))
  kHardSwish,
  kSoftplus,
  kClip,  // min(max(x, lo), hi); NaN stays NaN
  kSilu,  // x sigmoid(x)
};

struct UnaryParams {
  float alpha = 0;
  float beta = 0;
  float lo = 0;  // Clip bounds (used when the pointers below are null)
  float hi = 0;
  /// Clip bounds read on the device (one element of the input's float type), when not null:
  /// Clip's min/max inputs are tensors, possibly computed, so the kernel reads them itself.
  const void* lo_ptr = nullptr;
  const void* hi_ptr = nullptr;
};

/// y[i] = op(x[i]) for i < n, x of type `in`, y of type `out`.
cudaError_t launch_unary(UnaryOp op, const UnaryParams& p, FloatType in, FloatType out, const void* x, void* y,
                         int64_t n, cudaStream_t stream);

/// Cast between integer/bool and numeric types, which launch_unary's float-only kernels do not
/// take: integer/bool sources to any of these types (integers wrap, bool is "!= 0", narrowing to
/// fp16/bf16 rounds once), and float sources to bool. Float -> integer is not offered (ONNX leaves
/// out-of-range values to the implementation; the host reference decides those).
enum class CastType : int32_t { kBool = 0, kI8, kU8, kI16, kU16, kI32, kU32, kI64, kU64, kF16, kBF16, kF32, kF64 };
cudaError_t launch_cast(CastType in, CastType out, const void* x, void* y, int64_t n, cudaStream_t stream);

enum class BinaryOp : int32_t { kAdd = 0, kSub, kMul, kDiv, kPow, kMax, kMin };

/// Output dims and per-operand element strides (0 on broadcast dims), outermost first.
struct BroadcastDesc {
  int32_t rank = 0;
  int64_t dims[kMaxDims] = {};
  int64_t strides[3][kMaxDims] = {};  // operands a, b, and c (Where's condition is operand 0)
};

/// y = a op b with numpy broadcasting (a, b, y of type t). `desc` covers operands 0 (a), 1 (b).
/// Where each operand is laid out as y over a trailing block of dims and broadcast over the dims
/// before it (a [1, S, H] bias on [B, S, H]; y itself), 16-byte packs move with one index
/// modulo per pack; other broadcasts index element by element.
cudaError_t launch_binary(BinaryOp op, FloatType t, const void* a, const void* b, void* y, int64_t n,
                          const BroadcastDesc& desc, cudaStream_t stream);
/// y = a op b for int32 / int64 tensors (is64) with broadcasting, ops Add, Sub, Mul, Max, Min;
/// Add/Sub/Mul wrap (two's complement), as the reference does. Index arithmetic in exported
/// text models (RoBERTa's position ids: CumSum(mask) * mask + padding_idx) runs on these.
cudaError_t launch_binary_int(BinaryOp op, bool is64, const void* a, const void* b, void* y, int64_t n,
                              const BroadcastDesc& desc, cudaStream_t stream);
/// y = a op b, all three contiguous with n elements (the vectorized path).
cudaError_t launch_binary_same_shape(BinaryOp op, FloatType t, const void* a, const void* b, void* y, int64_t n,
                                     cudaStream_t stream);

/// y = cond ? x : z with broadcasting; cond is bool (one byte), operand order in desc: cond, x, z.
cudaError_t launch_where(FloatType t, const uint8_t* cond, const void* x, const void* z, void* y, int64_t n,
                         const BroadcastDesc& desc, cudaStream_t stream);

/// Softmax over the middle dim of a contiguous [outer, len, inner] view.
cudaError_t launch_softmax(FloatType t, const void* x, void* y, int64_t outer, int64_t len, int64_t inner,
                           cudaStream_t stream);

/// A quantized copy a norm kernel writes beside (or instead of) its float output:
/// yq = QuantizeLinear(y as stored, scale, zero point 0), exactly as the QuantizeLinear kernels
/// compute it (quant_convert.cuh): the quotient y / scale rounded to `quotient` (y's type when
/// the scale has it, else f32), then int8 round-half-even saturated, or float8e4m3fn nearest-even
/// (saturated to +-448, or NaN without `saturate`). ingot::LayerNormQuantize's output 1.
enum class NormQuant : int32_t { kNone = 0, kInt8, kFloat8E4M3FN };
struct NormQuantOutput {
  NormQuant type = NormQuant::kNone;
  void* yq = nullptr;             ///< device, one byte per element of y
  const void* scale = nullptr;    ///< device, one value of scale_type
  FloatType scale_type = FloatType::kF32;
  FloatType quotient = FloatType::kF32;
  bool saturate = true;
};

/// LayerNormalization of each contiguous row of `len` elements (rows = outer); gamma and the
/// optional beta (nullptr) hold `len` elements of type `t`. rms: RMSNormalization instead
/// (x / sqrt(mean(x^2) + epsilon) * gamma; beta ignored). q (optional): also write the quantized
/// copy; y may then be null (not stored).
cudaError_t launch_layernorm(FloatType t, const void* x, const void* gamma, const void* beta, void* y, int64_t outer,
                             int64_t len, float epsilon, cudaStream_t stream, bool rms = false,
                             const NormQuantOutput* q = nullptr);

/// y = transpose(x): y's dims are out_dims; in_strides[d] is x's element stride along the input
/// dim that becomes output dim d. Elements of 1, 2, 4 or 8 bytes (any dtype of those widths).
cudaError_t launch_transpose(int32_t element_bytes, const void* x, void* y, int32_t rank, const int64_t* out_dims,
                             const int64_t* in_strides, int64_t n, cudaStream_t stream);

}  // namespace ingot::backend::cuda
