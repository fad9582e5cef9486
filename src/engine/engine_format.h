// Copyright ingot authors. Apache-2.0.
//
// The engine file: a Plan frozen for one backend, GPU and library set.
//
//   offset 0   fixed little-endian header (kEngineHeaderFixedBytes):
//                magic "INGOTENG", format version (u32), header size (u32),
//                metadata offset/size, weights offset/size (u64 each),
//                checksum (u64: 64-bit FNV-1a over the whole file with this field read as 0),
//              then the identity: ingot version, backend, gpu arch and (name, version) library
//              pairs, each string a u32 length and its bytes
//   metadata   a FlatBuffer (engine.fbs): the optimized graph, steps, value plans, profiles,
//              memory summary. Verified with flatbuffers::Verifier before any field is read.
//   weights    64-byte aligned (from the file start), every tensor 64-byte aligned inside it,
//              so a mapped file serves the weights in place.
//
// The identity is checked field by field on load because a mismatch means the tactics,
// kernels or numerics inside were chosen for something else: the only fix is a rebuild, and
// the error says so. Checksum before identity: a damaged file is reported as damaged.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "builder/plan.h"
#include "core/status.h"

namespace ingot::engine {

/// Bumped on any change to the header or the schema's meaning.
constexpr uint32_t kEngineFormatVersion = 1;
constexpr size_t kEngineHeaderFixedBytes = 56;
constexpr size_t kEngineAlignment = 64;

/// What an engine is bound to. Two identities must be equal for a file to load.
struct EngineIdentity {
  std::string backend;        ///< "cpu" or "cuda"
  std::string gpu_arch;       ///< "sm_90"; "" for cpu
  std::string ingot_version;  ///< ingot::version() of the build that wrote the file
  std::map<std::string, std::string> library_versions;  ///< e.g. "cuda" -> "13.0"
};

/// The identity of this ingot build for `backend` / `gpu_arch` (library versions left to the
/// caller, which knows what it linked).
EngineIdentity current_identity(const std::string& backend, const std::string& gpu_arch);

/// Serializes a plan. Fails (kInvalidArgument) when the plan points at nodes or values outside
/// its graph, or when plan.backend / plan.gpu_arch are set and disagree with `id`.
Result<std::vector<uint8_t>> write_engine(const builder::Plan& plan, const EngineIdentity& id);

/// Parses an engine. `expected` is the identity of the running build/GPU; any difference in
/// format version, ingot version, backend, gpu arch or a library version is an error naming
/// the field, the file's value and the expected one, and what to do. Corrupt or truncated
/// input is an error, never a crash. Numeric weights (initializers, tensor attributes) are
/// borrowed zero-copy from `data`, kept alive by `owner` (stored in Plan::storage); when `data`
/// is not 16-byte aligned the weights section is copied once into aligned memory instead.
Result<builder::Plan> read_engine(const void* data, size_t size, std::shared_ptr<const void> owner,
                                  const EngineIdentity& expected);

/// The checksum a file of `size` bytes should carry (its stored field read as zero), and where
/// it is stored (u64 little-endian). For tools and fuzzers that patch files on purpose.
uint64_t engine_checksum(const void* data, size_t size);
constexpr size_t kEngineChecksumOffset = 48;

/// The identity alone (magic, format version and header checked; no checksum), for inspect.
Result<EngineIdentity> read_engine_identity(const void* data, size_t size);

}  // namespace ingot::engine
