// Copyright ingot authors. Apache-2.0.
//
// libFuzzer target for `ingot serve`'s gRPC request conversion: arbitrary bytes parsed as a KServe
// v2 ModelInferRequest (protobuf's own parser), then converted (infer_request_from_proto) and
// validated against a fixed model. Any crash, sanitizer report or unbounded allocation is a bug:
// bad requests must come back as INVALID_ARGUMENT with a message.
#include <cstddef>
#include <cstdint>

#include "server/grpc_request.h"
#include "server/tensor_types.h"

using namespace ingot;
using namespace ingot::server;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  inference::ModelInferRequest proto;
  if (!proto.ParseFromArray(data, static_cast<int>(size))) return 0;
  InferRequest request;
  if (infer_request_from_proto(&proto, &request)) return 0;
  for (const InferInput& in : request.inputs) {
    const size_t esize = element_size(in.dtype);
    // The conversion promised packed data of the shape's size, or a shared-memory slice of it.
    const uint64_t want = static_cast<uint64_t>(element_count(in.shape)) * esize;
    if (esize == 0 || (in.shm ? in.shm->byte_size != want : in.data.size() != want)) __builtin_trap();
  }
  static const ModelSignature model{
      "m", 4, {{"x", DataType::kFloat32, {-1}}, {"k", DataType::kInt64, {2}}}, {{"y", DataType::kFloat32, {-1}}}};
  int64_t batch = 0;
  (void)validate_request(request, model, &batch);
  return 0;
}
