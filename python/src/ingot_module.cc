// Copyright ingot authors. Apache-2.0.
//
// _ingot: the public C++ API (include/ingot/ only) as a Python extension module (nanobind).
// It is deliberately thin: C++ names and shapes, Status errors raised as ingot.Error. The
// TensorRT-shaped API that users import (Logger, Builder, OnnxParser, BuilderConfig, Runtime,
// ICudaEngine, IExecutionContext, the calibrators) is Python, in python/ingot/, on top of it.
// Long calls (build, enqueue) release the GIL; callbacks into Python (the logger, a Python
// calibrator) take it back.
#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "ingot/builder.h"
#include "ingot/data_type.h"
#include "ingot/engine.h"
#include "ingot/inspect.h"
#include "ingot/llm.h"
#include "ingot/logger.h"
#include "ingot/reference.h"
#include "ingot/status.h"
#include "ingot/version.h"

#if defined(INGOT_WITH_CUDA)
#include <cuda_runtime_api.h>
#endif

namespace nb = nanobind;
using namespace nb::literals;

namespace {

/// Every failed Status surfaces as this (ingot.Error, a RuntimeError), its message starting
/// with the code's name ("invalid model: ...", "unsupported: ...").
struct IngotError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void check(const ingot::Status& s) {
  if (!s.ok()) throw IngotError(std::string(ingot::status_code_name(s.code())) + ": " + s.message());
}

template <class T>
T take(ingot::Result<T>&& r) {
  if (!r.ok()) check(r.status());
  return std::move(r).value();
}

/// A Logger that hands every message to a Python callable(severity: int, message: str).
class CallbackLogger final : public ingot::Logger {
 public:
  explicit CallbackLogger(nb::object fn) : fn_(std::move(fn)) {}
  ~CallbackLogger() override {
    nb::gil_scoped_acquire gil;
    fn_.reset();
  }
  void log(ingot::Severity severity, const char* message) noexcept override {
    nb::gil_scoped_acquire gil;
    try {
      if (fn_.is_valid()) fn_(static_cast<int>(severity), std::string(message));
    } catch (nb::python_error& e) {
      e.discard_as_unraisable("ingot logger callback");
    } catch (...) {
    }
  }

 private:
  nb::object fn_;
};

std::shared_ptr<ingot::Logger> make_logger(nb::object fn) {
  if (fn.is_none()) return std::shared_ptr<ingot::Logger>(&ingot::default_logger(), [](ingot::Logger*) {});
  return std::make_shared<CallbackLogger>(std::move(fn));
}

/// A Calibrator backed by a Python object with next_batch(inputs) -> list of (name, dtype,
/// shape, bytes) or None, num_batches(), algorithm(), percentile(), read_cache() -> str and
/// write_cache(str) (python/ingot/calibrator.py adapts TensorRT's calibrator classes to this).
class CalibratorBridge final : public ingot::Calibrator {
 public:
  explicit CalibratorBridge(nb::object obj) : obj_(std::move(obj)) {}
  ~CalibratorBridge() override {
    nb::gil_scoped_acquire gil;
    obj_.reset();
  }

  ingot::Result<std::vector<ingot::HostTensor>> next_batch(const std::vector<ingot::TensorInfo>& inputs) override {
    nb::gil_scoped_acquire gil;
    try {
      nb::list infos;
      for (const auto& t : inputs) infos.append(nb::make_tuple(t.name, static_cast<int>(t.dtype), t.shape));
      nb::object batch = obj_.attr("next_batch")(infos);
      std::vector<ingot::HostTensor> out;
      if (batch.is_none()) return out;
      for (nb::handle item : batch) {
        auto tup = nb::cast<nb::tuple>(item);
        ingot::HostTensor h;
        h.name = nb::cast<std::string>(tup[0]);
        h.dtype = static_cast<ingot::DataType>(nb::cast<int>(tup[1]));
        h.shape = nb::cast<std::vector<int64_t>>(tup[2]);
        nb::bytes data = nb::cast<nb::bytes>(tup[3]);
        const auto* p = static_cast<const uint8_t*>(data.data());
        h.data.assign(p, p + data.size());
        out.push_back(std::move(h));
      }
      return out;
    } catch (nb::python_error& e) {
      return ingot::Status(ingot::StatusCode::kInvalidArgument, std::string("calibrator get_batch: ") + e.what());
    } catch (std::exception& e) {
      return ingot::Status(ingot::StatusCode::kInvalidArgument, std::string("calibrator get_batch: ") + e.what());
    }
  }
  int num_batches() const override { return call_or<int>("num_batches", -1); }
  std::string algorithm() const override { return call_or<std::string>("algorithm", "entropy"); }
  double percentile() const override { return call_or<double>("percentile", 99.99); }
  std::string read_cache() override { return call_or<std::string>("read_cache", ""); }
  void write_cache(const std::string& text) override {
    nb::gil_scoped_acquire gil;
    try {
      obj_.attr("write_cache")(text);
    } catch (nb::python_error& e) {
      e.discard_as_unraisable("ingot calibrator write_calibration_cache");
    }
  }

 private:
  template <class T>
  T call_or(const char* name, T fallback) const {
    nb::gil_scoped_acquire gil;
    try {
      nb::object r = obj_.attr(name)();
      return r.is_none() ? fallback : nb::cast<T>(r);
    } catch (nb::python_error& e) {
      e.discard_as_unraisable(name);
    } catch (...) {
    }
    return fallback;
  }
  nb::object obj_;
};

/// A builder with the logger it was given (kept alive as long as the builder).
struct BuilderBox {
  std::shared_ptr<ingot::Logger> logger;
  std::unique_ptr<ingot::Builder> builder;
};

/// A build configuration plus the Python calibrator it points at.
struct ConfigBox {
  ingot::BuilderConfig config;
  nb::object calibrator = nb::none();
};

nb::dict summary_dict(const ingot::BuildSummary& s) {
  nb::dict d;
  d["steps"] = s.steps;
  d["nodes_before_optimization"] = s.nodes_before_optimization;
  d["fused_nodes"] = s.fused_nodes;
  d["tactics_timed"] = s.tactics_timed;
  d["timing_cache_hits"] = s.timing_cache_hits;
  d["engine_bytes"] = s.engine_bytes;
  d["arena_bytes"] = s.arena_bytes;
  d["weight_bytes"] = s.weight_bytes;
  d["seconds"] = s.seconds;
  d["reduced_precision_layers"] = s.reduced_precision_layers;
  d["host_steps"] = s.host_steps;
  d["notes"] = s.notes;
  d["int8_layers"] = s.int8_layers;
  d["int8_kept"] = s.int8_kept;
  d["calibration_batches"] = s.calibration_batches;
  d["calibration_from_cache"] = s.calibration_from_cache;
  return d;
}

nb::tuple build(BuilderBox& b, ConfigBox& c, nb::bytes model, const std::string& path) {
  ingot::BuilderConfig cfg = c.config;
  std::unique_ptr<CalibratorBridge> cal;
  if (!c.calibrator.is_none()) {
    cal = std::make_unique<CalibratorBridge>(c.calibrator);
    cfg.calibrator = cal.get();
  }
  ingot::BuildSummary summary;
  ingot::Result<std::vector<uint8_t>> r = ingot::Status::Ok();
  {
    std::string bytes = path.empty() ? std::string(model.c_str(), model.size()) : std::string();
    nb::gil_scoped_release release;
    r = path.empty() ? b.builder->build_serialized_from_bytes(bytes.data(), bytes.size(), cfg, &summary)
                     : b.builder->build_serialized(path, cfg, &summary);
  }
  std::vector<uint8_t> engine = take(std::move(r));
  return nb::make_tuple(nb::bytes(engine.data(), engine.size()), summary_dict(summary));
}

/// A context and the engine it runs (the engine stays alive with it).
struct ContextBox {
  std::shared_ptr<ingot::Engine> engine;
  std::unique_ptr<ingot::ExecutionContext> ctx;
};

nb::dict io_dict(const ingot::IoTensorDesc& d) {
  nb::dict r;
  r["name"] = d.name;
  r["dtype"] = static_cast<int>(d.dtype);
  r["shape"] = d.shape;
  r["dim_names"] = d.dim_names;
  r["is_input"] = d.is_input;
  return r;
}

nb::dict info_dict(const ingot::TensorInfo& t) {
  nb::dict r;
  r["name"] = t.name;
  r["dtype"] = static_cast<int>(t.dtype);
  r["shape"] = t.shape;
  r["dim_names"] = t.dim_names;
  r["rank_known"] = t.rank_known;
  return r;
}

}  // namespace

NB_MODULE(_ingot, m) {
  m.doc() = "ingot's C++ API (thin); import ingot for the TensorRT-shaped API";
  nb::exception<IngotError>(m, "Error", PyExc_RuntimeError);
  // Engines and contexts a script still holds at interpreter exit are not leaks of ours.
  nb::set_leak_warnings(false);

  m.def("version", [] { return std::string(ingot::version()); });
  m.def("data_type_name", [](int t) { return std::string(ingot::data_type_name(static_cast<ingot::DataType>(t))); });
  m.def("cuda_device_count", [] {
#if defined(INGOT_WITH_CUDA)
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
    return n;
#else
    return 0;
#endif
  });
  m.def("stream_synchronize", [](uintptr_t stream) {
#if defined(INGOT_WITH_CUDA)
    nb::gil_scoped_release release;
    if (cudaStreamSynchronize(reinterpret_cast<cudaStream_t>(stream)) != cudaSuccess)
      throw IngotError(std::string("cuda error: ") + cudaGetErrorString(cudaGetLastError()));
#else
    (void)stream;
#endif
  }, "stream"_a = 0);
  m.def("built_with_cuda", [] {
#if defined(INGOT_WITH_CUDA)
    return true;
#else
    return false;
#endif
  });
  // Calibrators that hand TensorRT-style pointers: host memory is read directly, device memory
  // (CUDA builds) is copied back first.
  m.def("read_memory", [](uintptr_t ptr, size_t nbytes) {
    std::string out(nbytes, '\0');
#if defined(INGOT_WITH_CUDA)
    cudaPointerAttributes attr{};
    if (cudaPointerGetAttributes(&attr, reinterpret_cast<const void*>(ptr)) == cudaSuccess &&
        (attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged)) {
      if (cudaMemcpy(out.data(), reinterpret_cast<const void*>(ptr), nbytes, cudaMemcpyDeviceToHost) != cudaSuccess)
        throw IngotError("read_memory: cudaMemcpy from device pointer failed");
      return nb::bytes(out.data(), out.size());
    }
    (void)cudaGetLastError();
#endif
    std::memcpy(out.data(), reinterpret_cast<const void*>(ptr), nbytes);
    return nb::bytes(out.data(), out.size());
  });

  m.def("import_model", [](nb::bytes model, const std::string& path) {
    ingot::Result<std::unique_ptr<ingot::ReferenceModel>> r = ingot::Status::Ok();
    {
      std::string bytes = path.empty() ? std::string(model.c_str(), model.size()) : std::string();
      nb::gil_scoped_release release;
      r = path.empty() ? ingot::ReferenceModel::load_bytes(bytes.data(), bytes.size()) : ingot::ReferenceModel::load(path);
    }
    std::unique_ptr<ingot::ReferenceModel> ref = take(std::move(r));
    nb::list ins, outs;
    for (const auto& t : ref->inputs()) ins.append(info_dict(t));
    for (const auto& t : ref->outputs()) outs.append(info_dict(t));
    return nb::make_tuple(ins, outs, ref->opset(), ref->num_nodes());
  }, "model"_a, "path"_a = "");

  // The LLM runtime (issue 22): the thin half of ingot.LLM (python/ingot/llm.py).
  nb::class_<ingot::LlmModel>(m, "LlmModel")
      .def_static("load_gguf", [](const std::string& path) {
        ingot::Result<std::unique_ptr<ingot::LlmModel>> r = ingot::Status::Ok();
        {
          nb::gil_scoped_release release;
          r = ingot::LlmModel::load_gguf(path);
        }
        return std::shared_ptr<ingot::LlmModel>(take(std::move(r)));
      }, "path"_a)
      .def_static("load", [](const std::string& path, const std::string& backend, bool bf16, int64_t kv_blocks,
                             bool fp8_weights, bool fp8_kv, bool int4_weights, int64_t int4_group,
                             bool checkpoint_int4) {
        ingot::LlmLoadOptions o;
        o.checkpoint_int4 = checkpoint_int4;
        o.int4_group = int4_group;
        o.backend = backend;
        o.bf16 = bf16;
        o.fp8_weights = fp8_weights;
        o.int4_weights = int4_weights;
        o.fp8_kv = fp8_kv;
        o.kv_blocks = kv_blocks;
        ingot::Result<std::unique_ptr<ingot::LlmModel>> r = ingot::Status::Ok();
        {
          nb::gil_scoped_release release;
          r = ingot::LlmModel::load(path, o);
        }
        return std::shared_ptr<ingot::LlmModel>(take(std::move(r)));
      }, "path"_a, "backend"_a, "bf16"_a, "kv_blocks"_a, "fp8_weights"_a = false, "fp8_kv"_a = false,
         "int4_weights"_a = false, "int4_group"_a = 0, "checkpoint_int4"_a = true)
      .def("int4_weights", &ingot::LlmModel::int4_weights)
      .def("last_logits", [](ingot::LlmModel& m, const std::vector<std::vector<int32_t>>& prompts) {
        ingot::Result<std::vector<std::vector<float>>> r = ingot::Status::Ok();
        {
          nb::gil_scoped_release release;
          r = m.last_logits(prompts);
        }
        std::vector<std::vector<float>> rows = take(std::move(r));
        std::string flat;
        for (const auto& row : rows) flat.append(reinterpret_cast<const char*>(row.data()), row.size() * sizeof(float));
        return nb::bytes(flat.data(), flat.size());  // rows x vocab_size float32, row-major
      }, "prompts"_a)
      .def("describe", &ingot::LlmModel::describe)
      .def("encode_prompt", [](const ingot::LlmModel& m, const std::string& text) { return take(m.encode_prompt(text)); },
           "text"_a)
      .def("encode_chat", [](const ingot::LlmModel& m, const std::vector<std::pair<std::string, std::string>>& turns) {
        std::vector<ingot::ChatMessage> msgs;
        for (const auto& [role, content] : turns) msgs.push_back({role, content});
        return take(m.encode_chat(msgs));
      }, "messages"_a)
      .def("generate", [](ingot::LlmModel& m, const std::vector<std::vector<int32_t>>& prompts, int64_t max_tokens,
                          double temperature, int64_t top_k, double top_p, nb::object seed, bool ignore_eos,
                          int64_t kv_blocks) {
        ingot::GenerationParams p;
        p.max_tokens = max_tokens;
        p.temperature = temperature;
        p.top_k = top_k;
        p.top_p = top_p;
        p.has_seed = !seed.is_none();
        if (p.has_seed) p.seed = nb::cast<uint64_t>(seed);
        p.ignore_eos = ignore_eos;
        p.kv_blocks = kv_blocks;
        ingot::Result<std::vector<ingot::GenerationResult>> r = ingot::Status::Ok();
        ingot::GenerationStats st;
        {
          nb::gil_scoped_release release;
          r = m.generate_ids(prompts, p, &st);
        }
        std::vector<ingot::GenerationResult> results = take(std::move(r));
        nb::list out;
        for (const ingot::GenerationResult& g : results) {
          nb::dict d;
          d["text"] = g.text;
          d["prompt_ids"] = g.prompt_ids;
          d["token_ids"] = g.token_ids;
          d["finish_reason"] = g.finish_reason;
          out.append(d);
        }
        nb::dict stats;
        stats["seconds"] = st.seconds;
        stats["steps"] = st.steps;
        stats["prompt_tokens"] = st.prompt_tokens;
        stats["generated_tokens"] = st.generated_tokens;
        stats["preemptions"] = st.preemptions;
        stats["graph_steps"] = st.graph_steps;
        stats["warmup_seconds"] = st.warmup_seconds;
        stats["forward_seconds"] = st.forward_seconds;
        stats["sample_seconds"] = st.sample_seconds;
        return nb::make_tuple(out, stats);
      }, "prompts"_a, "max_tokens"_a, "temperature"_a, "top_k"_a, "top_p"_a, "seed"_a.none(), "ignore_eos"_a,
         "kv_blocks"_a);

  nb::class_<ConfigBox>(m, "BuilderConfig")
      .def(nb::init<>())
      .def_prop_rw("backend", [](ConfigBox& c) { return c.config.backend == ingot::BackendKind::kCuda ? "cuda" : "cpu"; },
                   [](ConfigBox& c, const std::string& b) {
                     if (b != "cpu" && b != "cuda") throw IngotError("invalid argument: backend must be 'cpu' or 'cuda', got '" + b + "'");
                     c.config.backend = b == "cuda" ? ingot::BackendKind::kCuda : ingot::BackendKind::kCpu;
                   })
      .def_prop_rw("fp16", [](ConfigBox& c) { return c.config.fp16; }, [](ConfigBox& c, bool v) { c.config.fp16 = v; })
      .def_prop_rw("bf16", [](ConfigBox& c) { return c.config.bf16; }, [](ConfigBox& c, bool v) { c.config.bf16 = v; })
      .def_prop_rw("tf32", [](ConfigBox& c) { return c.config.tf32; }, [](ConfigBox& c, bool v) { c.config.tf32 = v; })
      .def_prop_rw("int8", [](ConfigBox& c) { return c.config.int8; }, [](ConfigBox& c, bool v) { c.config.int8 = v; })
      .def_prop_rw("fp8", [](ConfigBox& c) { return c.config.fp8; }, [](ConfigBox& c, bool v) { c.config.fp8 = v; })
      .def_prop_rw("strict_types", [](ConfigBox& c) { return c.config.strict_types; },
                   [](ConfigBox& c, bool v) { c.config.strict_types = v; })
      .def_prop_rw("reduced_io", [](ConfigBox& c) { return c.config.reduced_io; }, [](ConfigBox& c, bool v) { c.config.reduced_io = v; })
      .def_prop_rw("allow_host_fallback", [](ConfigBox& c) { return c.config.allow_host_fallback; },
                   [](ConfigBox& c, bool v) { c.config.allow_host_fallback = v; })
      .def_prop_rw("int8_min_cosine", [](ConfigBox& c) { return c.config.int8_min_cosine; },
                   [](ConfigBox& c, double v) { c.config.int8_min_cosine = v; })
      .def_prop_rw("workspace_bytes", [](ConfigBox& c) { return c.config.workspace_bytes; },
                   [](ConfigBox& c, uint64_t v) { c.config.workspace_bytes = v; })
      .def_prop_rw("optimization_level", [](ConfigBox& c) { return c.config.optimization_level; },
                   [](ConfigBox& c, int v) {
                     if (v < 0 || v > 5) throw IngotError("invalid argument: optimization level must be 0..5");
                     c.config.optimization_level = v;
                   })
      .def_prop_rw("timing_cache_file", [](ConfigBox& c) { return c.config.timing_cache_file; },
                   [](ConfigBox& c, const std::string& v) { c.config.timing_cache_file = v; })
      .def_prop_rw("tactic_timing", [](ConfigBox& c) { return c.config.tactic_timing; },
                   [](ConfigBox& c, const std::string& v) { c.config.tactic_timing = v; })
      .def_prop_rw("conv_layout", [](ConfigBox& c) { return c.config.conv_layout; },
                   [](ConfigBox& c, const std::string& v) { c.config.conv_layout = v; })
      .def_prop_rw("layer_precisions", [](ConfigBox& c) { return c.config.layer_precisions; },
                   [](ConfigBox& c, const std::map<std::string, std::string>& v) { c.config.layer_precisions = v; })
      .def_prop_rw("disabled_passes", [](ConfigBox& c) { return c.config.disabled_passes; },
                   [](ConfigBox& c, const std::vector<std::string>& v) { c.config.disabled_passes = v; })
      .def_prop_rw("calibrator", [](ConfigBox& c) { return c.calibrator; }, [](ConfigBox& c, nb::object v) { c.calibrator = v; })
      .def("add_profile",
           [](ConfigBox& c, const std::vector<std::tuple<std::string, std::vector<int64_t>, std::vector<int64_t>,
                                                        std::vector<int64_t>>>& dims) {
             ingot::OptimizationProfile p;
             for (const auto& [name, mn, opt, mx] : dims) p.set_dimensions(name, mn, opt, mx);
             c.config.profiles.push_back(std::move(p));
             return static_cast<int>(c.config.profiles.size()) - 1;
           })
      .def_prop_ro("num_profiles", [](ConfigBox& c) { return static_cast<int>(c.config.profiles.size()); });

  nb::class_<BuilderBox>(m, "Builder")
      .def("__init__", [](BuilderBox* b, nb::object log_fn) {
        new (b) BuilderBox();
        b->logger = make_logger(std::move(log_fn));
        b->builder = std::make_unique<ingot::Builder>(*b->logger);
      }, "log_fn"_a = nb::none())
      .def("build", &build, "config"_a, "model"_a, "path"_a = "",
           "Builds from ONNX bytes (or the file at `path`): (engine bytes, summary dict); ingot.Error on failure");

  nb::class_<ingot::Engine>(m, "Engine")
      .def_prop_ro("io_tensors", [](const ingot::Engine& e) {
        nb::list l;
        for (const auto& d : e.io_tensors()) l.append(io_dict(d));
        return l;
      })
      .def_prop_ro("num_profiles", &ingot::Engine::num_profiles)
      .def("profile_dimensions", [](const ingot::Engine& e, int profile, const std::string& name) {
        std::vector<int64_t> mn, opt, mx;
        check(e.profile_dimensions(profile, name, &mn, &opt, &mx));
        return nb::make_tuple(mn, opt, mx);
      })
      .def_prop_ro("layers", [](const ingot::Engine& e) {
        nb::list l;
        for (const auto& d : e.layers()) {
          nb::dict r;
          r["name"] = d.name;
          r["op"] = d.op;
          r["tactic"] = d.tactic;
          r["precision"] = d.precision;
          r["layout"] = d.layout;
          r["origins"] = d.origins;
          r["inputs"] = d.inputs;
          r["outputs"] = d.outputs;
          l.append(r);
        }
        return l;
      })
      .def_prop_ro("memory", [](const ingot::Engine& e) {
        ingot::MemoryFigures f = e.memory();
        nb::dict r;
        r["arena_bytes"] = f.arena_bytes;
        r["weight_bytes"] = f.weight_bytes;
        r["workspace_bytes"] = f.workspace_bytes;
        return r;
      })
      .def_prop_ro("backend", &ingot::Engine::backend)
      .def("create_execution_context", [](std::shared_ptr<ingot::Engine> e) {
        auto c = std::make_unique<ContextBox>();
        c->ctx = take(e->create_execution_context());
        c->engine = std::move(e);
        return c.release();
      }, nb::rv_policy::take_ownership);

  nb::class_<ContextBox>(m, "ExecutionContext")
      .def("set_optimization_profile", [](ContextBox& c, int p) { check(c.ctx->set_optimization_profile(p)); })
      .def_prop_ro("optimization_profile", [](ContextBox& c) { return c.ctx->optimization_profile(); })
      .def("set_input_shape", [](ContextBox& c, const std::string& n, const std::vector<int64_t>& d) {
        check(c.ctx->set_input_shape(n, d));
      })
      .def("set_tensor_address", [](ContextBox& c, const std::string& n, uintptr_t p) {
        check(c.ctx->set_tensor_address(n, reinterpret_cast<void*>(p)));
      })
      .def("tensor_address", [](ContextBox& c, const std::string& n) {
        return reinterpret_cast<uintptr_t>(c.ctx->tensor_address(n));
      })
      .def("infer_shapes", [](ContextBox& c) { check(c.ctx->infer_shapes()); })
      .def("tensor_shape", [](ContextBox& c, const std::string& n) { return take(c.ctx->tensor_shape(n)); })
      .def("enqueue", [](ContextBox& c, uintptr_t stream) {
        ingot::Status s = ingot::Status::Ok();
        {
          nb::gil_scoped_release release;
          s = c.ctx->enqueue(reinterpret_cast<void*>(stream));
        }
        check(s);
      }, "stream"_a = 0)
      .def("set_cuda_graph_mode", [](ContextBox& c, bool on) { check(c.ctx->set_cuda_graph_mode(on)); })
      .def_prop_ro("cuda_graph_status", [](ContextBox& c) { return c.ctx->cuda_graph_status(); })
      .def_prop_ro("cuda_graphs_held", [](ContextBox& c) { return c.ctx->cuda_graphs_held(); })
      .def_prop_ro("engine", [](ContextBox& c) { return c.engine; });

  m.def("deserialize", [](nb::bytes data, nb::object log_fn) {
    std::shared_ptr<ingot::Logger> logger = make_logger(std::move(log_fn));
    ingot::Runtime rt(*logger);
    ingot::Result<std::shared_ptr<ingot::Engine>> r = ingot::Status::Ok();
    {
      std::string bytes(data.c_str(), data.size());
      nb::gil_scoped_release release;
      r = rt.deserialize(bytes.data(), bytes.size());
    }
    return take(std::move(r));
  }, "data"_a, "log_fn"_a = nb::none());
  m.def("deserialize_file", [](const std::string& path, nb::object log_fn) {
    std::shared_ptr<ingot::Logger> logger = make_logger(std::move(log_fn));
    ingot::Runtime rt(*logger);
    return take(rt.deserialize_file(path));
  }, "path"_a, "log_fn"_a = nb::none());
}
