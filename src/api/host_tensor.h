// Copyright ingot authors. Apache-2.0.
//
// The public HostTensor as an internal Tensor (a copy), for the api room's doors (the reference
// model's inputs, the builder's calibration batches).
#pragma once

#include "core/tensor.h"
#include "ingot/reference.h"

namespace ingot {

/// Fails, naming the tensor, on a negative dim or a byte or string count that does not fit the shape.
Result<Tensor> host_to_tensor(const HostTensor& h);

}  // namespace ingot
