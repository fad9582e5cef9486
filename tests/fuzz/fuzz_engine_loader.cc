// Copyright ingot authors. Apache-2.0.
//
// libFuzzer target for the engine loader: any bytes must give a Plan or an error, never a
// crash, leak or out-of-bounds read. The first byte picks a mode; in mode 1 the checksum is
// recomputed before loading so mutations reach the FlatBuffer verifier and the graph decoder
// instead of stopping at the checksum. Seeds: engines written by the unit tests
// (INGOT_ENGINE_SEEDS_DIR=dir ingot_unit_tests --gtest_filter=EngineFormat.WriteFuzzSeeds),
// each prefixed with a mode byte.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "engine/engine_format.h"
#include "ir/text.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ingot;
  if (size < 1) return 0;
  const uint8_t mode = data[0];
  auto file = std::make_shared<std::vector<uint8_t>>(data + 1, data + size);
  if ((mode & 1) && file->size() >= engine::kEngineHeaderFixedBytes) {
    uint64_t sum = engine::engine_checksum(file->data(), file->size());
    for (int i = 0; i < 8; ++i) (*file)[engine::kEngineChecksumOffset + i] = static_cast<uint8_t>(sum >> (8 * i));
  }
  auto id = engine::read_engine_identity(file->data(), file->size());
  engine::EngineIdentity expected;
  if (id.ok()) expected = id.value();  // accept whatever identity the file claims
  auto plan = engine::read_engine(file->data(), file->size(), file, expected);
  if (plan.ok() && plan.value().graph) {
    // Touch what a runtime would: the text form walks every value, node and attribute, and
    // reading every weight byte proves the borrowed ranges are in bounds.
    volatile size_t sink = ir::to_text(*plan.value().graph, 64).size();
    for (const ir::Value* v : plan.value().graph->initializers()) {
      const Tensor* t = v->initializer();
      if (t->dtype() == DataType::kString) continue;
      const uint8_t* p = static_cast<const uint8_t*>(t->raw());
      for (size_t i = 0; i < t->nbytes(); ++i) sink = sink + p[i];
    }
    (void)sink;
    auto again = engine::write_engine(plan.value(), expected);
    (void)again;
  }
  return 0;
}
