// Copyright ingot authors. Apache-2.0.
//
// ingot::FusedConvPool's pool half, named once: its pool_* attributes and the max pooling's
// (MaxPool / ingot::Pool) attribute each stands for. The op's shape inference, the CPU reference
// and fuse_conv_pool all map through this table.
#pragma once

#include <string>

#include "ir/attribute.h"

namespace ingot::ir {

struct FusedPoolAttr {
  const char* fused;  // on FusedConvPool
  const char* pool;   // on MaxPool / ingot::Pool
};
inline constexpr FusedPoolAttr kFusedConvPoolWindow[] = {{"pool_kernel_shape", "kernel_shape"},
                                                        {"pool_strides", "strides"},
                                                        {"pool_pads", "pads"},
                                                        {"pool_dilations", "dilations"},
                                                        {"pool_ceil_mode", "ceil_mode"}};

/// The FusedConvPool attribute a pooling attribute becomes; null when it has none.
inline const char* fused_pool_attr(const std::string& pool_attr) {
  for (const FusedPoolAttr& a : kFusedConvPoolWindow)
    if (pool_attr == a.pool) return a.fused;
  return nullptr;
}

/// The ingot::Pool {mode "max"} attributes of FusedConvPool attributes `fused` (in its layout).
inline Attributes fused_conv_pool_pool_attrs(const Attributes& fused) {
  Attributes pool;
  pool.set_string("mode", "max");
  pool.set_int("channels_last", fused.get_int("channels_last", 0));
  for (const FusedPoolAttr& a : kFusedConvPoolWindow)
    if (const Attribute* v = fused.find(a.fused)) pool.set(a.pool, *v);
  return pool;
}

/// Whether `name` is one of FusedConvPool's pool attributes (not the convolution's).
inline bool is_fused_pool_attr(const std::string& name) {
  for (const FusedPoolAttr& a : kFusedConvPoolWindow)
    if (name == a.fused) return true;
  return false;
}

}  // namespace ingot::ir
