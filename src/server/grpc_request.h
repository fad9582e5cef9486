// Copyright ingot authors. Apache-2.0.
//
// The gRPC endpoint's request conversion: a KServe v2 ModelInferRequest (inputs with raw or typed
// contents or shared-memory parameters, requested outputs) into the InferRequest the HTTP parser
// also produces. Pure: no gRPC, no model state, so the fuzz target calls it directly (full
// protobuf only, for the generated message).
#pragma once

#include <optional>

#include "server/grpc_service.pb.h"
#include "server/infer_request.h"

namespace ingot::server {

/// Errors (400) name the input or output and what is wrong: unknown datatype, BYTES, negative
/// dims, contents that disagree with the shape, both or neither kind of contents, a shared-memory
/// parameter of the wrong type or size, duplicate inputs. The inputs' raw_input_contents are moved
/// out of `p` into the request (left empty there), not copied.
std::optional<RequestError> infer_request_from_proto(inference::ModelInferRequest* p, InferRequest* out);

}  // namespace ingot::server
