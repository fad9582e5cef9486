// Loads a model through the installed public API and runs it once.
#include <cstdio>

#include <ingot/reference.h>
#include <ingot/version.h>

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  auto model = ingot::ReferenceModel::load(argv[1]);
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", model.status().to_string().c_str());
    return 1;
  }
  std::vector<ingot::HostTensor> inputs;
  for (const auto& info : (*model)->inputs()) {
    std::vector<int64_t> shape;
    for (int64_t d : info.shape) shape.push_back(d < 0 ? 2 : d);
    auto t = ingot::HostTensor::zeros(info.name, info.dtype, shape);
    if (!t.ok()) return 1;
    for (int64_t i = 0; i < t->numel(); ++i) t->set_element(i, 0.25 * static_cast<double>(i % 7));
    inputs.push_back(std::move(t).value());
  }
  auto out = (*model)->run(inputs);
  if (!out.ok()) {
    std::fprintf(stderr, "%s\n", out.status().to_string().c_str());
    return 1;
  }
  std::printf("ingot %s: %zu outputs, first has %lld elements\n", ingot::version(), out->size(),
              static_cast<long long>((*out)[0].numel()));
  return 0;
}
