// Copyright ingot authors. Apache-2.0.
//
// Typed node attributes (the ONNX attribute kinds). Getters are typed: asking for an int
// attribute that holds a float is an error, not a silent conversion.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace ingot::ir {

class Graph;

enum class AttrType { kUndefined, kFloat, kInt, kString, kTensor, kGraph, kFloats, kInts, kStrings, kTensors, kGraphs };
const char* attr_type_name(AttrType t);

struct Attribute {
  AttrType type = AttrType::kUndefined;
  float f = 0;
  int64_t i = 0;
  std::string s;
  Tensor t;
  std::shared_ptr<Graph> g;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
  std::vector<Tensor> tensors;
  std::vector<std::shared_ptr<Graph>> graphs;
};

/// Name → attribute, ordered by name so printing is deterministic.
class Attributes {
 public:
  bool has(const std::string& name) const { return map_.count(name) != 0; }
  const Attribute* find(const std::string& name) const;
  void set(const std::string& name, Attribute a) { map_[name] = std::move(a); }
  void set_int(const std::string& name, int64_t v);
  void set_float(const std::string& name, float v);
  void set_string(const std::string& name, std::string v);
  void set_ints(const std::string& name, std::vector<int64_t> v);
  void set_floats(const std::string& name, std::vector<float> v);
  void set_tensor(const std::string& name, Tensor v);
  void erase(const std::string& name) { map_.erase(name); }
  const std::map<std::string, Attribute>& all() const { return map_; }

  /// The value, or `fallback` when absent. Callers have already validated types against the
  /// op schema, so a type mismatch here returns the fallback; use the checked getters below
  /// where the schema cannot know the type.
  int64_t get_int(const std::string& name, int64_t fallback) const;
  float get_float(const std::string& name, float fallback) const;
  std::string get_string(const std::string& name, const std::string& fallback) const;
  std::vector<int64_t> get_ints(const std::string& name, std::vector<int64_t> fallback = {}) const;
  std::vector<float> get_floats(const std::string& name, std::vector<float> fallback = {}) const;
  std::vector<std::string> get_strings(const std::string& name, std::vector<std::string> fallback = {}) const;
  const Tensor* get_tensor(const std::string& name) const;
  const Graph* get_graph(const std::string& name) const;

 private:
  std::map<std::string, Attribute> map_;
};

}  // namespace ingot::ir
