// Copyright ingot authors. Apache-2.0.
//
// ModelInferRequest -> InferRequest (see grpc_request.h).
#include "server/grpc_request.h"

#include <cstdint>
#include <cstring>
#include <string>

#include "server/tensor_types.h"

namespace ingot::server {

namespace {

template <class T, class Field>
void pack(const Field& field, std::string& out) {
  out.resize(static_cast<size_t>(field.size()) * sizeof(T));
  for (int i = 0; i < field.size(); ++i) {
    T v = static_cast<T>(field.Get(i));
    std::memcpy(&out[static_cast<size_t>(i) * sizeof(T)], &v, sizeof(T));
  }
}

bool pack_contents(const inference::InferTensorContents& c, DataType dtype, std::string& out, std::string& why) {
  switch (dtype) {
    case DataType::kBool:
      pack<uint8_t>(c.bool_contents(), out);
      return true;
    case DataType::kInt8:
      pack<int8_t>(c.int_contents(), out);
      return true;
    case DataType::kInt16:
      pack<int16_t>(c.int_contents(), out);
      return true;
    case DataType::kInt32:
      pack<int32_t>(c.int_contents(), out);
      return true;
    case DataType::kInt64:
      pack<int64_t>(c.int64_contents(), out);
      return true;
    case DataType::kUInt8:
      pack<uint8_t>(c.uint_contents(), out);
      return true;
    case DataType::kUInt16:
      pack<uint16_t>(c.uint_contents(), out);
      return true;
    case DataType::kUInt32:
      pack<uint32_t>(c.uint_contents(), out);
      return true;
    case DataType::kUInt64:
      pack<uint64_t>(c.uint64_contents(), out);
      return true;
    case DataType::kFloat32:
      pack<float>(c.fp32_contents(), out);
      return true;
    case DataType::kFloat64:
      pack<double>(c.fp64_contents(), out);
      return true;
    default:
      why = std::string(datatype_to_protocol(dtype)) + " tensors must be sent in raw_input_contents";
      return false;
  }
}

using ParameterMap = google::protobuf::Map<std::string, inference::InferParameter>;

/// shared_memory_region / _byte_size / _offset of a tensor's parameters (none: *ref stays empty).
std::optional<RequestError> shm_params(const ParameterMap& params, const std::string& where,
                                       std::optional<SharedMemoryRef>* ref) {
  auto bad = [&](const std::string& m) { return RequestError{400, where + ": " + m}; };
  auto region = params.find("shared_memory_region");
  if (region == params.end()) {
    if (params.count("shared_memory_byte_size") || params.count("shared_memory_offset"))
      return bad("shared_memory_byte_size/offset without shared_memory_region");
    return std::nullopt;
  }
  if (region->second.parameter_choice_case() != inference::InferParameter::kStringParam ||
      region->second.string_param().empty())
    return bad("shared_memory_region must be a region name (string_param)");
  auto size = params.find("shared_memory_byte_size");
  auto whole = [](const inference::InferParameter& v, uint64_t* n) {
    if (v.parameter_choice_case() == inference::InferParameter::kInt64Param && v.int64_param() >= 0) {
      *n = static_cast<uint64_t>(v.int64_param());
      return true;
    }
    if (v.parameter_choice_case() == inference::InferParameter::kUint64Param) {
      *n = v.uint64_param();
      return true;
    }
    return false;
  };
  SharedMemoryRef r;
  r.region = region->second.string_param();
  if (size == params.end() || !whole(size->second, &r.byte_size))
    return bad("shared_memory_region needs shared_memory_byte_size (a non-negative integer)");
  if (auto off = params.find("shared_memory_offset"); off != params.end() && !whole(off->second, &r.offset))
    return bad("shared_memory_offset must be a non-negative integer");
  *ref = std::move(r);
  return std::nullopt;
}

}  // namespace

std::optional<RequestError> infer_request_from_proto(inference::ModelInferRequest* proto, InferRequest* out) {
  const inference::ModelInferRequest& p = *proto;
  auto bad = [](std::string m) { return RequestError{400, std::move(m)}; };
  out->id = p.id();
  if (p.inputs().empty()) return bad("the request has no inputs");
  // raw_input_contents holds one entry per input whose data is not in shared memory.
  int in_body = 0;
  for (const auto& t : p.inputs()) in_body += t.parameters().count("shared_memory_region") ? 0 : 1;
  if (!p.raw_input_contents().empty() && p.raw_input_contents_size() != in_body) {
    return bad("raw_input_contents has " + std::to_string(p.raw_input_contents_size()) + " entries for " +
               std::to_string(in_body) + " inputs not in shared memory");
  }
  int raw_index = 0;
  if (auto t = p.parameters().find("timeout"); t != p.parameters().end()) {
    if (t->second.int64_param() > 0) out->timeout_us = t->second.int64_param();
  }
  for (int i = 0; i < p.inputs_size(); ++i) {
    const auto& t = p.inputs(i);
    InferInput in;
    in.name = t.name();
    in.dtype = datatype_from_protocol(t.datatype());
    if (in.dtype == DataType::kUndefined)
      return bad("input '" + in.name + "': unknown datatype '" + t.datatype() + "'");
    if (in.dtype == DataType::kString)
      return bad("input '" + in.name + "': BYTES tensors are not supported by this server");
    for (int64_t d : t.shape()) {
      if (d < 0)
        return bad("input '" + in.name + "': shape " + dims_string({t.shape().begin(), t.shape().end()}) +
                   " has a negative dim");
      in.shape.push_back(d);
    }
    int64_t count = element_count(in.shape);
    size_t esize = element_size(in.dtype);
    if (count < 0 || (count > 0 && static_cast<uint64_t>(count) > UINT64_MAX / esize)) {
      return bad("input '" + in.name + "': shape " + dims_string(in.shape) + " has too many elements");
    }
    uint64_t want = static_cast<uint64_t>(count) * esize;
    if (auto e = shm_params(t.parameters(), "input '" + in.name + "'", &in.shm)) return e;
    if (in.shm) {
      if (t.has_contents()) return bad("input '" + in.name + "': has shared_memory_region and also contents");
      if (in.shm->byte_size != want) {
        return bad("input '" + in.name + "': shared_memory_byte_size " + std::to_string(in.shm->byte_size) +
                   " does not match shape " + dims_string(in.shape) + " of " + t.datatype() + " (" +
                   std::to_string(want) + " bytes)");
      }
    } else if (!p.raw_input_contents().empty()) {
      if (t.has_contents()) return bad("input '" + in.name + "': both contents and raw_input_contents are given");
      in.data.swap(*proto->mutable_raw_input_contents(raw_index++));  // moved, not copied: it can be MBs
    } else {
      std::string why;
      if (!pack_contents(t.contents(), in.dtype, in.data, why)) return bad("input '" + in.name + "': " + why);
    }
    if (!in.shm && in.data.size() != want) {
      return bad("input '" + in.name + "': " + std::to_string(in.data.size()) + " bytes of data but shape " +
                 dims_string(in.shape) + " of " + t.datatype() + " needs " + std::to_string(want));
    }
    for (const InferInput& prev : out->inputs) {
      if (prev.name == in.name) return bad("input '" + in.name + "' appears twice");
    }
    out->inputs.push_back(std::move(in));
  }
  for (const auto& o : p.outputs()) {
    RequestedOutput r{o.name(), true, std::nullopt};
    if (auto e = shm_params(o.parameters(), "output '" + o.name() + "'", &r.shm)) return e;
    out->outputs.push_back(std::move(r));
  }
  return std::nullopt;
}

}  // namespace ingot::server
