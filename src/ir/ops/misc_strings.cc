// Copyright ingot authors. Apache-2.0.
//
// String ops (StringNormalizer, StringConcat, StringSplit, RegexFullMatch), TfIdfVectorizer
// and the ai.onnx.ml ops LabelEncoder, Binarizer and ArrayFeatureExtractor.
#include <algorithm>

#include "ir/ops/all_ops.h"

namespace ingot::ir {

void register_misc_string_ops(OpRegistry& r);

namespace {

Status need_string(const InferenceContext& c, size_t i) {
  if (c.input_dtype(i) != DataType::kUndefined && c.input_dtype(i) != DataType::kString)
    return c.error("input ", i, " must be a string tensor, got ", data_type_name(c.input_dtype(i)));
  return Status::Ok();
}

Status infer_string_normalizer(InferenceContext& c) {
  INGOT_RETURN_IF_ERROR(need_string(c, 0));
  std::string action = c.attrs().get_string("case_change_action", "NONE");
  if (action != "NONE" && action != "LOWER" && action != "UPPER")
    return c.error("case_change_action must be NONE, LOWER or UPPER, got '", action, "'");
  const Shape& s = c.input_shape(0);
  if (!s.rank_known()) return c.set_output(0, DataType::kString, Shape::unknown_rank()), Status::Ok();
  if (s.rank() == 1) return c.set_output(0, DataType::kString, Shape{Dim::unknown()}), Status::Ok();
  if (s.rank() == 2) {
    if (s[0].is_known() && s[0].value() != 1) return c.error("a 2-D input must be [1, C], got ", s.to_string());
    c.set_output(0, DataType::kString, Shape{1, Dim::unknown()});
    return Status::Ok();
  }
  return c.error("input must be [C] or [1, C], got ", s.to_string());
}

Status infer_string_concat(InferenceContext& c) {
  INGOT_RETURN_IF_ERROR(need_string(c, 0));
  INGOT_RETURN_IF_ERROR(need_string(c, 1));
  return c.propagate_broadcast(0, DataType::kString);
}

Status infer_string_split(InferenceContext& c) {
  INGOT_RETURN_IF_ERROR(need_string(c, 0));
  const Shape& s = c.input_shape(0);
  if (!s.rank_known()) {
    c.set_output(0, DataType::kString, Shape::unknown_rank());
    c.set_output(1, DataType::kInt64, Shape::unknown_rank());
    return Status::Ok();
  }
  std::vector<Dim> dims = s.dims();
  dims.push_back(Dim::unknown());
  c.set_output(0, DataType::kString, Shape(dims));
  if (c.num_outputs() > 1) c.set_output(1, DataType::kInt64, s);
  return Status::Ok();
}

Status infer_regex(InferenceContext& c) {
  INGOT_RETURN_IF_ERROR(need_string(c, 0));
  c.set_output(0, DataType::kBool, c.input_shape(0));
  return Status::Ok();
}

Status infer_tfidf(InferenceContext& c) {
  std::vector<int64_t> idx = c.attrs().get_ints("ngram_indexes");
  if (idx.empty()) return c.error("ngram_indexes is required");
  int64_t size = *std::max_element(idx.begin(), idx.end()) + 1;
  std::string mode = c.attrs().get_string("mode", "");
  if (mode != "TF" && mode != "IDF" && mode != "TFIDF") return c.error("mode must be TF, IDF or TFIDF, got '", mode, "'");
  DataType in = c.input_dtype(0);
  if (in != DataType::kUndefined && in != DataType::kString && in != DataType::kInt32 && in != DataType::kInt64)
    return c.error("input must be string, int32 or int64, got ", data_type_name(in));
  const Shape& s = c.input_shape(0);
  if (!s.rank_known()) return c.set_output(0, DataType::kFloat32, Shape::unknown_rank()), Status::Ok();
  if (s.rank() <= 1) return c.set_output(0, DataType::kFloat32, Shape{size}), Status::Ok();
  if (s.rank() == 2) return c.set_output(0, DataType::kFloat32, Shape{s[0], size}), Status::Ok();
  return c.error("input must be [C] or [N, C], got ", s.to_string());
}

// LabelEncoder's output dtype from whichever values attribute is present.
Result<DataType> label_encoder_output(const InferenceContext& c) {
  const Attributes& a = c.attrs();
  if (a.has("values_tensor")) return a.get_tensor("values_tensor")->dtype();
  if (a.has("values_floats")) return DataType::kFloat32;
  if (a.has("values_int64s")) return DataType::kInt64;
  if (a.has("values_strings")) return DataType::kString;
  if (a.has("classes_strings")) {  // opset 1: string <-> int64
    if (c.input_dtype(0) == DataType::kString) return DataType::kInt64;
    if (c.input_dtype(0) == DataType::kInt64) return DataType::kString;
    return DataType::kUndefined;
  }
  return c.error("one of values_tensor, values_floats, values_int64s, values_strings is required");
}

Status infer_label_encoder(InferenceContext& c) {
  INGOT_ASSIGN_OR_RETURN(DataType dt, label_encoder_output(c));
  c.set_output(0, dt, c.input_shape(0));
  return Status::Ok();
}

Status infer_array_feature_extractor(InferenceContext& c) {
  const Shape& x = c.input_shape(0);
  const Shape& y = c.input_shape(1);
  if (c.input_dtype(1) != DataType::kUndefined && c.input_dtype(1) != DataType::kInt64)
    return c.error("indices must be int64");
  if (!x.rank_known() || !y.rank_known()) return c.set_output(0, c.input_dtype(0), Shape::unknown_rank()), Status::Ok();
  if (x.rank() < 1) return c.error("X must have rank >= 1");
  Dim n = 1;
  for (const Dim& d : y.dims()) n = (n.is_known() && d.is_known()) ? Dim(mul_dims(n.value(), d.value())) : Dim::unknown();
  std::vector<Dim> dims;
  if (x.rank() == 1) dims = {1, n};
  else {
    dims = x.dims();
    dims.back() = n;
  }
  c.set_output(0, c.input_dtype(0), Shape(dims));
  return Status::Ok();
}

}  // namespace

void register_misc_string_ops(OpRegistry& r) {
  r.add("StringNormalizer").inputs(1, 1).outputs(1, 1).opsets(10)
      .attr("case_change_action", AttrType::kString)
      .attr("is_case_sensitive", AttrType::kInt)
      .attr("locale", AttrType::kString)
      .attr("stopwords", AttrType::kStrings)
      .infer(infer_string_normalizer);
  r.add("StringConcat").inputs(2, 2).outputs(1, 1).opsets(20).infer(infer_string_concat);
  r.add("StringSplit").inputs(1, 1).outputs(1, 2).opsets(20)
      .attr("delimiter", AttrType::kString)
      .attr("maxsplit", AttrType::kInt)
      .infer(infer_string_split);
  r.add("RegexFullMatch").inputs(1, 1).outputs(1, 1).opsets(20)
      .attr("pattern", AttrType::kString)
      .infer(infer_regex);
  r.add("TfIdfVectorizer").inputs(1, 1).outputs(1, 1).opsets(9)
      .attr("max_gram_length", AttrType::kInt, true)
      .attr("max_skip_count", AttrType::kInt, true)
      .attr("min_gram_length", AttrType::kInt, true)
      .attr("mode", AttrType::kString, true)
      .attr("ngram_counts", AttrType::kInts, true)
      .attr("ngram_indexes", AttrType::kInts, true)
      .attr("pool_int64s", AttrType::kInts)
      .attr("pool_strings", AttrType::kStrings)
      .attr("weights", AttrType::kFloats)
      .infer(infer_tfidf);

  const std::string ml = "ai.onnx.ml";
  r.add("LabelEncoder", ml).inputs(1, 1).outputs(1, 1).opsets(1)
      .attr("classes_strings", AttrType::kStrings)
      .attr("default_float", AttrType::kFloat)
      .attr("default_int64", AttrType::kInt)
      .attr("default_string", AttrType::kString)
      .attr("default_tensor", AttrType::kTensor)
      .attr("keys_floats", AttrType::kFloats)
      .attr("keys_int64s", AttrType::kInts)
      .attr("keys_strings", AttrType::kStrings)
      .attr("keys_tensor", AttrType::kTensor)
      .attr("values_floats", AttrType::kFloats)
      .attr("values_int64s", AttrType::kInts)
      .attr("values_strings", AttrType::kStrings)
      .attr("values_tensor", AttrType::kTensor)
      .infer(infer_label_encoder);
  r.add("Binarizer", ml).inputs(1, 1).outputs(1, 1).opsets(1)
      .attr("threshold", AttrType::kFloat)
      .infer([](InferenceContext& c) { return c.propagate_same(0, 0); });
  r.add("ArrayFeatureExtractor", ml).inputs(2, 2).outputs(1, 1).opsets(1)
      .infer(infer_array_feature_extractor);
}

}  // namespace ingot::ir
