// Copyright ingot authors. Apache-2.0.
//
// The cuda resize family against the CPU reference (cpu::run_node on the same host inputs):
// nearest (every nearest_mode), linear (1-D, 2-D, 3-D, `axes`), cubic (cubic_coeff_a,
// exclude_outside), antialias, every coordinate_transformation_mode (tf_crop_and_resize with
// extrapolation_value), scales / sizes / computed sizes / keep_aspect_ratio_policy, opsets 10 to
// 19, in f32/f16/bf16 on odd sizes, up and down, with non-integer scales.
//
// Every case runs twice: the kernel's own arithmetic (resize_math, __host__ __device__) replayed
// on the host from the parameters the tactic records, which needs no GPU, then the tactic on the
// device (skipped, saying why, without one). Also which nodes the family refuses and why, and
// the host-side parameter checks.
#include <string>
#include <vector>

#include "backend/cuda/resize/resize_kernels.h"
#include "op_case_util.h"

namespace ingot::gpu_test {
namespace {

using backend::cuda::resize_family;
using backend::cuda::ResizeDesc;
using backend::cuda::ResizeParams;

constexpr DataType kFloatTypes[] = {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16};

const char* const kCoordModes[] = {"half_pixel",    "half_pixel_symmetric", "pytorch_half_pixel",
                                   "align_corners", "asymmetric",           "tf_half_pixel_for_nn"};
const char* const kNearestModes[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};

Tensor f32s(const std::vector<float>& v) {
  return Tensor::from_vector(DataType::kFloat32, {static_cast<int64_t>(v.size())}, v);
}

struct Geometry {
  Shape64 x;
  std::vector<float> scales;
};

// Up with non-integer factors, down, mixed, exactly 2x, and one where an output is 1 wide.
const Geometry kGeometries[] = {
    {{2, 3, 7, 9}, {1, 1, 1.7f, 2.3f}}, {{1, 2, 11, 13}, {1, 1, 0.6f, 0.45f}}, {{1, 3, 5, 8}, {1, 1, 2.0f, 0.7f}},
    {{2, 1, 4, 6}, {1, 1, 2.0f, 2.0f}}, {{1, 2, 3, 9}, {1, 1, 0.34f, 1.25f}},
};

class CudaResizeTest : public OpCaseTest {
 protected:
  int inner2_replays_ = 0;  ///< replays that compared the image kernel's arithmetic too

  /// The host replay of the kernel's arithmetic, then the device run (check()).
  void run_case(int64_t opset, const std::vector<Operand>& ins, const std::string& call) {
    replay_on_host(opset, ins, call);
    check(resize_family(), opset, ins, call, "cuda.resize");
  }

  void replay_on_host(int64_t opset, const std::vector<Operand>& ins, const std::string& call,
                      const Tolerance* tol = nullptr) {
    const std::string text = op_graph(opset, ins, call);
    SCOPED_TRACE("host replay of " + text);
    auto g = parse_graph(text);
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    const ir::Node& node = *(*g)->nodes()[0];
    ResizeParams p;
    Status st = backend::cuda::resize_params_for(node, input_types(node), &p);
    ASSERT_TRUE(st.ok()) << st.to_string();
    std::vector<Tensor> data;
    for (const Operand& o : ins) {
      if (o.dtype == DataType::kUndefined)
        data.emplace_back();
      else if (o.data.defined())
        data.push_back(o.data);
      else
        data.push_back(random_tensor(o.dtype, o.shape, rng_, -3.0, 3.0));
    }
    auto ref = run_reference(node, data);
    ASSERT_TRUE(ref.ok()) << "reference: " << ref.status().to_string();
    const Tensor& want = (*ref)[0];
    ResizeDesc d;
    st = backend::cuda::resize_desc_for(p, data[0].shape(), want.shape(), &d);
    ASSERT_TRUE(st.ok()) << st.to_string();
    Tensor got = Tensor::zeros(want.dtype(), want.shape()).value();
    const Tensor& x = data[0];
    auto read = [&](int64_t off) { return x.get_f64(off); };
    int64_t differ = 0;
    for (int64_t i = 0; i < got.numel(); ++i) {
      const double v = backend::cuda::resize_math::resize_element(d, i, read);
      got.set_f64(i, v);
      // The image kernel (only the last two dims resized) must give the very same double, in
      // both of its index types.
      if (backend::cuda::resize_math::inner2_applies(d)) {
        const auto q = backend::cuda::resize_math::inner2_desc(d);
        const double a = backend::cuda::resize_math::resize_element_inner2(q, i, read);
        differ += std::memcmp(&a, &v, sizeof v) != 0;
      }
    }
    EXPECT_EQ(differ, 0) << "elements where resize_element_inner2 differs from resize_element";
    if (backend::cuda::resize_math::inner2_applies(d)) ++inner2_replays_;
    EXPECT_TRUE(tol ? all_close(got, want, *tol) : all_close(got, want));
  }

  /// The error resize_params_for gives for a node (empty when it is accepted).
  std::string refusal(int64_t opset, const std::vector<Operand>& ins, const std::string& call) {
    auto g = parse_graph(op_graph(opset, ins, call));
    if (!g.ok()) return "parse: " + g.status().to_string();
    const ir::Node& node = *(*g)->nodes()[0];
    ResizeParams p;
    Status st = backend::cuda::resize_params_for(node, input_types(node), &p);
    return st.ok() ? "" : st.message();
  }
};

TEST_F(CudaResizeTest, NearestEveryModeAndCoordinateTransform) {
  for (DataType t : kFloatTypes)
    for (const Geometry& g : kGeometries)
      for (const char* ctm : kCoordModes)
        for (const char* nm : kNearestModes)
          run_case(13, {input(t, g.x), omitted(), initializer(f32s(g.scales))},
                   std::string("Resize {mode=\"nearest\", coordinate_transformation_mode=\"") + ctm +
                       "\", nearest_mode=\"" + nm + "\"}");
}

TEST_F(CudaResizeTest, NearestExcludeOutside) {
  // Positions picked outside the input read zero.
  for (DataType t : kFloatTypes)
    run_case(13, {input(t, {1, 2, 5, 7}), omitted(), initializer(f32s({1, 1, 0.7f, 1.6f}))},
             "Resize {mode=\"nearest\", coordinate_transformation_mode=\"tf_half_pixel_for_nn\", "
             "nearest_mode=\"ceil\", exclude_outside=1}");
}

TEST_F(CudaResizeTest, LinearEveryCoordinateTransform) {
  for (DataType t : kFloatTypes)
    for (const Geometry& g : kGeometries)
      for (const char* ctm : kCoordModes)
        run_case(13, {input(t, g.x), omitted(), initializer(f32s(g.scales))},
                 std::string("Resize {mode=\"linear\", coordinate_transformation_mode=\"") + ctm + "\"}");
}

// The image kernel (resize_element_inner2: only the last two dims resized, every upsample of a
// segmentation head) against the generic arithmetic, bit for bit, on the host: no GPU needed,
// so CI runs it. Nearest, linear and cubic over every geometry and coordinate transform, one
// and two resized axes, ranks 2 to 5.
TEST_F(CudaResizeTest, ImageKernelArithmeticIsTheGenericOnesOnTheHost) {
  for (const Geometry& g : kGeometries)
    for (const char* ctm : kCoordModes) {
      const std::string c = std::string(", coordinate_transformation_mode=\"") + ctm + "\"}";
      for (const char* mode : {"nearest", "linear", "cubic"})
        replay_on_host(13, {input(DataType::kFloat32, g.x), omitted(), initializer(f32s(g.scales))},
                       std::string("Resize {mode=\"") + mode + "\"" + c);
      replay_on_host(13, {input(DataType::kFloat32, g.x), omitted(), initializer(f32s(g.scales))},
                     "Resize {mode=\"cubic\", exclude_outside=1" + c);
    }
  replay_on_host(13, {input(DataType::kFloat32, {9, 11}), omitted(), initializer(f32s({1.4f, 0.6f}))},
                 "Resize {mode=\"linear\"}");
  replay_on_host(13, {input(DataType::kFloat32, {2, 3, 17}), omitted(), initializer(f32s({1, 1, 0.55f}))},
                 "Resize {mode=\"linear\"}");
  replay_on_host(13, {input(DataType::kFloat32, {1, 2, 3, 6, 7}), omitted(), initializer(f32s({1, 1, 1, 1.5f, 0.75f}))},
                 "Resize {mode=\"linear\"}");
  replay_on_host(13, {input(DataType::kFloat32, {2, 21, 5, 5}), omitted(), initializer(f32s({1, 1, 8, 8}))},
                 "Resize {mode=\"linear\"}");  // FCN's head: 21 classes up 8x
  for (const char* mode : {"nearest", "linear", "cubic"})  // only h resized
    replay_on_host(13, {input(DataType::kFloat32, {1, 2, 9, 5}), omitted(), initializer(f32s({1, 1, 1.5f, 1}))},
                   std::string("Resize {mode=\"") + mode + "\"}");
  EXPECT_GT(inner2_replays_, 40) << "the image kernel's arithmetic was rarely compared";
}

TEST_F(CudaResizeTest, LinearOneTwoAndThreeAxesAndRanks) {
  for (DataType t : kFloatTypes) {
    // 1-D over the last axis of a rank-3 tensor, trilinear over a rank-5 one, every axis of a
    // rank-2 one, and a rank-1 one.
    run_case(13, {input(t, {2, 3, 17}), omitted(), initializer(f32s({1, 1, 0.55f}))}, "Resize {mode=\"linear\"}");
    run_case(13, {input(t, {1, 2, 5, 6, 7}), omitted(), initializer(f32s({1, 1, 1.5f, 0.75f, 1.3f}))},
             "Resize {mode=\"linear\", coordinate_transformation_mode=\"align_corners\"}");
    run_case(13, {input(t, {9, 11}), omitted(), initializer(f32s({1.4f, 0.6f}))}, "Resize {mode=\"linear\"}");
    run_case(13, {input(t, {13}), omitted(), initializer(f32s({2.5f}))},
             "Resize {mode=\"linear\", coordinate_transformation_mode=\"asymmetric\"}");
    // Opset 18's axes: the last two, given negative and out of order.
    run_case(18, {input(t, {2, 3, 7, 9}), omitted(), initializer(f32s({1.6f, 0.8f}))},
             "Resize {mode=\"linear\", axes=[-1, 2]}");
    run_case(18, {input(t, {2, 5, 6}), omitted(), initializer(f32s({1.9f}))}, "Resize {mode=\"linear\", axes=[1]}");
  }
}

TEST_F(CudaResizeTest, CubicCoefficientsAndExcludeOutside) {
  for (DataType t : kFloatTypes)
    for (const Geometry& g : kGeometries)
      for (const char* ctm : kCoordModes)
        for (const char* extra :
             {"", ", cubic_coeff_a=-0.5", ", exclude_outside=1", ", cubic_coeff_a=-0.6, exclude_outside=1"})
          run_case(13, {input(t, g.x), omitted(), initializer(f32s(g.scales))},
                   std::string("Resize {mode=\"cubic\", coordinate_transformation_mode=\"") + ctm + "\"" + extra + "}");
}

TEST_F(CudaResizeTest, TfCropAndResizeWithExtrapolation) {
  // Rois inside the input and reaching past it (extrapolated positions take the value).
  const std::vector<float> rois[] = {
      {0, 0, 0.1f, 0.2f, 1, 1, 0.8f, 0.9f},
      {0, 0, -0.2f, 0.3f, 1, 1, 1.3f, 1.1f},
      {0, 0, 0.4f, 0.0f, 1, 1, 0.45f, 1.0f},
  };
  for (DataType t : kFloatTypes)
    for (const std::vector<float>& roi : rois)
      for (const char* mode : {"nearest", "linear", "cubic"})
        for (const Geometry& g : kGeometries)
          run_case(13, {input(t, g.x), initializer(f32s(roi)), initializer(f32s(g.scales))},
                   std::string("Resize {mode=\"") + mode +
                       "\", coordinate_transformation_mode=\"tf_crop_and_resize\", extrapolation_value=-7.5}");
}

TEST_F(CudaResizeTest, SizesAndKeepAspectRatio) {
  for (DataType t : kFloatTypes) {
    for (const char* mode : {"nearest", "linear", "cubic"}) {
      const std::string m = std::string("Resize {mode=\"") + mode + "\"";
      run_case(13, {input(t, {2, 3, 7, 9}), omitted(), omitted(), initializer(i64s({2, 3, 12, 5}))}, m + "}");
      run_case(13, {input(t, {1, 2, 10, 9}), omitted(), omitted(), initializer(i64s({1, 2, 3, 20}))},
               m + ", coordinate_transformation_mode=\"align_corners\"}");
      for (const char* policy : {"stretch", "not_larger", "not_smaller"}) {
        run_case(18, {input(t, {2, 3, 7, 9}), omitted(), omitted(), initializer(i64s({11, 5}))},
                 m + ", axes=[2, 3], keep_aspect_ratio_policy=\"" + policy + "\"}");
        run_case(18, {input(t, {1, 3, 8, 6}), omitted(), omitted(), initializer(i64s({13, 13}))},
                 m + ", axes=[3, 2], keep_aspect_ratio_policy=\"" + policy + "\"}");
      }
    }
  }
}

TEST_F(CudaResizeTest, ComputedSizesWithStretchComeFromTheOutputShape) {
  // sizes is a graph input (its values are data): the output shape the runtime propagates is it.
  for (DataType t : kFloatTypes) {
    run_case(13, {input(t, {2, 3, 7, 9}), omitted(), omitted(), input(i64s({2, 3, 10, 4}))},
             "Resize {mode=\"linear\", coordinate_transformation_mode=\"pytorch_half_pixel\"}");
    run_case(18, {input(t, {1, 2, 6, 5}), omitted(), omitted(), input(i64s({9, 11}))},
             "Resize {mode=\"cubic\", axes=[2, 3]}");
  }
}

TEST_F(CudaResizeTest, Antialias) {
  for (DataType t : kFloatTypes)
    for (const Geometry& g : kGeometries)
      for (const char* mode : {"linear", "cubic"})
        for (const char* extra : {"", ", exclude_outside=1"})
          run_case(18, {input(t, g.x), omitted(), initializer(f32s(g.scales))},
                   std::string("Resize {mode=\"") + mode + "\", antialias=1" + extra + "}");
}

TEST_F(CudaResizeTest, OlderOpsets) {
  for (DataType t : kFloatTypes) {
    // Opset 10: scales is input 1; asymmetric coordinates and "simple" nearest rounding.
    for (const Geometry& g : kGeometries) {
      run_case(10, {input(t, g.x), initializer(f32s(g.scales))}, "Resize {mode=\"nearest\"}");
      run_case(10, {input(t, g.x), initializer(f32s(g.scales))}, "Resize {mode=\"linear\"}");
    }
    // Opset 11: roi is a required input, here empty.
    run_case(11,
             {input(t, {1, 2, 7, 9}), initializer(Tensor::zeros(DataType::kFloat32, {0}).value()),
              initializer(f32s({1, 1, 1.5f, 0.5f}))},
             "Resize {mode=\"cubic\", coordinate_transformation_mode=\"align_corners\"}");
    run_case(19, {input(t, {1, 2, 7, 9}), omitted(), initializer(f32s({1, 1, 1.5f, 0.5f}))},
             "Resize {mode=\"linear\", coordinate_transformation_mode=\"half_pixel_symmetric\"}");
  }
}

TEST_F(CudaResizeTest, IdentityAxesAndLargeImages) {
  for (DataType t : kFloatTypes) {
    run_case(13, {input(t, {1, 3, 5, 7}), omitted(), initializer(f32s({1, 1, 1, 1}))}, "Resize {mode=\"linear\"}");
    run_case(13, {input(t, {1, 3, 64, 96}), omitted(), initializer(f32s({1, 1, 2, 2}))},
             "Resize {mode=\"nearest\", coordinate_transformation_mode=\"asymmetric\", nearest_mode=\"floor\"}");
    run_case(13, {input(t, {2, 4, 40, 30}), omitted(), initializer(f32s({1, 1, 0.25f, 1.5f}))},
             "Resize {mode=\"cubic\"}");
  }
}

TEST_F(CudaResizeTest, OneResizedAxisIsBitIdenticalToTheReference) {
  // The kernel sums one axis's taps in the reference's order, unfused: the same doubles, so a
  // following TopK sees the same ties (the engine test in cuda_topk_test.cc relies on it).
  const Tolerance exact{0, 0};
  for (const char* mode : {"linear", "cubic"})
    replay_on_host(13, {input(DataType::kFloat32, {2, 3, 40}), omitted(), initializer(f32s({1, 1, 61}))},
                   std::string("Resize {mode=\"") + mode + "\"}", &exact);
}

TEST_F(CudaResizeTest, CapturesIntoACudaGraph) {
  check_captured(resize_family(), 13,
                 {input(DataType::kFloat32, {2, 3, 7, 9}), omitted(), initializer(f32s({1, 1, 1.7f, 0.6f}))},
                 "Resize {mode=\"cubic\"}");
}

TEST_F(CudaResizeTest, RefusesWhatItDoesNotHandleAndSaysWhy) {
  const Operand scales = initializer(f32s({1, 1, 2, 2}));
  // Integer data.
  refuses(resize_family(), 13, {input(DataType::kUInt8, {1, 1, 4, 4}), omitted(), scales}, "Resize {mode=\"nearest\"}");
  EXPECT_NE(refusal(13, {input(DataType::kInt32, {1, 1, 4, 4}), omitted(), scales}, "Resize").find("input X is i32"),
            std::string::npos);
  // Scales computed at run time.
  refuses(resize_family(), 13, {input(DataType::kFloat32, {1, 1, 4, 4}), omitted(), input(f32s({1, 1, 2, 2}))},
          "Resize {mode=\"linear\"}");
  EXPECT_NE(refusal(13, {input(DataType::kFloat32, {1, 1, 4, 4}), omitted(), input(f32s({1, 1, 2, 2}))}, "Resize")
                .find("'scales' is computed"),
            std::string::npos);
  // Computed sizes with a keep_aspect_ratio_policy other than stretch.
  EXPECT_NE(refusal(18, {input(DataType::kFloat32, {1, 1, 4, 4}), omitted(), omitted(), input(i64s({6, 5}))},
                    "Resize {axes=[2, 3], keep_aspect_ratio_policy=\"not_larger\"}")
                .find("keep_aspect_ratio_policy"),
            std::string::npos);
  // tf_crop_and_resize with a computed roi.
  EXPECT_NE(refusal(13, {input(DataType::kFloat32, {1, 1, 4, 4}), input(f32s({0, 0, 0, 0, 1, 1, 1, 1})), scales},
                    "Resize {coordinate_transformation_mode=\"tf_crop_and_resize\"}")
                .find("'roi'"),
            std::string::npos);
  // Rank above 8.
  EXPECT_NE(refusal(13,
                    {input(DataType::kFloat32, {1, 1, 1, 1, 1, 1, 1, 2, 2}), omitted(),
                     initializer(f32s({1, 1, 1, 1, 1, 1, 1, 2, 2}))},
                    "Resize")
                .find("rank 9"),
            std::string::npos);
  // A valid node is accepted.
  EXPECT_EQ(refusal(13, {input(DataType::kFloat16, {1, 1, 4, 4}), omitted(), scales}, "Resize {mode=\"cubic\"}"), "");
}

TEST_F(CudaResizeTest, HostParametersCheckShapesAndRoundTrip) {
  auto g = parse_graph(
      op_graph(13, {input(DataType::kFloat32, {1, 2, 5, 7}), omitted(), initializer(f32s({1, 1, 1.5f, 0.5f}))},
               "Resize {mode=\"linear\"}"));
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  const ir::Node& node = *(*g)->nodes()[0];
  ResizeParams p;
  ASSERT_TRUE(backend::cuda::resize_params_for(node, input_types(node), &p).ok());
  ResizeDesc d;
  // floor(1.5 * 5) = 7, floor(0.5 * 7) = 3.
  Status st = backend::cuda::resize_desc_for(p, {1, 2, 5, 7}, {1, 2, 7, 3}, &d);
  ASSERT_TRUE(st.ok()) << st.to_string();
  EXPECT_FALSE(d.resized[0]);
  EXPECT_FALSE(d.resized[1]);
  EXPECT_TRUE(d.resized[2]);
  EXPECT_TRUE(d.resized[3]);
  EXPECT_EQ(d.in_stride[0], 70);
  EXPECT_EQ(d.in_stride[2], 7);
  EXPECT_DOUBLE_EQ(d.scale[2], 1.5);
  // A wrong output shape is an error naming the dim, not a launch.
  st = backend::cuda::resize_desc_for(p, {1, 2, 5, 7}, {1, 2, 8, 3}, &d);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("dim 2 should be 7"), std::string::npos) << st.message();
  st = backend::cuda::resize_desc_for(p, {1, 2, 5}, {1, 2, 7}, &d);
  EXPECT_FALSE(st.ok());
  // The engine's params rebuild the same tactic; malformed ones are rejected.
  auto cands = resize_family().candidates(node, input_types(node));
  ASSERT_EQ(cands.size(), 1u);
  std::vector<uint8_t> bytes = cands[0]->serialize();
  EXPECT_NE(resize_family().create("cuda.resize", bytes), nullptr);
  bytes.pop_back();
  EXPECT_EQ(resize_family().create("cuda.resize", bytes), nullptr);
  EXPECT_EQ(resize_family().create("cuda.resize.other", cands[0]->serialize()), nullptr);
}

}  // namespace
}  // namespace ingot::gpu_test
