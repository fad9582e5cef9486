// Copyright ingot authors. Apache-2.0.
#include <gtest/gtest.h>

#include "ir/op_registry.h"
#include "ir/text.h"

namespace ingot::ir {
namespace {

constexpr const char* kGraph = R"(graph main {
  opset "" 17
  input %x: f32[batch,3]
  init %w: f32[3] = [1, -2, 0.5]
  %s: f32[batch,3] = Add(%x, %w) @add0
  %y: f32[batch,3] = LeakyRelu {alpha=0.100000001}(%s) @act
  output %y
}
)";

TEST(IrText, RoundTripsAFlatGraph) {
  auto g = parse_text(kGraph);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_EQ(to_text(**g), kGraph);
  EXPECT_EQ((*g)->nodes()[1]->attrs().get_float("alpha", 0), 0.1f);
  EXPECT_EQ((*g)->nodes()[0]->name(), "add0");
}

TEST(IrText, InferenceFillsTypesOfAnUntypedGraph) {
  auto g = parse_text(R"(graph g {
    opset "" 17
    input %x: f32[N,4]
    %r = Relu(%x)
    output %r
  })");
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  ASSERT_TRUE(infer_graph(**g).ok());
  EXPECT_EQ((*g)->outputs()[0]->shape().to_string(), "[N,4]");
  EXPECT_EQ((*g)->outputs()[0]->dtype(), DataType::kFloat32);
}

TEST(IrText, ErrorsNameTheLine) {
  auto bad = parse_text("graph g {\n  input %x: f99[2]\n}\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("line 2"), std::string::npos) << bad.status().message();
  auto undefined = parse_text("graph g {\n  %y = Relu(%nope)\n  output %y\n}\n");
  ASSERT_FALSE(undefined.ok());
  EXPECT_NE(undefined.status().message().find("nope"), std::string::npos);
  auto cycle = parse_text("graph g {\n  %a = Relu(%b)\n  %b = Relu(%a)\n  output %b\n}\n");
  ASSERT_FALSE(cycle.ok());
  EXPECT_NE(cycle.status().message().find("cycle"), std::string::npos);
}

}  // namespace
}  // namespace ingot::ir
