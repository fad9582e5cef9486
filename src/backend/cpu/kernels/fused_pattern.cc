// Copyright ingot authors. Apache-2.0.
//
// Reference kernels for the ops the pattern-recognition passes create (see
// src/ir/ops/fused_pattern.cc). The ingot twins of ai.onnx ops run the ai.onnx
// reference kernel on the same context: their inputs and attributes are laid
// out identically, so there is one implementation to trust.
#include <cmath>

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

Status attention_4d(KernelContext &k) {
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
