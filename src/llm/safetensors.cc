// Copyright ingot authors. Apache-2.0.
#include "llm/safetensors.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "core/tensor.h"

namespace ingot::llm {

namespace {

constexpr uint64_t kMaxHeader = 100ull << 20;  // the format's own limit is 100 MB

struct DtypeName {
  const char* name;
  DataType type;
};
constexpr DtypeName kDtypes[] = {
    {"F64", DataType::kFloat64}, {"F32", DataType::kFloat32}, {"F16", DataType::kFloat16},
    {"BF16", DataType::kBFloat16}, {"F8_E4M3", DataType::kFloat8E4M3FN}, {"F8_E5M2", DataType::kFloat8E5M2},
    {"I64", DataType::kInt64}, {"I32", DataType::kInt32}, {"I16", DataType::kInt16}, {"I8", DataType::kInt8},
    {"U64", DataType::kUInt64}, {"U32", DataType::kUInt32}, {"U16", DataType::kUInt16}, {"U8", DataType::kUInt8},
    {"BOOL", DataType::kBool},
};

}  // namespace

SafetensorsFile::~SafetensorsFile() = default;

Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::open(const std::string& path) {
  INGOT_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> map, MappedFile::open(path));
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->what_ = path;
  f->map_ = std::move(map);
  INGOT_RETURN_IF_ERROR(f->parse_impl(f->map_->data(), f->map_->size()));
  return f;
}

Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::parse(const uint8_t* data, size_t size,
                                                                const std::string& what) {
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->what_ = what;
  INGOT_RETURN_IF_ERROR(f->parse_impl(data, size));
  return f;
}

Status SafetensorsFile::parse_impl(const uint8_t* data, size_t size) {
  if (size < 8) return invalid_model(what_, ": not a safetensors file (", size, " bytes, no header length)");
  uint64_t n = 0;
  std::memcpy(&n, data, 8);
  if (n > kMaxHeader || n > size - 8)
    return invalid_model(what_, ": header of ", n, " bytes does not fit the file (", size, " bytes)");
  nlohmann::json h = nlohmann::json::parse(data + 8, data + 8 + n, nullptr, /*allow_exceptions=*/false);
  if (h.is_discarded() || !h.is_object()) return invalid_model(what_, ": the header is not a JSON object");
  const uint64_t data_size = size - 8 - n;
  const uint8_t* base = data + 8 + n;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (auto it = h.begin(); it != h.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object()) return invalid_model(what_, ": __metadata__ is not an object");
      for (auto m = it->begin(); m != it->end(); ++m)
        if (m->is_string()) metadata_[m.key()] = m->get<std::string>();
      continue;
    }
    const nlohmann::json& e = *it;
    SafeTensor t;
    t.name = it.key();
    t.file = what_;
    if (!e.is_object() || !e.contains("dtype") || !e["dtype"].is_string() || !e.contains("shape") ||
        !e["shape"].is_array() || !e.contains("data_offsets") || !e["data_offsets"].is_array() ||
        e["data_offsets"].size() != 2)
      return invalid_model(what_, ": tensor '", t.name, "' needs dtype, shape and data_offsets [begin, end]");
    t.dtype_name = e["dtype"].get<std::string>();
    for (const DtypeName& d : kDtypes)
      if (t.dtype_name == d.name) t.dtype = d.type;
    if (t.dtype == DataType::kUndefined)
      return unsupported(what_, ": tensor '", t.name, "' has dtype '", t.dtype_name, "'");
    uint64_t numel = 1;
    for (const auto& d : e["shape"]) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > (1ull << 40))
        return invalid_model(what_, ": tensor '", t.name, "' has a bad dim");
      const uint64_t v = d.get<uint64_t>();
      if (v && numel > (1ull << 50) / v) return invalid_model(what_, ": tensor '", t.name, "' is too large");
      numel *= v;
      t.shape.push_back(static_cast<int64_t>(v));
    }
    const auto& off = e["data_offsets"];
    if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      return invalid_model(what_, ": tensor '", t.name, "' data_offsets are not byte positions");
    const uint64_t b = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
    if (b > end || end > data_size)
      return invalid_model(what_, ": tensor '", t.name, "' bytes [", b, ", ", end, ") lie outside the ", data_size,
                           "-byte data section");
    t.nbytes = end - b;
    if (t.nbytes != storage_bytes(t.dtype, static_cast<int64_t>(numel)))
      return invalid_model(what_, ": tensor '", t.name, "' holds ", t.nbytes, " bytes for ", numel, " ", t.dtype_name,
                           " elements");
    t.data = base + b;
    ranges.emplace_back(b, end);
    tensors_[t.name] = std::move(t);
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second) return invalid_model(what_, ": two tensors' byte ranges overlap");
  return Status::Ok();
}

Result<std::unique_ptr<SafetensorsModel>> SafetensorsModel::open(const std::string& folder) {
  std::unique_ptr<SafetensorsModel> m(new SafetensorsModel());
  const std::string index = folder + "/model.safetensors.index.json";
  std::ifstream in(index);
  if (!in) {
    INGOT_ASSIGN_OR_RETURN(auto f, SafetensorsFile::open(folder + "/model.safetensors"));
    m->files_.push_back(std::move(f));
    for (const auto& [name, t] : m->files_[0]->tensors()) m->all_[name] = &t;
    return m;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(ss.str(), nullptr, false);
  if (j.is_discarded() || !j.contains("weight_map") || !j["weight_map"].is_object())
    return invalid_model(index, ": no weight_map object");
  std::map<std::string, std::string> want;  // tensor -> shard
  std::set<std::string> shards;
  for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
    if (!it->is_string()) return invalid_model(index, ": weight_map['", it.key(), "'] is not a file name");
    const std::string shard = it->get<std::string>();
    if (shard.find('/') != std::string::npos || shard.find("..") != std::string::npos)
      return invalid_model(index, ": shard '", shard, "' is not a file in the folder");
    want[it.key()] = shard;
    shards.insert(shard);
  }
  std::map<std::string, const SafetensorsFile*> by_shard;
  for (const std::string& s : shards) {
    INGOT_ASSIGN_OR_RETURN(auto f, SafetensorsFile::open(folder + "/" + s));
    by_shard[s] = f.get();
    m->files_.push_back(std::move(f));
  }
  for (const auto& [name, shard] : want) {
    auto it = by_shard[shard]->tensors().find(name);
    if (it == by_shard[shard]->tensors().end())
      return invalid_model(index, ": '", name, "' is not in its shard '", shard, "'");
    m->all_[name] = &it->second;
  }
  return m;
}

const SafeTensor* SafetensorsModel::find(const std::string& name) const {
  auto it = all_.find(name);
  return it == all_.end() ? nullptr : it->second;
}

Result<std::vector<float>> to_floats(const SafeTensor& t) {
  const int64_t n = static_cast<int64_t>(t.nbytes / std::max<size_t>(1, storage_bytes(t.dtype, 1)));
  std::vector<float> out(static_cast<size_t>(n));
  const uint8_t* p = t.data;
  for (int64_t i = 0; i < n; ++i) {
    switch (t.dtype) {
      case DataType::kFloat32: { float v; std::memcpy(&v, p + 4 * i, 4); out[i] = v; break; }
      case DataType::kFloat64: { double v; std::memcpy(&v, p + 8 * i, 8); out[i] = static_cast<float>(v); break; }
      case DataType::kFloat16: { uint16_t v; std::memcpy(&v, p + 2 * i, 2); out[i] = half_bits_to_float(v); break; }
      case DataType::kBFloat16: { uint16_t v; std::memcpy(&v, p + 2 * i, 2); out[i] = bfloat16_bits_to_float(v); break; }
      case DataType::kFloat8E4M3FN:
      case DataType::kFloat8E5M2: out[i] = small_float_to_float(p[i], t.dtype); break;
      case DataType::kInt8: out[i] = static_cast<int8_t>(p[i]); break;
      case DataType::kUInt8: case DataType::kBool: out[i] = p[i]; break;
      case DataType::kInt32: { int32_t v; std::memcpy(&v, p + 4 * i, 4); out[i] = static_cast<float>(v); break; }
      case DataType::kInt64: { int64_t v; std::memcpy(&v, p + 8 * i, 8); out[i] = static_cast<float>(v); break; }
      default: return unsupported(t.file, ": tensor '", t.name, "' of ", t.dtype_name, " as floats");
    }
  }
  return out;
}

}  // namespace ingot::llm
