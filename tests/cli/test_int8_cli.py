#!/usr/bin/env python3
# Copyright ingot authors. Apache-2.0.
"""INT8 calibration through `ingot build --int8` (issue 20, first slice; CPU backend):
  - the scale each calibrator writes to the calibration cache equals an independent NumPy
    implementation of the same algorithm (min-max, percentile, and TensorRT's entropy / KL
    search over a 2048-bin |x| histogram, Q smoothed as MXNet and onnxruntime smooth it, the zero
    bin counted as the next, as pytorch-quantization does) on data
    with outliers, where the three disagree;
  - the int8 engine of a MatMul computes what int8 arithmetic computes (x rounded to its scale's
    steps and saturated, W rounded per output column) and the cnn_small engine stays close to fp32;
  - a rebuild with the cache runs no batch (the data folder may be gone), the cache is TensorRT's
    text form; progress lines while calibrating; `ingot compare --int8` builds and reports;
  - errors: --int8 without data, a missing or empty folder, a batch of the wrong shape, a bad cache.
Usage: test_int8_cli.py --ingot build/tools/ingot --models build/test-models"""
import argparse
import os
import re
import shutil
import struct
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from cli_harness import check, summary
from cli_harness import run as _run

BINS, LEVELS = 2048, 128


def run(ingot, *args):
    return _run(ingot, *args, timeout=300)


# ---- the oracle: the calibrators written again from their description, in NumPy -------------
def histogram(x):
    a = np.abs(x.astype(np.float64)).ravel()
    rng = a.max() * (1 + 2.0 ** -20)  # one batch: no growth
    idx = np.minimum((a * (BINS / rng)).astype(np.int64), BINS - 1)
    return np.bincount(idx, minlength=BINS).astype(np.float64), rng, a.max()


def entropy_bins(hist):
    hist = hist.copy()
    hist[0] = hist[1]  # a ReLU's zeros do not decide the threshold (as pytorch-quantization)
    total = hist.sum()
    best, best_d = len(hist), np.inf
    for i in range(LEVELS, len(hist) + 1):
        p = hist[:i].copy()
        p[-1] += total - hist[:i].sum()
        q = np.zeros(i)
        per = i // LEVELS
        for g in range(LEVELS):
            s, e = g * per, (i if g == LEVELS - 1 else g * per + per)
            chunk = hist[s:e]
            nz = chunk > 0
            if nz.any():
                q[s:e][nz] = chunk.sum() / nz.sum()
        pn, qs = p / p.sum(), q.sum()
        zero = q <= 0
        take = 1e-4 * zero.sum() / (i - zero.sum())
        qn = np.where(zero, 1e-4, q / qs - take)
        m = pn > 0
        if (qn[m] <= 0).any():  # Q cannot hold what P does there: this i is out
            continue
        d = float(np.sum(pn[m] * np.log(pn[m] / qn[m])))
        if d <= best_d:  # the largest i among equals
            best, best_d = i, d
    return best


def expected_scale(x, algo, percentile=99.99):
    hist, rng, amax = histogram(x)
    width = rng / BINS
    if algo == "minmax":
        th = amax
    elif algo == "percentile":
        c = np.cumsum(hist)
        b = int(np.searchsorted(c, hist.sum() * percentile / 100.0))
        th = min(amax, (b + 1) * width)
    else:
        th = min(amax, (entropy_bins(hist) + 0.5) * width)
    return np.float32(th / 127.0)


def cache_scales(path):
    lines = open(path).read().splitlines()
    out = {}
    for ln in lines[1:]:
        name, hexv = ln.rsplit(": ", 1)
        out[name] = struct.unpack(">f", bytes.fromhex(hexv))[0]
    return lines[0], out


def matmul_model(path, w):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [64, 4])
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "mm", [x], [y],
                          [numpy_helper.from_array(w, "w")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ingot", required=True)
    ap.add_argument("--models", required=True)
    a = ap.parse_args()
    ingot = a.ingot
    work = tempfile.mkdtemp(prefix="ingot-int8-")
    rng = np.random.default_rng(20261202)
    w = rng.standard_normal((16, 4)).astype(np.float32)
    model = os.path.join(work, "mm.onnx")
    matmul_model(model, w)
    # Laplace-distributed activations with a few far outliers, all in the first batch (the oracle's
    # histogram then needs no growth); two more batches inside its range.
    data = os.path.join(work, "data")
    os.makedirs(data)
    batches = [rng.laplace(0, 1, (64, 16)).astype(np.float32) for _ in range(3)]
    batches[0][0, :3] = [30.0, -25.0, 28.0]
    for b in batches[1:]:
        np.clip(b, -20, 20, out=b)
    for k, b in enumerate(batches):
        np.save(os.path.join(data, f"batch{k}.npy"), b)
    allx = np.concatenate(batches)

    found = {}
    for algo, extra in (("minmax", []), ("percentile", ["--percentile", "99.9"]), ("entropy", [])):
        cache = os.path.join(work, f"{algo}.cache")
        eng = os.path.join(work, f"{algo}.engine")
        rc, out, err = run(ingot, "build", model, "-o", eng, "--int8", "--calibration-data", data, "--calibrator", algo,
                           *extra, "--calibration-cache", cache)
        ok = rc == 0 and os.path.exists(cache)
        check(f"build --int8 --calibrator {algo} writes the engine and the cache", ok, out + err)
        if not ok:
            continue
        header, scales = cache_scales(cache)
        want = expected_scale(allx, algo, 99.9 if algo == "percentile" else 99.99)
        found[algo] = scales.get("x")
        check(f"{algo}: the cached scale of x equals the NumPy implementation ({want:.6g})",
              scales.get("x") is not None and np.isclose(scales["x"], want, rtol=1e-6, atol=0), (scales.get("x"), want))
        if algo == "entropy":
            check("the cache is TensorRT's text form (header, then name: 8 hex digits)",
                  header == "INGOT-1-EntropyCalibration2" and all(re.fullmatch(r"[^:]+: [0-9a-f]{8}", ln)
                                                                  for ln in open(cache).read().splitlines()[1:]), header)
            check("the summary says what was quantized and from how many batches",
                  "int8             1 layers quantized, 0 kept in float" in out and "3 calibration batches" in out, out)
            check("calibrating prints progress with an ETA", "calibrating: batch 3/3" in err and "ETA" in err, err)
            # What int8 arithmetic computes, for a test input: x to its scale's steps, saturated;
            # W per output column.
            xt = rng.laplace(0, 1, (64, 16)).astype(np.float32)
            s = np.float32(scales["x"])
            xq = np.clip(np.round(xt / s), -128, 127) * s
            col = np.abs(w).max(axis=0) / 127.0
            wq = (np.clip(np.round(w / col), -127, 127) * col).astype(np.float32)
            want_y = xq.astype(np.float64) @ wq.astype(np.float64)
            np.save(os.path.join(work, "xt.npy"), xt)
            outdir = os.path.join(work, "out")
            rc, out, err = run(ingot, "run", eng, "--load-inputs", f"x:{os.path.join(work, 'xt.npy')}",
                               "--save-outputs", outdir)
            got = np.load(os.path.join(outdir, "y.npy")) if rc == 0 else None
            check("the int8 engine computes int8 arithmetic (rounded, saturated x; W per column)",
                  got is not None and np.allclose(got, want_y, rtol=1e-5, atol=1e-4),
                  (out + err)[-400:] if got is None else float(np.abs(got - want_y).max()))
    check("the three calibrators disagree on outlier-heavy data (minmax > percentile, entropy clips too)",
          len(found) == 3 and found["minmax"] > found["percentile"] and found["minmax"] > found["entropy"], found)

    # ---- FP8 (E4M3): scale = max / 448, values rounded to E4M3 (ml_dtypes as the oracle) --------
    import ml_dtypes
    e4m3 = lambda a: a.astype(ml_dtypes.float8_e4m3fn).astype(np.float64)  # noqa: E731
    fcache = os.path.join(work, "fp8.cache")
    feng = os.path.join(work, "fp8.engine")
    rc, out, err = run(ingot, "build", model, "-o", feng, "--fp8", "--calibration-data", data, "--calibration-cache",
                       fcache)
    check("build --fp8: min-max by default, a cache marked FP8E4M3",
          rc == 0 and "fp8 (e4m3)       1 layers quantized" in out and
          open(fcache).readline().strip() == "INGOT-1-MinMaxCalibration-FP8E4M3", out + err)
    if rc == 0:
        _, fs = cache_scales(fcache)
        check("fp8: the cached scale of x is max |x| / 448", np.isclose(fs["x"], np.float32(np.abs(allx).max() / 448.0),
                                                                     rtol=1e-6), fs.get("x"))
        xt = rng.laplace(0, 1, (64, 16)).astype(np.float32)
        s8 = np.float32(fs["x"])
        xq = e4m3((xt / s8).astype(np.float32)) * s8
        # One weight scale (TensorRT's and modelopt's FP8 weights), held in float32.
        col = np.float64(np.float32(np.abs(w).max() / 448.0))
        wq = (e4m3((w / col).astype(np.float32)) * col).astype(np.float32)
        np.save(os.path.join(work, "xf.npy"), xt)
        outdir = os.path.join(work, "fout")
        rc, out, err = run(ingot, "run", feng, "--load-inputs", f"x:{os.path.join(work, 'xf.npy')}", "--save-outputs",
                           outdir)
        got = np.load(os.path.join(outdir, "y.npy")) if rc == 0 else None
        want_y = xq @ wq.astype(np.float64)
        check("the fp8 engine computes E4M3 arithmetic (x and W, one scale, rounded to E4M3)",
              got is not None and np.allclose(got, want_y, rtol=1e-5, atol=1e-4),
              (out + err)[-400:] if got is None else float(np.abs(got - want_y).max()))
    rc, out, err = run(ingot, "build", model, "-o", feng, "--int8", "--calibration-cache", fcache)
    check("an fp8 cache is refused by an int8 build, naming both", rc != 0 and "for fp8" in err and "is int8" in err,
          err)
    rc, out, err = run(ingot, "build", model, "-o", feng, "--int8", "--fp8", "--calibration-data", data)
    check("--int8 with --fp8 is an error", rc != 0 and "one of int8 and fp8" in err, err)

    # ---- the cache alone: no batch runs, the data folder may be gone ----------------------------
    moved = data + "_gone"
    shutil.move(data, moved)
    rc, out, err = run(ingot, "build", model, "-o", os.path.join(work, "again.engine"), "--int8",
                       "--calibration-data", data, "--calibration-cache", os.path.join(work, "entropy.cache"))
    check("a rebuild with the cache reads the scales and runs no batch",
          rc == 0 and "from the calibration cache" in out and "calibrating: batch" not in err, out + err)
    shutil.move(moved, data)

    # ---- a real (small) CNN stays close to fp32 ------------------------------------------------
    cnn = os.path.join(a.models, "cnn_small", "model.onnx")
    cdata = os.path.join(work, "cnn_data")
    os.makedirs(cdata)
    for k in range(4):
        np.save(os.path.join(cdata, f"b{k}.npy"), rng.standard_normal((2, 3, 32, 32)).astype(np.float32))
    np.save(os.path.join(work, "cnn_x.npy"), rng.standard_normal((2, 3, 32, 32)).astype(np.float32))
    rc, out, err = run(ingot, "compare", cnn, "--int8", "--calibration-data", cdata, "--load-inputs",
                       f"input:{os.path.join(work, 'cnn_x.npy')}", "--atol", "0.5", "--rtol", "0.5")
    cos = re.search(r"cosine ([\d.]+)", out)
    check("ingot compare --int8 builds a calibrated engine of cnn_small: cosine vs fp32 >= 0.99",
          rc == 0 and cos and float(cos.group(1)) >= 0.99, out + err)

    # ---- mixed precision: the layer int8 hurts goes back to float, the other stays ---------------
    # mm2's weight columns each hold one large entry among small ones, and the large entries meet
    # an input channel that is almost always ~0 (w1's first column is tiny): per-column int8
    # rounds the small entries, which carry the signal, to 0, so mm2 alone in int8 is far off;
    # mm1 on Gaussian data is benign. Its own generator and data (no outliers, min-max).
    mrng = np.random.default_rng(7)
    w1 = mrng.standard_normal((16, 32)).astype(np.float32)
    w1[:, 0] *= 1e-3
    w2 = (mrng.standard_normal((32, 4)) * 0.02).astype(np.float32)
    w2[0, :] = 60.0
    mdata = os.path.join(work, "mixed_data")
    os.makedirs(mdata)
    for k in range(3):
        np.save(os.path.join(mdata, f"b{k}.npy"), mrng.standard_normal((64, 16)).astype(np.float32))
    two = os.path.join(work, "two.onnx")
    xi = helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 16])
    yo = helper.make_tensor_value_info("y", TensorProto.FLOAT, [64, 4])
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name="mm1"), helper.make_node("Relu", ["h"], ["r"], name="relu"),
             helper.make_node("MatMul", ["r", "w2"], ["y"], name="mm2")]
    g = helper.make_graph(nodes, "two", [xi], [yo], [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), two)
    rc, out, err = run(ingot, "build", two, "-o", os.path.join(work, "two.engine"), "--int8", "--calibration-data", mdata,
                       "--calibrator", "minmax", "--int8-min-cosine", "0.995")
    # The budget holds for every sample (row) of the output: mm1 alone in int8 keeps each row's
    # cosine near 0.998; mm2 alone ruins them.
    sens = dict(re.findall(r"^    (mm\d)\s+([\d.]+)$", out, re.M))
    worst = re.search(r"worst (?:output|sample) cosine ([\d.]+)", out)
    check("--int8-min-cosine keeps the layer int8 hurts (mm2) in float and mm1 in int8, naming why",
          rc == 0 and "1 layers quantized, 1 kept in float" in out and "float: mm2 (MatMul): kept in float for accuracy"
          in out and worst and float(worst.group(1)) >= 0.995, out + err)
    check("the summary lists each layer's cosine alone in int8, mm2 the worse",
          set(sens) == {"mm1", "mm2"} and float(sens["mm2"]) < float(sens["mm1"]), sens)
    rc, out, err = run(ingot, "build", two, "-o", os.path.join(work, "two_b.engine"), "--int8", "--calibration-data",
                       mdata, "--calibrator", "minmax", "--int8-min-cosine", "0.995", "--layer-precisions",
                       "mm2:int8,mm1:fp32")
    check("--layer-precisions pins layers under --int8 (mm2:int8 stays int8, mm1:fp32 stays float)",
          rc == 0 and "float: mm1 (MatMul): --layer-precisions mm1:fp32" in out and "1 layers quantized" in out
          and "mm2 (MatMul)" not in out.split("int8 accuracy")[0], out + err)
    # ---- SmoothQuant: both MatMul inputs smoothed, named in the summary, the model still right ----
    rc, out, err = run(ingot, "build", two, "-o", os.path.join(work, "two_sq.engine"), "--int8", "--calibration-data",
                       mdata, "--smoothquant", "0.5")
    check("--smoothquant 0.5 smooths both MatMul inputs and says so",
          rc == 0 and "smoothquant      alpha 0.50, 2 activations smoothed" in out and "x -> mm1" in out
          and "2 layers quantized" in out, out + err)
    rc, out, err = run(ingot, "build", two, "-o", os.path.join(work, "two_sq2.engine"), "--int8", "--calibration-data",
                       mdata, "--smoothquant", "1.5")
    check("--smoothquant outside [0, 1] is a usage error naming alpha", rc != 0 and "alpha in [0, 1]" in err, err)
    rc, out, err = run(ingot, "build", two, "-o", os.path.join(work, "two_sq3.engine"), "--fp8", "--calibration-data",
                       mdata, "--smoothquant", "0.5")
    check("--smoothquant with --fp8 is an error", rc != 0 and "SmoothQuant" in err and "fp8" in err, err)
    rc, out, err = run(ingot, "build", two, "-o", os.path.join(work, "two_c.engine"), "--layer-precisions", "mm2:int8")
    check("layer precision int8 without --int8 is an error", rc != 0 and "needs --int8" in err, err)

    # ---- errors ------------------------------------------------------------------------------
    eng = os.path.join(work, "bad.engine")
    rc, out, err = run(ingot, "build", model, "-o", eng, "--int8")
    check("--int8 without calibration data is an error saying what is missing",
          rc != 0 and "calibration" in err.lower() and "--calibration-data" in err, err)
    rc, out, err = run(ingot, "build", model, "-o", eng, "--int8", "--calibration-data", os.path.join(work, "nope"))
    check("a missing calibration folder is named", rc != 0 and "nope" in err and "not a folder" in err, err)
    empty = os.path.join(work, "empty")
    os.makedirs(empty)
    rc, out, err = run(ingot, "build", model, "-o", eng, "--int8", "--calibration-data", empty)
    check("an empty calibration folder is named", rc != 0 and "no .npy batches" in err, err)
    wrong = os.path.join(work, "wrong")
    os.makedirs(wrong)
    np.save(os.path.join(wrong, "b0.npy"), np.zeros((64, 15), np.float32))
    rc, out, err = run(ingot, "build", model, "-o", eng, "--int8", "--calibration-data", wrong)
    check("a batch of the wrong shape is named (batch 1, the input)", rc != 0 and "calibration batch 1" in err, err)
    bad_cache = os.path.join(work, "bad.cache")
    open(bad_cache, "w").write("INGOT-1-EntropyCalibration2\nx: nothex!\n")
    rc, out, err = run(ingot, "build", model, "-o", eng, "--int8", "--calibration-cache", bad_cache)
    check("a malformed cache is named with its line", rc != 0 and "calibration cache" in err and "line 2" in err, err)
    rc, out, err = run(ingot, "build", model, "-o", eng, "--int8", "--calibration-data", data, "--calibrator", "kl")
    check("an unknown calibrator is a usage error", rc == 2 and "entropy, minmax or percentile" in err, err)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
