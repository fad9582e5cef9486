// Copyright ingot authors. Apache-2.0.
#include <cstdlib>
#include <cstring>

#include "backend/device.h"

namespace ingot::backend {

namespace {
class HostDevice : public Device {
 public:
  bool is_host() const override { return true; }
  Result<void*> allocate(size_t bytes) override {
    size_t n = ((bytes + 255) / 256) * 256;
    void* p = std::aligned_alloc(256, n ? n : 256);
    if (!p) return make_status(StatusCode::kOutOfMemory, "cannot allocate ", bytes, " bytes of host memory");
    return p;
  }
  void release(void* p) override { std::free(p); }
  Status copy_to_device(void* dst, const void* src, size_t n, void*) override { return copy(dst, src, n); }
  Status copy_to_host(void* dst, const void* src, size_t n, void*) override { return copy(dst, src, n); }
  Status copy_on_device(void* dst, const void* src, size_t n, void*) override { return copy(dst, src, n); }
  Status fill(void* dst, int byte, size_t n, void*) override {
    if (n) std::memset(dst, byte, n);
    return Status::Ok();
  }
  Status synchronize(void*) override { return Status::Ok(); }
  std::string arch() const override { return ""; }
  std::map<std::string, std::string> library_versions() const override { return {}; }

 private:
  static Status copy(void* dst, const void* src, size_t n) {
    if (n && dst != src) std::memmove(dst, src, n);
    return Status::Ok();
  }
};
}  // namespace

Device& host_device() {
  static HostDevice d;
  return d;
}

}  // namespace ingot::backend
