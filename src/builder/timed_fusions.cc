// Copyright ingot authors. Apache-2.0.
#include "builder/timed_fusions.h"

#include <cmath>
#include <cstdio>

#include "backend/device.h"
#include "builder/split_fusions.h"
#include "passes/passes.h"

namespace ingot::builder {

namespace {

// The check every timed fusion passes its pass: a device tactic for the fused node and, on a timed
// build, a best time no slower than the replaced steps' best times together. Counts into `rep`.
passes::FusionCheck timed_check(const backend::Backend& be, const LayoutTiming* timing, TimedFusionReport& rep) {
  const bool timed = timing && timing->cache && timing->options && timing->stats && !be.device().is_host();
  return [&be, timing, timed, &rep](const ir::Node& fused, const std::vector<const ir::Node*>& parts,
                                    std::string* why) -> Result<bool> {
    if (!has_device_tactic(be, fused)) return false;
    if (!timed) {
      ++rep.fused;
      return true;
    }
    INGOT_ASSIGN_OR_RETURN(double f, measured_best_ms(be, fused, *timing));
    double unfused = 0;
    for (const ir::Node* p : parts) {
      INGOT_ASSIGN_OR_RETURN(double t, measured_best_ms(be, *p, *timing));
      unfused += t;
    }
    if (std::isfinite(f) && std::isfinite(unfused)) {
      rep.fused_ms += f;
      rep.unfused_ms += unfused;
      if (f > unfused) {
        char buf[160];
        std::snprintf(buf, sizeof buf, "the fused node measured %.4f ms, its %zu steps %.4f ms", f, parts.size(),
                      unfused);
        *why = buf;
        ++rep.kept_slower;
        return false;
      }
    }
    ++rep.fused;
    return true;
  };
}

void note_report(passes::PassContext& ctx, const char* pass, const char* what, const TimedFusionReport& rep) {
  if (rep.fused + rep.kept_slower == 0) return;
  char buf[200];
  std::snprintf(buf, sizeof buf, "%s: %d %s fused, %d kept unfused (slower)", pass, rep.fused, what, rep.kept_slower);
  std::string note = buf;
  if (rep.unfused_ms > 0) {
    std::snprintf(buf, sizeof buf, "; measured %.4f ms fused against %.4f ms unfused where compared", rep.fused_ms,
                  rep.unfused_ms);
    note += buf;
  }
  ctx.note("builder", note);
}

// Runs the pass `make` builds around the timed check and notes what it fused as `what`.
template <class MakePass>
Status run_timed(ir::Graph& g, const backend::Backend& be, const LayoutTiming* timing, passes::PassContext& ctx,
                 TimedFusionReport* report, MakePass make, const char* pass, const char* what) {
  TimedFusionReport local;
  TimedFusionReport& rep = report ? *report : local;
  INGOT_RETURN_IF_ERROR(make(timed_check(be, timing, rep))->run(g, ctx).status());
  note_report(ctx, pass, what, rep);
  return Status::Ok();
}

}  // namespace

Status fuse_squeeze_excite_where_faster(ir::Graph& g, const backend::Backend& be, const LayoutTiming* timing,
                                        passes::PassContext& ctx, TimedFusionReport* report) {
  return run_timed(g, be, timing, ctx, report, passes::make_fuse_squeeze_excite, "fuse_squeeze_excite", "block(s)");
}

Status fuse_conv_pool_where_faster(ir::Graph& g, const backend::Backend& be, const LayoutTiming* timing,
                                   passes::PassContext& ctx, TimedFusionReport* report) {
  // Never on the host backend, although its reference tactic takes the node: it runs the convolution and
  // the pooling one after the other anyway, with the convolution's output in scratch memory outside the
  // planned arena (102 MB for ResNet's stem at batch 64). The gain is a device kernel's alone.
  auto make = [&be](passes::FusionCheck check) {
    return passes::make_fuse_conv_pool([&be, check](const ir::Node& fused, const std::vector<const ir::Node*>& parts,
                                                    std::string* why) -> Result<bool> {
      if (be.device().is_host()) {
        *why = "the host backend runs it as the two steps anyway";
        return false;
      }
      return check(fused, parts, why);
    });
  };
  return run_timed(g, be, timing, ctx, report, make, "fuse_conv_pool", "conv+pool(s)");
}

Status fuse_concat_pointwise_where_faster(ir::Graph& g, const backend::Backend& be, const LayoutTiming* timing,
                                          passes::PassContext& ctx, TimedFusionReport* report) {
  return run_timed(g, be, timing, ctx, report, passes::make_fuse_concat_pointwise, "fuse_concat_pointwise",
                   "Concat(s)");
}

}  // namespace ingot::builder
