// Copyright ingot authors. Apache-2.0.
#include "file_io.h"

#include <fstream>
#include <iterator>

namespace ingot::tools {

Result<std::string> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status(StatusCode::kNotFound, "cannot open '" + path + "'");
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad()) return Status(StatusCode::kIoError, "cannot read '" + path + "'");
  return bytes;
}

Status write_file(const std::string& path, std::string_view bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  f.close();
  if (!f) return Status(StatusCode::kIoError, "cannot write '" + path + "'");
  return Status::Ok();
}

}  // namespace ingot::tools
