// Copyright ingot authors. Apache-2.0.
//
// Elementwise ops: arithmetic, math functions, activations, comparisons, logic and bitwise
// ops. Every output is the (numpy) broadcast of the inputs; ops before opset 7 with the
// legacy `broadcast`/`axis` attributes give the first input's shape.
#include "ir/ops/all_ops.h"

#include <string>
#include <vector>

namespace ingot::ir {

namespace {

/// All known input dtypes must agree; returns the common one (kUndefined if none is known).
Result<DataType> common_dtype(const InferenceContext& c, size_t first, size_t last) {
  DataType dt = DataType::kUndefined;
  for (size_t i = first; i < last && i < c.num_inputs(); ++i) {
    if (!c.has_input(i)) continue;
    DataType d = c.input_dtype(i);
    if (d == DataType::kUndefined) continue;
    if (dt == DataType::kUndefined) {
      dt = d;
    } else if (d != dt) {
      return c.error("input ", i, " has type ", data_type_name(d), " but input ", first, " has ",
                     data_type_name(dt));
    }
  }
  return dt;
}

/// Broadcast of inputs [0, n) with the legacy (opset < 7) broadcast attribute honoured.
Status broadcast_out(InferenceContext& c, DataType out_dtype) {
  if (c.opset() < 7 && c.attrs().has("broadcast")) {
    if (c.attrs().get_int("broadcast", 0) != 0) {
      // Legacy broadcasting: B is aligned to A (at `axis`, or at the end); output is A's shape.
      const Shape& a = c.input_shape(0);
      const Shape& b = c.input_shape(1);
      if (a.rank_known() && b.rank_known()) {
        int64_t ra = static_cast<int64_t>(a.rank()), rb = static_cast<int64_t>(b.rank());
        int64_t axis = c.attrs().get_int("axis", ra - rb);
        if (axis < 0) axis += ra;
        if (rb > ra || axis < 0 || axis + rb > ra)
          return c.error("legacy broadcast of ", b.to_string(), " to ", a.to_string(), " at axis ",
                         axis, " is impossible");
      }
      c.set_output(0, out_dtype, a);
      return Status::Ok();
    }
  }
  return c.propagate_broadcast(0, out_dtype);
}

/// Same-typed inputs, output of that type (Add, Sub, ...) or of `out` when given (Equal, ...).
InferFn binary_fn(DataType out = DataType::kUndefined) {
  return [out](InferenceContext& c) -> Status {
    auto dt = common_dtype(c, 0, c.num_inputs());
    if (!dt.ok()) return dt.status();
    return broadcast_out(c, out == DataType::kUndefined ? *dt : out);
  };
}

InferFn unary_same() {
  return [](InferenceContext& c) { return c.propagate_same(0, 0); };
}

InferFn unary_bool() {
  return [](InferenceContext& c) -> Status {
    c.set_output(0, DataType::kBool, c.input_shape(0));
    return Status::Ok();
  };
}

}  // namespace

void register_elementwise_ops(OpRegistry& r) {
  // ---- binary arithmetic
  for (const char* op : {"Add", "Sub", "Mul", "Div"}) {
    r.add(op).inputs(2, 2).outputs(1, 1).opsets(1)
        .attr("axis", AttrType::kInt).attr("broadcast", AttrType::kInt)
        .attr("consumed_inputs", AttrType::kInts)
        .infer(binary_fn());
  }
  r.add("Pow").inputs(2, 2).outputs(1, 1).opsets(1)
      .attr("axis", AttrType::kInt).attr("broadcast", AttrType::kInt)
      .infer([](InferenceContext& c) -> Status {
        // Output has the base's type; the exponent may be of another numeric type (opset 12+).
        return broadcast_out(c, c.input_dtype(0));
      });
  r.add("Mod").inputs(2, 2).outputs(1, 1).opsets(10)
      .attr("fmod", AttrType::kInt)
      .infer([](InferenceContext& c) -> Status {
        int64_t fmod = c.attrs().get_int("fmod", 0);
        if (fmod != 0 && fmod != 1) return c.error("fmod must be 0 or 1, got ", fmod);
        auto dt = common_dtype(c, 0, 2);
        if (!dt.ok()) return dt.status();
        return c.propagate_broadcast(0, *dt);
      });
  r.add("BitShift").inputs(2, 2).outputs(1, 1).opsets(11)
      .attr("direction", AttrType::kString, true)
      .infer([](InferenceContext& c) -> Status {
        std::string d = c.attrs().get_string("direction", "");
        if (d != "LEFT" && d != "RIGHT") return c.error("direction must be LEFT or RIGHT, got '", d, "'");
        auto dt = common_dtype(c, 0, 2);
        if (!dt.ok()) return dt.status();
        if (*dt != DataType::kUndefined && !is_integer(*dt))
          return c.error("BitShift needs integer inputs, got ", data_type_name(*dt));
        return c.propagate_broadcast(0, *dt);
      });
  for (const char* op : {"BitwiseAnd", "BitwiseOr", "BitwiseXor"}) {
    r.add(op).inputs(2, 2).outputs(1, 1).opsets(18).infer(binary_fn());
  }
  r.add("BitwiseNot").inputs(1, 1).outputs(1, 1).opsets(18).infer(unary_same());

  // ---- comparisons and logic (bool outputs)
  for (const char* op : {"Equal", "Less", "Greater", "And", "Or", "Xor"}) {
    r.add(op).inputs(2, 2).outputs(1, 1).opsets(1)
        .attr("axis", AttrType::kInt).attr("broadcast", AttrType::kInt)
        .infer(binary_fn(DataType::kBool));
  }
  for (const char* op : {"LessOrEqual", "GreaterOrEqual"}) {
    r.add(op).inputs(2, 2).outputs(1, 1).opsets(12).infer(binary_fn(DataType::kBool));
  }
  r.add("Not").inputs(1, 1).outputs(1, 1).opsets(1).infer(unary_same());
  r.add("IsNaN").inputs(1, 1).outputs(1, 1).opsets(9).infer(unary_bool());
  r.add("IsInf").inputs(1, 1).outputs(1, 1).opsets(10)
      .attr("detect_negative", AttrType::kInt).attr("detect_positive", AttrType::kInt)
      .infer(unary_bool());
  r.add("Where").inputs(3, 3).outputs(1, 1).opsets(9)
      .infer([](InferenceContext& c) -> Status {
        if (c.input_dtype(0) != DataType::kUndefined && c.input_dtype(0) != DataType::kBool)
          return c.error("condition must be bool, got ", data_type_name(c.input_dtype(0)));
        auto dt = common_dtype(c, 1, 3);
        if (!dt.ok()) return dt.status();
        return c.propagate_broadcast(0, *dt);
      });

  // ---- variadic
  for (const char* op : {"Max", "Min", "Sum", "Mean"}) {
    r.add(op).inputs(1, -1).outputs(1, 1).opsets(1)
        .attr("consumed_inputs", AttrType::kInts)
        .infer(binary_fn());
  }

  // ---- unary math, same type and shape
  for (const char* op : {"Neg", "Abs", "Sqrt", "Reciprocal", "Exp", "Log", "Tanh", "Sigmoid",
                         "Relu", "Floor", "Ceil"}) {
    r.add(op).inputs(1, 1).outputs(1, 1).opsets(1)
        .attr("consumed_inputs", AttrType::kInts)
        .infer(unary_same());
  }
  for (const char* op : {"Sin", "Cos", "Tan", "Asin", "Acos", "Atan"}) {
    r.add(op).inputs(1, 1).outputs(1, 1).opsets(7).infer(unary_same());
  }
  for (const char* op : {"Erf", "Sign", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh"}) {
    r.add(op).inputs(1, 1).outputs(1, 1).opsets(9).infer(unary_same());
  }
  r.add("Round").inputs(1, 1).outputs(1, 1).opsets(11).infer(unary_same());
  r.add("Softplus").inputs(1, 1).outputs(1, 1).opsets(1).infer(unary_same());
  r.add("Softsign").inputs(1, 1).outputs(1, 1).opsets(1).infer(unary_same());
  r.add("HardSwish").inputs(1, 1).outputs(1, 1).opsets(14).infer(unary_same());
  r.add("Mish").inputs(1, 1).outputs(1, 1).opsets(18).infer(unary_same());

  // ---- activations with attributes
  r.add("HardSigmoid").inputs(1, 1).outputs(1, 1).opsets(1)
      .attr("alpha", AttrType::kFloat).attr("beta", AttrType::kFloat)
      .attr("consumed_inputs", AttrType::kInts)
      .infer(unary_same());
  r.add("LeakyRelu").inputs(1, 1).outputs(1, 1).opsets(1)
      .attr("alpha", AttrType::kFloat).attr("consumed_inputs", AttrType::kInts)
      .infer(unary_same());
  r.add("Elu").inputs(1, 1).outputs(1, 1).opsets(1)
      .attr("alpha", AttrType::kFloat).attr("consumed_inputs", AttrType::kInts)
      .infer(unary_same());
  r.add("Selu").inputs(1, 1).outputs(1, 1).opsets(1)
      .attr("alpha", AttrType::kFloat).attr("gamma", AttrType::kFloat)
      .attr("consumed_inputs", AttrType::kInts)
      .infer(unary_same());
  r.add("Celu").inputs(1, 1).outputs(1, 1).opsets(12)
      .attr("alpha", AttrType::kFloat)
      .infer([](InferenceContext& c) -> Status {
        if (c.attrs().get_float("alpha", 1.0f) == 0.0f) return c.error("alpha must not be 0");
        return c.propagate_same(0, 0);
      });
  r.add("ThresholdedRelu").inputs(1, 1).outputs(1, 1).opsets(10)
      .attr("alpha", AttrType::kFloat)
      .infer(unary_same());
  r.add("Shrink").inputs(1, 1).outputs(1, 1).opsets(9)
      .attr("bias", AttrType::kFloat).attr("lambd", AttrType::kFloat)
      .infer(unary_same());
  r.add("Swish").inputs(1, 1).outputs(1, 1).opsets(24)
      .attr("alpha", AttrType::kFloat)
      .infer(unary_same());
  r.add("Gelu").inputs(1, 1).outputs(1, 1).opsets(20)
      .attr("approximate", AttrType::kString)
      .infer([](InferenceContext& c) -> Status {
        std::string a = c.attrs().get_string("approximate", "none");
        if (a != "none" && a != "tanh") return c.error("approximate must be 'none' or 'tanh', got '", a, "'");
        return c.propagate_same(0, 0);
      });
  r.add("PRelu").inputs(2, 2).outputs(1, 1).opsets(1)
      .attr("consumed_inputs", AttrType::kInts)
      .infer([](InferenceContext& c) -> Status {
        auto dt = common_dtype(c, 0, 2);
        if (!dt.ok()) return dt.status();
        // slope broadcasts unidirectionally to X; the output has X's shape.
        const Shape& x = c.input_shape(0);
        const Shape& s = c.input_shape(1);
        if (x.rank_known() && s.rank_known()) {
          auto b = broadcast_shapes(x, s);
          if (!b.ok()) return c.error(b.status().message());
          if (b->rank() != x.rank()) return c.error("slope ", s.to_string(), " does not broadcast to X ", x.to_string());
          for (size_t i = 0; i < x.rank(); ++i) {
            if (x[i].is_known() && (*b)[i].is_known() && x[i].value() != (*b)[i].value())
              return c.error("slope ", s.to_string(), " does not broadcast to X ", x.to_string());
          }
        }
        c.set_output(0, *dt, x);
        return Status::Ok();
      });
  r.add("Clip").inputs(1, 3).outputs(1, 1).opsets(1)
      .attr("min", AttrType::kFloat).attr("max", AttrType::kFloat)
      .attr("consumed_inputs", AttrType::kInts)
      .infer([](InferenceContext& c) -> Status {
        auto dt = common_dtype(c, 0, 3);
        if (!dt.ok()) return dt.status();
        for (size_t i = 1; i < 3; ++i) {
          if (!c.has_input(i)) continue;
          const Shape& s = c.input_shape(i);
          if (s.rank_known() && s.rank() > 1) return c.error("input ", i, " must be a scalar, got ", s.to_string());
          if (s.rank() == 1 && s[0].is_known() && s[0].value() != 1)
            return c.error("input ", i, " must be a scalar, got ", s.to_string());
        }
        return c.propagate_same(0, 0);
      });
}

}  // namespace ingot::ir
