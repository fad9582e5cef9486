// Copyright ingot authors. Apache-2.0.
#include "inputs.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <ostream>
#include <sstream>

namespace ingot::tools {

bool parse_pairs(const std::string& text, std::map<std::string, std::string>& out, std::string& err) {
  std::istringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    auto colon = item.find(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == item.size()) {
      err = "malformed '" + item + "' (expected name:file.npy)";
      return false;
    }
    out[item.substr(0, colon)] = item.substr(colon + 1);
  }
  return true;
}

Result<HostTensor> random_input(const TensorInfo& info, const ShapeOptions& shapes, std::mt19937_64& rng) {
  std::vector<int64_t> shape;
  if (shapes.run_dims(info.name, shape)) {
    if (info.rank_known && shape.size() != info.shape.size())
      return Status(StatusCode::kInvalidArgument, "--shapes gives input '" + info.name + "' rank " +
                                                      std::to_string(shape.size()) + ", the model declares rank " +
                                                      std::to_string(info.shape.size()));
    for (size_t i = 0; i < shape.size() && info.rank_known; ++i)
      if (info.shape[i] >= 0 && info.shape[i] != shape[i])
        return Status(StatusCode::kInvalidArgument, "--shapes gives input '" + info.name + "' dim " + std::to_string(i) +
                                                        " = " + std::to_string(shape[i]) + ", the model fixes it to " +
                                                        std::to_string(info.shape[i]));
  } else {
    if (!info.rank_known)
      return Status(StatusCode::kInvalidArgument,
                    "input '" + info.name + "' has unknown rank: give --shapes " + info.name + ":...");
    for (int64_t d : info.shape) shape.push_back(d >= 0 ? d : 1);  // open dims default to 1
  }
  auto t = HostTensor::zeros(info.name, info.dtype, shape);
  if (!t.ok()) return t.status();
  HostTensor h = std::move(t).value();
  std::uniform_real_distribution<double> uni(-1.0, 1.0);
  std::uniform_int_distribution<int> ints(0, 9);
  for (int64_t i = 0; i < h.numel(); ++i) {
    switch (h.dtype) {
      case DataType::kString: h.strings[i] = "s" + std::to_string(ints(rng)); break;
      case DataType::kBool: h.set_element(i, ints(rng) & 1); break;
      case DataType::kFloat32: case DataType::kFloat64: case DataType::kFloat16: case DataType::kBFloat16:
        h.set_element(i, uni(rng));
        break;
      default: h.set_element(i, ints(rng)); break;
    }
  }
  return h;
}

void summarize(const HostTensor& t, std::ostream& os) {
  os << "  " << t.name << "  " << data_type_name(t.dtype) << dims_to_string(t.shape);
  if (t.dtype == DataType::kString) {
    os << "  (" << t.strings.size() << " strings)\n";
    return;
  }
  int64_t n = t.numel(), nan = 0, inf = 0;
  double mn = INFINITY, mx = -INFINITY, sum = 0, sq = 0;
  for (int64_t i = 0; i < n; ++i) {
    double v = t.element(i);
    if (std::isnan(v)) { ++nan; continue; }
    if (std::isinf(v)) { ++inf; continue; }
    mn = std::min(mn, v);
    mx = std::max(mx, v);
    sum += v;
    sq += v * v;
  }
  int64_t finite = n - nan - inf;
  double mean = finite ? sum / finite : 0, sd = finite ? std::sqrt(std::max(0.0, sq / finite - mean * mean)) : 0;
  std::ios::fmtflags flags = os.flags();
  std::streamsize prec = os.precision();
  os << std::setprecision(6) << "  min " << (finite ? mn : 0) << "  max " << (finite ? mx : 0) << "  mean " << mean
     << "  std " << sd;
  if (nan) os << "  nan " << nan;
  if (inf) os << "  inf " << inf;
  os << "\n";
  os.flags(flags);
  os.precision(prec);
}

}  // namespace ingot::tools
