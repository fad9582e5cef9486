// Copyright ingot authors. Apache-2.0.
//
// Running an ONNX model on ingot's CPU reference backend: the simplest door into libingot,
// and the oracle that engine outputs are compared against. It interprets the imported graph
// node by node with simple, obviously correct kernels; it is not fast.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ingot/data_type.h"
#include "ingot/status.h"

namespace ingot {

/// A host tensor that owns its bytes (row-major, packed as ONNX stores the dtype).
/// Strings (dtype kString) are held in `strings`, one per element.
struct HostTensor {
  std::string name;
  DataType dtype = DataType::kUndefined;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;
  std::vector<std::string> strings;

  /// Number of elements (product of shape; 1 for a scalar).
  int64_t numel() const;
  /// Element i converted to double (any numeric or bool dtype).
  double element(int64_t i) const;
  /// Sets element i from a double, converting to the dtype (rounding, as a C cast for ints).
  void set_element(int64_t i, double v);
  /// A zero-filled tensor; fails on negative dims.
  static Result<HostTensor> zeros(std::string name, DataType dtype, std::vector<int64_t> shape);
};

/// Name, dtype and shape of a model input or output. Dims that the model leaves open are
/// -1 in `shape`, with the symbol (e.g. "batch") in `dim_names` when the model names it.
struct TensorInfo {
  std::string name;
  DataType dtype = DataType::kUndefined;
  std::vector<int64_t> shape;
  std::vector<std::string> dim_names;
  bool rank_known = true;
};

class ReferenceModel {
 public:
  /// Imports `onnx_path` (external data resolved next to it), validates every node and
  /// infers shapes. Fails with a message naming the file and the offending node/op/opset.
  static Result<std::unique_ptr<ReferenceModel>> load(const std::string& onnx_path);
  /// Same from serialized ModelProto bytes (no external data).
  static Result<std::unique_ptr<ReferenceModel>> load_bytes(const void* data, size_t size);
  ~ReferenceModel();

  const std::vector<TensorInfo>& inputs() const { return inputs_; }
  const std::vector<TensorInfo>& outputs() const { return outputs_; }
  /// Opset of the default domain.
  int64_t opset() const;
  /// Number of nodes after import (functions inlined).
  size_t num_nodes() const;

  /// Runs the model. `inputs` are matched by name; inputs with an initializer default may be
  /// left out. Fails (naming the input) on a wrong dtype, rank or fixed dim, an unknown or
  /// missing input, or any kernel error. Returns the outputs in model order.
  Result<std::vector<HostTensor>> run(const std::vector<HostTensor>& inputs) const;
  /// Like run, but returns every value a node computed (model outputs included), in node
  /// order: the oracle for per-layer comparison, where an engine's intermediate tensors are
  /// matched by name. Keeps everything alive at once, so it needs more memory than run.
  Result<std::vector<HostTensor>> run_all(const std::vector<HostTensor>& inputs) const;

 private:
  ReferenceModel();
  Result<std::vector<HostTensor>> execute(const std::vector<HostTensor>& inputs, bool keep_all) const;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::vector<TensorInfo> inputs_, outputs_;
};

}  // namespace ingot
