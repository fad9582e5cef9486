// Copyright ingot authors. Apache-2.0.
#include "ir/attribute.h"

namespace ingot::ir {

const char* attr_type_name(AttrType t) {
  switch (t) {
    case AttrType::kFloat: return "float";
    case AttrType::kInt: return "int";
    case AttrType::kString: return "string";
    case AttrType::kTensor: return "tensor";
    case AttrType::kGraph: return "graph";
    case AttrType::kFloats: return "floats";
    case AttrType::kInts: return "ints";
    case AttrType::kStrings: return "strings";
    case AttrType::kTensors: return "tensors";
    case AttrType::kGraphs: return "graphs";
    default: return "undefined";
  }
}

const Attribute* Attributes::find(const std::string& name) const {
  auto it = map_.find(name);
  return it == map_.end() ? nullptr : &it->second;
}

void Attributes::set_int(const std::string& name, int64_t v) {
  Attribute a; a.type = AttrType::kInt; a.i = v; map_[name] = std::move(a);
}
void Attributes::set_float(const std::string& name, float v) {
  Attribute a; a.type = AttrType::kFloat; a.f = v; map_[name] = std::move(a);
}
void Attributes::set_string(const std::string& name, std::string v) {
  Attribute a; a.type = AttrType::kString; a.s = std::move(v); map_[name] = std::move(a);
}
void Attributes::set_ints(const std::string& name, std::vector<int64_t> v) {
  Attribute a; a.type = AttrType::kInts; a.ints = std::move(v); map_[name] = std::move(a);
}
void Attributes::set_floats(const std::string& name, std::vector<float> v) {
  Attribute a; a.type = AttrType::kFloats; a.floats = std::move(v); map_[name] = std::move(a);
}
void Attributes::set_tensor(const std::string& name, Tensor v) {
  Attribute a; a.type = AttrType::kTensor; a.t = std::move(v); map_[name] = std::move(a);
}

int64_t Attributes::get_int(const std::string& name, int64_t fallback) const {
  const Attribute* a = find(name);
  return a && a->type == AttrType::kInt ? a->i : fallback;
}
float Attributes::get_float(const std::string& name, float fallback) const {
  const Attribute* a = find(name);
  return a && a->type == AttrType::kFloat ? a->f : fallback;
}
std::string Attributes::get_string(const std::string& name, const std::string& fallback) const {
  const Attribute* a = find(name);
  return a && a->type == AttrType::kString ? a->s : fallback;
}
std::vector<int64_t> Attributes::get_ints(const std::string& name, std::vector<int64_t> fallback) const {
  const Attribute* a = find(name);
  return a && a->type == AttrType::kInts ? a->ints : fallback;
}
std::vector<float> Attributes::get_floats(const std::string& name, std::vector<float> fallback) const {
  const Attribute* a = find(name);
  return a && a->type == AttrType::kFloats ? a->floats : fallback;
}
std::vector<std::string> Attributes::get_strings(const std::string& name, std::vector<std::string> fallback) const {
  const Attribute* a = find(name);
  return a && a->type == AttrType::kStrings ? a->strings : fallback;
}
const Tensor* Attributes::get_tensor(const std::string& name) const {
  const Attribute* a = find(name);
  return a && a->type == AttrType::kTensor ? &a->t : nullptr;
}
const Graph* Attributes::get_graph(const std::string& name) const {
  const Attribute* a = find(name);
  return a && a->type == AttrType::kGraph ? a->g.get() : nullptr;
}

}  // namespace ingot::ir
