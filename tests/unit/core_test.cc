// Copyright ingot authors. Apache-2.0.
#include <gtest/gtest.h>

#include <cmath>

#include "core/dtype.h"
#include "core/tensor.h"
#include "ir/shape.h"

namespace ingot {
namespace {

TEST(Float16, RoundTripsExactValuesAndRoundsToNearestEven) {
  for (float f : {0.0f, 1.0f, -2.5f, 65504.0f, 6.103515625e-05f /*min normal*/, 5.960464477539063e-08f /*min subnormal*/})
    EXPECT_EQ(static_cast<float>(Float16(f)), f) << f;
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties go to even (1.0).
  EXPECT_EQ(static_cast<float>(Float16(1.0f + std::ldexp(1.0f, -11))), 1.0f);
  EXPECT_TRUE(std::isinf(static_cast<float>(Float16(70000.0f))));
  EXPECT_TRUE(std::isnan(static_cast<float>(Float16(NAN))));
}

TEST(BFloat16, RoundsToNearestEven) {
  EXPECT_EQ(static_cast<float>(BFloat16(1.0f)), 1.0f);
  EXPECT_EQ(static_cast<float>(BFloat16(1.0f + std::ldexp(1.0f, -8))), 1.0f);  // tie to even
  EXPECT_EQ(static_cast<float>(BFloat16(1.0f + 3 * std::ldexp(1.0f, -8))), 1.0f + std::ldexp(1.0f, -6));
}

TEST(Tensor, ZerosCloneAndElementAccessForEveryIntegerWidth) {
  for (DataType t : {DataType::kInt8, DataType::kUInt8, DataType::kInt16, DataType::kInt32, DataType::kInt64,
                     DataType::kUInt32, DataType::kInt4, DataType::kUInt4}) {
    Tensor a = Tensor::zeros(t, {3}).value();
    a.set_i64(0, 5);
    a.set_i64(1, is_signed_integer(t) ? -3 : 3);
    a.set_i64(2, 7);
    Tensor b = a.clone();
    a.set_i64(0, 1);
    EXPECT_EQ(b.get_i64(0), 5) << data_type_name(t);
    EXPECT_EQ(b.get_i64(1), is_signed_integer(t) ? -3 : 3) << data_type_name(t);
    EXPECT_EQ(b.get_i64(2), 7) << data_type_name(t);
  }
}

TEST(Tensor, RejectsNegativeDimsAndHugeShapes) {
  EXPECT_FALSE(Tensor::zeros(DataType::kFloat32, {2, -1}).ok());
  auto huge = Tensor::zeros(DataType::kFloat32, {1LL << 40, 1LL << 40});
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), StatusCode::kOutOfMemory);
}

TEST(Shape, BroadcastKeepsSymbolsAndRejectsMismatch) {
  using ir::Dim;
  using ir::Shape;
  Shape a{Dim::symbol("N"), Dim(3), Dim(1)};
  Shape b{Dim(4)};
  auto r = ir::broadcast_shapes(a, b);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->to_string(), "[N,3,4]");
  EXPECT_FALSE(ir::broadcast_shapes(Shape{Dim(2)}, Shape{Dim(3)}).ok());
}

}  // namespace
}  // namespace ingot
