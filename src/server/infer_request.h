// Copyright ingot authors. Apache-2.0.
//
// The KServe v2 (Open Inference Protocol) infer request and response over HTTP, with the
// binary-tensor extension: pure functions from bytes to a request (or an error naming what is
// wrong) and from output tensors to bytes. No I/O and no model state, so the unit tests and
// the fuzz target call them directly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ingot/data_type.h"

namespace ingot::server {

/// A failed request: the HTTP status to answer with and a message naming the problem.
struct RequestError {
  int http_status = 400;
  std::string message;
};

/// Where a tensor lives in a registered shared-memory region (Triton's system shared-memory
/// extension: parameters shared_memory_region, shared_memory_byte_size, shared_memory_offset).
struct SharedMemoryRef {
  std::string region;
  uint64_t offset = 0;
  uint64_t byte_size = 0;
};

/// Bytes an input reads in place from a registered shared-memory region instead of owning them.
struct ExternalBytes {
  const char* data = nullptr;
  size_t size = 0;
  bool pinned = false;               ///< page-locked (registered with CUDA): the device can DMA from it
  std::shared_ptr<const void> hold;  ///< keeps the region mapped while the request is in flight
  /// CUDA device memory (a CUDA shared-memory region, opened from its cudaIpc handle): never read
  /// on the host; a cuda instance copies it device to device, a cpu one copies it to the host first.
  bool device = false;
};

/// One input tensor of a request; `data` holds the elements packed, little-endian, unless they
/// stay in the shared-memory region `shm` names: then the server points `external` at them
/// (no copy) once it has looked the region up. Read them through bytes() / byte_size().
struct InferInput {
  std::string name;
  DataType dtype = DataType::kUndefined;
  std::vector<int64_t> shape;
  std::string data;
  std::optional<SharedMemoryRef> shm;
  std::optional<ExternalBytes> external;

  const char* bytes() const { return external ? external->data : data.data(); }
  size_t byte_size() const { return external ? external->size : data.size(); }
};

struct RequestedOutput {
  std::string name;
  bool binary = false;                 ///< answer with the binary-tensor extension
  std::optional<SharedMemoryRef> shm;  ///< write the tensor into this region instead of the response
};

struct InferRequest {
  std::string id;
  std::vector<InferInput> inputs;
  /// Empty: every model output, in JSON unless `binary_outputs`.
  std::vector<RequestedOutput> outputs;
  bool binary_outputs = false;  ///< request parameter binary_data_output
  int64_t timeout_us = 0;       ///< request parameter "timeout" (microseconds); 0 = the model's default
};

/// Parses an infer request body. `header_length` is the Inference-Header-Content-Length header
/// (nullopt when absent: the whole body is JSON); the binary tensors follow the JSON header in
/// input order. A binary tensor's bytes are not copied: its `external` points into `body`, which
/// the caller keeps until the request is answered (read inputs through bytes()). Errors (400):
/// malformed JSON, missing/ill-typed fields, unknown datatypes, data that disagrees with the
/// shape, binary sizes that do not add up to the body.
std::optional<RequestError> parse_infer_request(const char* body, size_t size, std::optional<size_t> header_length,
                                                InferRequest* out);

/// What a model accepts; dims exclude the batch dim when max_batch_size > 0, -1 = any size.
struct TensorSpec {
  std::string name;
  DataType dtype = DataType::kUndefined;
  std::vector<int64_t> dims;
};
struct ModelSignature {
  std::string name;
  int64_t max_batch_size = 0;
  std::vector<TensorSpec> inputs, outputs;
};

/// Checks a parsed request against the model: every input known and present once, datatype and
/// shape as the model says, batch dims equal and within max_batch_size, outputs known. Sets
/// `batch_size` (1 when the model does not batch). Errors are 400 and name the tensor.
std::optional<RequestError> validate_request(const InferRequest& request, const ModelSignature& model,
                                             int64_t* batch_size);

/// One output tensor of a response; `data` points at its packed elements.
struct OutputTensor {
  std::string name;
  DataType dtype = DataType::kUndefined;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  size_t bytes = 0;
  bool binary = false;
  /// Written into this region already: the response names it instead of carrying the data.
  std::optional<SharedMemoryRef> shm;
};

/// Writes the response: JSON, followed by the binary outputs when any is binary, in which
/// case `*header_length` is the JSON part's length (the Inference-Header-Content-Length);
/// otherwise it is nullopt.
std::string build_infer_response(const std::string& model_name, const std::string& model_version, const std::string& id,
                                 const std::vector<OutputTensor>& outputs, std::optional<size_t>* header_length);

/// {"error": message} as JSON.
std::string error_json(const std::string& message);

}  // namespace ingot::server
