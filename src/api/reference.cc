// Copyright ingot authors. Apache-2.0.
#include "ingot/reference.h"

#include <cstring>
#include <map>

#include "api/host_tensor.h"
#include "backend/cpu/executor.h"
#include "core/tensor.h"
#include "onnx/importer.h"

namespace ingot {

int64_t HostTensor::numel() const { return shape_numel(shape); }

double HostTensor::element(int64_t i) const {
  Tensor t = Tensor::borrow(dtype, shape, data.data(), nullptr);
  return t.get_f64(i);
}

void HostTensor::set_element(int64_t i, double v) {
  Tensor t = Tensor::borrow(dtype, shape, data.data(), nullptr);
  t.set_f64(i, v);
}

Result<HostTensor> HostTensor::zeros(std::string name, DataType dtype, std::vector<int64_t> shape) {
  INGOT_ASSIGN_OR_RETURN(Tensor t, Tensor::zeros(dtype, shape));
  HostTensor h;
  h.name = std::move(name);
  h.dtype = dtype;
  h.shape = std::move(shape);
  if (dtype == DataType::kString)
    h.strings.resize(static_cast<size_t>(t.numel()));
  else
    h.data.assign(t.nbytes(), 0);
  return h;
}

struct ReferenceModel::Impl {
  onnx::Model model;
};

ReferenceModel::ReferenceModel() : impl_(std::make_unique<Impl>()) {}
ReferenceModel::~ReferenceModel() = default;

namespace {
TensorInfo info_of(const ir::Value& v) {
  TensorInfo i;
  i.name = v.name();
  i.dtype = v.dtype();
  i.rank_known = v.shape().rank_known();
  for (const ir::Dim& d : v.shape().dims()) {
    i.shape.push_back(d.is_known() ? d.value() : -1);
    i.dim_names.push_back(d.is_symbol() ? d.symbol_name() : "");
  }
  return i;
}

Result<std::unique_ptr<ReferenceModel>> finish(std::unique_ptr<ReferenceModel> m) { return m; }
}  // namespace

Result<std::unique_ptr<ReferenceModel>> ReferenceModel::load(const std::string& onnx_path) {
  INGOT_ASSIGN_OR_RETURN(onnx::Model model, onnx::import_model_file(onnx_path));
  std::unique_ptr<ReferenceModel> m(new ReferenceModel());
  m->impl_->model = std::move(model);
  for (const ir::Value* v : m->impl_->model.graph->inputs()) m->inputs_.push_back(info_of(*v));
  for (const ir::Value* v : m->impl_->model.graph->outputs()) m->outputs_.push_back(info_of(*v));
  return finish(std::move(m));
}

Result<std::unique_ptr<ReferenceModel>> ReferenceModel::load_bytes(const void* data, size_t size) {
  INGOT_ASSIGN_OR_RETURN(onnx::Model model, onnx::import_model_bytes(data, size));
  std::unique_ptr<ReferenceModel> m(new ReferenceModel());
  m->impl_->model = std::move(model);
  for (const ir::Value* v : m->impl_->model.graph->inputs()) m->inputs_.push_back(info_of(*v));
  for (const ir::Value* v : m->impl_->model.graph->outputs()) m->outputs_.push_back(info_of(*v));
  return finish(std::move(m));
}

int64_t ReferenceModel::opset() const { return impl_->model.graph->opset(""); }
size_t ReferenceModel::num_nodes() const { return impl_->model.graph->nodes().size(); }

namespace {
HostTensor to_host(const std::string& name, const Tensor& t) {
  HostTensor h;
  h.name = name;
  h.dtype = t.dtype();
  h.shape = t.shape();
  if (h.dtype == DataType::kString) {
    h.strings = t.strings();
  } else if (t.nbytes()) {
    const auto* p = static_cast<const uint8_t*>(t.raw());
    h.data.assign(p, p + t.nbytes());
  }
  return h;
}
}  // namespace

Result<Tensor> host_to_tensor(const HostTensor& h) {
  for (int64_t d : h.shape)
    if (d < 0) return invalid_argument("input '", h.name, "' has a negative dim");
  INGOT_ASSIGN_OR_RETURN(Tensor t, Tensor::zeros(h.dtype, h.shape));
  if (h.dtype == DataType::kString) {
    if (static_cast<int64_t>(h.strings.size()) != t.numel())
      return invalid_argument("input '", h.name, "' has ", h.strings.size(), " strings for ", t.numel(), " elements");
    t.mutable_strings() = h.strings;
  } else {
    if (h.data.size() != t.nbytes())
      return invalid_argument("input '", h.name, "' has ", h.data.size(), " bytes but ", data_type_name(h.dtype),
                              shape_to_string(h.shape), " needs ", t.nbytes());
    if (t.nbytes()) std::memcpy(t.mutable_raw(), h.data.data(), t.nbytes());
  }
  return t;
}

Result<std::vector<HostTensor>> ReferenceModel::run(const std::vector<HostTensor>& inputs) const {
  return execute(inputs, false);
}

Result<std::vector<HostTensor>> ReferenceModel::run_all(const std::vector<HostTensor>& inputs) const {
  return execute(inputs, true);
}

Result<std::vector<HostTensor>> ReferenceModel::execute(const std::vector<HostTensor>& inputs, bool keep_all) const {
  std::map<std::string, Tensor> feeds;
  for (const HostTensor& h : inputs) {
    INGOT_ASSIGN_OR_RETURN(feeds[h.name], host_to_tensor(h));
  }
  cpu::ExecutorOptions options;
  options.keep_intermediates = keep_all;
  cpu::Executor exec(options);
  INGOT_ASSIGN_OR_RETURN(std::vector<Tensor> outs, exec.run(*impl_->model.graph, feeds));
  std::vector<HostTensor> result;
  if (!keep_all) {
    for (size_t i = 0; i < outs.size(); ++i) result.push_back(to_host(outputs_[i].name, outs[i]));
    return result;
  }
  // intermediates() is keyed by name; walk the nodes to hand values back in execution order.
  const auto& all = exec.intermediates();
  for (const auto& node : impl_->model.graph->nodes()) {
    for (const ir::Value* v : node->outputs()) {
      if (!v) continue;
      auto it = all.find(v->name());
      if (it != all.end() && it->second.defined()) result.push_back(to_host(v->name(), it->second));
    }
  }
  return result;
}

}  // namespace ingot
