// Copyright ingot authors. Apache-2.0.
#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace ingot {

Result<std::unique_ptr<MappedFile>> MappedFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return make_status(StatusCode::kNotFound, "cannot open '", path, "'");
  struct stat st;
  if (fstat(fd, &st) != 0) {
    ::close(fd);
    return make_status(StatusCode::kIoError, "cannot stat '", path, "'");
  }
  std::unique_ptr<MappedFile> f(new MappedFile());
  f->size_ = static_cast<size_t>(st.st_size);
  if (f->size_) {
    void* m = mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
      ::close(fd);
      return make_status(StatusCode::kIoError, "cannot map '", path, "'");
    }
    f->map_ = m;
  }
  ::close(fd);
  return f;
}

MappedFile::~MappedFile() {
  if (map_) munmap(map_, size_);
}

}  // namespace ingot
