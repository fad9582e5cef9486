// Copyright ingot authors. Apache-2.0.
//
// Unit tests of `ingot serve`'s pieces: the KServe v2 request parser and response writer, the
// config.pbtxt reader, and the dynamic batcher on a real CPU engine (ordering, splitting,
// shapes that must not mix, queue bound, timeouts, drain on stop).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <nlohmann/json.hpp>
#include <thread>

#include "ingot/builder.h"
#include "ingot/engine.h"
#include "onnx/onnx.pb.h"
#include "server/dynamic_batcher.h"
#ifdef INGOT_SERVER_WITH_GRPC
#include "server/grpc_request.h"
#include "server/grpc_service.pb.h"
#endif
#include "server/infer_request.h"
#include "server/metrics.h"
#include "server/model_config.h"
#include "server/shared_memory.h"

#ifdef INGOT_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace ingot::server {
namespace {

using json = nlohmann::json;

std::optional<RequestError> parse(const std::string& body, InferRequest* r,
                                  std::optional<size_t> header = std::nullopt) {
  return parse_infer_request(body.data(), body.size(), header, r);
}

void expect_error(const std::string& body, const std::string& words, std::optional<size_t> header = std::nullopt) {
  InferRequest r;
  auto e = parse(body, &r, header);
  ASSERT_TRUE(e.has_value()) << body;
  EXPECT_EQ(e->http_status, 400);
  EXPECT_NE(e->message.find(words), std::string::npos) << "'" << e->message << "' lacks '" << words << "'";
}

std::vector<float> floats(const std::string& data) {
  std::vector<float> v(data.size() / 4);
  std::memcpy(v.data(), data.data(), v.size() * 4);
  return v;
}

TEST(InferRequestParser, JsonTensorsNestedOrFlat) {
  InferRequest r;
  auto e = parse(R"({"id":"r1","inputs":[{"name":"x","shape":[2,2],"datatype":"FP32","data":[[1,2.5],[3,-4]]},
                     {"name":"i","shape":[3],"datatype":"INT64","data":[-9007199254740993,0,9223372036854775807]},
                     {"name":"b","shape":[2],"datatype":"BOOL","data":[true,false]}],
                     "outputs":[{"name":"y","parameters":{"binary_data":true}},{"name":"z"}]})",
                 &r);
  ASSERT_FALSE(e.has_value()) << e->message;
  EXPECT_EQ(r.id, "r1");
  ASSERT_EQ(r.inputs.size(), 3u);
  EXPECT_EQ(r.inputs[0].shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(floats(r.inputs[0].data), (std::vector<float>{1, 2.5f, 3, -4}));
  int64_t i[3];
  std::memcpy(i, r.inputs[1].data.data(), 24);
  EXPECT_EQ(i[0], -9007199254740993LL);  // exact: integers are not routed through double
  EXPECT_EQ(i[2], INT64_MAX);
  EXPECT_EQ(r.inputs[2].data, std::string("\1\0", 2));
  ASSERT_EQ(r.outputs.size(), 2u);
  EXPECT_TRUE(r.outputs[0].binary);
  EXPECT_FALSE(r.outputs[1].binary);
}

TEST(InferRequestParser, BinaryTensorsFollowTheHeaderInInputOrder) {
  std::string head = R"({"inputs":[{"name":"a","shape":[2],"datatype":"FP32","parameters":{"binary_data_size":8}},
                         {"name":"b","shape":[1],"datatype":"INT32","data":[7]},
                         {"name":"c","shape":[1],"datatype":"UINT8","parameters":{"binary_data_size":1}}],
                         "parameters":{"binary_data_output":true,"timeout":1500}})";
  float a[2] = {1.5f, -2};
  std::string body = head + std::string(reinterpret_cast<char*>(a), 8) + "\x2a";
  InferRequest r;
  auto e = parse(body, &r, head.size());
  ASSERT_FALSE(e.has_value()) << e->message;
  // Binary tensors are views into the body, not copies.
  ASSERT_TRUE(r.inputs[0].external.has_value());
  EXPECT_EQ(r.inputs[0].bytes(), body.data() + head.size());
  EXPECT_EQ(floats(std::string(r.inputs[0].bytes(), r.inputs[0].byte_size())), (std::vector<float>{1.5f, -2}));
  EXPECT_FALSE(r.inputs[1].external.has_value());  // JSON data is packed into the input
  EXPECT_EQ(std::string(r.inputs[2].bytes(), r.inputs[2].byte_size()), "\x2a");
  EXPECT_TRUE(r.binary_outputs);
  EXPECT_EQ(r.timeout_us, 1500);
  // Sizes that do not add up, each named.
  expect_error(body + "x", "1 bytes after", head.size());
  expect_error(body.substr(0, body.size() - 1), "runs past the body", head.size());
  expect_error(body, "no Inference-Header-Content-Length");
  expect_error(body, "exceeds the body size", body.size() + 1);
}

TEST(InferRequestParser, EveryBadRequestIsNamed) {
  expect_error("", "malformed JSON");
  expect_error("{\"inputs\":[", "malformed JSON");
  expect_error("[]", "JSON object");
  expect_error("{}", "\"inputs\"");
  expect_error(R"({"inputs":[]})", "empty");
  expect_error(R"({"inputs":[{"shape":[1],"datatype":"FP32","data":[1]}]})", "\"name\"");
  expect_error(R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP99","data":[1]}]})", "unknown datatype 'FP99'");
  expect_error(R"({"inputs":[{"name":"x","shape":[1,-2],"datatype":"FP32","data":[1]}]})", "non-negative");
  expect_error(R"({"inputs":[{"name":"x","shape":[3],"datatype":"FP32","data":[1,2]}]})",
               "2 elements but shape [3] needs 3");
  expect_error(R"({"inputs":[{"name":"x","shape":[1],"datatype":"UINT8","data":[300]}]})", "out of range");
  expect_error(R"({"inputs":[{"name":"x","shape":[1],"datatype":"INT8","data":[1.5]}]})", "expected an integer");
  expect_error(R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":["a"]}]})", "expected a number");
  expect_error(R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1e300]}]})", "out of range for FP32");
  expect_error(R"({"inputs":[{"name":"x","shape":[1],"datatype":"BOOL","data":[1]}]})", "true/false");
  expect_error(R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP16","data":[1]}]})", "binary");
  expect_error(R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32"}]})", "\"data\" is missing");
  expect_error(R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1]},
                             {"name":"x","shape":[1],"datatype":"FP32","data":[1]}]})",
               "appears twice");
  expect_error(R"({"inputs":[{"name":"x","shape":[4000000000,4000000000,4000000000],"datatype":"FP32","data":[1]}]})",
               "too many elements");
  expect_error(
      R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1]}],"outputs":[{"name":"y"},{"name":"y"}]})",
      "requested twice");
  expect_error(R"({"id":5,"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1]}]})", "\"id\"");
  std::string deep = std::string(100, '[') + "1" + std::string(100, ']');
  expect_error(R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":)" + deep + "}]}", "nested deeper");
}

#ifdef INGOT_SERVER_WITH_GRPC
// gRPC's raw_input_contents become the inputs' bytes without a copy: moved out of the message
// (a 16-image fp32 request is 9.6 MB; the copy was half the server's CPU time per request).
TEST(GrpcRequest, RawContentsAreMovedIntoTheInputs) {
  inference::ModelInferRequest q;
  q.set_id("r7");
  for (const char* name : {"a", "b"}) {
    auto* t = q.add_inputs();
    t->set_name(name);
    t->set_datatype("FP32");
    t->add_shape(1);
    t->add_shape(name[0] == 'a' ? 1024 : 1);  // a: past std::string's inline buffer, so a move keeps it
  }
  std::vector<float> a(1024);
  for (size_t i = 0; i < a.size(); ++i) a[i] = 0.5f * static_cast<float>(i) - 3;
  float b = 7;
  q.add_raw_input_contents(std::string(reinterpret_cast<char*>(a.data()), a.size() * 4));
  q.add_raw_input_contents(std::string(reinterpret_cast<char*>(&b), 4));
  const char* a_bytes = q.raw_input_contents(0).data();
  InferRequest r;
  auto e = infer_request_from_proto(&q, &r);
  ASSERT_FALSE(e.has_value()) << e->message;
  EXPECT_EQ(r.id, "r7");
  ASSERT_EQ(r.inputs.size(), 2u);
  EXPECT_EQ(floats(r.inputs[0].data), a);
  EXPECT_EQ(floats(r.inputs[1].data), (std::vector<float>{7}));
  EXPECT_EQ(r.inputs[0].data.data(), a_bytes);  // the same buffer: moved
  EXPECT_TRUE(q.raw_input_contents(0).empty());
  // A size that disagrees with the shape is still named.
  inference::ModelInferRequest bad;
  auto* t = bad.add_inputs();
  t->set_name("x");
  t->set_datatype("FP32");
  t->add_shape(2);
  bad.add_raw_input_contents(std::string(4, '\0'));
  InferRequest rb;
  auto be = infer_request_from_proto(&bad, &rb);
  ASSERT_TRUE(be.has_value());
  EXPECT_NE(be->message.find("4 bytes of data but shape [2]"), std::string::npos) << be->message;
}
#endif

// The system shared-memory extension's request parameters.
TEST(InferRequestParser, SharedMemoryInputsAndOutputs) {
  InferRequest r;
  auto e = parse(R"({"inputs":[{"name":"x","shape":[2,3],"datatype":"FP32","parameters":
                     {"shared_memory_region":"in","shared_memory_byte_size":24,"shared_memory_offset":64}}],
                     "outputs":[{"name":"y","parameters":{"shared_memory_region":"out","shared_memory_byte_size":48}}]})",
                 &r);
  ASSERT_FALSE(e.has_value()) << e->message;
  ASSERT_EQ(r.inputs.size(), 1u);
  ASSERT_TRUE(r.inputs[0].shm.has_value());
  EXPECT_EQ(r.inputs[0].shm->region, "in");
  EXPECT_EQ(r.inputs[0].shm->offset, 64u);
  EXPECT_EQ(r.inputs[0].shm->byte_size, 24u);
  EXPECT_TRUE(r.inputs[0].data.empty());
  ASSERT_EQ(r.outputs.size(), 1u);
  ASSERT_TRUE(r.outputs[0].shm.has_value());
  EXPECT_EQ(r.outputs[0].shm->region, "out");
  EXPECT_EQ(r.outputs[0].shm->offset, 0u);
  expect_error(R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","parameters":{"shared_memory_region":"in"}}]})",
               "needs shared_memory_byte_size");
  expect_error(R"({"inputs":[{"name":"x","shape":[2],"datatype":"FP32","parameters":
                   {"shared_memory_region":"in","shared_memory_byte_size":4}}]})",
               "shared_memory_byte_size 4 does not match shape [2]");
  expect_error(R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1],"parameters":
                   {"shared_memory_region":"in","shared_memory_byte_size":4}}]})",
               "also data");
  expect_error(R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1],"parameters":
                   {"shared_memory_offset":4}}]})",
               "without shared_memory_region");
  expect_error(R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","parameters":
                   {"shared_memory_region":7,"shared_memory_byte_size":4}}]})",
               "must be a region name");
  expect_error(R"({"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1]}],"outputs":[{"name":"y",
                   "parameters":{"shared_memory_region":"o","shared_memory_byte_size":-1}}]})",
               "needs shared_memory_byte_size");
}

// Triton's C++ HTTP client (perf_analyzer) takes an output with "parameters" to carry
// binary_data_size; a shared-memory output is written into its region and named by no parameters.
TEST(InferResponse, SharedMemoryOutputsCarryNoParameters) {
  float y[3] = {1.5f, -2, 3};
  std::optional<size_t> header;
  std::string body = build_infer_response(
      "m", "1", "", {{"y", DataType::kFloat32, {1, 3}, y, 12, true, SharedMemoryRef{"out", 8, 64}}}, &header);
  EXPECT_FALSE(header.has_value());  // nothing binary follows
  json j = json::parse(body);
  EXPECT_EQ(j["outputs"][0]["name"], "y");
  EXPECT_EQ(j["outputs"][0]["shape"], json::array({1, 3}));
  EXPECT_FALSE(j["outputs"][0].contains("parameters"));
  EXPECT_FALSE(j["outputs"][0].contains("data"));
}

// A POSIX shared-memory object of `bytes`, removed with the fixture.
class SharedMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    key_ = "/ingot_shm_test_" + std::to_string(getpid());
    int fd = shm_open(key_.c_str(), O_CREAT | O_RDWR | O_TRUNC, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(ftruncate(fd, kBytes), 0);
    void* p = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    ASSERT_NE(p, MAP_FAILED);
    mem_ = static_cast<uint8_t*>(p);
    for (size_t i = 0; i < kBytes; ++i) mem_[i] = static_cast<uint8_t>(i * 7 + 3);
  }
  void TearDown() override {
    if (mem_) munmap(mem_, kBytes);
    shm_unlink(key_.c_str());
  }
  static constexpr size_t kBytes = 3 * 4096 + 100;
  std::string key_;
  uint8_t* mem_ = nullptr;
};

TEST_F(SharedMemoryTest, RegisterReadWriteStatusUnregister) {
  SharedMemoryManager m;
  // Offset 5000: not page-aligned, in the object's second page.
  ASSERT_FALSE(m.register_region("r", key_, 5000, 2000).has_value());
  ExternalBytes got;
  ASSERT_FALSE(m.view(SharedMemoryRef{"r", 10, 8}, &got).has_value());
  ASSERT_EQ(got.size, 8u);
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(static_cast<uint8_t>(got.data[i]), mem_[5010 + i]) << i;
  const char out[4] = {'a', 'b', 'c', 'd'};
  ASSERT_FALSE(m.write(SharedMemoryRef{"r", 1996, 4}, out, 4).has_value());
  EXPECT_EQ(std::memcmp(mem_ + 5000 + 1996, out, 4), 0);  // the client sees it in its own mapping
  std::vector<SharedMemoryRegionInfo> st;
  ASSERT_FALSE(m.status("", &st).has_value());
  ASSERT_EQ(st.size(), 1u);
  EXPECT_EQ(st[0].name, "r");
  EXPECT_EQ(st[0].key, key_);
  EXPECT_EQ(st[0].offset, 5000u);
  EXPECT_EQ(st[0].byte_size, 2000u);

  auto words = [](const std::optional<RequestError>& e, const std::string& w) {
    return e.has_value() && e->http_status == 400 && e->message.find(w) != std::string::npos;
  };
  EXPECT_TRUE(words(m.view(SharedMemoryRef{"r", 1997, 4}, &got), "exceeds its 2000 bytes"));
  EXPECT_TRUE(words(m.write(SharedMemoryRef{"r", 0, 2}, out, 4), "needs 4 bytes"));
  EXPECT_TRUE(words(m.view(SharedMemoryRef{"nope", 0, 4}, &got), "no shared-memory region 'nope'"));
  EXPECT_TRUE(words(m.register_region("r", key_, 0, 8), "already registered"));
  EXPECT_TRUE(words(m.register_region("big", key_, 4096, kBytes), "exceeds key"));
  EXPECT_TRUE(words(m.register_region("gone", "/ingot_no_such_key", 0, 8), "cannot open key"));
  EXPECT_TRUE(words(m.register_region("zero", key_, 0, 0), "byte_size must be positive"));
  EXPECT_TRUE(words(m.status("nope", &st), "no system shared-memory region 'nope'"));
  EXPECT_TRUE(words(m.unregister("nope"), "no system shared-memory region 'nope'"));
  // The CUDA extension shares the names but sees only its own regions; without a device (or a
  // handle CUDA can open) nothing registers, and the message names the region.
  EXPECT_TRUE(words(m.register_cuda_region("r", std::string(64, '\1'), 0, 8), "already registered"));
  auto cuda = m.register_cuda_region("g", std::string(64, '\1'), 0, 8);
  ASSERT_TRUE(cuda.has_value());
  EXPECT_NE(cuda->message.find("'g'"), std::string::npos) << cuda->message;
  EXPECT_TRUE(words(m.register_cuda_region("g", std::string(64, '\1'), 0, 0), "byte_size must be positive"));
  EXPECT_TRUE(words(m.status("r", &st, SharedMemoryKind::kCuda), "no CUDA shared-memory region 'r'"));
  EXPECT_TRUE(words(m.unregister("r", SharedMemoryKind::kCuda), "no CUDA shared-memory region 'r'"));
  ASSERT_FALSE(m.status("", &st, SharedMemoryKind::kCuda).has_value());
  EXPECT_TRUE(st.empty());
  ASSERT_FALSE(m.unregister("", SharedMemoryKind::kCuda).has_value());  // all CUDA regions: none
  ASSERT_FALSE(m.status("r", &st).has_value()) << "unregistering every CUDA region left the system ones";

  ASSERT_FALSE(m.register_region("r2", key_, 0, kBytes).has_value());
  ASSERT_FALSE(m.unregister("r").has_value());
  ASSERT_FALSE(m.status("", &st).has_value());
  ASSERT_EQ(st.size(), 1u);
  EXPECT_EQ(st[0].name, "r2");
  ASSERT_FALSE(m.unregister("").has_value());
  ASSERT_FALSE(m.status("", &st).has_value());
  EXPECT_TRUE(st.empty());
}

TEST_F(SharedMemoryTest, ViewReadsInPlaceAndHoldsTheMappingPastUnregister) {
  SharedMemoryManager m;
  ASSERT_FALSE(m.register_region("r", key_, 5000, 2000).has_value());
  ExternalBytes v;
  ASSERT_FALSE(m.view(SharedMemoryRef{"r", 16, 32}, &v).has_value());
  ASSERT_EQ(v.size, 32u);
  for (size_t i = 0; i < 32; ++i) EXPECT_EQ(static_cast<uint8_t>(v.data[i]), mem_[5016 + i]) << i;
  mem_[5016] = 0xAB;  // the client writes after the lookup: the view is the region, not a copy
  EXPECT_EQ(static_cast<uint8_t>(v.data[0]), 0xAB);
  ASSERT_FALSE(m.unregister("r").has_value());
  // The view still reads mapped memory (AddressSanitizer / a segfault would say otherwise).
  EXPECT_EQ(static_cast<uint8_t>(v.data[1]), mem_[5017]);
  ExternalBytes none;
  EXPECT_TRUE(m.view(SharedMemoryRef{"r", 0, 4}, &none).has_value());
  EXPECT_TRUE(m.view(SharedMemoryRef{"r2", 0, 4}, &none).has_value());
}

ModelSignature mlp_signature() {
  return ModelSignature{
      "m", 8, {{"x", DataType::kFloat32, {3}}, {"k", DataType::kInt64, {-1}}}, {{"y", DataType::kFloat32, {3}}}};
}

TEST(ValidateRequest, AgainstTheModel) {
  ModelSignature sig = mlp_signature();
  auto check = [&](const std::string& body, const std::string& words) {
    InferRequest r;
    ASSERT_FALSE(parse(body, &r).has_value()) << body;
    int64_t batch = 0;
    auto e = validate_request(r, sig, &batch);
    if (words.empty()) {
      EXPECT_FALSE(e.has_value()) << e->message;
      return;
    }
    ASSERT_TRUE(e.has_value()) << body;
    EXPECT_EQ(e->http_status, 400);
    EXPECT_NE(e->message.find(words), std::string::npos) << e->message;
  };
  const std::string k = R"({"name":"k","shape":[2,5],"datatype":"INT64","data":[1,2,3,4,5,6,7,8,9,10]})";
  check(R"({"inputs":[{"name":"x","shape":[2,3],"datatype":"FP32","data":[1,2,3,4,5,6]},)" + k + "]}", "");
  check(R"({"inputs":[{"name":"x","shape":[2,3],"datatype":"FP64","data":[1,2,3,4,5,6]},)" + k + "]}", "datatype FP64");
  check(R"({"inputs":[{"name":"x","shape":[2,4],"datatype":"FP32","data":[1,2,3,4,5,6,7,8]},)" + k + "]}",
        "shape [2,4] does not match the model's [batch,3]");
  check(R"({"inputs":[{"name":"x","shape":[1,3],"datatype":"FP32","data":[1,2,3]},)" + k + "]}", "differs");
  check(R"({"inputs":[{"name":"x","shape":[2,3],"datatype":"FP32","data":[1,2,3,4,5,6]}]})", "missing input 'k'");
  check(R"({"inputs":[{"name":"q","shape":[2,3],"datatype":"FP32","data":[1,2,3,4,5,6]},)" + k + "]}",
        "unknown input 'q'");
  check(R"({"inputs":[{"name":"x","shape":[0,3],"datatype":"FP32","data":[]},)" + k + "]}", "batch size 0");
  check(R"({"inputs":[{"name":"x","shape":[2,3],"datatype":"FP32","data":[1,2,3,4,5,6]},)" + k +
            R"(],"outputs":[{"name":"nope"}]})",
        "unknown output 'nope'");
}

TEST(InferResponse, JsonAndBinaryOutputs) {
  float y[3] = {1.5f, -2, 3};
  int64_t k[2] = {INT64_MAX, -1};
  std::optional<size_t> header;
  std::string body = build_infer_response(
      "m", "2", "id7", {{"y", DataType::kFloat32, {1, 3}, y, 12, false}, {"k", DataType::kInt64, {2}, k, 16, false}},
      &header);
  EXPECT_FALSE(header.has_value());
  json j = json::parse(body);
  EXPECT_EQ(j["model_name"], "m");
  EXPECT_EQ(j["model_version"], "2");
  EXPECT_EQ(j["id"], "id7");
  EXPECT_EQ(j["outputs"][0]["data"], json({1.5, -2.0, 3.0}));
  EXPECT_EQ(j["outputs"][1]["data"][0].get<int64_t>(), INT64_MAX);
  body = build_infer_response(
      "m", "2", "", {{"y", DataType::kFloat32, {1, 3}, y, 12, true}, {"k", DataType::kInt64, {2}, k, 16, false}},
      &header);
  ASSERT_TRUE(header.has_value());
  j = json::parse(body.substr(0, *header));
  EXPECT_EQ(j["outputs"][0]["parameters"]["binary_data_size"], 12);
  EXPECT_FALSE(j["outputs"][0].contains("data"));
  ASSERT_EQ(body.size(), *header + 12);
  EXPECT_EQ(std::memcmp(body.data() + *header, y, 12), 0);
}

TEST(ModelConfig, TritonConfigParses) {
  auto c = parse_model_config(R"(
    name: "resnet"
    platform: "onnxruntime_onnx"
    max_batch_size: 32
    version_policy: { latest: { num_versions: 2 } }
    input [ { name: "in" data_type: TYPE_FP32 format: FORMAT_NCHW dims: [ 3, 224, 224 ] } ]
    output [ { name: "out" data_type: TYPE_FP32 dims: [ 1000 ] label_filename: "labels.txt" } ]
    instance_group [ { count: 2 kind: KIND_GPU gpus: [ 0, 1 ] }, { count: 1 kind: KIND_CPU } ]
    dynamic_batching {
      preferred_batch_size: [ 8, 16 ]
      max_queue_delay_microseconds: 100
      default_queue_policy { max_queue_size: 64 default_timeout_microseconds: 5000 }
    }
    parameters { key: "k" value: { string_value: "v" } }
    ingot { fp16: true optimization_level: 0 }
  )",
                              "config.pbtxt");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->input(0).dims_size(), 3);
  EXPECT_TRUE(c->ingot().has_optimization_level());
  auto b = batching_options(*c, "config.pbtxt");
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ(b->max_batch_size, 32);
  EXPECT_TRUE(b->dynamic);
  EXPECT_EQ(b->preferred_sizes, (std::vector<int64_t>{8, 16}));
  EXPECT_EQ(b->max_queue_delay_us, 100);
  EXPECT_EQ(b->max_queue_size, 64);
  EXPECT_EQ(b->default_timeout_us, 5000);
  EXPECT_EQ(b->instances, 3);
  EXPECT_EQ(b->gpus, (std::vector<int>{0, 1, -1}));
}

// Triton's optimization.cuda.graphs: ingot replays CUDA graphs unless the config turns them off
// (Triton's default is off, so the field's presence is what counts).
TEST(ModelConfig, CudaGraphsOnUnlessTurnedOff) {
  for (const auto& [text, want] :
       std::vector<std::pair<std::string, bool>>{{"max_batch_size: 8", true},
                                                 {"max_batch_size: 8 optimization { cuda { graphs: true } }", true},
                                                 {"max_batch_size: 8 optimization { cuda { graphs: false } }", false},
                                                 {"max_batch_size: 8 optimization { cuda { } }", true}}) {
    auto c = parse_model_config(text, "config.pbtxt");
    ASSERT_TRUE(c.ok()) << text << ": " << c.status().message();
    auto b = batching_options(*c, "config.pbtxt");
    ASSERT_TRUE(b.ok()) << b.status().message();
    EXPECT_EQ(b->cuda_graphs, want) << text;
  }
}

// GET .../config prints the config as Triton does: 64-bit integers (dims, the queue delay, version
// numbers) as JSON numbers, not the strings protobuf's JSON printer writes.
TEST(ModelConfig, JsonHasNumbersWhereTritonHasThem) {
  auto c = parse_model_config(
      "max_batch_size: 16\n"
      "input [ { name: \"x\" data_type: TYPE_FP32 dims: [ 3, 224, 224 ] } ]\n"
      "output [ { name: \"y\" data_type: TYPE_FP32 dims: [ 1000 ] } ]\n"
      "dynamic_batching { preferred_batch_size: [ 8, 16 ] max_queue_delay_microseconds: 500 }\n"
      "version_policy { specific { versions: [ 1, 3 ] } }\n",
      "m/config.pbtxt");
  ASSERT_TRUE(c.ok()) << c.status().message();
  const std::string text = model_config_json(*c);
  auto j = nlohmann::json::parse(text);
  EXPECT_EQ(j["max_batch_size"], 16);
  EXPECT_EQ(j["input"][0]["dims"], nlohmann::json::array({3, 224, 224})) << text;
  EXPECT_EQ(j["output"][0]["dims"], nlohmann::json::array({1000})) << text;
  EXPECT_EQ(j["dynamic_batching"]["max_queue_delay_microseconds"], 500) << text;
  EXPECT_EQ(j["dynamic_batching"]["preferred_batch_size"], nlohmann::json::array({8, 16})) << text;
  EXPECT_EQ(j["version_policy"]["specific"]["versions"], nlohmann::json::array({1, 3})) << text;
  EXPECT_EQ(j["input"][0]["data_type"], "TYPE_FP32");
  EXPECT_EQ(text.find("\"224\""), std::string::npos) << text;
}

TEST(ModelConfig, ErrorsNameTheFieldAndFile) {
  auto c = parse_model_config("max_batch_size: 4\n  max_batch_sise: 8\n", "repo/m/config.pbtxt");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("repo/m/config.pbtxt:2:"), std::string::npos) << c.status().message();
  EXPECT_NE(c.status().message().find("max_batch_sise"), std::string::npos) << c.status().message();
  auto bad_pref = parse_model_config("max_batch_size: 4 dynamic_batching { preferred_batch_size: [ 8 ] }", "f");
  ASSERT_TRUE(bad_pref.ok());
  auto b = batching_options(*bad_pref, "f");
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("preferred_batch_size 8"), std::string::npos) << b.status().message();
  auto no_batch = parse_model_config("dynamic_batching { }", "f");
  ASSERT_TRUE(no_batch.ok());
  EXPECT_FALSE(batching_options(*no_batch, "f").ok());
  // ingot.prepared_batch_sizes: auto, none or a list within [1, max_batch_size].
  auto prepared = [](const std::string& value) {
    auto c = parse_model_config(
        "max_batch_size: 8 parameters { key: \"ingot.prepared_batch_sizes\" value { string_value: \"" + value +
            "\" } }",
        "p/config.pbtxt");
    EXPECT_TRUE(c.ok()) << c.status().message();
    return batching_options(*c, "p/config.pbtxt");
  };
  auto listed = prepared("8,1,2,2");
  ASSERT_TRUE(listed.ok()) << listed.status().message();
  EXPECT_EQ(listed->prepared, BatchingOptions::Prepared::kList);
  EXPECT_EQ(listed->prepared_sizes, (std::vector<int64_t>{1, 2, 8}));
  EXPECT_EQ(prepared("none")->prepared, BatchingOptions::Prepared::kNone);
  EXPECT_EQ(prepared("auto")->prepared, BatchingOptions::Prepared::kAuto);
  for (const char* bad : {"0", "9", "two", "1,,2", "", "4;8"}) {
    auto r = prepared(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("ingot.prepared_batch_sizes"), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("p/config.pbtxt"), std::string::npos) << r.status().message();
  }
  // ingot's shorthands for the queue policy.
  auto s = parse_model_config(
      "max_batch_size: 4 dynamic_batching { max_queue_size: 3 default_timeout_microseconds: 9 }", "f");
  ASSERT_TRUE(s.ok());
  auto sb = batching_options(*s, "f");
  ASSERT_TRUE(sb.ok());
  EXPECT_EQ(sb->max_queue_size, 3);
  EXPECT_EQ(sb->default_timeout_us, 9);
}

class Quiet : public Logger {
  void log(Severity, const char*) noexcept override {}
};

// y = x + x with x: [batch, d] (d symbolic too), an engine with batch in [1, 16], d in [1, 8].
std::shared_ptr<Engine> doubling_engine(BackendKind backend = BackendKind::kCpu, int64_t min_batch = 1) {
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name("double");
  for (auto* vi : {g->add_input(), g->add_output()}) {
    vi->set_name(vi == &g->input(0) ? "x" : "y");
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(::onnx::TensorProto::FLOAT);
    tt->mutable_shape()->add_dim()->set_dim_param("batch");
    tt->mutable_shape()->add_dim()->set_dim_param("d");
  }
  auto* n = g->add_node();
  n->set_op_type("Add");
  n->add_input("x");
  n->add_input("x");
  n->add_output("y");
  std::string bytes = m.SerializeAsString();
  static Quiet quiet;
  BuilderConfig bc;
  bc.backend = backend;
  OptimizationProfile p;
  p.set_dimensions("x", {min_batch, 1}, {8, 4}, {16, 8});
  bc.profiles.push_back(p);
  auto eng = Builder(quiet).build_serialized_from_bytes(bytes.data(), bytes.size(), bc);
  EXPECT_TRUE(eng.ok()) << eng.status().to_string();
  if (!eng.ok()) return nullptr;
  auto e = Runtime(quiet).deserialize(eng->data(), eng->size());
  EXPECT_TRUE(e.ok()) << e.status().to_string();
  return e.ok() ? e.value() : nullptr;
}

InferRequest doubling_request(int64_t rows, int64_t d, float base) {
  InferRequest r;
  InferInput in{"x", DataType::kFloat32, {rows, d}, {}};
  std::vector<float> v(static_cast<size_t>(rows * d));
  for (size_t i = 0; i < v.size(); ++i) v[i] = base + static_cast<float>(i);
  in.data.assign(reinterpret_cast<const char*>(v.data()), v.size() * 4);
  r.inputs.push_back(std::move(in));
  return r;
}

// Request t's answer from the doubling engine: one output of rows x d, element i = 2 (base + i).
void expect_doubled(const InferResult& r, int64_t rows, int64_t d, float base, int t) {
  ASSERT_FALSE(r.error.has_value()) << r.error->message;
  ASSERT_EQ(r.outputs.size(), 1u);
  EXPECT_EQ(r.outputs[0].shape, (std::vector<int64_t>{rows, d}));
  std::vector<float> y = floats(r.outputs[0].data);
  ASSERT_EQ(y.size(), static_cast<size_t>(rows * d));
  for (size_t i = 0; i < y.size(); ++i) EXPECT_EQ(y[i], 2 * (base + i)) << "request " << t << " element " << i;
}

struct BatcherFixture : ::testing::Test {
  Metrics metrics;
  std::unique_ptr<ModelStats> stats;
  ModelSignature sig{"double", 16, {{"x", DataType::kFloat32, {-1}}}, {{"y", DataType::kFloat32, {-1}}}};
  std::unique_ptr<DynamicBatcher> make(BatchingOptions o) {
    stats = std::make_unique<ModelStats>(&metrics, "double", "1");
    auto engine = doubling_engine();
    if (!engine) return nullptr;
    auto b = DynamicBatcher::create(engine, sig, o, stats.get());
    EXPECT_TRUE(b.ok()) << b.status().to_string();
    return b.ok() ? std::move(b.value()) : nullptr;
  }
  static BatchingOptions opts(int64_t delay_us, int64_t queue = 0, int64_t timeout_us = 0) {
    BatchingOptions o;
    o.max_batch_size = 16;
    o.dynamic = true;
    o.max_queue_delay_us = delay_us;
    o.max_queue_size = queue;
    o.default_timeout_us = timeout_us;
    o.instances = 2;
    o.gpus = {-1, -1};
    return o;
  }
};

TEST(ModelConfig, SignatureAgainstTheEngine) {
  auto engine = doubling_engine();  // x, y: [batch in 1..16, d in 1..8], FP32
  ASSERT_TRUE(engine);
  auto sig_for = [&](const std::string& text) {
    auto c = parse_model_config(text, "m/config.pbtxt");
    EXPECT_TRUE(c.ok()) << c.status().message();
    return resolve_signature(*c, *engine, "m/config.pbtxt");
  };
  auto expect_error = [&](const std::string& text, const std::string& words) {
    auto s = sig_for(text);
    ASSERT_FALSE(s.ok()) << text;
    EXPECT_NE(s.status().message().find(words), std::string::npos) << s.status().message();
    EXPECT_NE(s.status().message().find("m/config.pbtxt"), std::string::npos) << s.status().message();
  };
  // Left out, inputs and outputs come from the engine, batch dim dropped.
  auto s = sig_for("max_batch_size: 8");
  ASSERT_TRUE(s.ok()) << s.status().message();
  ASSERT_EQ(s->inputs.size(), 1u);
  EXPECT_EQ(s->inputs[0].name, "x");
  EXPECT_EQ(s->inputs[0].dims, (std::vector<int64_t>{-1}));
  EXPECT_EQ(s->outputs[0].name, "y");
  s = sig_for(R"(max_batch_size: 8 input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] } ])");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->inputs[0].dims, (std::vector<int64_t>{4}));
  expect_error(R"(max_batch_size: 8 input [ { name: "z" data_type: TYPE_FP32 dims: [ 4 ] } ])", "input 'z'");
  expect_error(R"(max_batch_size: 8 input [ { name: "x" data_type: TYPE_INT32 dims: [ 4 ] } ])", "TYPE_INT32");
  expect_error(R"(max_batch_size: 8 input [ { name: "x" data_type: TYPE_FP32 dims: [ 4, 4 ] } ])", "dims [4,4]");
  expect_error("max_batch_size: 32", "at most 16");  // the engine's profile stops at 16
}

TEST_F(BatcherFixture, ConcurrentRequestsBatchAndSplitBackInOrder) {
  auto b = make(opts(20000));
  ASSERT_TRUE(b);
  constexpr int kThreads = 24;
  std::vector<InferResult> results(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Two widths (d = 4 and d = 3) that must never share a batch; 1..3 rows each.
      results[t] = b->infer(doubling_request(1 + t % 3, t % 2 ? 3 : 4, 100.0f * t), 1 + t % 3);
    });
  }
  for (auto& th : threads) th.join();
  int64_t batched = 0;
  for (int t = 0; t < kThreads; ++t) {
    expect_doubled(results[t], 1 + t % 3, t % 2 ? 3 : 4, 100.0f * t, t);
    batched = std::max(batched, results[t].executed_batch_size);
  }
  EXPECT_GT(batched, 3) << "no batch held more than one request";
}

// Prepared batch sizes (issue 19): each instance runs one batch of zeros of each prepared size at
// load, kept out of the statistics; afterwards every batch runs padded up to the next prepared
// size, so no batch size outside that set reaches the engine, and each request still gets exactly
// its own rows. On the CPU backend nothing is prepared unless the config lists sizes.
// What `auto` prepares for cuda engines: powers of two and their midpoints, max_batch_size and the
// preferred sizes, so no batch is padded by a third or more.
TEST(PreparedSizes, AutoHasPowersOfTwoAndMidpoints) {
  EXPECT_EQ(auto_prepared_sizes(128, {}), (std::vector<int64_t>{1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128}));
  EXPECT_EQ(auto_prepared_sizes(16, {10}), (std::vector<int64_t>{1, 2, 3, 4, 6, 8, 10, 12, 16}));
  EXPECT_EQ(auto_prepared_sizes(100, {}), (std::vector<int64_t>{1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 100}));
  EXPECT_EQ(auto_prepared_sizes(1, {}), (std::vector<int64_t>{1}));
  for (int64_t max : {5, 17, 64, 100, 128, 1000}) {
    const std::vector<int64_t> sizes = auto_prepared_sizes(max, {});
    ASSERT_EQ(sizes.back(), max);
    for (int64_t rows = 1; rows <= max; ++rows) {
      const int64_t padded = *std::lower_bound(sizes.begin(), sizes.end(), rows);
      EXPECT_LT(3 * (padded - rows), padded) << rows << " rows run as " << padded << " (max " << max << ")";
    }
  }
}

TEST_F(BatcherFixture, BatchesRunPaddedToSizesPreparedAtLoad) {
  sig.inputs[0].dims = {4};
  sig.outputs[0].dims = {4};
  BatchingOptions o = opts(0);
  EXPECT_TRUE(make(o)->prepared_sizes().empty()) << "auto prepares nothing for cpu engines";
  o.prepared = BatchingOptions::Prepared::kList;
  o.prepared_sizes = {4, 16};
  auto b = make(o);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->prepared_sizes(), (std::vector<int64_t>{4, 16}));
  EXPECT_GT(b->warm_up_ms(), 0.0);
  auto stats_json = [&] { return nlohmann::json::parse(stats->to_json("double", "1")); };
  EXPECT_EQ(stats_json()["execution_count"], 0) << "the warm-up batches are not statistics";
  EXPECT_EQ(b->padded_rows(1), 4);
  EXPECT_EQ(b->padded_rows(4), 4);
  EXPECT_EQ(b->padded_rows(5), 16);
  int64_t rows_sent = 0;
  for (int64_t rows = 1; rows <= 16; ++rows) {
    InferResult r = b->infer(doubling_request(rows, 4, 10.0f * rows), rows);
    expect_doubled(r, rows, 4, 10.0f * rows, static_cast<int>(rows));
    EXPECT_EQ(r.executed_batch_size, rows <= 4 ? 4 : 16) << rows << " rows";
    rows_sent += rows;
  }
  nlohmann::json j = stats_json();
  EXPECT_EQ(j["execution_count"], 16);
  EXPECT_EQ(j["inference_count"], rows_sent) << "padding rows are not inferences";
  for (const auto& bs : j["batch_stats"]) {
    const int64_t size = bs["batch_size"];
    EXPECT_TRUE(size == 4 || size == 16) << "a batch of " << size << " reached the engine";
  }
  // A profile that starts at batch 4: sizes below it are not prepared (nor could they run), and the
  // model still loads.
  {
    auto engine4 = doubling_engine(BackendKind::kCpu, 4);
    ASSERT_TRUE(engine4);
    BatchingOptions o4 = o;
    o4.prepared_sizes = {1, 2, 4, 16};
    auto b4 = DynamicBatcher::create(engine4, sig, o4, stats.get());
    ASSERT_TRUE(b4.ok()) << b4.status().to_string();
    EXPECT_EQ((*b4)->prepared_sizes(), (std::vector<int64_t>{4, 16}));
    expect_doubled((*b4)->infer(doubling_request(5, 4, 2.0f), 5), 5, 4, 2.0f, 0);
  }
  // Open non-batch dims: no shape to prepare, so nothing is prepared or padded.
  sig.inputs[0].dims = {-1};
  sig.outputs[0].dims = {-1};
  auto open = make(o);
  ASSERT_TRUE(open);
  EXPECT_TRUE(open->prepared_sizes().empty());
  expect_doubled(open->infer(doubling_request(3, 2, 1.0f), 3), 3, 2, 1.0f, 0);
}

TEST_F(BatcherFixture, InputsReadInPlaceBatchWithOwnedOnes) {
  auto b = make(opts(20000));
  ASSERT_TRUE(b);
  constexpr int kThreads = 8;
  // Odd requests read their rows from memory the request does not own (a shared-memory view).
  std::vector<std::vector<float>> outside(kThreads);
  std::vector<InferResult> results(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    InferRequest r = doubling_request(2, 4, 10.0f * t);
    if (t % 2) {
      InferInput& in = r.inputs[0];
      outside[t].resize(in.data.size() / 4);
      std::memcpy(outside[t].data(), in.data.data(), in.data.size());
      in.data = "not these bytes";
      in.external = ExternalBytes{reinterpret_cast<const char*>(outside[t].data()), outside[t].size() * 4, false, {}};
    }
    threads.emplace_back([&, t, r = std::move(r)]() mutable { results[t] = b->infer(std::move(r), 2); });
  }
  for (auto& th : threads) th.join();
  int64_t batched = 0;
  for (int t = 0; t < kThreads; ++t) {
    expect_doubled(results[t], 2, 4, 10.0f * t, t);
    batched = std::max(batched, results[t].executed_batch_size);
  }
  EXPECT_GT(batched, 2) << "no batch held more than one request";
}

TEST_F(BatcherFixture, FullQueueAnswers503AtOnce) {
  auto b = make(opts(300000, /*queue=*/2));  // a batch waits 300 ms: the queue fills
  ASSERT_TRUE(b);
  std::vector<std::thread> threads;
  std::atomic<int> ok{0}, full{0};
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      InferResult r = b->infer(doubling_request(1, 4, t), 1);
      if (!r.error) ++ok;
      if (r.error && r.error->http_status == 503 && r.error->message.find("queue full") != std::string::npos) ++full;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_GE(ok.load(), 2);
  EXPECT_GE(full.load(), 1);
  EXPECT_EQ(ok + full, 6);
}

TEST_F(BatcherFixture, TimedOutRequestIsAnsweredAndNeverRun) {
  auto b = make(opts(500000, 0, /*timeout_us=*/20000));
  ASSERT_TRUE(b);
  auto t0 = Clock::now();
  InferResult r = b->infer(doubling_request(1, 4, 0), 1);
  ASSERT_TRUE(r.error.has_value());
  EXPECT_EQ(r.error->http_status, 504);
  EXPECT_LT(Clock::now() - t0, std::chrono::milliseconds(400)) << "answered only when the batch would have formed";
  b->stop();
  json s = json::parse(stats->to_json("double", "1"));
  EXPECT_EQ(s["execution_count"], 0) << "a timed-out request ran";
}

TEST_F(BatcherFixture, StopDrainsTheQueue) {
  auto b = make(opts(5000000));  // would wait 5 s for a fuller batch
  ASSERT_TRUE(b);
  std::vector<InferResult> results(3);
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) threads.emplace_back([&, t] { results[t] = b->infer(doubling_request(1, 4, t), 1); });
  while (b->queued() < 3) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  auto t0 = Clock::now();
  b->stop();
  for (auto& th : threads) th.join();
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(2));
  for (const auto& r : results) EXPECT_FALSE(r.error.has_value()) << r.error->message;
  InferResult late = b->infer(doubling_request(1, 4, 0), 1);
  ASSERT_TRUE(late.error.has_value());
  EXPECT_EQ(late.error->http_status, 503);
}

TEST_F(BatcherFixture, FailingBatchFailsOnlyItsRequests) {
  auto b = make(opts(0));
  ASSERT_TRUE(b);
  // d = 9 is outside the engine's profile [1, 8]: the execution fails, with the engine's message.
  InferResult bad = b->infer(doubling_request(1, 9, 0), 1);
  ASSERT_TRUE(bad.error.has_value());
  EXPECT_NE(bad.error->message.find("x"), std::string::npos) << bad.error->message;
  InferResult good = b->infer(doubling_request(2, 4, 1), 2);
  EXPECT_FALSE(good.error.has_value()) << good.error->message;
}

// The cuda batcher (GPU machine; label gpu): inputs copied to the device straight from pinned
// shared memory, through the staging buffer from pageable memory or from the request's own bytes,
// with fixed-size outputs written into the instance's buffers (dims known) or left to the
// context (dims open). Doubling is exact in fp32, so every answer must match to the bit.
TEST(CudaBatcher, PinnedPageableDeviceAndOwnedInputsGiveExactAnswers) {
#ifndef INGOT_WITH_CUDA
  GTEST_SKIP() << "ingot is built without CUDA";
#else
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    cudaGetLastError();
    GTEST_SKIP() << "no CUDA device on this machine";
  }
  auto engine = doubling_engine(BackendKind::kCuda);
  ASSERT_TRUE(engine);
  ASSERT_EQ(engine->backend(), "cuda");
  for (int64_t d : {4, -1}) {  // fixed width: bound outputs, reserved buffers; open: grown on demand
    SCOPED_TRACE("signature width " + std::to_string(d));
    Metrics metrics;
    ModelStats stats(&metrics, "double", "1");
    ModelSignature sig{"double", 16, {{"x", DataType::kFloat32, {d}}}, {{"y", DataType::kFloat32, {d}}}};
    BatchingOptions o;
    o.max_batch_size = 16;
    o.dynamic = true;
    o.max_queue_delay_us = 20000;
    o.instances = 2;
    o.gpus = {0, 0};
    auto b = DynamicBatcher::create(engine, sig, o, &stats);
    ASSERT_TRUE(b.ok()) << b.status().to_string();
    constexpr int kThreads = 24;
    const int64_t width = d > 0 ? d : 4;
    // Graphs per prepared size, captured by the warm-up (fixed width; the open width prepares none).
    if (d > 0) {
      EXPECT_EQ((*b)->prepared_sizes(), auto_prepared_sizes(16, {}));
      EXPECT_EQ((*b)->cuda_graphs(), "on (8 graphs per instance)");
    }
    float* pinned = nullptr;
    ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&pinned), kThreads * 3 * width * sizeof(float)), cudaSuccess);
    float* on_device = nullptr;  // as a CUDA shared-memory region's bytes
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&on_device), kThreads * 3 * width * sizeof(float)), cudaSuccess);
    std::vector<std::vector<float>> pageable(kThreads);
    std::vector<InferResult> results(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      const int64_t rows = 1 + t % 3;
      InferRequest r = doubling_request(rows, width, 1000.0f * t + 0.25f);
      InferInput& in = r.inputs[0];
      if (t % 3 == 1) {  // a pinned region
        float* at = pinned + t * 3 * width;
        std::memcpy(at, in.data.data(), in.data.size());
        in.external = ExternalBytes{reinterpret_cast<const char*>(at), in.data.size(), true, {}};
        in.data = "stale";
      } else if (t % 3 == 2) {  // a region that could not be pinned
        pageable[t].resize(in.data.size() / 4);
        std::memcpy(pageable[t].data(), in.data.data(), in.data.size());
        in.external = ExternalBytes{reinterpret_cast<const char*>(pageable[t].data()), in.data.size(), false, {}};
        in.data = "stale";
      } else if (t % 6 == 3) {  // device memory: copied device to device
        float* at = on_device + t * 3 * width;
        ASSERT_EQ(cudaMemcpy(at, in.data.data(), in.data.size(), cudaMemcpyHostToDevice), cudaSuccess);
        in.external = ExternalBytes{reinterpret_cast<const char*>(at), in.data.size(), false, {}, true};
        in.data = "stale";
      }
      threads.emplace_back([&, t, rows, r = std::move(r)]() mutable { results[t] = (*b)->infer(std::move(r), rows); });
    }
    for (auto& th : threads) th.join();
    int64_t batched = 0;
    for (int t = 0; t < kThreads; ++t) {
      expect_doubled(results[t], 1 + t % 3, width, 1000.0f * t + 0.25f, t);
      batched = std::max(batched, results[t].executed_batch_size);
    }
    EXPECT_GT(batched, 3) << "no batch held more than one request";
    (*b)->stop();
    cudaFreeHost(pinned);
    cudaFree(on_device);
  }
#endif
}

}  // namespace
}  // namespace ingot::server
