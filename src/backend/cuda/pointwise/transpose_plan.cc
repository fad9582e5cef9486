// Copyright ingot authors. Apache-2.0.
//
// The host half of launch_transpose's general forms (transpose_plan.h says which and why).
#include "backend/cuda/pointwise/transpose_plan.h"

#include <algorithm>
#include <climits>
#include <cstdint>

#include "backend/cuda/core/device_info.h"

namespace ingot::backend::cuda {
namespace {

constexpr int64_t kMaxTransposeBlocks = 4096;  // 132 SMs x 8 resident blocks x ~4 waves; grid-stride after

// Two waves of blocks, one per multiprocessor each, on the current device; an H100's or H200's 132
// where no device answers (the host replay tests, which then plan as for those).
int64_t two_waves() {
  const int sm = current_device_info().sm_count;
  return 2 * static_cast<int64_t>(sm > 0 ? sm : 132);
}

void add_dim(TransposeGroup* g, int64_t dim, int64_t in, int64_t out) {
  g->dims[g->rank] = dim;
  g->in[g->rank] = in;
  g->out[g->rank] = out;
  ++g->rank;
  g->size *= dim;
}

}  // namespace

int32_t merge_transpose_dims(int32_t rank, const int64_t* out_dims, const int64_t* in_strides, int64_t* dims,
                             int64_t* strides) {
  if (rank < 0 || rank > kTransposeGroupDims) return -1;
  int32_t mr = 0;
  for (int32_t i = 0; i < rank; ++i) {
    if (out_dims[i] <= 0) return -1;
    if (out_dims[i] == 1) continue;
    if (mr > 0 && strides[mr - 1] == in_strides[i] * out_dims[i]) {
      dims[mr - 1] *= out_dims[i];
      strides[mr - 1] = in_strides[i];
    } else {
      dims[mr] = out_dims[i];
      strides[mr] = in_strides[i];
      ++mr;
    }
  }
  return mr;
}

int64_t transpose_plan_blocks(const TransposePlan& plan) {
  const int64_t work = plan.form == TransposeForm::kRuns
                           ? (plan.outer.size * plan.run + kTransposeThreads - 1) / kTransposeThreads
                           : plan.batch.size * plan.tiles_j * plan.tiles_k;
  return std::max<int64_t>(1, std::min(work, kMaxTransposeBlocks));
}

bool plan_transpose(int32_t element_bytes, int32_t rank, const int64_t* out_dims, const int64_t* in_strides,
                    const void* x, const void* y, TransposePlan* plan) {
  if (element_bytes <= 0 || rank < 0 || rank > kTransposeGroupDims) return false;
  int64_t md[kTransposeGroupDims], ms[kTransposeGroupDims];
  int32_t mr = merge_transpose_dims(rank, out_dims, in_strides, md, ms);
  if (mr < 0) return false;
  if (mr == 0) {  // one element
    md[0] = 1;
    ms[0] = 1;
    mr = 1;
  }
  int64_t os[kTransposeGroupDims];  // the output is contiguous
  int64_t n = 1;
  for (int32_t d = mr; d-- > 0;) {
    os[d] = n;
    n *= md[d];
  }
  *plan = TransposePlan{};
  const auto fits32 = [](int64_t v) { return v < INT32_MAX; };

  if (ms[mr - 1] == 1) {
    // kRuns: the widest unit that every run start (input and output) and both pointers allow.
    const int64_t run_bytes = md[mr - 1] * element_bytes;
    int32_t u = 16;
    const auto divides = [&](int64_t v) { return v % u == 0; };
    for (; u > 1; u /= 2) {
      bool ok = divides(run_bytes) && divides(static_cast<int64_t>(reinterpret_cast<uintptr_t>(x))) &&
                divides(static_cast<int64_t>(reinterpret_cast<uintptr_t>(y)));
      for (int32_t d = 0; ok && d + 1 < mr; ++d) ok = divides(ms[d] * element_bytes);
      if (ok) break;
    }
    plan->form = TransposeForm::kRuns;
    plan->unit_bytes = u;
    plan->run = run_bytes / u;
    for (int32_t d = 0; d + 1 < mr; ++d) add_dim(&plan->outer, md[d], ms[d] * element_bytes / u, os[d] * element_bytes / u);
    const int64_t units = plan->outer.size * plan->run;
    plan->index32 = fits32(units + transpose_plan_blocks(*plan) * kTransposeThreads);
    return true;
  }

  // kTiled.
  int32_t kstar = -1;
  for (int32_t d = 0; d < mr; ++d)
    if (ms[d] == 1) kstar = d;
  if (kstar < 0) return false;  // not a permutation of a contiguous input
  // Every size is tiled. Session 37 kept tensors under 1 MB on the one-thread-per-element loop
  // (MaxViT-T b1's 0.4-0.8 MB window transposes took about 11 us as 64 x 64 tiles against the loop's
  // 5-7); with 32 x 32 tiles below two waves and the unrolled tile loads the H100 probe of session 38
  // has the tiles at 3.2 us against the loop's 3.8 at 0.4 MB, and 5.1 against 5.1 at 1.6 MB.
  plan->form = TransposeForm::kTiled;
  const int64_t tile = element_bytes <= 2 ? 64 : 32;
  // J: trailing output dims up to (not including) kstar, until a tile row is full.
  int32_t jlo = mr;
  int64_t jsize = 1;
  while (jlo > 0 && jlo - 1 != kstar && jsize < tile) {
    --jlo;
    jsize *= md[jlo];
  }
  // K: kstar, then the dim whose input stride continues it, and so on, until a tile column is full.
  bool in_k[kTransposeGroupDims] = {};
  int32_t korder[kTransposeGroupDims];  // innermost (stride 1) first
  int32_t kn = 0;
  korder[kn++] = kstar;
  in_k[kstar] = true;
  int64_t ksize = md[kstar];
  while (ksize < tile) {
    const int64_t next_stride = ms[korder[kn - 1]] * md[korder[kn - 1]];
    int32_t e = -1;
    for (int32_t d = 0; d < jlo; ++d)
      if (!in_k[d] && ms[d] == next_stride) e = d;
    if (e < 0) break;
    korder[kn++] = e;
    in_k[e] = true;
    ksize *= md[e];
  }
  plan->tile = static_cast<int32_t>(tile);
  for (int32_t d = jlo; d < mr; ++d) add_dim(&plan->j, md[d], ms[d], os[d]);
  for (int32_t i = kn; i-- > 0;) add_dim(&plan->k, md[korder[i]], ms[korder[i]], os[korder[i]]);
  for (int32_t d = 0; d < jlo; ++d)
    if (!in_k[d]) add_dim(&plan->batch, md[d], ms[d], os[d]);
  plan->tiles_j = (plan->j.size + tile - 1) / tile;
  plan->tiles_k = (plan->k.size + tile - 1) / tile;
  // 2-byte and 1-byte elements take 64 x 64 tiles unless that leaves fewer than two waves of blocks
  // (two_waves: the device's multiprocessors); then 32 x 32, four times the blocks. J and K were grown
  // to the larger tile, which the smaller one also fills.
  if (tile == 64 && plan->batch.size * plan->tiles_j * plan->tiles_k < two_waves()) {
    plan->tile = 32;
    plan->tiles_j = (plan->j.size + 31) / 32;
    plan->tiles_k = (plan->k.size + 31) / 32;
  }
  const int64_t tiles = plan->batch.size * plan->tiles_j * plan->tiles_k;
  plan->index32 = fits32(std::max({plan->batch.size, plan->j.size, plan->k.size, tiles + transpose_plan_blocks(*plan)}));
  return true;
}

}  // namespace ingot::backend::cuda
