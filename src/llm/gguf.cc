// Copyright ingot authors. Apache-2.0.
#include "llm/gguf.h"

#include <cstring>

#include "core/dtype.h"

namespace ingot::llm {

namespace {

constexpr uint64_t kMaxCount = 1ull << 32;  // keys, tensors, array elements: far above real files
constexpr uint32_t kMaxDims = 8;

struct TypeInfo {
  GgmlType type;
  const char* name;
  int64_t block_elems, block_bytes;
};

constexpr TypeInfo kTypes[] = {
    {GgmlType::kF32, "F32", 1, 4},        {GgmlType::kF16, "F16", 1, 2},      {GgmlType::kQ4_0, "Q4_0", 32, 18},
    {GgmlType::kQ4_1, "Q4_1", 32, 20},    {GgmlType::kQ5_0, "Q5_0", 32, 22},  {GgmlType::kQ5_1, "Q5_1", 32, 24},
    {GgmlType::kQ8_0, "Q8_0", 32, 34},    {GgmlType::kQ8_1, "Q8_1", 32, 36},  {GgmlType::kQ2_K, "Q2_K", 256, 84},
    {GgmlType::kQ3_K, "Q3_K", 256, 110},  {GgmlType::kQ4_K, "Q4_K", 256, 144}, {GgmlType::kQ5_K, "Q5_K", 256, 176},
    {GgmlType::kQ6_K, "Q6_K", 256, 210},  {GgmlType::kQ8_K, "Q8_K", 256, 292}, {GgmlType::kI8, "I8", 1, 1},
    {GgmlType::kI16, "I16", 1, 2},        {GgmlType::kI32, "I32", 1, 4},      {GgmlType::kI64, "I64", 1, 8},
    {GgmlType::kF64, "F64", 1, 8},        {GgmlType::kBF16, "BF16", 1, 2},    {GgmlType::kIQ4_NL, "IQ4_NL", 32, 18},
    {GgmlType::kIQ4_XS, "IQ4_XS", 256, 136},
};

/// IQ4_NL's and IQ4_XS's 16 non-uniform levels (ggml's kvalues_iq4nl).
constexpr int8_t kIq4Levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

const TypeInfo* type_info(GgmlType t) {
  for (const TypeInfo& i : kTypes)
    if (i.type == t) return &i;
  return nullptr;
}

/// A bounds-checked cursor over the file.
class Reader {
 public:
  Reader(const uint8_t* p, size_t n, const std::string& what) : p_(p), n_(n), what_(what) {}
  size_t pos() const { return pos_; }
  template <class T>
  Status read(T* v, const char* field) {
    if (n_ - pos_ < sizeof(T)) return truncated(field);
    std::memcpy(v, p_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return Status::Ok();
  }
  Status read_string(std::string* s, const char* field) {
    uint64_t len = 0;
    INGOT_RETURN_IF_ERROR(read(&len, field));
    if (len > n_ - pos_) return truncated(field);
    s->assign(reinterpret_cast<const char*>(p_ + pos_), static_cast<size_t>(len));
    pos_ += static_cast<size_t>(len);
    return Status::Ok();
  }
  Status truncated(const char* field) const {
    return invalid_model(what_, ": truncated GGUF file: ", field, " at byte ", pos_, " runs past its end (", n_,
                         " bytes)");
  }

 private:
  const uint8_t* p_;
  size_t n_;
  size_t pos_ = 0;
  const std::string& what_;
};

bool integer_type(GgufType t) {
  switch (t) {
    case GgufType::kU8: case GgufType::kI8: case GgufType::kU16: case GgufType::kI16: case GgufType::kU32:
    case GgufType::kI32: case GgufType::kU64: case GgufType::kI64: case GgufType::kBool: return true;
    default: return false;
  }
}

Status read_scalar(Reader& r, GgufType t, int64_t* i, double* f) {
  switch (t) {
    case GgufType::kU8: { uint8_t v; INGOT_RETURN_IF_ERROR(r.read(&v, "a u8 value")); *i = v; return Status::Ok(); }
    case GgufType::kI8: { int8_t v; INGOT_RETURN_IF_ERROR(r.read(&v, "an i8 value")); *i = v; return Status::Ok(); }
    case GgufType::kU16: { uint16_t v; INGOT_RETURN_IF_ERROR(r.read(&v, "a u16 value")); *i = v; return Status::Ok(); }
    case GgufType::kI16: { int16_t v; INGOT_RETURN_IF_ERROR(r.read(&v, "an i16 value")); *i = v; return Status::Ok(); }
    case GgufType::kU32: { uint32_t v; INGOT_RETURN_IF_ERROR(r.read(&v, "a u32 value")); *i = v; return Status::Ok(); }
    case GgufType::kI32: { int32_t v; INGOT_RETURN_IF_ERROR(r.read(&v, "an i32 value")); *i = v; return Status::Ok(); }
    case GgufType::kU64: { uint64_t v; INGOT_RETURN_IF_ERROR(r.read(&v, "a u64 value")); *i = static_cast<int64_t>(v); return Status::Ok(); }
    case GgufType::kI64: { int64_t v; INGOT_RETURN_IF_ERROR(r.read(&v, "an i64 value")); *i = v; return Status::Ok(); }
    case GgufType::kBool: { uint8_t v; INGOT_RETURN_IF_ERROR(r.read(&v, "a bool value")); *i = v != 0; return Status::Ok(); }
    case GgufType::kF32: { float v; INGOT_RETURN_IF_ERROR(r.read(&v, "an f32 value")); *f = v; return Status::Ok(); }
    case GgufType::kF64: { double v; INGOT_RETURN_IF_ERROR(r.read(&v, "an f64 value")); *f = v; return Status::Ok(); }
    default: return internal_error("read_scalar: not a scalar type");
  }
}

Status read_value(Reader& r, GgufType t, GgufValue* v, const std::string& what, const std::string& key) {
  v->type = t;
  if (t == GgufType::kString) return r.read_string(&v->s, "a string value");
  if (t == GgufType::kArray) {
    uint32_t et = 0;
    uint64_t count = 0;
    INGOT_RETURN_IF_ERROR(r.read(&et, "an array's element type"));
    INGOT_RETURN_IF_ERROR(r.read(&count, "an array's length"));
    v->elem_type = static_cast<GgufType>(et);
    if (count > kMaxCount) return invalid_model(what, ": metadata '", key, "' claims ", count, " array elements");
    if (v->elem_type == GgufType::kArray) return unsupported(what, ": metadata '", key, "' is an array of arrays");
    if (v->elem_type == GgufType::kString) {
      for (uint64_t k = 0; k < count; ++k) {
        std::string s;
        INGOT_RETURN_IF_ERROR(r.read_string(&s, "an array string"));
        v->strings.push_back(std::move(s));
      }
      return Status::Ok();
    }
    if (et > static_cast<uint32_t>(GgufType::kF64))
      return invalid_model(what, ": metadata '", key, "' has array element type ", et, " (GGUF knows 0..12)");
    for (uint64_t k = 0; k < count; ++k) {
      int64_t i = 0;
      double f = 0;
      INGOT_RETURN_IF_ERROR(read_scalar(r, v->elem_type, &i, &f));
      if (integer_type(v->elem_type)) v->ints.push_back(i);
      else v->floats.push_back(f);
    }
    return Status::Ok();
  }
  if (static_cast<uint32_t>(t) > static_cast<uint32_t>(GgufType::kF64))
    return invalid_model(what, ": metadata '", key, "' has value type ", static_cast<uint32_t>(t), " (GGUF knows 0..12)");
  return read_scalar(r, t, &v->i, &v->f);
}

float f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return half_bits_to_float(h);
}

}  // namespace

void ggml_k4_scale_min(int j, const uint8_t* q, uint8_t* d, uint8_t* m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

std::string ggml_type_name(GgmlType t) {
  const TypeInfo* i = type_info(t);
  return i ? i->name : "type " + std::to_string(static_cast<uint32_t>(t));
}

bool ggml_block(GgmlType t, int64_t* block_elems, int64_t* block_bytes) {
  const TypeInfo* i = type_info(t);
  if (!i) return false;
  *block_elems = i->block_elems;
  *block_bytes = i->block_bytes;
  return true;
}

int64_t GgufTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

GgufFile::~GgufFile() = default;

Result<std::unique_ptr<GgufFile>> GgufFile::open(const std::string& path) {
  INGOT_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> map, MappedFile::open(path));
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->what_ = path;
  f->map_ = std::move(map);
  INGOT_RETURN_IF_ERROR(f->parse_impl(f->map_->data(), f->map_->size()));
  return f;
}

Result<std::unique_ptr<GgufFile>> GgufFile::parse(const uint8_t* data, size_t size, const std::string& what) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->what_ = what;
  INGOT_RETURN_IF_ERROR(f->parse_impl(data, size));
  return f;
}

Status GgufFile::parse_impl(const uint8_t* data, size_t size) {
  Reader r(data, size, what_);
  uint32_t magic = 0;
  INGOT_RETURN_IF_ERROR(r.read(&magic, "the magic"));
  if (std::memcmp(&magic, "GGUF", 4) != 0) return invalid_model(what_, ": not a GGUF file (no 'GGUF' magic)");
  INGOT_RETURN_IF_ERROR(r.read(&version_, "the version"));
  if (version_ != 2 && version_ != 3)
    return unsupported(what_, ": GGUF version ", version_, " (ingot reads versions 2 and 3)");
  uint64_t n_tensors = 0, n_kv = 0;
  INGOT_RETURN_IF_ERROR(r.read(&n_tensors, "the tensor count"));
  INGOT_RETURN_IF_ERROR(r.read(&n_kv, "the metadata count"));
  if (n_tensors > kMaxCount || n_kv > kMaxCount)
    return invalid_model(what_, ": GGUF header claims ", n_tensors, " tensors and ", n_kv, " metadata keys");
  for (uint64_t k = 0; k < n_kv; ++k) {
    std::string key;
    uint32_t t = 0;
    INGOT_RETURN_IF_ERROR(r.read_string(&key, "a metadata key"));
    INGOT_RETURN_IF_ERROR(r.read(&t, "a metadata value type"));
    GgufValue v;
    INGOT_RETURN_IF_ERROR(read_value(r, static_cast<GgufType>(t), &v, what_, key));
    kv_[key] = std::move(v);
  }
  if (const GgufValue* a = find("general.alignment")) {
    if (!integer_type(a->type) || a->i <= 0 || (a->i & (a->i - 1)) != 0 || a->i > (1 << 20))
      return invalid_model(what_, ": general.alignment must be a power of two, got ", a->i);
    alignment_ = static_cast<uint64_t>(a->i);
  }
  for (uint64_t k = 0; k < n_tensors; ++k) {
    GgufTensor t;
    uint32_t n_dims = 0, type = 0;
    INGOT_RETURN_IF_ERROR(r.read_string(&t.name, "a tensor name"));
    INGOT_RETURN_IF_ERROR(r.read(&n_dims, "a tensor's rank"));
    if (n_dims == 0 || n_dims > kMaxDims)
      return invalid_model(what_, ": tensor '", t.name, "' has rank ", n_dims, " (1..", kMaxDims, ")");
    int64_t numel = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t dim = 0;
      INGOT_RETURN_IF_ERROR(r.read(&dim, "a tensor dim"));
      if (dim == 0 || dim > (1ull << 40) || static_cast<uint64_t>(numel) > (1ull << 50) / dim)
        return invalid_model(what_, ": tensor '", t.name, "' has dim ", dim);
      t.dims.push_back(static_cast<int64_t>(dim));
      numel *= static_cast<int64_t>(dim);
    }
    INGOT_RETURN_IF_ERROR(r.read(&type, "a tensor type"));
    INGOT_RETURN_IF_ERROR(r.read(&t.offset, "a tensor offset"));
    t.type = static_cast<GgmlType>(type);
    int64_t be = 0, bb = 0;
    if (!ggml_block(t.type, &be, &bb)) return unsupported(what_, ": tensor '", t.name, "' has ggml type ", type);
    if (t.dims[0] % be != 0)
      return invalid_model(what_, ": tensor '", t.name, "' rows of ", t.dims[0], " are not whole ",
                           ggml_type_name(t.type), " blocks of ", be);
    t.nbytes = static_cast<uint64_t>(numel / be * bb);
    if (by_name_.count(t.name)) return invalid_model(what_, ": tensor '", t.name, "' appears twice");
    by_name_[t.name] = tensors_.size();
    tensors_.push_back(std::move(t));
  }
  const uint64_t data_start = (r.pos() + alignment_ - 1) / alignment_ * alignment_;
  for (GgufTensor& t : tensors_) {
    if (t.offset % alignment_ != 0)
      return invalid_model(what_, ": tensor '", t.name, "' offset ", t.offset, " is not aligned to ", alignment_);
    if (data_start > size || t.offset > size - data_start || t.nbytes > size - data_start - t.offset)
      return invalid_model(what_, ": tensor '", t.name, "' (", t.nbytes, " bytes at ", t.offset,
                           ") lies past the end of the file (", size, " bytes)");
    t.data = data + data_start + t.offset;
  }
  return Status::Ok();
}

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = kv_.find(key);
  return it == kv_.end() ? nullptr : &it->second;
}

const GgufTensor* GgufFile::tensor(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

Result<int64_t> GgufFile::get_int(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return make_status(StatusCode::kNotFound, what_, ": no metadata '", key, "'");
  if (!integer_type(v->type)) return invalid_model(what_, ": metadata '", key, "' is not an integer");
  return v->i;
}

Result<double> GgufFile::get_float(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return make_status(StatusCode::kNotFound, what_, ": no metadata '", key, "'");
  if (v->type == GgufType::kF32 || v->type == GgufType::kF64) return v->f;
  if (integer_type(v->type)) return static_cast<double>(v->i);
  return invalid_model(what_, ": metadata '", key, "' is not a number");
}

Result<std::string> GgufFile::get_string(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return make_status(StatusCode::kNotFound, what_, ": no metadata '", key, "'");
  if (v->type != GgufType::kString) return invalid_model(what_, ": metadata '", key, "' is not a string");
  return v->s;
}

Status dequantize(GgmlType t, const uint8_t* src, int64_t n, float* dst) {
  int64_t be = 0, bb = 0;
  if (!ggml_block(t, &be, &bb)) return unsupported("dequantize: ggml type ", static_cast<uint32_t>(t));
  if (n % be != 0) return invalid_argument("dequantize: ", n, " elements are not whole ", ggml_type_name(t), " blocks");
  const int64_t blocks = n / be;
  switch (t) {
    case GgmlType::kF32: std::memcpy(dst, src, static_cast<size_t>(n) * 4); return Status::Ok();
    case GgmlType::kF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = f16(src + 2 * i);
      return Status::Ok();
    case GgmlType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t b;
        std::memcpy(&b, src + 2 * i, 2);
        dst[i] = bfloat16_bits_to_float(b);
      }
      return Status::Ok();
    case GgmlType::kQ8_0:  // d (f16), 32 x int8
      for (int64_t b = 0; b < blocks; ++b, src += bb, dst += 32) {
        const float d = f16(src);
        for (int j = 0; j < 32; ++j) dst[j] = d * static_cast<float>(static_cast<int8_t>(src[2 + j]));
      }
      return Status::Ok();
    case GgmlType::kQ4_0:  // d (f16), 16 bytes: element j in the low nibble of byte j, j+16 in its high one
    case GgmlType::kQ4_1:  // d, m (f16), the same nibbles, value = q * d + m
      for (int64_t b = 0; b < blocks; ++b, src += bb, dst += 32) {
        const float d = f16(src);
        const bool q41 = t == GgmlType::kQ4_1;
        const float m = q41 ? f16(src + 2) : 0.0f;
        const uint8_t* qs = src + (q41 ? 4 : 2);
        for (int j = 0; j < 16; ++j) {
          const int lo = qs[j] & 0xF, hi = qs[j] >> 4;
          dst[j] = q41 ? lo * d + m : (lo - 8) * d;
          dst[j + 16] = q41 ? hi * d + m : (hi - 8) * d;
        }
      }
      return Status::Ok();
    case GgmlType::kQ5_0:  // d, 32 high bits (u32), 16 bytes of nibbles; value = (q - 16) * d
    case GgmlType::kQ5_1:  // d, m, high bits, nibbles; value = q * d + m
      for (int64_t b = 0; b < blocks; ++b, src += bb, dst += 32) {
        const bool q51 = t == GgmlType::kQ5_1;
        const float d = f16(src);
        const float m = q51 ? f16(src + 2) : 0.0f;
        uint32_t qh;
        std::memcpy(&qh, src + (q51 ? 4 : 2), 4);
        const uint8_t* qs = src + (q51 ? 8 : 6);
        for (int j = 0; j < 16; ++j) {
          const int x0 = (qs[j] & 0xF) | static_cast<int>(((qh >> j) << 4) & 0x10);
          const int x1 = (qs[j] >> 4) | static_cast<int>((qh >> (j + 12)) & 0x10);
          dst[j] = q51 ? x0 * d + m : (x0 - 16) * d;
          dst[j + 16] = q51 ? x1 * d + m : (x1 - 16) * d;
        }
      }
      return Status::Ok();
    case GgmlType::kQ4_K:  // d, dmin (f16), 12 bytes of 6-bit scales/mins, 128 bytes of nibbles
      for (int64_t b = 0; b < blocks; ++b, src += bb) {
        const float d = f16(src), dmin = f16(src + 2);
        const uint8_t* scales = src + 4;
        const uint8_t* q = src + 16;
        for (int c = 0, is = 0; c < 4; ++c, is += 2, q += 32) {
          uint8_t sc, mn;
          ggml_k4_scale_min(is, scales, &sc, &mn);
          const float d1 = d * sc, m1 = dmin * mn;
          ggml_k4_scale_min(is + 1, scales, &sc, &mn);
          const float d2 = d * sc, m2 = dmin * mn;
          for (int l = 0; l < 32; ++l) *dst++ = d1 * (q[l] & 0xF) - m1;
          for (int l = 0; l < 32; ++l) *dst++ = d2 * (q[l] >> 4) - m2;
        }
      }
      return Status::Ok();
    case GgmlType::kQ2_K:  // 16 scale bytes (low nibble scale, high nibble min), 64 bytes of 2-bit q, d, dmin
      for (int64_t b = 0; b < blocks; ++b, src += bb, dst += 256) {
        const uint8_t* sc = src;
        const uint8_t* q = src + 16;
        const float d = f16(src + 80), dmin = f16(src + 82);
        // Element e = 128 half + 32 s + l: bits 2s of q[32 half + l]; sub-block of 16: e / 16.
        for (int e = 0; e < 256; ++e) {
          const int half = e / 128, s = (e / 32) % 4, l = e % 32;
          const float dl = d * static_cast<float>(sc[e / 16] & 0xF), ml = dmin * static_cast<float>(sc[e / 16] >> 4);
          dst[e] = dl * static_cast<float>((q[32 * half + l] >> (2 * s)) & 3) - ml;
        }
      }
      return Status::Ok();
    case GgmlType::kQ3_K:  // hmask (32), 64 bytes of low 2 bits, 12 bytes of 6-bit signed scales, d
      for (int64_t b = 0; b < blocks; ++b, src += bb, dst += 256) {
        const uint8_t* hmask = src;
        const uint8_t* q = src + 32;
        const uint8_t* sc = src + 96;
        const float d = f16(src + 108);
        float dl[16];
        for (int i = 0; i < 16; ++i) {
          const int low = i < 8 ? sc[i] & 0xF : sc[i - 8] >> 4, high = (sc[8 + i % 4] >> (2 * (i / 4))) & 3;
          dl[i] = d * static_cast<float>((low | (high << 4)) - 32);
        }
        // Element e = 128 half + 32 s + l: low bits 2s of q[32 half + l], the high bit (e / 32) of
        // hmask[l]; a clear high bit subtracts 4.
        for (int e = 0; e < 256; ++e) {
          const int half = e / 128, s = (e / 32) % 4, l = e % 32;
          const int lo = (q[32 * half + l] >> (2 * s)) & 3, hi = (hmask[l] >> (e / 32)) & 1;
          dst[e] = dl[e / 16] * static_cast<float>(lo - (hi ? 0 : 4));
        }
      }
      return Status::Ok();
    case GgmlType::kQ5_K:  // d, dmin, 12 bytes of 6-bit scales/mins (as Q4_K), qh (32), 128 bytes of nibbles
      for (int64_t b = 0; b < blocks; ++b, src += bb, dst += 256) {
        const float d = f16(src), dmin = f16(src + 2);
        const uint8_t* scales = src + 4;
        const uint8_t* qh = src + 16;
        const uint8_t* q = src + 48;
        // Element e = 64 c + 32 h + l: nibble h of q[32 c + l], fifth bit (e / 32) of qh[l].
        for (int j = 0; j < 8; ++j) {
          uint8_t sc, mn;
          ggml_k4_scale_min(j, scales, &sc, &mn);
          const float dj = d * sc, mj = dmin * mn;
          for (int l = 0; l < 32; ++l) {
            const int v = ((q[32 * (j / 2) + l] >> (4 * (j % 2))) & 0xF) | (((qh[l] >> j) & 1) << 4);
            dst[32 * j + l] = dj * static_cast<float>(v) - mj;
          }
        }
      }
      return Status::Ok();
    case GgmlType::kIQ4_NL:  // d, 16 bytes of nibbles (low nibbles first) indexing kIq4Levels
      for (int64_t b = 0; b < blocks; ++b, src += bb, dst += 32) {
        const float d = f16(src);
        for (int l = 0; l < 16; ++l) {
          dst[l] = d * static_cast<float>(kIq4Levels[src[2 + l] & 0xF]);
          dst[l + 16] = d * static_cast<float>(kIq4Levels[src[2 + l] >> 4]);
        }
      }
      return Status::Ok();
    case GgmlType::kIQ4_XS:  // d, high scale bits (u16), low scale nibbles (4), 128 bytes of level nibbles
      for (int64_t b = 0; b < blocks; ++b, src += bb, dst += 256) {
        const float d = f16(src);
        uint16_t high;
        std::memcpy(&high, src + 2, 2);
        const uint8_t* low = src + 4;
        const uint8_t* q = src + 8;
        for (int i = 0; i < 8; ++i) {  // sub-block i of 32: nibbles of q[16 i ..), low ones first
          const int scale = (((low[i / 2] >> (4 * (i % 2))) & 0xF) | (((high >> (2 * i)) & 3) << 4)) - 32;
          const float dl = d * static_cast<float>(scale);
          for (int l = 0; l < 16; ++l) {
            dst[32 * i + l] = dl * static_cast<float>(kIq4Levels[q[16 * i + l] & 0xF]);
            dst[32 * i + l + 16] = dl * static_cast<float>(kIq4Levels[q[16 * i + l] >> 4]);
          }
        }
      }
      return Status::Ok();
    case GgmlType::kQ6_K:  // ql (128: low 4 bits), qh (64: high 2 bits), 16 int8 scales, d (f16)
      for (int64_t b = 0; b < blocks; ++b, src += bb) {
        const uint8_t* ql = src;
        const uint8_t* qh = src + 128;
        const auto* sc = reinterpret_cast<const int8_t*>(src + 192);
        const float d = f16(src + 208);
        for (int half = 0; half < 2; ++half, ql += 64, qh += 32, sc += 8, dst += 128) {
          for (int l = 0; l < 32; ++l) {
            const int is = l / 16;
            const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
            const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
            const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
            const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
            dst[l] = d * sc[is] * q1;
            dst[l + 32] = d * sc[is + 2] * q2;
            dst[l + 64] = d * sc[is + 4] * q3;
            dst[l + 96] = d * sc[is + 6] * q4;
          }
        }
      }
      return Status::Ok();
    default:
      return unsupported("dequantize: ggml type ", ggml_type_name(t), " (ingot reads F32, F16, BF16, Q4_0, Q4_1, "
                         "Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL and IQ4_XS)");
  }
}

Result<std::vector<float>> dequantize(const GgufTensor& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  INGOT_RETURN_IF_ERROR(dequantize(t.type, t.data, t.numel(), out.data()));
  return out;
}

}  // namespace ingot::llm
