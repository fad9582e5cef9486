// Copyright ingot authors. Apache-2.0.
//
// Plan <-> FlatBuffer metadata (engine.fbs), the part of the engine file between the header
// and the weights. Split from engine_format.cc so the header/checksum logic stays separate
// from the graph encoding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "builder/plan.h"
#include "core/status.h"

namespace ingot::engine::detail {

/// Encodes `plan` as a FlatBuffer; numeric tensor bytes are appended to `weights` (each at a
/// 64-byte aligned offset; identical storage is written once).
Result<std::vector<uint8_t>> encode_metadata(const builder::Plan& plan, std::vector<uint8_t>* weights);

/// Verifies and decodes the metadata. Tensors borrow from `weights` (kept alive by `owner`).
Result<builder::Plan> decode_metadata(const uint8_t* meta, size_t meta_size, const uint8_t* weights,
                                      size_t weights_size, std::shared_ptr<const void> owner);

}  // namespace ingot::engine::detail
