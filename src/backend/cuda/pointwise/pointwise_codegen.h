// Copyright ingot authors. Apache-2.0.
//
// Code generation for ingot::Pointwise: turns the node's `body` graph (a tree of elementwise
// ops, see passes/fuse_pointwise.cc) into the CUDA C++ source of one kernel family that NVRTC
// compiles at build time. Pure host code with no CUDA headers, so it is testable anywhere.
//
// The generated source is self-contained (no #include: fp16/bf16 conversions are inline PTX) and
// defines three extern "C" kernels taking one PointwiseArgs by value:
//   pw_flat       every input is either the output's shape, contiguous, or one element;
//                 vectorized 16-byte loads/stores when the host says the pointers allow it;
//   pw_general32  broadcasting by index math over <= kPointwiseMaxRank collapsed dims,
//                 32-bit indices (every tensor below 2^31 elements);
//   pw_general64  the same with 64-bit indices;
//   pw_inner_v    broadcasting with vector packs along the innermost collapsed dim (size a
//                 multiple of the vector width, every input's stride there 0 or 1, 32-bit
//                 indices): a bias over [N, C, H*W] or [rows, cols] reads rows as vectors;
//   pw_inner_h    the same with half the vector width (e.g. H*W = 196 in fp16).
// Shapes are launch arguments, so one compiled kernel serves every shape of a profile.
//
// Semantics follow the CPU reference kernels (backend/cpu/kernels/elementwise*.cc): each body
// value is computed in fp32 (fp64 when the value is fp64) and rounded to its declared type, so
// an fp16 body rounds after every op as the reference does. The node's input/output tensors may
// have other (storage) dtypes than the body's inputs/output (fp16 lowering): loads and stores
// convert between the two.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "ir/graph.h"

namespace ingot::backend::cuda {

constexpr int kPointwiseMaxRank = 8;
constexpr int kPointwiseMaxInputs = 16;
constexpr int kPointwiseBlock = 256;  ///< threads per block every pointwise kernel is built for
constexpr int kPointwiseMaxConcat = 64;  ///< pieces of a body's leading Concat

/// The kernels' single argument. The generated source declares the same struct; keep both in
/// sync (pointwise_codegen.cc writes it from these constants).
struct PointwiseArgs {
  const void* in[kPointwiseMaxInputs];
  void* out;
  int64_t n;      ///< output elements
  int32_t rank;   ///< collapsed dims (pw_general*); pw_flat ignores it
  int32_t vec_ok; ///< pw_flat: every full operand is aligned for the vector width
  int64_t dims[kPointwiseMaxRank];
  /// Element strides of input k per collapsed output dim; 0 where it broadcasts. pw_flat reads
  /// strides[k][0] only: 1 for a full input, 0 for a one-element input.
  int64_t strides[kPointwiseMaxInputs][kPointwiseMaxRank];
};

/// A body that starts with a Concat of its first `pieces` inputs (fuse_concat_pointwise) along `axis`
/// (of the joined value's rank, non-negative). The kernels then load the joined value (x0) from the
/// pieces where they lie, and take PointwiseConcatArgs as a second argument. The other body inputs
/// are the kernel's inputs 1, 2, ...: PointwiseArgs's input 0 is the joined value (the output's shape).
struct PointwiseConcat {
  int pieces = 0;
  int axis = 0;
};

/// The second kernel argument with a leading Concat; the generated source declares the same struct.
struct PointwiseConcatArgs {
  const void* in[kPointwiseMaxConcat];
  int64_t off[kPointwiseMaxConcat + 1];  ///< piece j holds [off[j], off[j + 1]) along the axis
  int64_t inner;                          ///< elements per step along the axis (the dims after it)
  int32_t n;                              ///< pieces
};

/// Whether `body` starts with a Concat of its first inputs, in order, whose result the body reads
/// (not a body output), with a known rank; fills `c`.
bool leading_concat(const ir::Graph& body, PointwiseConcat* c);

struct PointwiseSource {
  std::string source;
  int vec = 1;  ///< elements per vector access in pw_flat (16 bytes of the widest full operand)
  PointwiseConcat concat;  ///< pieces 0 without a leading Concat
};

/// Generates the kernels for `node` (an ingot::Pointwise) whose inputs are stored as
/// `input_storage` and whose output is stored as `output_storage`. Unsupported bodies (an op or
/// dtype outside the list, legacy broadcast attributes, too many inputs) give kUnsupported with
/// a message naming the node and the body op.
Result<PointwiseSource> generate_pointwise_source(const ir::Node& node, const std::vector<DataType>& input_storage,
                                                  DataType output_storage);

/// The launch geometry for one run: size-1 output dims dropped, neighbouring dims that every
/// input walks contiguously merged (so [N,C,H,W] + [1,C,1,1] becomes [N, C, H*W]), and whether
/// pw_flat serves it. Fills args.rank/dims/strides and args.n. No allocation (enqueue calls it).
/// False when an input does not broadcast to `out` or the collapsed rank exceeds the limit.
bool plan_pointwise_launch(const Shape64& out, const Shape64* const* inputs, int num_inputs, PointwiseArgs* args,
                           bool* flat);

/// Compiles generated source with NVRTC to a CUBIN for `arch` (e.g. "sm_90a"). Errors carry the
/// NVRTC log. Identical (source, arch) pairs are compiled once per process. Implemented in
/// pointwise_tactics.cc (it links NVRTC); declared here so tests can compile without a GPU.
Result<std::vector<uint8_t>> compile_pointwise_source(const std::string& source, const std::string& arch);

}  // namespace ingot::backend::cuda
