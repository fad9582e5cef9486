// Copyright ingot authors. Apache-2.0.
#include "npy.h"

#include <cstring>
#include <fstream>
#include <sstream>

#include "file_io.h"

namespace ingot::tools {

namespace {
struct NpyType {
  const char* descr;
  DataType dtype;
  size_t size;
};
constexpr NpyType kTypes[] = {
    {"<f4", DataType::kFloat32, 4}, {"<f8", DataType::kFloat64, 8}, {"<f2", DataType::kFloat16, 2},
    {"|i1", DataType::kInt8, 1},    {"|u1", DataType::kUInt8, 1},   {"<i2", DataType::kInt16, 2},
    {"<u2", DataType::kUInt16, 2},  {"<i4", DataType::kInt32, 4},   {"<u4", DataType::kUInt32, 4},
    {"<i8", DataType::kInt64, 8},   {"<u8", DataType::kUInt64, 8},  {"|b1", DataType::kBool, 1},
};

Status error(const std::string& path, const std::string& what) {
  return Status(StatusCode::kInvalidArgument, path + ": not a supported .npy file: " + what);
}

std::string dict_value(const std::string& header, const std::string& key) {
  auto k = header.find("'" + key + "'");
  if (k == std::string::npos) return "";
  auto colon = header.find(':', k);
  if (colon == std::string::npos) return "";
  size_t p = colon + 1;
  while (p < header.size() && header[p] == ' ') ++p;
  if (p >= header.size()) return "";
  if (header[p] == '\'') {
    auto e = header.find('\'', p + 1);
    return e == std::string::npos ? "" : header.substr(p + 1, e - p - 1);
  }
  if (header[p] == '(') {
    auto e = header.find(')', p);
    return e == std::string::npos ? "" : header.substr(p, e - p + 1);
  }
  auto e = header.find_first_of(",}", p);
  return header.substr(p, e - p);
}
}  // namespace

Result<HostTensor> load_npy(const std::string& path) {
  auto read = read_file(path);
  if (!read.ok()) return read.status();
  const std::string& all = *read;
  if (all.size() < 10 || all.compare(0, 6, "\x93NUMPY") != 0) return error(path, "bad magic");
  int major = static_cast<uint8_t>(all[6]);
  size_t header_len, start;
  if (major == 1) {
    header_len = static_cast<uint8_t>(all[8]) | static_cast<uint8_t>(all[9]) << 8;
    start = 10;
  } else if (major == 2 || major == 3) {
    if (all.size() < 12) return error(path, "truncated header");
    uint32_t l;
    std::memcpy(&l, all.data() + 8, 4);
    header_len = l;
    start = 12;
  } else {
    return error(path, "unknown version " + std::to_string(major));
  }
  if (start + header_len > all.size()) return error(path, "truncated header");
  std::string header = all.substr(start, header_len);
  std::string descr = dict_value(header, "descr");
  if (dict_value(header, "fortran_order").find("True") != std::string::npos)
    return error(path, "Fortran order is not supported");
  const NpyType* type = nullptr;
  for (const auto& t : kTypes)
    if (descr == t.descr || (descr.size() == 3 && std::string(t.descr).substr(1) == descr.substr(1) && descr[0] == '=')) type = &t;
  if (!type) return error(path, "dtype '" + descr + "' is not supported");
  HostTensor t;
  t.dtype = type->dtype;
  std::string shape = dict_value(header, "shape");
  std::istringstream ss(shape.size() > 2 ? shape.substr(1, shape.size() - 2) : "");
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.find_first_not_of(' ') == std::string::npos) continue;
    try {
      long long d = std::stoll(item);
      if (d < 0) return error(path, "negative dim");
      t.shape.push_back(d);
    } catch (...) {
      return error(path, "bad shape '" + shape + "'");
    }
  }
  size_t bytes = static_cast<size_t>(t.numel()) * type->size;
  size_t data_start = start + header_len;
  if (all.size() - data_start != bytes)
    return error(path, "holds " + std::to_string(all.size() - data_start) + " data bytes, shape needs " + std::to_string(bytes));
  t.data.assign(all.begin() + static_cast<std::ptrdiff_t>(data_start), all.end());
  return t;
}

Status save_npy(const std::string& path, const HostTensor& t) {
  const NpyType* type = nullptr;
  for (const auto& k : kTypes)
    if (k.dtype == t.dtype) type = &k;
  if (!type) return Status(StatusCode::kUnsupported, std::string("cannot write ") + data_type_name(t.dtype) + " to .npy");
  std::string shape = "(";
  for (size_t i = 0; i < t.shape.size(); ++i) shape += std::to_string(t.shape[i]) + (t.shape.size() == 1 ? "," : i + 1 < t.shape.size() ? ", " : "");
  shape += ")";
  std::string header = std::string("{'descr': '") + type->descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::ofstream f(path, std::ios::binary);
  if (!f) return Status(StatusCode::kIoError, "cannot write '" + path + "'");
  f.write("\x93NUMPY\x01\x00", 8);
  uint16_t len = static_cast<uint16_t>(header.size());
  f.write(reinterpret_cast<const char*>(&len), 2);
  f.write(header.data(), static_cast<std::streamsize>(header.size()));
  f.write(reinterpret_cast<const char*>(t.data.data()), static_cast<std::streamsize>(t.data.size()));
  return f ? Status::Ok() : Status(StatusCode::kIoError, "error writing '" + path + "'");
}

}  // namespace ingot::tools
