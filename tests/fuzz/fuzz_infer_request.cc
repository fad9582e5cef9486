// Copyright ingot authors. Apache-2.0.
//
// libFuzzer target for `ingot serve`'s KServe v2 request parser: arbitrary bytes as an infer
// request body (with or without the binary-tensor extension's header length), then validation
// against a fixed model and the response writer on whatever parsed. Any crash, sanitizer report
// or unbounded allocation is a bug: bad requests must come back as 4xx errors.
#include <cstddef>
#include <cstdint>
#include <optional>

#include "server/infer_request.h"
#include "server/tensor_types.h"

using namespace ingot;
using namespace ingot::server;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // First byte >= 0x80: the next two give Inference-Header-Content-Length (may exceed the body).
  std::optional<size_t> header;
  if (size >= 3 && data[0] >= 0x80) {
    header = static_cast<size_t>(data[1]) | static_cast<size_t>(data[2]) << 8;
    data += 3;
    size -= 3;
  } else if (size >= 1 && data[0] >= 0x80) {
    return 0;
  }
  InferRequest request;
  if (parse_infer_request(reinterpret_cast<const char*>(data), size, header, &request)) return 0;
  static const ModelSignature model{
      "m", 4, {{"x", DataType::kFloat32, {-1}}, {"k", DataType::kInt64, {2}}}, {{"y", DataType::kFloat32, {-1}}}};
  int64_t batch = 0;
  (void)validate_request(request, model, &batch);
  // Echo the inputs back as outputs: exercises the JSON and binary writers on every dtype.
  std::vector<OutputTensor> outs;
  for (const InferInput& in : request.inputs) {
    size_t esize = element_size(in.dtype);
    if (esize == 0 || in.byte_size() % esize != 0) __builtin_trap();  // the parser promised packed data
    // A binary tensor is a view into the body: it must lie inside it.
    if (in.external) {
      const char* body = reinterpret_cast<const char*>(data);
      if (in.external->data < body || in.external->size > size || in.external->data > body + (size - in.external->size))
        __builtin_trap();
    }
    outs.push_back({in.name, in.dtype, in.shape, in.bytes(), in.byte_size(), request.binary_outputs});
  }
  std::optional<size_t> out_header;
  std::string body = build_infer_response("m", "1", request.id, outs, &out_header);
  if (out_header && *out_header > body.size()) __builtin_trap();
  return 0;
}
