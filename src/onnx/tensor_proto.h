// Copyright ingot authors. Apache-2.0.
//
// TensorProto → Tensor: every storage form ONNX allows (raw_data, the typed repeated fields,
// external data), with sizes checked against the dims.
#pragma once

#include <memory>
#include <string>

#include "core/tensor.h"
#include "onnx/onnx.pb.h"

namespace ingot::onnx {

struct TensorSource {
  /// Keeps the proto alive so raw_data can be borrowed instead of copied; may be null, in
  /// which case data is copied.
  std::shared_ptr<const void> owner;
  /// Folder for external-data locations; empty forbids external data.
  std::string base_dir;
  /// Mapped external files, appended to keep them alive.
  std::vector<std::shared_ptr<const void>>* storage = nullptr;
};

/// Converts `proto`; errors name the tensor and say what disagrees.
Result<Tensor> tensor_from_proto(const ::onnx::TensorProto& proto, const TensorSource& source);

}  // namespace ingot::onnx
