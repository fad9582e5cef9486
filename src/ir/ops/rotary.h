// Copyright ingot authors. Apache-2.0.
//
// What ingot::RotaryEmbedding's inference (fused_pattern.cc), the recognize_rotary pass and the
// CUDA rotary tactic agree on: which cos/sin shapes the op takes. Header-only.
#pragma once

#include "ir/shape.h"

namespace ingot::ir {

/// Whether cos or sin of shape `p` fits X of shape `x` (known rank >= 1): p's rank is at most
/// x's, its last dim is X's last dim D, and every other dim is 1 or X's, so broadcasting it
/// against X leaves X's shape. With `provably`, dims must be equal for every binding of symbols
/// (what a rewrite or a tactic over a whole profile needs); without, only two known sizes that
/// differ fail (inference, which the concrete run checks again). An unknown rank of `p` fits
/// only without `provably`.
inline bool rotary_param_fits(const Shape& x, const Shape& p, bool provably) {
  if (!p.rank_known()) return !provably;
  if (p.rank() < 1 || p.rank() > x.rank()) return false;
  for (size_t j = 0; j < p.rank(); ++j) {
    const Dim& pd = p[p.rank() - 1 - j];
    const Dim& xd = x[x.rank() - 1 - j];
    if (j > 0 && pd.is_known() && pd.value() == 1) continue;
    const bool equal = provably ? pd.provably_equal(xd) : !(pd.is_known() && xd.is_known() && pd.value() != xd.value());
    if (!equal) return false;
  }
  return true;
}

}  // namespace ingot::ir
