// Copyright ingot authors. Apache-2.0.
#include "run_command.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iomanip>
#include <iostream>
#include <map>
#include <random>
#include <sstream>

#include "ingot/reference.h"
#include "npy.h"

namespace ingot::tools {

namespace {

struct RunOptions {
  std::string model;
  std::string backend = "cpu";
  std::map<std::string, std::vector<int64_t>> shapes;  // --shapes name:1x3x224x224
  std::map<std::string, std::string> input_files;      // --load-inputs name:file.npy
  std::string save_outputs;                            // --save-outputs DIR
  uint64_t seed = 1;
  int iterations = 1;
};

bool parse_dims(const std::string& text, std::vector<int64_t>& dims) {
  dims.clear();
  if (text.empty()) return true;  // scalar
  std::istringstream ss(text);
  std::string part;
  while (std::getline(ss, part, 'x')) {
    if (part.empty() || part.find_first_not_of("0123456789") != std::string::npos) return false;
    try {
      dims.push_back(std::stoll(part));
    } catch (...) {
      return false;
    }
  }
  return true;
}

// "a:1x3,b:2" → map; error message on malformed text.
bool parse_shape_list(const std::string& text, std::map<std::string, std::vector<int64_t>>& out, std::string& err) {
  std::istringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    auto colon = item.rfind(':');
    if (colon == std::string::npos || colon == 0) {
      err = "malformed shape '" + item + "' (expected name:DIMxDIMx...)";
      return false;
    }
    std::vector<int64_t> dims;
    if (!parse_dims(item.substr(colon + 1), dims)) {
      err = "malformed dims in '" + item + "' (expected positive integers joined by 'x', e.g. 1x3x224x224)";
      return false;
    }
    out[item.substr(0, colon)] = dims;
  }
  return true;
}

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

Result<HostTensor> random_input(const TensorInfo& info, const RunOptions& opt, std::mt19937_64& rng) {
  std::vector<int64_t> shape;
  auto it = opt.shapes.find(info.name);
  if (it != opt.shapes.end()) {
    shape = it->second;
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
      return Status(StatusCode::kInvalidArgument, "input '" + info.name + "' has unknown rank: give --shapes " + info.name + ":...");
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

std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? "," : "") + std::to_string(s[i]);
  return r + "]";
}

void summarize(const HostTensor& t, std::ostream& os) {
  os << "  " << t.name << "  " << data_type_name(t.dtype) << shape_str(t.shape);
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
  os << std::setprecision(6) << "  min " << (finite ? mn : 0) << "  max " << (finite ? mx : 0) << "  mean " << mean
     << "  std " << sd;
  if (nan) os << "  nan " << nan;
  if (inf) os << "  inf " << inf;
  os << "\n";
}

}  // namespace

void run_help() {
  std::cout << "usage: ingot run MODEL.onnx [options]\n\n"
               "Runs a model and prints each output's name, dtype, shape and statistics.\n\n"
               "options:\n"
               "  --backend cpu               backend to run on (cpu: the reference backend)\n"
               "  --shapes name:1x3x224x224   shapes for inputs with open dims (comma-separated list)\n"
               "  --load-inputs name:f.npy    read inputs from .npy files (others are random)\n"
               "  --save-outputs DIR          write each output to DIR/<name>.npy\n"
               "  --seed N                    seed for random inputs (default 1)\n"
               "  --iterations N              run N times and report the mean wall time\n";
}

int run_command(const std::vector<std::string>& args) {
  RunOptions opt;
  std::string err;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](std::string& out) {
      if (i + 1 >= args.size()) {
        std::cerr << "ingot run: " << a << " needs a value\n";
        return false;
      }
      out = args[++i];
      return true;
    };
    std::string v;
    if (a == "-h" || a == "--help") {
      run_help();
      return 0;
    } else if (a == "--backend") {
      if (!value(opt.backend)) return 2;
    } else if (a == "--shapes") {
      if (!value(v)) return 2;
      if (!parse_shape_list(v, opt.shapes, err)) {
        std::cerr << "ingot run: --shapes: " << err << "\n";
        return 2;
      }
    } else if (a == "--load-inputs") {
      if (!value(v)) return 2;
      if (!parse_pairs(v, opt.input_files, err)) {
        std::cerr << "ingot run: --load-inputs: " << err << "\n";
        return 2;
      }
    } else if (a == "--save-outputs") {
      if (!value(opt.save_outputs)) return 2;
    } else if (a == "--seed" || a == "--iterations") {
      if (!value(v)) return 2;
      try {
        long long n = std::stoll(v);
        if (n < 0 || (a == "--iterations" && n < 1)) throw std::out_of_range("");
        if (a == "--seed") opt.seed = static_cast<uint64_t>(n);
        else opt.iterations = static_cast<int>(n);
      } catch (...) {
        std::cerr << "ingot run: " << a << " needs a positive integer, got '" << v << "'\n";
        return 2;
      }
    } else if (!a.empty() && a[0] == '-') {
      std::cerr << "ingot run: unknown option '" << a << "' (see ingot run --help)\n";
      return 2;
    } else if (opt.model.empty()) {
      opt.model = a;
    } else {
      std::cerr << "ingot run: unexpected argument '" << a << "'\n";
      return 2;
    }
  }
  if (opt.model.empty()) {
    std::cerr << "ingot run: no model given (see ingot run --help)\n";
    return 2;
  }
  if (opt.backend != "cpu") {
    std::cerr << "ingot run: backend '" << opt.backend << "' is not available in this build (available: cpu)\n";
    return 2;
  }
  auto model = ReferenceModel::load(opt.model);
  if (!model.ok()) {
    std::cerr << "ingot run: " << model.status().to_string() << "\n";
    return 1;
  }
  for (const auto& [name, file] : opt.input_files) {
    bool known = false;
    for (const auto& in : (*model)->inputs()) known |= in.name == name;
    if (!known) {
      std::cerr << "ingot run: --load-inputs names '" << name << "', which is not an input of the model\n";
      return 2;
    }
  }
  for (const auto& [name, dims] : opt.shapes) {
    bool known = false;
    for (const auto& in : (*model)->inputs()) known |= in.name == name;
    if (!known) {
      std::cerr << "ingot run: --shapes names '" << name << "', which is not an input of the model\n";
      return 2;
    }
  }
  std::mt19937_64 rng(opt.seed);
  std::vector<HostTensor> inputs;
  std::cout << "model " << opt.model << " (opset " << (*model)->opset() << ", " << (*model)->num_nodes()
            << " nodes), backend " << opt.backend << "\ninputs:\n";
  for (const TensorInfo& info : (*model)->inputs()) {
    auto f = opt.input_files.find(info.name);
    Result<HostTensor> t = f != opt.input_files.end() ? load_npy(f->second) : random_input(info, opt, rng);
    if (!t.ok()) {
      std::cerr << "ingot run: input '" << info.name << "': " << t.status().message() << "\n";
      return 2;
    }
    t->name = info.name;
    summarize(*t, std::cout);
    inputs.push_back(std::move(t).value());
  }
  Result<std::vector<HostTensor>> outs = Status(StatusCode::kInternal, "not run");
  auto t0 = std::chrono::steady_clock::now();
  for (int it = 0; it < opt.iterations; ++it) {
    outs = (*model)->run(inputs);
    if (!outs.ok()) {
      std::cerr << "ingot run: " << outs.status().to_string() << "\n";
      return 1;
    }
  }
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / opt.iterations;
  std::cout << "outputs:\n";
  for (const HostTensor& t : *outs) summarize(t, std::cout);
  std::cout << "wall time per run: " << std::fixed << std::setprecision(3) << ms << " ms (" << opt.iterations
            << " run" << (opt.iterations > 1 ? "s" : "") << ")\n";
  if (!opt.save_outputs.empty()) {
    for (const HostTensor& t : *outs) {
      std::string name = t.name;
      std::replace(name.begin(), name.end(), '/', '_');
      Status s = save_npy(opt.save_outputs + "/" + name + ".npy", t);
      if (!s.ok()) {
        std::cerr << "ingot run: " << s.to_string() << "\n";
        return 1;
      }
    }
  }
  return 0;
}

}  // namespace ingot::tools
