#!/usr/bin/env python3
# Copyright ingot authors. Apache-2.0.
"""`ingot tune` (the route search, issue 23) on the CPU backend: the dry run lists exactly the routes
a full sweep tries; a threshold excludes the routes whose loss is over it (they stay in the table and
the cache, never chosen); loaded reference outputs are what routes are scored against; the timeout
stops the search and keeps the best so far; the tuning cache round-trips (a rerun builds nothing and
chooses the same route); the chosen engine and the SVG are written; several --opt-shapes are a search axis whose routes build
engines for their own opt shapes; bad flags are clear errors.

Usage: test_tune.py --ingot build/tools/ingot --models DIR (tests/models/make_models.py's output)
"""
import argparse
import json
import os
import re
import sys
import tempfile

import numpy as np

from cli_harness import check, run, summary


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ingot", required=True)
    ap.add_argument("--models", required=True)
    a = ap.parse_args()
    cnn = os.path.join(a.models, "cnn_small", "model.onnx")
    mlp = os.path.join(a.models, "mlp_symbolic_batch", "model.onnx")
    work = tempfile.mkdtemp(prefix="ingot-tune-")
    cache = os.path.join(work, "cache.json")

    rc, out, err = run(a.ingot, "tune", cnn, "--dry-run")
    m = re.search(r"^(\d+) routes for", out, re.M)
    listed = int(m.group(1)) if m else -1
    check("dry run: 3 precisions x 3 conv layouts for a model with a Conv", rc == 0 and listed == 9, out + err)
    check("dry run builds nothing", "9 to build" in out and not os.path.exists(cache), out)

    svg = os.path.join(work, "tune.svg")
    best = os.path.join(work, "best.engine")
    rc, out, err = run(a.ingot, "tune", cnn, "--tuning-cache", cache, "--accuracy-threshold", "1e-9",
                       "--svg", svg, "-o", best, timeout=600)
    m = re.search(r"^(\d+) of (\d+) routes \((\d+) built, (\d+) from the tuning cache\)", out, re.M)
    check("a full sweep tries every route the dry run listed", rc == 0 and m and int(m.group(1)) == listed
          and int(m.group(3)) == listed, out + err)
    rows = re.findall(r"^\s+(\d+)\s+(\S+)\s+([\d.]+)\s+(\S+)\s+(yes|NO)\s", out, re.M)
    check("every route has a row", len(rows) == listed, out)
    over = [r for r in rows if r[4] == "NO"]
    check("threshold 1e-9 (cosine): the fp16 and bf16 routes are over it, the fp32 ones within",
          {r[1].split("/")[0] for r in over} == {"fp16", "bf16"} and
          all(r[4] == "yes" for r in rows if r[1].startswith("fp32/")), out)
    chosen = re.search(r"^chosen: route (\d+) \((\S+)\)", out, re.M)
    fastest_ok = min((r for r in rows if r[4] == "yes"), key=lambda r: float(r[2]))
    check("the chosen route is the fastest within the threshold, never one over it",
          chosen and chosen.group(2).startswith("fp32/") and chosen.group(2) == fastest_ok[1], out)
    rc2, out2, _ = run(a.ingot, "run", best, "--iterations", "1")
    check("the chosen engine is written and runs", os.path.exists(best) and rc2 == 0, out2)
    s = open(svg).read() if os.path.exists(svg) else ""
    check("the SVG marks every route, the threshold and the Pareto front",
          s.count("<circle") == listed and "threshold" in s and "Pareto" in s, s[:300])
    c = json.load(open(cache))
    check("the cache holds every route, those over the threshold too", len(c["entries"]) == listed, str(c)[:300])

    check("the -o engine is the one measured in the sweep", "(measured in this run)" in out, out)
    kept = cache + ".engine"
    check("the tuning cache keeps the chosen route's engine beside it",
          os.path.exists(kept) and open(kept, "rb").read() == open(best, "rb").read() and
          chosen and c.get("engine_route") == chosen.group(2), str(c.get("engine_route")))

    again_engine = os.path.join(work, "again.engine")
    rc, out, err = run(a.ingot, "tune", cnn, "--tuning-cache", cache, "--accuracy-threshold", "1e-9",
                       "-o", again_engine, timeout=600)
    m = re.search(r"\((\d+) built, (\d+) from the tuning cache\)", out)
    again = re.search(r"^chosen: route (\d+) \((\S+)\)", out, re.M)
    check("a rerun with the cache builds nothing and chooses the same route",
          rc == 0 and m and m.group(1) == "0" and again and chosen and again.group(2) == chosen.group(2), out + err)
    check("the rerun writes the kept engine without building it",
          "(kept by the tuning cache)" in out and os.path.exists(again_engine) and
          open(again_engine, "rb").read() == open(best, "rb").read(), out)
    rc, out, _ = run(a.ingot, "tune", cnn, "--tuning-cache", cache, "--dry-run")
    check("the dry run sees the cache", "0 to build" in out, out)
    rc, out, err = run(a.ingot, "tune", cnn, "--tuning-cache", cache, "--accuracy-algorithm", "max-abs",
                       "--dry-run")
    check("a cache made for another loss is not reused", "9 to build" in out and "another model" in err, out + err)

    bad_cache = os.path.join(work, "bad_cache.json")
    with open(bad_cache, "w") as f:
        f.write('{"version": "one", "entries": [1, 2]}')
    rc, out, err = run(a.ingot, "tune", mlp, "--shapes", "x:4x8", "--precisions", "fp32", "--tuning-cache", bad_cache,
                       timeout=600)
    check("a malformed tuning cache is ignored with a note and rewritten",
          rc == 0 and "malformed" in err and json.load(open(bad_cache))["version"] == 1, out + err)
    rc, out, _ = run(a.ingot, "tune", mlp, "--shapes", "x:4x8", "--precisions", "fp32", "--tuning-cache", bad_cache,
                     "--dry-run")
    rc2, out2, err2 = run(a.ingot, "tune", mlp, "--shapes", "x:16x8", "--precisions", "fp32", "--tuning-cache",
                          bad_cache, "--dry-run")
    check("the cache is reused at the same shapes, not at others (a route's time depends on them)",
          "0 to build" in out and "1 to build" in out2 and "another model" in err2, out + out2 + err2)
    # The same path, other contents: the routes are not reused.
    import shutil
    moved = os.path.join(work, "model.onnx")
    shutil.copy(cnn, moved)
    rc, out, err = run(a.ingot, "tune", moved, "--precisions", "fp32", "--conv-layouts", "auto", "--tuning-cache",
                       os.path.join(work, "moved.json"), timeout=600)
    shutil.copy(mlp, moved)
    rc, out, err = run(a.ingot, "tune", moved, "--precisions", "fp32", "--conv-layouts", "auto", "--tuning-cache",
                       os.path.join(work, "moved.json"), "--dry-run")
    check("a model changed in place does not reuse the routes of the old one",
          "1 to build" in out and "another model" in err, out + err)

    rc, out, err = run(a.ingot, "tune", cnn, "--tuning-timeout", "0.001", timeout=600)
    m = re.search(r"^(\d+) of (\d+) routes", out, re.M)
    check("the timeout stops the search after the first route and keeps the best so far",
          rc == 0 and m and m.group(1) == "1" and "timeout" in out and "chosen: route 1" in out, out + err)

    # Reference outputs from `ingot run` (same seed, same random inputs) and deliberately wrong ones.
    ref = os.path.join(work, "ref")
    rc, out, err = run(a.ingot, "run", mlp, "--shapes", "x:4x8", "--save-outputs", ref, "--iterations", "1")
    check("ingot run saves reference outputs", rc == 0 and os.listdir(ref), out + err)
    rc, out, err = run(a.ingot, "tune", mlp, "--shapes", "x:4x8", "--load-ref-outputs", ref,
                       "--accuracy-threshold", "1e-6", "--precisions", "fp32", timeout=600)
    check("routes are scored against loaded reference outputs (fp32 matches `ingot run`'s)",
          rc == 0 and re.search(r"fp32/auto/o3/stream\s+[\d.]+\s+\S+\s+yes", out), out + err)
    for f in os.listdir(ref):
        arr = np.load(os.path.join(ref, f))
        np.save(os.path.join(ref, f), -arr)
    rc, out, err = run(a.ingot, "tune", mlp, "--shapes", "x:4x8", "--load-ref-outputs", ref,
                       "--accuracy-threshold", "0.5", "--precisions", "fp32", timeout=600)
    check("negated reference outputs: no route is within the threshold, none is chosen",
          rc == 1 and "no route within the accuracy threshold" in out, out + err)
    rc, out, err = run(a.ingot, "tune", mlp, "--shapes", "x:4x8", "--load-ref-outputs", ref,
                       "--accuracy-threshold", "3", "--precisions", "fp32", timeout=600)
    m = re.search(r"fp32/auto/o3/stream\s+[\d.]+\s+(\S+)\s+yes", out)
    check("the cosine loss of negated outputs is 2 (1 - cos 180 degrees)",
          rc == 0 and m and abs(float(m.group(1)) - 2) < 1e-6, out + err)

    for algo in ("rel-l2", "topk:2", "kl", "max-abs"):
        rc, out, err = run(a.ingot, "tune", mlp, "--shapes", "x:4x8", "--accuracy-algorithm", algo,
                           "--precisions", "fp32,fp16", timeout=600)
        check(f"--accuracy-algorithm {algo} scores the routes", rc == 0 and "chosen: route" in out, out + err)

    # int8 routes: one calibration for the whole search, its scales reused by every later int8 build.
    cal = os.path.join(work, "cal")
    os.makedirs(cal)
    rng = np.random.default_rng(5)
    for i in range(3):
        np.save(os.path.join(cal, f"b{i}.npy"), rng.standard_normal((2, 3, 32, 32)).astype(np.float32))
    rc, out, _ = run(a.ingot, "tune", cnn, "--calibration-data", cal, "--dry-run")
    m = re.search(r"^(\d+) routes for", out, re.M)
    check("--calibration-data adds the int8 routes to the default list (4 precisions x 3 layouts on the CPU)",
          rc == 0 and m and int(m.group(1)) == 12 and "int8/nhwc/o3/stream" in out, out)
    rc, out, err = run(a.ingot, "tune", cnn, "--calibration-data", cal, "--precisions", "fp32,int8",
                       "--accuracy-threshold", "0.05", timeout=600)
    rows = re.findall(r"^\s+\d+\s+(int8/\S+)\s+([\d.]+)\s+(\S+)\s+(yes|NO)\s", out, re.M)
    check("every int8 route builds, runs and is scored (loss > 0: 8-bit rounding, within 0.05)",
          rc == 0 and len(rows) == 3 and all(0 < float(r[2]) < 0.05 and r[3] == "yes" for r in rows), out + err)
    check("the int8 routes calibrate once and the later two read the scales back",
          "int8 routes: calibrated once on 3 batches; 2 later builds read the scales back" in out, out)

    # The profile's opt shapes as a search axis: --opt-shapes given twice doubles the routes; each
    # route's engine is built for its own opt shapes (the written engine's profile says which).
    prof = ["--min-shapes", "x:1x8", "--max-shapes", "x:32x8", "--opt-shapes", "x:4x8", "--opt-shapes", "x:32x8"]
    rc, out, err = run(a.ingot, "tune", mlp, *prof, "--precisions", "fp32,fp16", "--dry-run")
    m = re.search(r"^(\d+) routes for", out, re.M)
    check("two --opt-shapes: 2 precisions x 2 opt shapes, each named in the legend",
          rc == 0 and m and int(m.group(1)) == 4 and "fp16/auto/o3/stream/opt2" in out and
          "opt2 = --opt-shapes x:32x8" in out, out + err)
    opt_engine = os.path.join(work, "opt.engine")
    rc, out, err = run(a.ingot, "tune", mlp, *prof, "--precisions", "fp32", "-o", opt_engine, timeout=600)
    chosen = re.search(r"^chosen: route \d+ \(\S+/opt(\d)\)", out, re.M)
    rc2, out2, _ = run(a.ingot, "inspect", opt_engine)
    want = {"1": "opt [4,8]", "2": "opt [32,8]"}.get(chosen.group(1) if chosen else "", "?")
    check("the chosen route's engine carries its own opt shapes",
          rc == 0 and chosen and rc2 == 0 and "min [1,8]  " + want + "  max [32,8]" in out2, out + err + out2)
    rc, out, err = run(a.ingot, "tune", mlp, "--shapes", "x:4x8", "--opt-shapes", "x:4x8", "--opt-shapes", "x:8x8",
                       "--dry-run")
    check("several --opt-shapes with --shapes (no profile to vary): exit 2, saying so",
          rc == 2 and "need a profile" in err, out + err)

    for args, what in ((["--load-ref-outputs", ref], "needs --accuracy-threshold"),
                       (["--accuracy-algorithm", "l7"], "--accuracy-algorithm must be"),
                       (["--precisions", "fp12"], "--precisions takes"),
                       (["--precisions", "tf32"], "tf32 is a CUDA precision"),
                       (["--precisions", "fp32,int8"], "the int8 routes need --calibration-data"),
                       (["--calibrator", "median"], "--calibrator must be"),
                       (["--tuning-timeout", "-1"], "--tuning-timeout needs"),
                       (["--opt-levels", "9"], "--opt-levels")):
        rc, out, err = run(a.ingot, "tune", cnn, *args)
        check(f"bad flag {' '.join(args)}: exit 2, saying so", rc == 2 and what in err, out + err)
    rc, out, err = run(a.ingot, "tune", os.path.join(work, "missing.onnx"))
    check("a missing model is one clear error", rc != 0 and "missing.onnx" in err, out + err)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
