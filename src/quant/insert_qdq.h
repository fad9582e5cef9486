// Copyright ingot authors. Apache-2.0.
//
// Implicit INT8 quantization as explicit Q/DQ: given calibrated per-tensor scales, every Conv,
// Gemm and MatMul whose float inputs all have a scale reads them through a QuantizeLinear ->
// DequantizeLinear pair (int8, symmetric, zero point 0; one pair per tensor, shared by all its
// readers), and its constant weight becomes its 8-bit form read through a DequantizeLinear: int8
// per output channel (scale = max |w| of the channel / 127, values clamped to [-127, 127]; axis 0
// of a Conv weight, N of a MatMul/Gemm one), FP8 E4M3 with one scale per tensor. fuse_quant_gemm
// then makes each such layer one ingot::QuantGemm / ingot::QuantConv that multiplies the 8-bit
// numbers themselves, as an int8 engine does; the CPU backend runs it as the accuracy reference.
// (A weight of another rank, such as a batched MatMul's, is stored rounded in float instead.)
// Layers left in float are listed with the reason (no calibrated range, a non-float input, a
// weight that is not a constant).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "ir/graph.h"

namespace ingot::quant {

/// What the Q/DQ pairs quantize to: int8 (symmetric, scale = T / 127) or FP8 E4M3 (scale =
/// T / 448, values rounded to the nearest E4M3 number, as Hopper's FP8 tensor cores take them).
enum class QuantType { kInt8, kFp8E4M3 };
/// The largest magnitude the type represents (127 or 448): scale = threshold / this.
double quant_max(QuantType t);

struct QdqReport {
  int quantized_layers = 0;
  int qdq_pairs = 0;              ///< activation tensors given a Q/DQ pair
  std::vector<std::string> kept;  ///< "<layer>: why" for each quantizable layer left in float
  std::vector<std::string> int8;  ///< names of the layers quantized
};

/// Rewrites `g` in place (then topologically sorted). `scales`: tensor name -> scale (T / 127).
/// `keep_float`: layer name -> why it stays in float (reported in QdqReport::kept).
Result<QdqReport> insert_qdq(ir::Graph& g, const std::map<std::string, float>& scales,
                             const std::map<std::string, std::string>& keep_float = {},
                             QuantType type = QuantType::kInt8);

/// A layer's name in reports and in keep_float (its node name, else its op type).
std::string layer_name(const ir::Node& n);
/// A value name not yet used in `g`: `base`, else base_1, base_2, ...
std::string fresh_name(const ir::Graph& g, const std::string& base);

/// The names insert_qdq gives the layers it considers (node name, else op type), in node order.
std::vector<std::string> quantizable_layers(const ir::Graph& g);

/// The activation tensors whose scales insert_qdq reads: the float activation input of each
/// Conv, Gemm and MatMul it can quantize (one with a constant float weight as input 1), by name,
/// each once, in node order. A graph input is among them when such a layer reads it. Calibration
/// observes only these; a layer left out (a product of two activations, a non-float input) stays
/// in float whatever the scales, so its inputs need none.
std::vector<std::string> calibrated_tensors(const ir::Graph& g);

}  // namespace ingot::quant
