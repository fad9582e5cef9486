// Copyright ingot authors. Apache-2.0.
//
// ingot::LayerNormQuantize's CPU reference against a computation written out here: the norm in
// double over the axes from `axis` on, Y rounded to X's type, then Y as stored divided by the scale
// in float32 and rounded half to even and saturated (int8) or converted to E4M3 (fp8). float32 and
// float16 X, int8 and fp8 Yq, with and without B, RMSNorm, the last axis and an inner one, Y
// present and absent; then what shape inference refuses.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/executor.h"
#include "core/dtype.h"
#include "ir/graph.h"
#include "ir/op_registry.h"
#include "ops/run_cpu_node.h"

namespace ingot {
namespace {

using ir::Shape;

Tensor random_tensor(DataType t, const Shape64& shape, std::mt19937& rng, double lo = 0.1, double hi = 1.0) {
  std::uniform_real_distribution<double> mag(lo, hi);
  Tensor x = Tensor::zeros(t, shape).value();
  for (int64_t i = 0; i < x.numel(); ++i) x.set_f64(i, (rng() & 1 ? 1 : -1) * mag(rng));
  return x;
}

// A rounded to type t as a store to t rounds it (through float for the 16-bit types).
double stored(DataType t, double v) {
  const float f = static_cast<float>(v);
  return t == DataType::kFloat16 ? half_bits_to_float(float_to_half_bits(f)) : f;
}

struct Expected {
  std::vector<double> y;   // Y as stored in X's type
  std::vector<double> yq;  // Yq's values
};

// The norm of x over the axes from `axis` on, then QuantizeLinear of the stored result.
Expected expected(const Tensor& x, const Tensor& gamma, const Tensor* beta, bool rms, int64_t axis, float eps,
                  float scale, DataType q, bool saturate) {
  const int64_t rank = static_cast<int64_t>(x.rank());
  if (axis < 0) axis += rank;
  int64_t inner = 1;
  for (int64_t d = axis; d < rank; ++d) inner *= x.dim(static_cast<size_t>(d));
  Expected e;
  for (int64_t o = 0; o < x.numel() / inner; ++o) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < inner; ++i) mean += x.get_f64(o * inner + i);
    mean = rms ? 0.0 : mean / static_cast<double>(inner);
    for (int64_t i = 0; i < inner; ++i) var += std::pow(x.get_f64(o * inner + i) - mean, 2);
    const double inv = 1.0 / std::sqrt(var / static_cast<double>(inner) + static_cast<double>(eps));
    for (int64_t i = 0; i < inner; ++i) {
      double v = (x.get_f64(o * inner + i) - mean) * inv * gamma.get_f64(i);
      if (beta) v += beta->get_f64(i);
      const double y = stored(x.dtype(), v);
      e.y.push_back(y);
      const float quotient = static_cast<float>(y) / scale;
      if (q == DataType::kInt8)
        e.yq.push_back(std::min(127.0, std::max(-128.0, static_cast<double>(std::nearbyint(quotient)))));
      else
        e.yq.push_back(small_float_to_float(float_to_small_float(quotient, q, saturate), q));
    }
  }
  return e;
}

// One LayerNormQuantize node (Y output given or not) through the CPU kernels after inference.
Result<std::vector<Tensor>> run_norm_quantize(const std::vector<const Tensor*>& ins, const ir::Attributes& attrs,
                                              bool with_y) {
  return ops_test::run_cpu_node("LayerNormQuantize", "ingot", ins, attrs, {with_y, true});
}

TEST(LayerNormQuantizeKernel, EqualsTheNormThenQuantizeLinearComputedHere) {
  std::mt19937 rng(11);
  const float eps = 1e-3f;
  std::map<DataType, int> saturated;  // Yq values at the type's limit, by type: over all cases
  for (DataType xt : {DataType::kFloat32, DataType::kFloat16})
    for (DataType qt : {DataType::kInt8, DataType::kFloat8E4M3FN})
      for (const char* form : {"layernorm", "layernorm-no-bias", "rmsnorm"})
        for (int64_t axis : {-1, 1})
          for (bool with_y : {true, false}) {
            SCOPED_TRACE(std::string(data_type_name(xt)) + " -> " + data_type_name(qt) + ", " + form + ", axis " +
                         std::to_string(axis) + (with_y ? ", Y kept" : ", no Y"));
            const bool rms = std::string(form) == "rmsnorm", bias = std::string(form) == "layernorm";
            const Shape64 shape = {2, 3, 8};
            const Shape64 param = axis == -1 ? Shape64{8} : Shape64{3, 8};
            // An offset keeps the mean away from 0, and gamma up to 2 makes some quotients saturate.
            Tensor x = random_tensor(xt, shape, rng, 0.1, 3.0);
            for (int64_t i = 0; i < x.numel(); i += 3) x.set_f64(i, x.get_f64(i) + 1.5);
            Tensor gamma = random_tensor(xt, param, rng, 0.2, 2.0);
            Tensor beta = random_tensor(xt, param, rng, 0.1, 0.5);
            // int8: a scale at which |Y| > 2.54 saturates; fp8: one beyond 448 for the largest |Y|.
            const float scale = qt == DataType::kInt8 ? 0.02f : 0.006f;
            Tensor s = Tensor::from_vector<float>(DataType::kFloat32, {}, {scale});
            Tensor z = Tensor::zeros(qt, {}).value();
            ir::Attributes a;
            a.set_int("axis", axis);
            a.set_float("epsilon", eps);
            if (rms) a.set_int("rms", 1);
            auto out = run_norm_quantize({&x, &gamma, bias ? &beta : nullptr, &s, &z}, a, with_y);
            ASSERT_TRUE(out.ok()) << out.status().to_string();
            const Expected e = expected(x, gamma, bias ? &beta : nullptr, rms, axis, eps, scale, qt, true);
            const Tensor& yq = (*out)[1];
            ASSERT_EQ(yq.dtype(), qt);
            ASSERT_EQ(yq.shape(), shape);
            for (int64_t i = 0; i < yq.numel(); ++i) {
              ASSERT_EQ(yq.get_f64(i), e.yq[static_cast<size_t>(i)]) << "Yq element " << i;
              saturated[qt] += std::fabs(e.yq[static_cast<size_t>(i)]) >= (qt == DataType::kInt8 ? 127 : 448);
            }
            ASSERT_EQ((*out)[0].defined(), with_y);
            if (!with_y) continue;
            const Tensor& y = (*out)[0];
            ASSERT_EQ(y.dtype(), xt);
            for (int64_t i = 0; i < y.numel(); ++i)
              ASSERT_EQ(y.get_f64(i), e.y[static_cast<size_t>(i)]) << "Y element " << i;
          }
  // The saturation is exercised, and not everywhere.
  for (DataType qt : {DataType::kInt8, DataType::kFloat8E4M3FN}) {
    EXPECT_GT(saturated[qt], 0) << data_type_name(qt);
    EXPECT_LT(saturated[qt], 48 * 24 / 10) << data_type_name(qt);
  }
}

TEST(LayerNormQuantizeKernel, Fp8WithoutSaturationGivesNaNBeyond448) {
  std::mt19937 rng(12);
  Tensor x = random_tensor(DataType::kFloat32, {4, 16}, rng);
  Tensor gamma = random_tensor(DataType::kFloat32, {16}, rng, 1.0, 2.0);
  Tensor s = Tensor::from_vector<float>(DataType::kFloat32, {1}, {0.005f});
  Tensor z = Tensor::zeros(DataType::kFloat8E4M3FN, {1}).value();
  ir::Attributes a;
  a.set_int("saturate", 0);
  auto out = run_norm_quantize({&x, &gamma, nullptr, &s, &z}, a, false);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  const Expected e = expected(x, gamma, nullptr, false, -1, 1e-5f, 0.005f, DataType::kFloat8E4M3FN, false);
  int nans = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double got = (*out)[1].get_f64(i), want = e.yq[static_cast<size_t>(i)];
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << i;
      ++nans;
    } else {
      EXPECT_EQ(got, want) << i;
    }
  }
  EXPECT_GT(nans, 0);
}

// Inference of a LayerNormQuantize whose inputs are declared (types, shapes) and, for the zero
// point, given (`zero`, an initializer): the error message, or "" when it passes.
std::string inference_error(DataType x, DataType gamma, bool bias, DataType scale_type, const Shape64& scale_shape,
                            const Tensor& zero, const ir::Attributes& attrs = {}, bool with_scale = true) {
  ir::Graph g;
  g.set_opset_import("", 17);
  g.set_opset_import("ingot", 1);
  std::vector<ir::Value*> ins = {g.add_input("x", x, Shape({2, 8})), g.add_input("g", gamma, Shape({8})),
                                 bias ? g.add_input("b", gamma, Shape({8})) : nullptr,
                                 with_scale ? g.add_input("s", scale_type, Shape::from_concrete(scale_shape)) : nullptr,
                                 g.add_initializer("z", zero)};
  const ir::Node* n =
      g.add_node("LayerNormQuantize", ins, {g.add_value("y"), g.add_value("yq")}, attrs, "lnq", "ingot");
  Status st = ir::infer_node(*n);
  if (st.ok()) {
    EXPECT_EQ(n->output(1)->dtype(), zero.dtype());
    EXPECT_EQ(n->output(1)->shape(), Shape({2, 8}));
    EXPECT_EQ(n->output(0)->dtype(), x);
  }
  return st.ok() ? "" : st.message();
}

TEST(LayerNormQuantizeInference, TypesAndOneElementParameters) {
  const DataType f32 = DataType::kFloat32, f16 = DataType::kFloat16;
  const Tensor i8_zero = Tensor::zeros(DataType::kInt8, {}).value();
  EXPECT_EQ(inference_error(f32, f32, true, f32, {}, i8_zero), "");
  EXPECT_EQ(inference_error(f16, f16, false, f32, {1}, Tensor::zeros(DataType::kFloat8E4M3FN, {1}).value()), "");
  auto refuses = [](const std::string& message, const std::string& part) {
    EXPECT_NE(message.find(part), std::string::npos) << "'" << message << "' should say '" << part << "'";
  };
  refuses(inference_error(DataType::kInt32, DataType::kInt32, false, f32, {}, i8_zero), "X must be float32");
  refuses(inference_error(f32, f16, false, f32, {}, i8_zero), "scale is f16 but X is f32");
  refuses(inference_error(f32, f32, false, DataType::kInt32, {}, i8_zero), "y_scale must be float");
  refuses(inference_error(f32, f32, false, f32, {2}, i8_zero), "y_scale must hold one element");
  refuses(inference_error(f32, f32, false, f32, {}, Tensor::zeros(DataType::kUInt8, {}).value()),
          "y_zero_point must be int8 or float8e4m3fn");
  refuses(inference_error(f32, f32, false, f32, {}, Tensor::zeros(DataType::kInt8, {2}).value()),
          "y_zero_point must hold one element");
  refuses(inference_error(f32, f32, false, f32, {}, Tensor::from_vector<int8_t>(DataType::kInt8, {}, {3})),
          "y_zero_point must be 0");
  refuses(inference_error(f32, f32, false, f32, {}, i8_zero, {}, /*with_scale=*/false), "are required");
  ir::Attributes rms;
  rms.set_int("rms", 1);
  refuses(inference_error(f32, f32, true, f32, {}, i8_zero, rms), "takes no B");
  ir::Attributes axis;
  axis.set_int("axis", 2);
  refuses(inference_error(f32, f32, false, f32, {}, i8_zero, axis), "axis 2 out of range");
}

}  // namespace
}  // namespace ingot
