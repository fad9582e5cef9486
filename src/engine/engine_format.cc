// Copyright ingot authors. Apache-2.0.
#include "engine/engine_format.h"

#include <cstdlib>
#include <cstring>

#include "engine/engine_metadata.h"
#include "ingot/version.h"

namespace ingot::engine {
namespace {

constexpr char kMagic[8] = {'I', 'N', 'G', 'O', 'T', 'E', 'N', 'G'};
constexpr size_t kChecksumOffset = kEngineChecksumOffset;
constexpr size_t kMaxHeaderBytes = 1 << 20;

uint64_t align_up(uint64_t n) { return (n + kEngineAlignment - 1) / kEngineAlignment * kEngineAlignment; }

void put_u32(std::vector<uint8_t>& b, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) b[at + i] = static_cast<uint8_t>(v >> (8 * i));
}
void put_u64(std::vector<uint8_t>& b, size_t at, uint64_t v) {
  for (int i = 0; i < 8; ++i) b[at + i] = static_cast<uint8_t>(v >> (8 * i));
}
uint32_t get_u32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
uint64_t get_u64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// FNV-1a over little-endian 64-bit words (bytes for the tail): one multiply per 8 bytes keeps
// it near memory speed, and each step is a bijection of the state, so any single changed byte
// changes the result.
constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ull;
constexpr uint64_t kFnvPrime = 0x100000001b3ull;
uint64_t fnv1a_update(uint64_t h, const uint8_t* p, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) h = (h ^ get_u64(p + i)) * kFnvPrime;
  for (; i < n; ++i) h = (h ^ p[i]) * kFnvPrime;
  return h;
}
// The whole file with the checksum field read as zero.
uint64_t file_checksum(const uint8_t* p, size_t n) {
  static const uint8_t kZero[8] = {};
  uint64_t h = fnv1a_update(kFnvOffset, p, kChecksumOffset);
  h = fnv1a_update(h, kZero, 8);
  return fnv1a_update(h, p + kChecksumOffset + 8, n - kChecksumOffset - 8);
}

struct Header {
  uint32_t format_version = 0;
  uint32_t header_size = 0;
  uint64_t metadata_offset = 0, metadata_size = 0, weights_offset = 0, weights_size = 0, checksum = 0;
  EngineIdentity id;
};

void put_string(std::vector<uint8_t>& b, const std::string& s) {
  size_t at = b.size();
  b.resize(at + 4 + s.size());
  put_u32(b, at, static_cast<uint32_t>(s.size()));
  std::memcpy(b.data() + at + 4, s.data(), s.size());
}

// Magic, format version and the identity; offsets are not checked against the size here.
Result<Header> parse_header(const uint8_t* p, size_t size) {
  if (!p || size < sizeof(kMagic) || std::memcmp(p, kMagic, sizeof(kMagic)) != 0)
    return invalid_model("not an ingot engine file (no INGOTENG magic at its start)");
  if (size < kEngineHeaderFixedBytes)
    return invalid_model("engine file is truncated: ", size, " bytes, shorter than its ", kEngineHeaderFixedBytes, "-byte header");
  Header h;
  h.format_version = get_u32(p + 8);
  if (h.format_version != kEngineFormatVersion)
    return unsupported("engine format version: file has ", h.format_version, ", this ingot (", version(), ") reads version ",
                       kEngineFormatVersion, "; rebuild the engine with this ingot");
  h.header_size = get_u32(p + 12);
  h.metadata_offset = get_u64(p + 16);
  h.metadata_size = get_u64(p + 24);
  h.weights_offset = get_u64(p + 32);
  h.weights_size = get_u64(p + 40);
  h.checksum = get_u64(p + kChecksumOffset);
  if (h.header_size < kEngineHeaderFixedBytes || h.header_size > kMaxHeaderBytes)
    return invalid_model("engine header is corrupt: header size ", h.header_size);
  if (h.header_size > size)
    return invalid_model("engine file is truncated: ", size, " bytes, its header alone is ", h.header_size);
  size_t at = kEngineHeaderFixedBytes;
  auto read_string = [&](std::string* out) -> Status {
    if (h.header_size - at < 4) return invalid_model("engine header is corrupt: identity runs past the header");
    uint32_t n = get_u32(p + at);
    at += 4;
    if (n > h.header_size - at) return invalid_model("engine header is corrupt: identity runs past the header");
    out->assign(reinterpret_cast<const char*>(p + at), n);
    at += n;
    return Status::Ok();
  };
  INGOT_RETURN_IF_ERROR(read_string(&h.id.ingot_version));
  INGOT_RETURN_IF_ERROR(read_string(&h.id.backend));
  INGOT_RETURN_IF_ERROR(read_string(&h.id.gpu_arch));
  if (h.header_size - at < 4) return invalid_model("engine header is corrupt: identity runs past the header");
  uint32_t libs = get_u32(p + at);
  at += 4;
  for (uint32_t i = 0; i < libs; ++i) {
    std::string name, ver;
    INGOT_RETURN_IF_ERROR(read_string(&name));
    INGOT_RETURN_IF_ERROR(read_string(&ver));
    h.id.library_versions[name] = ver;
  }
  return h;
}

std::string shown(const std::string& s) { return s.empty() ? "(none)" : "'" + s + "'"; }

Status check_identity(const EngineIdentity& file, const EngineIdentity& want) {
  if (file.ingot_version != want.ingot_version)
    return unsupported("engine ingot version: file was built by ingot ", shown(file.ingot_version), ", this is ingot ",
                       shown(want.ingot_version), "; rebuild the engine with this ingot");
  if (file.backend != want.backend)
    return unsupported("engine backend: file has ", shown(file.backend), ", expected ", shown(want.backend),
                       "; rebuild the engine for the ", shown(want.backend), " backend");
  if (file.gpu_arch != want.gpu_arch)
    return unsupported("engine GPU arch: file has ", shown(file.gpu_arch), ", this GPU is ", shown(want.gpu_arch),
                       "; rebuild the engine on this GPU");
  std::map<std::string, std::string> names = file.library_versions;
  names.insert(want.library_versions.begin(), want.library_versions.end());
  for (const auto& [name, unused] : names) {
    auto f = file.library_versions.find(name);
    auto w = want.library_versions.find(name);
    std::string fv = f == file.library_versions.end() ? "" : f->second;
    std::string wv = w == want.library_versions.end() ? "" : w->second;
    if (f == file.library_versions.end() || w == want.library_versions.end() || fv != wv)
      return unsupported("engine library version of ", name, ": file has ", shown(fv), ", this build has ", shown(wv),
                         "; rebuild the engine with this ingot on this machine");
  }
  return Status::Ok();
}

}  // namespace

uint64_t engine_checksum(const void* data, size_t size) {
  if (size < kEngineHeaderFixedBytes) return 0;
  return file_checksum(static_cast<const uint8_t*>(data), size);
}

EngineIdentity current_identity(const std::string& backend, const std::string& gpu_arch) {
  EngineIdentity id;
  id.backend = backend;
  id.gpu_arch = gpu_arch;
  id.ingot_version = version();
  return id;
}

Result<std::vector<uint8_t>> write_engine(const builder::Plan& plan, const EngineIdentity& id) {
  if (!plan.backend.empty() && plan.backend != id.backend)
    return invalid_argument("write_engine: the plan was built for backend '", plan.backend, "', the identity says '", id.backend, "'");
  if (!plan.gpu_arch.empty() && plan.gpu_arch != id.gpu_arch)
    return invalid_argument("write_engine: the plan was built for GPU arch '", plan.gpu_arch, "', the identity says '", id.gpu_arch, "'");
  std::vector<uint8_t> weights;
  INGOT_ASSIGN_OR_RETURN(std::vector<uint8_t> meta, detail::encode_metadata(plan, &weights));

  std::vector<uint8_t> out(kEngineHeaderFixedBytes, 0);
  std::memcpy(out.data(), kMagic, sizeof(kMagic));
  put_string(out, id.ingot_version);
  put_string(out, id.backend);
  put_string(out, id.gpu_arch);
  size_t at = out.size();
  out.resize(at + 4);
  put_u32(out, at, static_cast<uint32_t>(id.library_versions.size()));
  for (const auto& [name, ver] : id.library_versions) {
    put_string(out, name);
    put_string(out, ver);
  }
  if (out.size() > kMaxHeaderBytes) return invalid_argument("write_engine: identity strings too long");
  const uint64_t header_size = align_up(out.size());
  const uint64_t meta_offset = header_size;
  const uint64_t weights_offset = align_up(meta_offset + meta.size());
  out.resize(weights_offset + weights.size(), 0);
  std::memcpy(out.data() + meta_offset, meta.data(), meta.size());
  if (!weights.empty()) std::memcpy(out.data() + weights_offset, weights.data(), weights.size());
  put_u32(out, 8, kEngineFormatVersion);
  put_u32(out, 12, static_cast<uint32_t>(header_size));
  put_u64(out, 16, meta_offset);
  put_u64(out, 24, meta.size());
  put_u64(out, 32, weights_offset);
  put_u64(out, 40, weights.size());
  put_u64(out, kChecksumOffset, file_checksum(out.data(), out.size()));
  return out;
}

Result<EngineIdentity> read_engine_identity(const void* data, size_t size) {
  INGOT_ASSIGN_OR_RETURN(Header h, parse_header(static_cast<const uint8_t*>(data), size));
  return h.id;
}

Result<builder::Plan> read_engine(const void* data, size_t size, std::shared_ptr<const void> owner,
                                  const EngineIdentity& expected) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  INGOT_ASSIGN_OR_RETURN(Header h, parse_header(p, size));
  const uint64_t meta_end = h.metadata_offset + h.metadata_size;
  const uint64_t weights_end = h.weights_offset + h.weights_size;
  if (h.metadata_offset < h.header_size || h.metadata_offset % 8 != 0 || meta_end < h.metadata_offset ||
      h.weights_offset < meta_end || h.weights_offset % kEngineAlignment != 0 || weights_end < h.weights_offset)
    return invalid_model("engine header is corrupt: bad section offsets");
  if (weights_end > size)
    return invalid_model("engine file is truncated: ", size, " bytes, its header says ", weights_end);
  if (weights_end < size)
    return invalid_model("engine file has ", size - weights_end, " unexpected bytes after its weights section");
  if (file_checksum(p, size) != h.checksum)
    return invalid_model("engine file is corrupt: checksum mismatch (the file was damaged after it was written)");
  INGOT_RETURN_IF_ERROR(check_identity(h.id, expected));

  // Tensors are read in place; on an oddly aligned buffer copy once so they are aligned.
  if (reinterpret_cast<uintptr_t>(p) % 16 != 0) {
    void* copy = std::aligned_alloc(kEngineAlignment, align_up(size));
    if (!copy) return make_status(StatusCode::kOutOfMemory, "read_engine: cannot allocate ", size, " bytes");
    std::memcpy(copy, p, size);
    owner = std::shared_ptr<const void>(copy, [](const void* q) { std::free(const_cast<void*>(q)); });
    p = static_cast<const uint8_t*>(copy);
  }
  INGOT_ASSIGN_OR_RETURN(builder::Plan plan,
                         detail::decode_metadata(p + h.metadata_offset, h.metadata_size, p + h.weights_offset,
                                                 h.weights_size, owner));
  plan.backend = h.id.backend;
  plan.gpu_arch = h.id.gpu_arch;
  if (owner) plan.storage.push_back(std::move(owner));
  return plan;
}

}  // namespace ingot::engine
