// Copyright ingot authors. Apache-2.0.
//
// What the cudnn-frontend (graph API) tactics share: their error check and element types.
// Included only where INGOT_WITH_CUDNN_FRONTEND is defined (cudnn_frontend.h is heavy).
#pragma once

#include <cudnn_frontend.h>

#include "backend/cuda/pointwise/elementwise_kernels.h"
#include "core/dtype.h"
#include "core/status.h"

namespace ingot::backend::cuda {

/// A cudnn-frontend call that failed: unsupported (the family then offers nothing or the
/// autotuner drops the candidate), naming the node, the stage and cuDNN's message.
#define INGOT_FE_CHECK(expr, node, what)                                                                      \
  do {                                                                                                        \
    ::cudnn_frontend::error_t ingot_fe_st_ = (expr);                                                          \
    if (!ingot_fe_st_.is_good())                                                                              \
      return ::ingot::make_status(::ingot::StatusCode::kUnsupported, (node).describe(), ": cuDNN ", what,    \
                                  ": ", ingot_fe_st_.get_message());                                          \
  } while (0)

inline cudnn_frontend::DataType_t fe_type(DataType t) {
  switch (t) {
    case DataType::kFloat16: return cudnn_frontend::DataType_t::HALF;
    case DataType::kBFloat16: return cudnn_frontend::DataType_t::BFLOAT16;
    default: return cudnn_frontend::DataType_t::FLOAT;
  }
}

inline cudnn_frontend::DataType_t fe_type(FloatType t) {
  switch (t) {
    case FloatType::kF16: return cudnn_frontend::DataType_t::HALF;
    case FloatType::kBF16: return cudnn_frontend::DataType_t::BFLOAT16;
    default: return cudnn_frontend::DataType_t::FLOAT;
  }
}

}  // namespace ingot::backend::cuda
