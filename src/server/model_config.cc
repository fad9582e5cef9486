// Copyright ingot authors. Apache-2.0.
//
// config.pbtxt parsing and checking (see model_config.h).
#include "server/model_config.h"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "server/tensor_types.h"

namespace ingot::server {

namespace {

// Keeps the first parse error with its position, for a message naming file, line and field.
class FirstError : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column, const std::string& message) override {
    if (error_.empty()) error_ = std::to_string(line + 1) + ":" + std::to_string(column + 1) + ": " + message;
  }
  void AddWarning(int, google::protobuf::io::ColumnNumber, const std::string&) override {}
  const std::string& error() const { return error_; }

 private:
  std::string error_;
};

Status invalid(const std::string& file, const std::string& message) {
  return Status(StatusCode::kInvalidArgument, file + ": " + message);
}

}  // namespace

Result<config::ModelConfig> parse_model_config(const std::string& text, const std::string& file) {
  config::ModelConfig config;
  google::protobuf::TextFormat::Parser parser;
  FirstError errors;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(text, &config)) {
    return Status(StatusCode::kInvalidArgument,
                  file + ":" + (errors.error().empty() ? std::string(" parse error") : errors.error()));
  }
  return config;
}

Result<config::ModelConfig> read_model_config(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status(StatusCode::kNotFound, "cannot read " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  return parse_model_config(ss.str(), path);
}

DataType datatype_from_config(config::DataType t) {
  switch (t) {
    case config::TYPE_BOOL:
      return DataType::kBool;
    case config::TYPE_UINT8:
      return DataType::kUInt8;
    case config::TYPE_UINT16:
      return DataType::kUInt16;
    case config::TYPE_UINT32:
      return DataType::kUInt32;
    case config::TYPE_UINT64:
      return DataType::kUInt64;
    case config::TYPE_INT8:
      return DataType::kInt8;
    case config::TYPE_INT16:
      return DataType::kInt16;
    case config::TYPE_INT32:
      return DataType::kInt32;
    case config::TYPE_INT64:
      return DataType::kInt64;
    case config::TYPE_FP16:
      return DataType::kFloat16;
    case config::TYPE_FP32:
      return DataType::kFloat32;
    case config::TYPE_FP64:
      return DataType::kFloat64;
    case config::TYPE_STRING:
      return DataType::kString;
    case config::TYPE_BF16:
      return DataType::kBFloat16;
    default:
      return DataType::kUndefined;
  }
}

void complete_model_config(config::ModelConfig& config, const ModelSignature& signature, const std::string& platform) {
  auto to_config = [](DataType t) {
    for (int v = config::DataType_MIN; v <= config::DataType_MAX; ++v)
      if (config::DataType_IsValid(v) && datatype_from_config(static_cast<config::DataType>(v)) == t)
        return static_cast<config::DataType>(v);
    return config::TYPE_INVALID;
  };
  if (config.input_size() == 0)
    for (const TensorSpec& t : signature.inputs) {
      config::ModelInput* in = config.add_input();
      in->set_name(t.name);
      in->set_data_type(to_config(t.dtype));
      for (int64_t d : t.dims) in->add_dims(d);
    }
  if (config.output_size() == 0)
    for (const TensorSpec& t : signature.outputs) {
      config::ModelOutput* out = config.add_output();
      out->set_name(t.name);
      out->set_data_type(to_config(t.dtype));
      for (int64_t d : t.dims) out->add_dims(d);
    }
  if (config.platform().empty() && config.backend().empty()) config.set_platform(platform);
}

Result<BatchingOptions> batching_options(const config::ModelConfig& config, const std::string& file) {
  BatchingOptions o;
  if (config.max_batch_size() < 0)
    return invalid(file, "max_batch_size must be >= 0, got " + std::to_string(config.max_batch_size()));
  o.max_batch_size = config.max_batch_size();
  if (config.has_dynamic_batching()) {
    const config::ModelDynamicBatching& db = config.dynamic_batching();
    if (o.max_batch_size == 0) return invalid(file, "dynamic_batching needs max_batch_size > 0");
    o.dynamic = true;
    for (int64_t p : db.preferred_batch_size()) {
      if (p < 1 || p > o.max_batch_size) {
        return invalid(file, "preferred_batch_size " + std::to_string(p) + " outside [1, max_batch_size " +
                                 std::to_string(o.max_batch_size) + "]");
      }
      o.preferred_sizes.push_back(p);
    }
    o.max_queue_delay_us = static_cast<int64_t>(std::min<uint64_t>(db.max_queue_delay_microseconds(), 60'000'000));
    if (db.has_default_queue_policy()) {
      const config::ModelQueuePolicy& qp = db.default_queue_policy();
      if (qp.timeout_action() != config::ModelQueuePolicy::REJECT) {
        return invalid(file, "default_queue_policy.timeout_action DELAY is not supported (only REJECT)");
      }
      o.max_queue_size = qp.max_queue_size();
      o.default_timeout_us = static_cast<int64_t>(std::min<uint64_t>(qp.default_timeout_microseconds(), INT64_MAX / 2));
    } else {
      o.max_queue_size = db.max_queue_size();
      o.default_timeout_us = static_cast<int64_t>(std::min<uint64_t>(db.default_timeout_microseconds(), INT64_MAX / 2));
    }
    if (db.priority_levels() > 0) return invalid(file, "dynamic_batching.priority_levels is not supported");
  }
  auto param = config.parameters().find("ingot.prepared_batch_sizes");
  if (param != config.parameters().end()) {
    const std::string& v = param->second.string_value();
    if (v == "auto") {
      o.prepared = BatchingOptions::Prepared::kAuto;
    } else if (v == "none") {
      o.prepared = BatchingOptions::Prepared::kNone;
    } else {
      if (o.max_batch_size == 0) return invalid(file, "ingot.prepared_batch_sizes needs max_batch_size > 0");
      o.prepared = BatchingOptions::Prepared::kList;
      size_t at = 0;
      while (at <= v.size()) {
        size_t comma = v.find(',', at);
        if (comma == std::string::npos) comma = v.size();
        const std::string item = v.substr(at, comma - at);
        char* end = nullptr;
        const long long n = item.empty() ? 0 : std::strtoll(item.c_str(), &end, 10);
        if (item.empty() || *end != '\0' || n < 1 || n > o.max_batch_size)
          return invalid(file, "ingot.prepared_batch_sizes: '" + item + "' is not a batch size in [1, max_batch_size " +
                                   std::to_string(o.max_batch_size) + "] (expected auto, none or a list like 1,2,4,8)");
        o.prepared_sizes.push_back(n);
        at = comma + 1;
      }
      std::sort(o.prepared_sizes.begin(), o.prepared_sizes.end());
      o.prepared_sizes.erase(std::unique(o.prepared_sizes.begin(), o.prepared_sizes.end()), o.prepared_sizes.end());
    }
  }
  if (config.optimization().cuda().has_graphs()) o.cuda_graphs = config.optimization().cuda().graphs();
  o.instances = 0;
  for (const config::ModelInstanceGroup& g : config.instance_group()) {
    int count = g.count() == 0 ? 1 : g.count();
    if (count < 0 || count > 64)
      return invalid(file, "instance_group count " + std::to_string(g.count()) + " outside [1, 64]");
    for (int i = 0; i < count; ++i) {
      // Instances spread over the listed GPUs in turn; CPU (or no list) = -1.
      int gpu = g.kind() == config::ModelInstanceGroup::KIND_CPU || g.gpus().empty() ? -1 : g.gpus(i % g.gpus_size());
      o.gpus.push_back(gpu);
    }
    o.instances += count;
  }
  if (o.instances == 0) {
    o.instances = 1;
    o.gpus.push_back(-1);
  }
  return o;
}

Result<ModelSignature> resolve_signature(const config::ModelConfig& config, const Engine& engine,
                                         const std::string& file) {
  ModelSignature sig;
  sig.name = config.name();
  sig.max_batch_size = config.max_batch_size();
  bool batching = sig.max_batch_size > 0;
  const std::vector<IoTensorDesc>& io = engine.io_tensors();
  auto find_io = [&](const std::string& name) -> const IoTensorDesc* {
    for (const IoTensorDesc& d : io) {
      if (d.name == name) return &d;
    }
    return nullptr;
  };
  // The engine's dims as the config would write them (batch dim dropped).
  auto engine_dims = [&](const IoTensorDesc& d, std::vector<int64_t>* dims) -> Status {
    *dims = d.shape;
    if (batching) {
      if (dims->empty())
        return invalid(
            file, "tensor '" + d.name + "' is a scalar in the engine, so it has no batch dim (max_batch_size > 0)");
      if ((*dims)[0] >= 0 && (*dims)[0] < sig.max_batch_size) {
        return invalid(file, "tensor '" + d.name + "' has a fixed first dim " + std::to_string((*dims)[0]) +
                                 " in the engine, smaller than max_batch_size " + std::to_string(sig.max_batch_size));
      }
      dims->erase(dims->begin());
    }
    return Status::Ok();
  };
  for (int pass = 0; pass < 2; ++pass) {
    bool inputs = pass == 0;
    std::vector<TensorSpec>& specs = inputs ? sig.inputs : sig.outputs;
    int n = inputs ? config.input_size() : config.output_size();
    if (n == 0) {  // auto-complete from the engine
      for (const IoTensorDesc& d : io) {
        if (d.is_input != inputs) continue;
        TensorSpec s{d.name, d.dtype, {}};
        Status st = engine_dims(d, &s.dims);
        if (!st.ok()) return st;
        specs.push_back(std::move(s));
      }
      continue;
    }
    for (int i = 0; i < n; ++i) {
      const std::string& name = inputs ? config.input(i).name() : config.output(i).name();
      config::DataType ct = inputs ? config.input(i).data_type() : config.output(i).data_type();
      const auto& cdims = inputs ? config.input(i).dims() : config.output(i).dims();
      const char* kind = inputs ? "input" : "output";
      const IoTensorDesc* d = find_io(name);
      if (!d || d->is_input != inputs) {
        std::string have;
        for (const IoTensorDesc& e : io) {
          if (e.is_input == inputs) have += (have.empty() ? "" : ", ") + e.name;
        }
        return invalid(
            file, std::string(kind) + " '" + name + "' is not an " + kind + " of the engine (it has: " + have + ")");
      }
      TensorSpec s{name, datatype_from_config(ct), {cdims.begin(), cdims.end()}};
      if (s.dtype != d->dtype) {
        return invalid(file, std::string(kind) + " '" + name + "': data_type " + config::DataType_Name(ct) +
                                 " but the engine has " + data_type_name(d->dtype));
      }
      if (s.dtype == DataType::kString)
        return invalid(file, std::string(kind) + " '" + name + "': TYPE_STRING is not served yet");
      std::vector<int64_t> ed;
      Status st = engine_dims(*d, &ed);
      if (!st.ok()) return st;
      bool ok = ed.size() == s.dims.size();
      for (size_t k = 0; ok && k < ed.size(); ++k) ok = ed[k] < 0 || s.dims[k] < 0 || ed[k] == s.dims[k];
      if (!ok) {
        return invalid(file, std::string(kind) + " '" + name + "': dims " + dims_string(s.dims) +
                                 " do not match the engine's " + dims_string(ed) +
                                 (batching ? " (batch dim left out, max_batch_size > 0)" : ""));
      }
      // Where the engine fixes a dim the config left open, the engine's value is the truth.
      for (size_t k = 0; k < ed.size(); ++k) {
        if (s.dims[k] < 0) s.dims[k] = ed[k];
      }
      specs.push_back(std::move(s));
    }
  }
  for (const IoTensorDesc& d : io) {
    if (!d.is_input) continue;
    bool listed = false;
    for (const TensorSpec& s : sig.inputs) listed = listed || s.name == d.name;
    if (!listed) return invalid(file, "engine input '" + d.name + "' is missing from the config's input list");
  }
  if (batching) {
    for (const TensorSpec& s : sig.inputs) {
      std::vector<int64_t> mn, opt, mx;
      if (engine.profile_dimensions(0, s.name, &mn, &opt, &mx).ok() && !mx.empty() && mx[0] < sig.max_batch_size) {
        return invalid(file, "the engine's profile allows a batch of at most " + std::to_string(mx[0]) +
                                 " for input '" + s.name + "', below max_batch_size " +
                                 std::to_string(sig.max_batch_size) + " (rebuild it)");
      }
    }
  }
  return sig;
}

namespace {

bool is_64bit_int(const google::protobuf::FieldDescriptor& f) {
  using FD = google::protobuf::FieldDescriptor;
  switch (f.cpp_type()) {
    case FD::CPPTYPE_INT64:
    case FD::CPPTYPE_UINT64:
      return true;
    default:
      return false;
  }
}

// A 64-bit integer protobuf printed as a JSON string, back to a number.
void to_number(nlohmann::json& v, bool is_unsigned) {
  if (!v.is_string()) return;
  const std::string& s = v.get_ref<const std::string&>();
  try {
    size_t used = 0;
    if (is_unsigned) {
      const unsigned long long n = std::stoull(s, &used);
      if (used == s.size()) v = n;
    } else {
      const long long n = std::stoll(s, &used);
      if (used == s.size()) v = n;
    }
  } catch (const std::exception&) {
    // Not a number after all: left as the printer wrote it.
  }
}

// Walks `j` (an object printed from a message of type `d`) and turns its 64-bit integer fields,
// repeated ones and map values included, into numbers.
void numbers_for_64bit_ints(nlohmann::json& j, const google::protobuf::Descriptor& d) {
  if (!j.is_object()) return;
  for (auto& [key, value] : j.items()) {
    const google::protobuf::FieldDescriptor* f = d.FindFieldByName(key);
    if (!f) continue;
    const google::protobuf::FieldDescriptor* elem = f;
    if (f->is_map()) elem = f->message_type()->FindFieldByName("value");
    auto fix = [&](nlohmann::json& x) {
      if (is_64bit_int(*elem))
        to_number(x, elem->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_UINT64);
      else if (elem->message_type())
        numbers_for_64bit_ints(x, *elem->message_type());
    };
    if (f->is_map() && value.is_object()) {
      for (auto& [k, x] : value.items()) {
        (void)k;
        fix(x);
      }
    } else if (f->is_repeated() && value.is_array()) {
      for (auto& x : value) fix(x);
    } else {
      fix(value);
    }
  }
}

}  // namespace

std::string model_config_json(const config::ModelConfig& config) {
  std::string out;
  google::protobuf::util::JsonPrintOptions po;
  po.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(config, &out, po);
  nlohmann::json j = nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return out;
  numbers_for_64bit_ints(j, *config::ModelConfig::descriptor());
  return j.dump();
}

}  // namespace ingot::server
