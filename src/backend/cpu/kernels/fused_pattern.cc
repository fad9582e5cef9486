// Copyright ingot authors. Apache-2.0.
//
// Reference kernels for the ops the pattern-recognition passes create (see
// src/ir/ops/fused_pattern.cc). The ingot twins of ai.onnx ops run the ai.onnx
// reference kernel on the same context: their inputs and attributes are laid
// out identically, so there is one implementation to trust.
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/kernels/all_kernels.h"

namespace ingot::cpu {

namespace {

KernelFn same_as_onnx(const char *op) {
  return [op](KernelContext &k) -> Status {
    const KernelFn *fn = KernelRegistry::global().find(op);
    if (fn == nullptr)
      return k.error("no ai.onnx ", op, " kernel");
    return (*fn)(k);
  };
}

Status silu(KernelContext &k) {
  const Tensor &x = *k.input(0);
  if (!is_float(x.dtype()))
    return k.unsupported_case("Silu needs a floating input");
  Tensor &y = k.output(0);
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double v = x.get_f64(i);
    y.set_f64(i, v / (1.0 + std::exp(-v)));
  }
  return Status::Ok();
}

// qkv_packed = 1: input 0 is [B, S, 3*H*D]; Q, K and V are its thirds on the last axis, copied
// out and given to the ai.onnx kernel as three inputs.
Status attention_packed(KernelContext &k) {
  const Tensor &qkv = *k.input(0);
  if (qkv.rank() != 3 || qkv.dim(2) % 3 != 0)
    return k.error("qkv_packed input must be 3-D [batch, seq, 3 * heads * head_size]");
  const int64_t rows = qkv.dim(0) * qkv.dim(1), width = qkv.dim(2) / 3;
  const size_t elem = storage_bytes(qkv.dtype(), 1);
  std::vector<Tensor> parts;
  for (int64_t p = 0; p < 3; ++p) {
    INGOT_ASSIGN_OR_RETURN(Tensor t, Tensor::zeros(qkv.dtype(), {qkv.dim(0), qkv.dim(1), width}));
    const auto *src = static_cast<const uint8_t *>(qkv.raw());
    auto *dst = static_cast<uint8_t *>(t.mutable_raw());
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(dst + r * width * elem, src + (r * 3 * width + p * width) * elem, width * elem);
    parts.push_back(std::move(t));
  }
  std::vector<const Tensor *> ins = {&parts[0], &parts[1], &parts[2]};
  for (size_t i = 3; i < k.num_inputs(); ++i)
    ins.push_back(k.input(i));
  KernelContext inner(k.node(), k.opset(), std::move(ins), std::move(k.outputs()), nullptr);
  const KernelFn *fn = KernelRegistry::global().find("Attention");
  if (fn == nullptr)
    return k.error("no ai.onnx Attention kernel");
  Status st = (*fn)(inner);
  k.outputs() = std::move(inner.outputs());
  return st;
}

Status attention_4d(KernelContext &k) {
  if (k.attrs().get_int("qkv_packed", 0) != 0)
    return attention_packed(k);
  const bool heads = k.attrs().has("q_num_heads") && k.attrs().has("kv_num_heads");
  for (size_t i = 0; i < 3; ++i)
    if (k.input(i)->rank() != 4 && !(k.input(i)->rank() == 3 && heads))
      return k.error("Q, K and V must be 4-D [batch, heads, seq, head_size], or 3-D with "
                     "q_num_heads and kv_num_heads");
  return same_as_onnx("Attention")(k);
}

} // namespace

void register_fused_pattern_kernels(KernelRegistry &r) {
  r.add("LayerNormalization", same_as_onnx("LayerNormalization"), "ingot");
  r.add("RMSNormalization", same_as_onnx("RMSNormalization"), "ingot");
  r.add("Gelu", same_as_onnx("Gelu"), "ingot");
  r.add("Silu", silu, "ingot");
  r.add("Attention", attention_4d, "ingot");
}

} // namespace ingot::cpu
