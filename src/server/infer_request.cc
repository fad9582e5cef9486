// Copyright ingot authors. Apache-2.0.
//
// KServe v2 infer request parsing and response writing (see infer_request.h).
#include "server/infer_request.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "server/tensor_types.h"

namespace ingot::server {

namespace {

using json = nlohmann::json;

constexpr int kMaxNesting = 32;  // nested "data" arrays deeper than any tensor rank we serve

RequestError bad(std::string message) { return RequestError{400, std::move(message)}; }

// Appends one JSON element to `out` as `dtype`; false with `why` when it does not fit.
bool append_element(const json& v, DataType dtype, std::string& out, std::string& why) {
  auto put = [&out](const auto& x) { out.append(reinterpret_cast<const char*>(&x), sizeof(x)); };
  auto as_int = [&](int64_t lo, uint64_t hi, auto tag) {
    using T = decltype(tag);
    if (v.is_number_unsigned()) {
      uint64_t u = v.get<uint64_t>();
      if (u > hi) return why = "value " + std::to_string(u) + " out of range", false;
      put(static_cast<T>(u));
      return true;
    }
    if (v.is_number_integer()) {
      int64_t s = v.get<int64_t>();
      if (s < lo || (s > 0 && static_cast<uint64_t>(s) > hi))
        return why = "value " + std::to_string(s) + " out of range", false;
      put(static_cast<T>(s));
      return true;
    }
    why = std::string("expected an integer, got ") + v.type_name();
    return false;
  };
  switch (dtype) {
    case DataType::kBool:
      if (!v.is_boolean()) return why = std::string("expected true/false, got ") + v.type_name(), false;
      put(static_cast<uint8_t>(v.get<bool>() ? 1 : 0));
      return true;
    case DataType::kUInt8:
      return as_int(0, UINT8_MAX, uint8_t{});
    case DataType::kUInt16:
      return as_int(0, UINT16_MAX, uint16_t{});
    case DataType::kUInt32:
      return as_int(0, UINT32_MAX, uint32_t{});
    case DataType::kUInt64:
      return as_int(0, UINT64_MAX, uint64_t{});
    case DataType::kInt8:
      return as_int(INT8_MIN, INT8_MAX, int8_t{});
    case DataType::kInt16:
      return as_int(INT16_MIN, INT16_MAX, int16_t{});
    case DataType::kInt32:
      return as_int(INT32_MIN, INT32_MAX, int32_t{});
    case DataType::kInt64:
      return as_int(INT64_MIN, INT64_MAX, int64_t{});
    case DataType::kFloat32:
    case DataType::kFloat64: {
      if (!v.is_number()) return why = std::string("expected a number, got ") + v.type_name(), false;
      double d = v.get<double>();
      if (dtype == DataType::kFloat64) {
        put(d);
      } else {
        if (std::isfinite(d) && std::fabs(d) > std::numeric_limits<float>::max()) {
          return why = "value " + std::to_string(d) + " out of range for FP32", false;
        }
        put(static_cast<float>(d));
      }
      return true;
    }
    default:
      why = std::string(datatype_to_protocol(dtype)) + " data must be sent as binary (binary_data_size)";
      return false;
  }
}

// Flattens (possibly nested) "data" row-major into `out`; counts the elements.
bool flatten(const json& v, DataType dtype, int depth, std::string& out, int64_t& count, std::string& why) {
  if (!v.is_array()) {
    if (!append_element(v, dtype, out, why)) return false;
    ++count;
    return true;
  }
  if (depth >= kMaxNesting) return why = "data nested deeper than " + std::to_string(kMaxNesting), false;
  for (const json& e : v) {
    if (!flatten(e, dtype, depth + 1, out, count, why)) return false;
  }
  return true;
}

// Reads an optional bool/int parameter; false with `err` when ill-typed.
std::optional<RequestError> read_params(const json& obj, const std::string& where, const json** params) {
  *params = nullptr;
  auto it = obj.find("parameters");
  if (it == obj.end()) return std::nullopt;
  if (!it->is_object()) return bad(where + ": \"parameters\" must be an object");
  *params = &*it;
  return std::nullopt;
}

// shared_memory_region / _byte_size / _offset of an input's or output's parameters (absent: no
// region). The byte size is required with a region, as in Triton's protocol.
std::optional<RequestError> read_shm_params(const json* params, const std::string& where,
                                            std::optional<SharedMemoryRef>* ref) {
  ref->reset();
  if (!params) return std::nullopt;
  auto region = params->find("shared_memory_region");
  if (region == params->end()) {
    if (params->contains("shared_memory_byte_size") || params->contains("shared_memory_offset"))
      return bad(where + ": shared_memory_byte_size/offset without shared_memory_region");
    return std::nullopt;
  }
  if (!region->is_string() || region->get<std::string>().empty())
    return bad(where + ": shared_memory_region must be a region name");
  SharedMemoryRef r;
  r.region = region->get<std::string>();
  auto size = params->find("shared_memory_byte_size");
  if (size == params->end() || !size->is_number_unsigned())
    return bad(where + ": shared_memory_region needs shared_memory_byte_size (a non-negative integer)");
  r.byte_size = size->get<uint64_t>();
  if (auto off = params->find("shared_memory_offset"); off != params->end()) {
    if (!off->is_number_unsigned()) return bad(where + ": shared_memory_offset must be a non-negative integer");
    r.offset = off->get<uint64_t>();
  }
  *ref = std::move(r);
  return std::nullopt;
}

std::optional<RequestError> parse_input(const json& j, size_t index, InferInput& in,
                                        std::optional<uint64_t>& binary_size) {
  std::string where = "input " + std::to_string(index);
  if (!j.is_object()) return bad(where + " must be an object");
  auto name = j.find("name");
  if (name == j.end() || !name->is_string()) return bad(where + ": \"name\" (string) is missing");
  in.name = name->get<std::string>();
  where = "input '" + in.name + "'";
  auto dt = j.find("datatype");
  if (dt == j.end() || !dt->is_string()) return bad(where + ": \"datatype\" (string) is missing");
  in.dtype = datatype_from_protocol(dt->get<std::string>());
  if (in.dtype == DataType::kUndefined) return bad(where + ": unknown datatype '" + dt->get<std::string>() + "'");
  if (in.dtype == DataType::kString) return bad(where + ": BYTES tensors are not supported by this server");
  auto shape = j.find("shape");
  if (shape == j.end() || !shape->is_array()) return bad(where + ": \"shape\" (array of integers) is missing");
  if (shape->size() > static_cast<size_t>(kMaxNesting)) return bad(where + ": shape has too many dims");
  for (const json& d : *shape) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0)
      return bad(where + ": shape " + shape->dump() + " must hold non-negative integers");
    in.shape.push_back(d.get<int64_t>());
  }
  int64_t expected = element_count(in.shape);
  if (expected < 0) return bad(where + ": shape " + dims_string(in.shape) + " has too many elements");
  const json* params = nullptr;
  if (auto e = read_params(j, where, &params)) return e;
  binary_size.reset();
  if (params) {
    auto bs = params->find("binary_data_size");
    if (bs != params->end()) {
      if (!bs->is_number_unsigned()) return bad(where + ": binary_data_size must be a non-negative integer");
      binary_size = bs->get<uint64_t>();
    }
  }
  uint64_t expected_bytes = static_cast<uint64_t>(expected) * element_size(in.dtype);
  if (expected_bytes / element_size(in.dtype) != static_cast<uint64_t>(expected))
    return bad(where + ": shape too large");
  auto data = j.find("data");
  if (auto e = read_shm_params(params, where, &in.shm)) return e;
  if (in.shm) {
    if (data != j.end() || binary_size) return bad(where + ": has shared_memory_region and also data");
    if (in.shm->byte_size != expected_bytes) {
      return bad(where + ": shared_memory_byte_size " + std::to_string(in.shm->byte_size) + " does not match shape " +
                 dims_string(in.shape) + " of " + datatype_to_protocol(in.dtype) + " (" +
                 std::to_string(expected_bytes) + " bytes)");
    }
    return std::nullopt;
  }
  if (binary_size) {
    if (data != j.end()) return bad(where + ": has both \"data\" and binary_data_size");
    if (*binary_size != expected_bytes) {
      return bad(where + ": binary_data_size " + std::to_string(*binary_size) + " does not match shape " +
                 dims_string(in.shape) + " of " + datatype_to_protocol(in.dtype) + " (" +
                 std::to_string(expected_bytes) + " bytes)");
    }
    return std::nullopt;
  }
  if (data == j.end()) return bad(where + ": \"data\" is missing (or give binary_data_size)");
  int64_t count = 0;
  std::string why;
  // Reserve only what the data can hold, never what the (client-chosen) shape claims.
  in.data.reserve(std::min<uint64_t>(expected_bytes, 1u << 20));
  if (!flatten(*data, in.dtype, 0, in.data, count, why))
    return bad(where + ": data element " + std::to_string(count) + ": " + why);
  if (count != expected) {
    return bad(where + ": data has " + std::to_string(count) + " elements but shape " + dims_string(in.shape) +
               " needs " + std::to_string(expected));
  }
  return std::nullopt;
}

}  // namespace

std::optional<RequestError> parse_infer_request(const char* body, size_t size, std::optional<size_t> header_length,
                                                InferRequest* out) {
  *out = InferRequest();
  size_t json_size = size;
  if (header_length) {
    if (*header_length > size) {
      return bad("Inference-Header-Content-Length " + std::to_string(*header_length) + " exceeds the body size " +
                 std::to_string(size));
    }
    json_size = *header_length;
  }
  json doc = json::parse(body, body + json_size, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return bad("malformed JSON in the request body");
  if (!doc.is_object()) return bad("the request body must be a JSON object");
  try {
    if (auto id = doc.find("id"); id != doc.end()) {
      if (!id->is_string()) return bad("\"id\" must be a string");
      out->id = id->get<std::string>();
    }
    const json* params = nullptr;
    if (auto e = read_params(doc, "request", &params)) return e;
    if (params) {
      if (auto b = params->find("binary_data_output"); b != params->end()) {
        if (!b->is_boolean()) return bad("request parameter binary_data_output must be true or false");
        out->binary_outputs = b->get<bool>();
      }
      if (auto t = params->find("timeout"); t != params->end()) {
        if (!t->is_number_unsigned())
          return bad("request parameter timeout must be a non-negative integer (microseconds)");
        out->timeout_us = static_cast<int64_t>(std::min<uint64_t>(t->get<uint64_t>(), INT64_MAX));
      }
    }
    auto inputs = doc.find("inputs");
    if (inputs == doc.end() || !inputs->is_array()) return bad("\"inputs\" (array) is missing");
    if (inputs->empty()) return bad("\"inputs\" is empty");
    size_t offset = json_size;  // binary tensors follow the JSON header in input order
    for (size_t i = 0; i < inputs->size(); ++i) {
      InferInput in;
      std::optional<uint64_t> binary_size;
      if (auto e = parse_input((*inputs)[i], i, in, binary_size)) return e;
      for (const InferInput& prev : out->inputs) {
        if (prev.name == in.name) return bad("input '" + in.name + "' appears twice");
      }
      if (binary_size) {
        if (!header_length)
          return bad("input '" + in.name +
                     "' has binary_data_size but the request has no Inference-Header-Content-Length");
        if (*binary_size > size - offset) {
          return bad("input '" + in.name + "': binary_data_size " + std::to_string(*binary_size) +
                     " runs past the body (" + std::to_string(size - offset) + " bytes left)");
        }
        // A view, not a copy (a request can carry MBs): the caller keeps `body` for the request.
        in.external = ExternalBytes{body + offset, static_cast<size_t>(*binary_size), false, {}};
        offset += *binary_size;
      }
      out->inputs.push_back(std::move(in));
    }
    if (offset != size) {
      return bad("the body has " + std::to_string(size - offset) + " bytes after the JSON header and binary inputs");
    }
    if (auto outputs = doc.find("outputs"); outputs != doc.end()) {
      if (!outputs->is_array()) return bad("\"outputs\" must be an array");
      for (size_t i = 0; i < outputs->size(); ++i) {
        const json& o = (*outputs)[i];
        if (!o.is_object()) return bad("output " + std::to_string(i) + " must be an object");
        auto name = o.find("name");
        if (name == o.end() || !name->is_string())
          return bad("output " + std::to_string(i) + ": \"name\" (string) is missing");
        RequestedOutput ro{name->get<std::string>(), out->binary_outputs};
        const json* oparams = nullptr;
        if (auto e = read_params(o, "output '" + ro.name + "'", &oparams)) return e;
        if (oparams) {
          if (auto b = oparams->find("binary_data"); b != oparams->end()) {
            if (!b->is_boolean()) return bad("output '" + ro.name + "': binary_data must be true or false");
            ro.binary = b->get<bool>();
          }
          if (oparams->contains("classification"))
            return bad("output '" + ro.name + "': classification is not supported");
          if (auto e = read_shm_params(oparams, "output '" + ro.name + "'", &ro.shm)) return e;
        }
        for (const RequestedOutput& prev : out->outputs) {
          if (prev.name == ro.name) return bad("output '" + ro.name + "' is requested twice");
        }
        out->outputs.push_back(std::move(ro));
      }
    }
  } catch (const std::exception& e) {  // a nlohmann type error we did not foresee: still the client's
    return bad(std::string("malformed request: ") + e.what());
  }
  return std::nullopt;
}

std::optional<RequestError> validate_request(const InferRequest& request, const ModelSignature& model,
                                             int64_t* batch_size) {
  *batch_size = 1;
  bool batching = model.max_batch_size > 0;
  int64_t batch = -1;
  for (const InferInput& in : request.inputs) {
    const TensorSpec* spec = nullptr;
    for (const TensorSpec& s : model.inputs) {
      if (s.name == in.name) spec = &s;
    }
    if (!spec) return bad("unknown input '" + in.name + "' for model '" + model.name + "'");
    if (in.dtype != spec->dtype) {
      return bad("input '" + in.name + "': datatype " + datatype_to_protocol(in.dtype) + " but model '" + model.name +
                 "' expects " + datatype_to_protocol(spec->dtype));
    }
    std::vector<int64_t> expect = spec->dims;
    if (batching) expect.insert(expect.begin(), -1);
    bool ok = in.shape.size() == expect.size();
    for (size_t d = 0; ok && d < expect.size(); ++d) ok = expect[d] < 0 || expect[d] == in.shape[d];
    if (!ok) {
      std::string want = dims_string(expect);
      if (batching) want.replace(1, 2, "batch");
      return bad("input '" + in.name + "': shape " + dims_string(in.shape) + " does not match the model's " + want +
                 " (-1 = any size)");
    }
    if (batching) {
      int64_t b = in.shape[0];
      if (b < 1 || b > model.max_batch_size) {
        return bad("input '" + in.name + "': batch size " + std::to_string(b) + " outside [1, " +
                   std::to_string(model.max_batch_size) + "] (max_batch_size of model '" + model.name + "')");
      }
      if (batch >= 0 && b != batch) {
        return bad("input '" + in.name + "': batch size " + std::to_string(b) + " differs from the other inputs' " +
                   std::to_string(batch));
      }
      batch = b;
    }
  }
  for (const TensorSpec& s : model.inputs) {
    bool found = false;
    for (const InferInput& in : request.inputs) found = found || in.name == s.name;
    if (!found) return bad("missing input '" + s.name + "' for model '" + model.name + "'");
  }
  for (const RequestedOutput& o : request.outputs) {
    bool found = false;
    for (const TensorSpec& s : model.outputs) found = found || s.name == o.name;
    if (!found) return bad("unknown output '" + o.name + "' for model '" + model.name + "'");
  }
  if (batching) *batch_size = batch;
  return std::nullopt;
}

namespace {
template <class T>
void append_values(json& arr, const void* data, size_t n) {
  const T* p = static_cast<const T*>(data);
  for (size_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, p + i, sizeof(T));
    arr.push_back(v);
  }
}
void append_floats(json& arr, const float* p, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    float v;
    std::memcpy(&v, p + i, sizeof(v));
    arr.push_back(static_cast<double>(v));
  }
}
}  // namespace

std::string build_infer_response(const std::string& model_name, const std::string& model_version, const std::string& id,
                                 const std::vector<OutputTensor>& outputs, std::optional<size_t>* header_length) {
  json doc = {{"model_name", model_name}, {"model_version", model_version}};
  if (!id.empty()) doc["id"] = id;
  json outs = json::array();
  bool any_binary = false;
  for (const OutputTensor& t : outputs) {
    json o = {{"name", t.name}, {"datatype", datatype_to_protocol(t.dtype)}, {"shape", t.shape}};
    // Types JSON cannot carry exactly (fp16/bf16) always go binary.
    bool binary = !t.shm && (t.binary || t.dtype == DataType::kFloat16 || t.dtype == DataType::kBFloat16);
    if (t.shm) {
      // Written into the region, named in the response by nothing but name, datatype and shape, as
      // Triton does: its C++ HTTP client (perf_analyzer) reads any output "parameters" as
      // binary_data_size and fails on a response that carries others.
    } else if (binary) {
      o["parameters"] = {{"binary_data_size", t.bytes}};
      any_binary = true;
    } else {
      json data = json::array();
      size_t n = element_size(t.dtype) ? t.bytes / element_size(t.dtype) : 0;
      switch (t.dtype) {
        case DataType::kBool: {
          const uint8_t* p = static_cast<const uint8_t*>(t.data);
          for (size_t i = 0; i < n; ++i) data.push_back(p[i] != 0);
          break;
        }
        case DataType::kUInt8:
          append_values<uint8_t>(data, t.data, n);
          break;
        case DataType::kUInt16:
          append_values<uint16_t>(data, t.data, n);
          break;
        case DataType::kUInt32:
          append_values<uint32_t>(data, t.data, n);
          break;
        case DataType::kUInt64:
          append_values<uint64_t>(data, t.data, n);
          break;
        case DataType::kInt8:
          append_values<int8_t>(data, t.data, n);
          break;
        case DataType::kInt16:
          append_values<int16_t>(data, t.data, n);
          break;
        case DataType::kInt32:
          append_values<int32_t>(data, t.data, n);
          break;
        case DataType::kInt64:
          append_values<int64_t>(data, t.data, n);
          break;
        case DataType::kFloat32:
          append_floats(data, static_cast<const float*>(t.data), n);
          break;
        case DataType::kFloat64:
          append_values<double>(data, t.data, n);
          break;
        default:
          break;
      }
      o["data"] = std::move(data);
    }
    outs.push_back(std::move(o));
  }
  doc["outputs"] = std::move(outs);
  // Non-finite floats have no JSON form; nlohmann writes null for them, as Triton does.
  std::string body = doc.dump(-1, ' ', false, json::error_handler_t::replace);
  header_length->reset();
  if (any_binary) {
    *header_length = body.size();
    for (const OutputTensor& t : outputs) {
      bool binary = !t.shm && (t.binary || t.dtype == DataType::kFloat16 || t.dtype == DataType::kBFloat16);
      if (binary) body.append(static_cast<const char*>(t.data), t.bytes);
    }
  }
  return body;
}

std::string error_json(const std::string& message) {
  return json{{"error", message}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace ingot::server
