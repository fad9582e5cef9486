// Copyright ingot authors. Apache-2.0.
//
// `ingot run --check-finite`: where do NaN and Inf first appear? Like Polygraphy's --validate
// (outputs) with every layer marked: one extra run with a tensor listener records, per step, the
// outputs holding non-finite values and which rows of their leading (batch) dim hold them, so a
// wrong engine names its first bad step without a reference run.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <map>
#include <string>
#include <vector>

#include "ingot/engine.h"
#include "ingot/reference.h"

namespace ingot::tools {

/// Non-finite values of one float tensor: NaN and Inf counts, and the indices of its leading dim
/// that hold any (the batch rows; empty for scalars).
struct NonFinite {
  int64_t nan = 0, inf = 0, numel = 0;
  int64_t rows = 0;       ///< size of the leading dim (0 for scalars)
  double max_abs = 0.0;   ///< largest |x| of the finite values (fp16 overflows past 65504)
  std::vector<int64_t> bad_rows;
  bool any() const { return nan + inf > 0; }
};

/// Scans a tensor; integer, bool and string tensors are always finite.
NonFinite scan_non_finite(const HostTensor& t);
/// The same over `data` (dtype, row-major `shape`) where it lies; null data scans as empty.
NonFinite scan_non_finite(DataType dtype, const std::vector<int64_t>& shape, const void* data);

/// "0-3, 7, 9-63" for sorted indices.
std::string index_ranges(const std::vector<int64_t>& sorted);

/// Records the steps whose outputs hold non-finite values (host copies are scanned in the callback
/// and dropped: memory stays at one tensor).
class FiniteScan : public TensorListener {
 public:
  struct Hit {
    int step;
    std::string tensor;
    std::vector<int64_t> dims;
    NonFinite found;
  };
  void on_tensor(int layer_index, const char* tensor_name, DataType dtype, const std::vector<int64_t>& dims,
                 const void* data) noexcept override;
  const std::vector<Hit>& hits() const { return hits_; }
  /// Largest finite |x| of every float tensor seen, by name: a first bad step whose inputs reach
  /// fp16's 65504 overflowed; one whose inputs are small computed garbage.
  const std::map<std::string, double>& max_abs() const { return max_abs_; }
  int tensors_seen() const { return seen_; }
  bool incomplete() const { return incomplete_; }

 private:
  std::vector<Hit> hits_;
  std::map<std::string, double> max_abs_;
  int seen_ = 0;
  bool incomplete_ = false;
};

/// The report: the first `max_steps` steps with non-finite outputs (op, tactic, counts, rows) or
/// that every step's outputs were finite.
void print_finite_report(const FiniteScan& scan, const Engine& engine, int max_steps, std::ostream& os);

}  // namespace ingot::tools
