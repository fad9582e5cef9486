#!/usr/bin/env python3
"""End-to-end checks of `ingot compare`: optimized engines of the test models agree with the
reference interpreter; an engine built from a different model (one weight of the mlp changed)
fails with exit code 1, its reported errors match a numpy evaluation of both models, and
--all-layers names the first step whose tensor numpy says differs; usage errors exit 2 with
one line on stderr."""
import argparse
import os
import re
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

from cli_harness import check, run, summary


def metric(out, name):
    m = re.search(name + r" ([-+0-9.einf]+)", out)
    return float(m.group(1)) if m else None


def mlp_values(weights, x):
    """Every value of the mlp model, by its ONNX name (numpy oracle)."""
    v = {"x": x}
    v["h"] = x @ weights["w1"]
    v["hb"] = v["h"] + weights["b1"]
    v["hr"] = np.maximum(v["hb"], 0)
    v["o"] = v["hr"] @ weights["w2"]
    v["ob"] = v["o"] + weights["b2"]
    e = np.exp(v["ob"] - v["ob"].max(axis=-1, keepdims=True))
    v["probs"] = e / e.sum(axis=-1, keepdims=True)
    return v


def table_rows(out):
    """(step, tensor, status) of the per-layer table rows."""
    rows = []
    body = out.split("per-layer comparison", 1)[1].splitlines()[2:]
    for line in body:
        parts = line.split()
        if not parts or not parts[0].isdigit():
            break
        status = "skip" if "not in the reference" in line else ("FAIL" if "FAIL" in line else "ok")
        rows.append((int(parts[0]), parts[3], status))
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ingot", required=True)
    ap.add_argument("--models", required=True)
    a = ap.parse_args()
    ingot = a.ingot
    mlp = os.path.join(a.models, "mlp_symbolic_batch", "model.onnx")

    # 1. The default optimized build agrees with the interpreter on every test model.
    for name in ("cnn_small", "transformer_encoder_2l", "mlp_symbolic_batch"):
        path = os.path.join(a.models, name, "model.onnx")
        rc, out, err = run(ingot, "compare", path)
        check(f"compare {name}: PASS, exit 0", rc == 0 and out.rstrip().splitlines()[-1].startswith("PASS")
              and "cosine" in out and "within tolerance 100.00%" in out, out + err)
        rc, out, err = run(ingot, "compare", path, "--all-layers")
        ok = rc == 0 and "every compared layer is within tolerance" in out
        check(f"compare {name} --all-layers: every layer within tolerance", ok, out + err)
        if ok:
            # Tensors reported as missing from the reference really are not values of the model.
            g = onnx.load(path).graph
            names = {o for n in g.node for o in n.output}
            skipped = [t for _, t, s in table_rows(out) if s == "skip"]
            check(f"compare {name}: 'not in the reference' tensors are not model values",
                  all(t not in names for t in skipped), str(skipped))
            compared = [t for _, t, s in table_rows(out) if s == "ok"]
            check(f"compare {name}: compared tensors are model values", compared and all(t in names for t in compared),
                  str(compared))
    rc, out, err = run(ingot, "compare", mlp, "--opt-level", "0", "--shapes", "x:3x8", "--seed", "7")
    check("compare --opt-level 0 --shapes x:3x8 passes", rc == 0 and "probs  f32[3,4]  PASS" in out, out + err)

    with tempfile.TemporaryDirectory() as tmp:
        # 2. A deliberately wrong engine: the mlp with one element of w2 changed.
        m = onnx.load(mlp)
        w = {t.name: numpy_helper.to_array(t).copy() for t in m.graph.initializer}
        x = np.random.default_rng(3).standard_normal((2, 8)).astype(np.float32)
        np.save(os.path.join(tmp, "x.npy"), x)
        good = mlp_values(w, x)
        i = int(np.argmax(np.abs(good["hr"]).sum(axis=0)))  # a hidden unit that is active, so the change shows
        bad_w = dict(w)
        bad_w["w2"] = w["w2"].copy()
        bad_w["w2"][i, 1] += 0.5
        for t in m.graph.initializer:
            if t.name == "w2":
                t.CopyFrom(numpy_helper.from_array(bad_w["w2"], "w2"))
        bad_model = os.path.join(tmp, "mlp_bad.onnx")
        onnx.save(m, bad_model)
        bad = mlp_values(bad_w, x)
        differs = {k for k in good if not np.allclose(good[k], bad[k], rtol=0, atol=1e-6)}
        check("oracle: the change reaches o/ob/probs but not h/hb/hr", differs == {"o", "ob", "probs"}, str(differs))

        engine = os.path.join(tmp, "mlp_bad.engine")
        rc, out, err = run(ingot, "build", bad_model, "-o", engine, "--shapes", "x:2x8")
        check("build the wrong engine", rc == 0, out + err)
        xarg = f"x:{os.path.join(tmp, 'x.npy')}"
        rc, out, err = run(ingot, "compare", mlp, "--engine", engine, "--load-inputs", xarg)
        check("compare with the wrong engine: FAIL, exit 1",
              rc == 1 and "probs  f32[2,4]  FAIL" in out and out.rstrip().splitlines()[-1].startswith("FAIL"), out + err)
        # Reported errors against numpy's (engine = modified model, reference = original).
        ref, got = good["probs"].astype(np.float64), bad["probs"].astype(np.float64)
        absd = np.abs(got - ref)
        want = {"max abs": absd.max(), "mean abs": absd.mean(), "max rel": (absd / np.abs(ref)).max(),
                "cosine": float(ref.ravel() @ got.ravel() / np.linalg.norm(ref) / np.linalg.norm(got))}
        for k, v in want.items():
            r = metric(out, k)
            check(f"wrong engine: {k} matches numpy ({v:.6g})", r is not None and abs(r - v) <= 1e-3 * abs(v) + 1e-6,
                  f"reported {r}\n{out}")
        within = int((absd <= 1e-5 + 1e-5 * np.abs(ref)).sum())
        check(f"wrong engine: {within}/8 within tolerance as numpy counts", f"({within}/8)" in out, out)
        # A loose enough tolerance lets the same engine pass: the verdict follows atol/rtol.
        rc, out2, err = run(ingot, "compare", mlp, "--engine", engine, "--load-inputs", xarg, "--atol", "1")
        check("wrong engine with --atol 1: PASS, exit 0", rc == 0, out2 + err)

        rc, out, err = run(ingot, "compare", mlp, "--engine", engine, "--load-inputs", xarg, "--all-layers")
        check("wrong engine --all-layers: exit 1", rc == 1, out + err)
        rows = table_rows(out) if "per-layer comparison" in out else []
        first = next((r for r in rows if r[2] == "FAIL"), None)
        mline = re.search(r"first layer out of tolerance: step (\d+) '[^']*' .*? producing '([^']+)'", out)
        check("--all-layers names the first failing step", first is not None and mline is not None
              and int(mline.group(1)) == first[0] and mline.group(2) == first[1], out)
        if first:
            before = [t for s, t, st in rows if s < first[0] and st != "skip"]
            check("the named tensor is the first one numpy says differs",
                  first[1] in differs and all(t not in differs for t in before), f"{first} before={before}")
        # --check-layers N: the first step (the hidden layer) is identical in both models.
        rc, out, err = run(ingot, "compare", mlp, "--load-inputs", xarg, "--check-layers", "1")
        check("--check-layers 1 on the right engine: exit 0", rc == 0 and "first 1 steps" in out, out + err)

        # 3. Usage errors: exit 2, one line on stderr, nothing on stdout.
        np.save(os.path.join(tmp, "bad_rank.npy"), np.zeros((2, 8, 1), np.float32))
        cases = {
            "no model": [],
            "unknown option": [mlp, "--frobnicate"],
            "bad --atol": [mlp, "--atol", "abc"],
            "negative --rtol": [mlp, "--rtol", "-1"],
            "bad --check-layers": [mlp, "--check-layers", "-3"],
            "missing value": [mlp, "--seed"],
            "malformed --load-inputs": [mlp, "--load-inputs", "x"],
            "--shapes names no input": [mlp, "--shapes", "nope:2x8"],
            "--load-inputs names no input": [mlp, "--load-inputs", f"nope:{os.path.join(tmp, 'x.npy')}"],
            "missing .npy": [mlp, "--load-inputs", f"x:{os.path.join(tmp, 'missing.npy')}"],
            "missing model": [os.path.join(tmp, "missing.onnx")],
            "two models": [mlp, mlp],
            "build flags with --engine": [mlp, "--engine", engine, "--opt-level", "1"],
        }
        for name, args in cases.items():
            rc, out, err = run(ingot, "compare", *args)
            check(f"usage error ({name}): exit 2, one line", rc == 2 and len(err.strip().splitlines()) == 1
                  and out == "" and err.startswith("ingot compare:"), f"rc={rc}\nstdout={out}\nstderr={err}")
        rc, out, err = run(ingot, "compare", "--help")
        check("compare --help", rc == 0 and "--all-layers" in out and "--check-layers" in out, out + err)

    return summary()


if __name__ == "__main__":
    sys.exit(main())
