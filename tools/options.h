// Copyright ingot authors. Apache-2.0.
//
// Command-line pieces shared by the subcommands: shape lists and flag parsing helpers.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ingot/builder.h"
#include "ingot/llm.h"

namespace ingot::tools {

using ShapeMap = std::map<std::string, std::vector<int64_t>>;

/// "a:1x3x224x224,b:8" → map. Error text in `err` on malformed input.
bool parse_shape_list(const std::string& text, ShapeMap& out, std::string& err);
/// "1x3x224x224" → dims ("" is a scalar).
bool parse_dims(const std::string& text, std::vector<int64_t>& dims);
/// "[1,3,224,224]"
std::string dims_to_string(const std::vector<int64_t>& d);
/// "12.3 MiB"
std::string human_bytes(uint64_t bytes);

/// Profile options as trtexec has them: --shapes sets min=opt=max; --min/--opt/--max-shapes
/// set each bound (any bound left out takes the others' value).
struct ShapeOptions {
  ShapeMap shapes, min, opt, max;
  /// Parses one of the four flags; returns false (with err) when `flag` is not one of them
  /// or its value is malformed.
  bool parse(const std::string& flag, const std::string& value, std::string& err);
  bool empty() const { return shapes.empty() && min.empty() && opt.empty() && max.empty(); }
  /// Builds one optimization profile; error when an input has inconsistent bounds.
  bool to_profile(OptimizationProfile& profile, std::string& err) const;
  /// Dims to run at for `input`: --shapes, else --opt-shapes; false when neither names it.
  bool run_dims(const std::string& input, std::vector<int64_t>& dims) const;
};

/// `text` as an integer in [lo, hi] into *out; otherwise prints "<command>: <flag> needs an integer
/// in [lo, hi], got '<text>'" to stderr and returns false.
bool parse_int_arg(const std::string& command, const std::string& flag, const std::string& text, long long lo,
                   long long hi, long long& out);

/// --backend cpu|cuda and --dtype fp16|bf16 of `ingot generate` / `ingot serve MODEL.gguf`: false
/// when `flag` is not one of them (err empty) or its value is not allowed (err says so).
bool parse_llm_load_flag(const std::string& flag, const std::string& value, LlmLoadOptions& options, std::string& err);
/// "GPU bf16", "GPU fp16" or "CPU fp32", then what else runs: fp8 weights, int4 weights (`int4`:
/// LlmModel::int4_weights, asked for or the checkpoint's own), an fp8 KV cache.
std::string llm_precision_label(const LlmLoadOptions& options, bool int4);

enum class BuildFlag { kNotMine, kOk, kError };

/// Parses args[i] when it is one of the builder's flags (precision, tuning, passes), advancing i
/// past its value; shared by build, run (.onnx built on the fly) and compare so one model is
/// built the same way everywhere. kError comes with one line in `err` naming flag and value.
BuildFlag parse_build_flag(const std::vector<std::string>& args, size_t& i, BuilderConfig& config, std::string& err);
/// The help lines of those flags.
std::string build_flags_help();

}  // namespace ingot::tools
