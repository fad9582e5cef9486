// Copyright ingot authors. Apache-2.0.
#include "onnx/tensor_proto.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

namespace ingot::onnx {

namespace {

struct MappedFile {
  void* addr = nullptr;
  size_t size = 0;
  ~MappedFile() {
    if (addr && addr != MAP_FAILED) munmap(addr, size);
  }
};

Result<std::shared_ptr<MappedFile>> map_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return make_status(StatusCode::kNotFound, "cannot open external data file '", path, "'");
  struct stat st;
  if (fstat(fd, &st) != 0) {
    ::close(fd);
    return make_status(StatusCode::kIoError, "cannot stat '", path, "'");
  }
  auto m = std::make_shared<MappedFile>();
  m->size = static_cast<size_t>(st.st_size);
  if (m->size > 0) {
    m->addr = mmap(nullptr, m->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m->addr == MAP_FAILED) {
      ::close(fd);
      m->addr = nullptr;
      return make_status(StatusCode::kIoError, "cannot map '", path, "'");
    }
  }
  ::close(fd);
  return m;
}

// Elements stored in int32_data for these types (ONNX packs small types there).
bool uses_int32_data(DataType t) {
  switch (t) {
    case DataType::kInt32: case DataType::kInt16: case DataType::kInt8: case DataType::kUInt16:
    case DataType::kUInt8: case DataType::kBool: case DataType::kFloat16: case DataType::kBFloat16:
    case DataType::kFloat8E4M3FN: case DataType::kFloat8E4M3FNUZ: case DataType::kFloat8E5M2:
    case DataType::kFloat8E5M2FNUZ: case DataType::kFloat8E8M0: case DataType::kUInt4:
    case DataType::kInt4: case DataType::kFloat4E2M1: case DataType::kUInt2: case DataType::kInt2:
      return true;
    default:
      return false;
  }
}

Result<Tensor> from_external(const ::onnx::TensorProto& p, DataType dtype, Shape64 shape,
                             const TensorSource& src) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& kv : p.external_data()) {
    if (kv.key() == "location") location = kv.value();
    else if (kv.key() == "offset") offset = std::strtoll(kv.value().c_str(), nullptr, 10);
    else if (kv.key() == "length") length = std::strtoll(kv.value().c_str(), nullptr, 10);
  }
  const std::string& name = p.name();
  if (location.empty()) return invalid_model("tensor '", name, "': external data without a location");
  if (src.base_dir.empty())
    return invalid_model("tensor '", name, "': external data '", location,
                         "' but the model was not loaded from a file");
  if (location.find("..") != std::string::npos || location[0] == '/')
    return invalid_model("tensor '", name, "': external data location '", location,
                         "' must be a relative path inside the model's folder");
  std::string path = src.base_dir + "/" + location;
  INGOT_ASSIGN_OR_RETURN(auto mapped, map_file(path));
  size_t need = storage_bytes(dtype, shape_numel(shape));
  if (length < 0) length = static_cast<int64_t>(mapped->size) - offset;
  if (offset < 0 || static_cast<size_t>(offset) > mapped->size ||
      static_cast<size_t>(offset + length) > mapped->size)
    return invalid_model("tensor '", name, "': external data [", offset, ", +", length, ") is outside '", path,
                         "' (", mapped->size, " bytes)");
  if (static_cast<size_t>(length) != need)
    return invalid_model("tensor '", name, "': external data holds ", length, " bytes but ",
                         data_type_name(dtype), shape_to_string(shape), " needs ", need);
  if (src.storage) src.storage->push_back(mapped);
  const uint8_t* base = static_cast<const uint8_t*>(mapped->addr) + offset;
  if (reinterpret_cast<uintptr_t>(base) % 8 == 0 || need == 0)
    return Tensor::borrow(dtype, std::move(shape), base, mapped);
  INGOT_ASSIGN_OR_RETURN(Tensor t, Tensor::zeros(dtype, std::move(shape)));
  std::memcpy(t.mutable_raw(), base, need);
  return t;
}

}  // namespace

Result<Tensor> tensor_from_proto(const ::onnx::TensorProto& p, const TensorSource& src) {
  const std::string& name = p.name();
  if (!is_valid_data_type(p.data_type()))
    return invalid_model("tensor '", name, "': unknown data type ", p.data_type());
  DataType dtype = static_cast<DataType>(p.data_type());
  if (dtype == DataType::kComplex64 || dtype == DataType::kComplex128)
    return unsupported("tensor '", name, "': complex data types are not supported");
  Shape64 shape;
  long double total = 1;
  for (int64_t d : p.dims()) {
    if (d < 0) return invalid_model("tensor '", name, "': negative dim ", d);
    shape.push_back(d);
    total *= d;
  }
  if (total > static_cast<long double>(1LL << 46))
    return invalid_model("tensor '", name, "': ", shape_to_string(shape), " is implausibly large");
  int64_t numel = shape_numel(shape);

  if (p.has_data_location() && p.data_location() == ::onnx::TensorProto::EXTERNAL)
    return from_external(p, dtype, std::move(shape), src);

  if (dtype == DataType::kString) {
    if (p.string_data_size() != numel)
      return invalid_model("tensor '", name, "': ", p.string_data_size(), " strings for shape ",
                           shape_to_string(shape));
    std::vector<std::string> v(p.string_data().begin(), p.string_data().end());
    return Tensor::from_strings(std::move(shape), std::move(v));
  }
  size_t need = storage_bytes(dtype, numel);
  if (p.has_raw_data()) {
    const std::string& raw = p.raw_data();
    if (raw.size() != need)
      return invalid_model("tensor '", name, "': raw_data has ", raw.size(), " bytes but ", data_type_name(dtype),
                           shape_to_string(shape), " needs ", need);
    if (src.owner && reinterpret_cast<uintptr_t>(raw.data()) % 8 == 0)
      return Tensor::borrow(dtype, std::move(shape), raw.data(), src.owner);
    INGOT_ASSIGN_OR_RETURN(Tensor t, Tensor::zeros(dtype, std::move(shape)));
    if (need) std::memcpy(t.mutable_raw(), raw.data(), need);
    return t;
  }

  auto count_error = [&](int64_t have) {
    return invalid_model("tensor '", name, "': holds ", have, " values but ", data_type_name(dtype),
                         shape_to_string(shape), " needs ", numel);
  };
  // Check the element count against the data actually present before allocating, so a
  // malformed file cannot make us allocate more than it holds.
  int64_t have = 0;
  if (dtype == DataType::kFloat32) have = p.float_data_size();
  else if (dtype == DataType::kFloat64) have = p.double_data_size();
  else if (dtype == DataType::kInt64) have = p.int64_data_size();
  else if (dtype == DataType::kUInt32 || dtype == DataType::kUInt64) have = p.uint64_data_size();
  else if (uses_int32_data(dtype)) have = p.int32_data_size();
  bool packed_ok = is_sub_byte(dtype) && have == static_cast<int64_t>(need);
  if (have != numel && !packed_ok) return count_error(have);
  INGOT_ASSIGN_OR_RETURN(Tensor t, Tensor::zeros(dtype, shape));
  if (dtype == DataType::kFloat32) {
    if (p.float_data_size() != numel) return count_error(p.float_data_size());
    if (need) std::memcpy(t.mutable_raw(), p.float_data().data(), need);
  } else if (dtype == DataType::kFloat64) {
    if (p.double_data_size() != numel) return count_error(p.double_data_size());
    if (need) std::memcpy(t.mutable_raw(), p.double_data().data(), need);
  } else if (dtype == DataType::kInt64) {
    if (p.int64_data_size() != numel) return count_error(p.int64_data_size());
    if (need) std::memcpy(t.mutable_raw(), p.int64_data().data(), need);
  } else if (dtype == DataType::kUInt32 || dtype == DataType::kUInt64) {
    if (p.uint64_data_size() != numel) return count_error(p.uint64_data_size());
    for (int64_t i = 0; i < numel; ++i) t.set_i64(i, static_cast<int64_t>(p.uint64_data(i)));
  } else if (uses_int32_data(dtype)) {
    int bits = data_type_bits(dtype);
    if (bits < 8) {
      // Sub-byte types: ONNX packs two (or four) elements per int32_data entry.
      int64_t expect = static_cast<int64_t>(need);
      if (p.int32_data_size() != expect && p.int32_data_size() != numel) return count_error(p.int32_data_size());
      if (p.int32_data_size() == expect) {
        for (int64_t i = 0; i < expect; ++i) t.mutable_data<uint8_t>()[i] = static_cast<uint8_t>(p.int32_data(i));
      } else {
        for (int64_t i = 0; i < numel; ++i) t.set_i64(i, p.int32_data(i));
      }
    } else {
      if (p.int32_data_size() != numel) return count_error(p.int32_data_size());
      for (int64_t i = 0; i < numel; ++i) {
        uint32_t bitsv = static_cast<uint32_t>(p.int32_data(i));
        switch (bits) {
          case 8: t.mutable_data<uint8_t>()[i] = static_cast<uint8_t>(bitsv); break;
          case 16: t.mutable_data<uint16_t>()[i] = static_cast<uint16_t>(bitsv); break;
          default: t.mutable_data<int32_t>()[i] = static_cast<int32_t>(bitsv); break;
        }
      }
    }
  } else if (numel != 0) {
    return invalid_model("tensor '", name, "': no data for ", data_type_name(dtype), shape_to_string(shape));
  }
  return t;
}

}  // namespace ingot::onnx
