#!/usr/bin/env python3
"""Benchmarking and per-layer profiling in `ingot run`: the performance summary with the asked
percentiles, --export-times with one entry per timed iteration, --duration, --streams, the
per-layer table (--dump-profile) covering every engine step with shares summing to 100%, its
precision / TFLOP/s / roofline columns ("-" on CPU engines), --cuda-graph's warning on CPU engines, and
--export-profile whose FLOPs match 2*M*N*K (and 2*outputs*Cin*kh*kw for a Conv) worked out here
from the model file. Bad values exit 2 with one line."""
import argparse
import json
import os
import re
import sys
import tempfile

import onnx
from onnx import numpy_helper

from cli_harness import check as _check
from cli_harness import run, summary


def check(name, cond, detail=""):
    _check(name, cond, detail, detail_tail=3000)


def verbose_steps(out):
    """Step lines printed by `ingot run --verbose` after "steps:"."""
    lines = out.splitlines()
    if "steps:" not in lines:
        return []
    steps = []
    for line in lines[lines.index("steps:") + 1:]:
        if not line.startswith("  "):
            break
        steps.append(line.split()[0])
    return steps


def profile_rows(out):
    """Rows of the --dump-profile table: (step, op, percent)."""
    lines = out.splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith("=== Profile")), None)
    if start is None:
        return []
    rows = []
    for line in lines[start + 2:]:
        f = line.split()
        if not f or not f[0].isdigit():
            break
        # step op name fused tactic prec layout ms host-ms % FLOPs bytes TFLOP/s GB/s roofline%
        rows.append((int(f[0]), f[1], float(f[-6])))
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ingot", required=True)
    ap.add_argument("--models", required=True)
    a = ap.parse_args()
    ingot = a.ingot
    cnn = os.path.join(a.models, "cnn_small", "model.onnx")
    mlp = os.path.join(a.models, "mlp_symbolic_batch", "model.onnx")
    tfm = os.path.join(a.models, "transformer_encoder_2l", "model.onnx")

    rc, out, err = run(ingot, "run", cnn, "--iterations", "20", "--warmup", "3", "--percentile", "50,90,99")
    ok = rc == 0 and "Performance summary" in out and all(f"percentile({p}%)" in out for p in (50, 90, 99))
    check("summary lists the asked percentiles", ok, out + err)
    m = re.search(r"Throughput: ([\d.]+) qps, ([\d.]+) items/s", out)
    # cnn_small's input is [2,3,32,32]: 2 items per query.
    check("throughput in qps and items/s (items = batch 2)",
          bool(m) and float(m.group(1)) > 0 and abs(float(m.group(2)) - 2 * float(m.group(1))) < 0.02, out)
    lat = re.search(r"Latency: min = ([\d.]+) ms, max = ([\d.]+) ms, mean = ([\d.]+) ms, median = ([\d.]+) ms", out)
    check("latency min <= median <= max", bool(lat) and float(lat.group(1)) <= float(lat.group(4)) <= float(lat.group(2)),
          out)
    check("summary names enqueue, H2D, D2H, GPU compute and host wall time",
          all(s in out for s in ("Enqueue Time", "H2D", "D2H", "GPU Compute Time: n/a", "Total Host Walltime")), out)

    rc, out, err = run(ingot, "run", cnn, "--iterations", "5", "--back-to-back", "7")
    b2b = re.search(r"Back-to-back: ([\d.]+) ms per query \(7 queries per stream", out)
    check("--back-to-back N prints the time per query of N queries without a synchronize",
          rc == 0 and bool(b2b) and float(b2b.group(1)) > 0, out + err)
    rc, out, err = run(ingot, "run", cnn, "--back-to-back", "0")
    check("--back-to-back 0 is an error naming the flag", rc != 0 and "--back-to-back" in err, out + err)

    rc, out, err = run(ingot, "run", cnn, "--percentile", "75.5")
    check("fractional percentile", rc == 0 and "percentile(75.5%)" in out, out + err)

    with tempfile.TemporaryDirectory() as tmp:
        times = os.path.join(tmp, "times.json")
        rc, out, err = run(ingot, "run", cnn, "--iterations", "17", "--export-times", times)
        ok = rc == 0 and os.path.exists(times)
        t = json.load(open(times)) if ok else []
        check("--export-times holds exactly --iterations entries", ok and len(t) == 17, f"{len(t)} entries\n{out}{err}")
        check("--export-times entries have non-negative latencies",
              ok and all(e["latencyMs"] >= 0 and e["startMs"] >= 0 for e in t), str(t[:3]))

        rc, out, err = run(ingot, "run", mlp, "--iterations", "1", "--duration", "0.3", "--export-times", times)
        t = json.load(open(times)) if rc == 0 else []
        end = max((e["startMs"] + e["latencyMs"] for e in t), default=0)
        check("--duration keeps running past --iterations until the duration is met",
              rc == 0 and len(t) > 1 and end >= 300, f"{len(t)} entries, last end {end} ms\n{out}{err}")

        rc, out, err = run(ingot, "run", cnn, "--streams", "2", "--iterations", "9", "--export-times", times)
        t = json.load(open(times)) if rc == 0 else []
        check("--streams 2 runs both streams the asked iterations",
              rc == 0 and "2 streams" in out and len(t) == 18 and sorted({e["stream"] for e in t}) == [0, 1],
              f"{len(t)} entries\n{out}{err}")

        # Every engine step appears once, in order, and the shares sum to 100%.
        for name, model, extra in (("cnn_small", cnn, []), ("transformer_encoder_2l", tfm, []),
                                   ("mlp_symbolic_batch", mlp, ["--shapes", "x:5x8"])):
            rc, out, err = run(ingot, "run", model, "--verbose", "--dump-profile", "--iterations", "5", *extra)
            steps = verbose_steps(out)
            rows = profile_rows(out)
            check(f"{name}: --dump-profile lists every engine step",
                  rc == 0 and len(steps) > 0 and [r[0] for r in rows] == list(range(len(steps)))
                  and [r[1] for r in rows] == steps, f"verbose {steps}\nprofile {rows}\n{out}{err}")
            check(f"{name}: --dump-profile has precision, TFLOP/s and roofline columns (roofline '-' on CPU)",
                  rc == 0 and re.search(r"prec\s+layout\s+ms\s+host ms\s+%\s+FLOPs\s+bytes\s+TFLOP/s\s+GB/s\s+roofl%", out)
                  and "roofline: - (CPU engine)" in out, out)
            total = sum(r[2] for r in rows)
            check(f"{name}: per-layer percentages sum to ~100", abs(total - 100) < 0.5, f"sum {total}")

        # FLOPs of known layers, worked out from the model file.
        prof = os.path.join(tmp, "profile.json")
        rc, out, err = run(ingot, "run", cnn, "--export-profile", prof, "--iterations", "3")
        p = json.load(open(prof)) if rc == 0 and os.path.exists(prof) else {"layers": []}
        layers = {l["name"]: l for l in p["layers"]}
        g = onnx.load(cnn).graph
        w = {i.name: numpy_helper.to_array(i) for i in g.initializer}
        batch = g.input[0].type.tensor_type.shape.dim[0].dim_value
        # fc: Gemm(flat[batch,16], fc.w[10,16], transB=1) -> M = batch, N = 10, K = 16.
        n_out, k = w["fc.w"].shape
        fc = layers.get("fc", {})
        check("--export-profile: Gemm 'fc' FLOPs = 2*M*N*K", fc.get("flops") == 2 * batch * n_out * k,
              f"fc {fc}, expected {2 * batch * n_out * k}")
        # fc bytes: A [batch,16] + W [10,16] + bias [10] + Y [batch,10], all f32.
        want_bytes = 4 * (batch * k + n_out * k + n_out + batch * n_out)
        check("--export-profile: Gemm 'fc' bytes = inputs + outputs", fc.get("bytes") == want_bytes,
              f"fc {fc}, expected {want_bytes}")
        # stem conv: 3x3, pad 1, stride 1 on 32x32 -> out [batch,8,32,32]; each output takes 3*3*3 MACs.
        cout, cin, kh, kw = w["stem.w"].shape
        want = 2 * batch * cout * 32 * 32 * cin * kh * kw
        stem = layers.get("stem/conv", {})
        check("--export-profile: FusedConv 'stem/conv' FLOPs = 2*outputs*Cin*kh*kw", stem.get("flops") == want,
              f"stem {stem}, expected {want}")
        check("--export-profile: unknown figures are null, CPU roofline is null",
              any(l["flops"] is None for l in p["layers"]) and all(l["rooflinePercent"] is None for l in p["layers"]),
              str(p["layers"][:2]))
        check("--export-profile: CPU engine has no peaks; f32 steps say precision f32",
              p.get("peaks", 0) is None and p.get("backend") == "cpu"
              and all(l["precision"] == "f32" for l in p["layers"] if l["op"].endswith(("Conv", "Gemm"))),
              str(p["layers"][:2]))
        check("--export-profile: TFLOP/s = FLOPs / time",
              all(abs(l["tflops"] - l["flops"] / (l["medianMs"] * 1e-3) / 1e12) <= 1e-6 * l["tflops"]
                  for l in p["layers"] if l["flops"] and l["medianMs"] > 0) and fc.get("tflops") is not None,
              str(p["layers"][:2]))
        check("--export-profile: percentages sum to ~100",
              abs(sum(l["percent"] for l in p["layers"]) - 100) < 1e-3, str(p["layers"]))
        check("--export-profile: a CPU engine's steps are timed on the host, and it says so",
              p.get("timing", "").startswith("host:") and "CPU engine" in p.get("timing", ""), str(p.get("timing")))
        # On the CPU a step's enqueue is its execution: the enqueue time is there and within the step's.
        check("--export-profile: every step's host enqueue time, at most its time",
              p["layers"] and all(l["enqueueMs"] is not None and 0 <= l["enqueueMs"] <= l["medianMs"]
                                  for l in p["layers"]), str(p["layers"][:2]))

        # mlp at batch 5: the first matmul is x[5,8] @ w1 -> 2*5*w1.shape[0]*w1.shape[1].
        rc, out, err = run(ingot, "run", mlp, "--shapes", "x:5x8", "--export-profile", prof)
        p = json.load(open(prof)) if rc == 0 else {"layers": []}
        w1 = next(numpy_helper.to_array(i) for i in onnx.load(mlp).graph.initializer if i.name == "w1")
        first = p["layers"][0] if p["layers"] else {}
        check("--export-profile: MatMul FLOPs follow --shapes (batch 5)",
              first.get("flops") == 2 * 5 * w1.shape[0] * w1.shape[1], f"{first} w1 {w1.shape}")

        # An engine file: activations' shapes come from the run, so Gemm FLOPs are still known.
        eng = os.path.join(tmp, "cnn.engine")
        rc, out, err = run(ingot, "build", cnn, "-o", eng)
        rc, out, err = run(ingot, "run", eng, "--export-profile", prof, "--dump-profile")
        p = json.load(open(prof)) if rc == 0 else {"layers": []}
        fc = next((l for l in p["layers"] if l["name"] == "fc"), {})
        check(".engine: Gemm 'fc' FLOPs = 2*M*N*K", fc.get("flops") == 2 * batch * n_out * k, f"{fc}\n{out}{err}")
        stem = next((l for l in p["layers"] if l["name"] == "stem/conv"), {})
        check(".engine alone: Conv FLOPs unknown (weights are not visible)", stem.get("flops", 0) is None, str(stem))
        rc, out, err = run(ingot, "run", eng, "--export-profile", prof, "--onnx", cnn)
        p = json.load(open(prof)) if rc == 0 else {"layers": []}
        stem = next((l for l in p["layers"] if l["name"] == "stem/conv"), {})
        check(".engine --onnx MODEL: Conv FLOPs from the model's weight shapes", stem.get("flops") == want,
              f"{stem}\n{out}{err}")
        # An fp16 engine: the builder renames the weights it converts ("/f16") and lays out for
        # channels-last convs ("/krsc"); the FLOPs still come from the model's weights.
        eng16 = os.path.join(tmp, "cnn_fp16.engine")
        rc, out, err = run(ingot, "build", cnn, "-o", eng16, "--fp16")
        rc, out, err = run(ingot, "run", eng16, "--export-profile", prof, "--onnx", cnn)
        p = json.load(open(prof)) if rc == 0 else {"layers": []}
        stem = next((l for l in p["layers"] if l["name"] == "stem/conv"), {})
        check(".engine (fp16) --onnx MODEL: Conv FLOPs through the converted weights' names",
              stem.get("flops") == want, f"{stem}\n{out}{err}")
        for bad, expect in ((["--onnx", os.path.join(tmp, "no.onnx")], "cannot open"), (["--onnx"], "needs a value")):
            rc, out, err = run(ingot, "run", eng, *bad)
            check(f"--onnx error: {' '.join(bad[:1])} {expect}", rc == 2 and expect in err
                  and len(err.strip().splitlines()) == 1, err)
        rc, out, err = run(ingot, "run", cnn, "--onnx", cnn)
        check("--onnx with an .onnx model: one clear line", rc == 2 and "not an .engine" in err, err)

    # --cuda-graph on a CPU engine: a clear warning, then a normal benchmark.
    rc, out, err = run(ingot, "run", cnn, "--cuda-graph", "--iterations", "3")
    check("--cuda-graph on a CPU engine warns and runs normally",
          rc == 0 and "warning: --cuda-graph has no effect on a CPU engine" in out + err
          and "Performance summary" in out and "CUDA graph:" not in out, out + err)
    rc, out, err = run(ingot, "run", "--help")
    check("run --help lists --cuda-graph", rc == 0 and "--cuda-graph" in out, out + err)

    rc, out, err = run(ingot, "run", cnn, "--no-data-transfers", "--iterations", "2")
    check("--no-data-transfers notes it has no effect on CPU", rc == 0 and "no effect" in out, out + err)

    rc, out, err = run(ingot, "run", cnn, "--reference", "--iterations", "3")
    check("--reference takes --iterations", rc == 0 and "(3 runs)" in out, out + err)

    for bad in (["--percentile", "101"], ["--percentile", "50,x"], ["--iterations", "0"], ["--streams", "0"],
                ["--warmup", "-1"], ["--duration", "-2"], ["--iterations"], ["--reference", "--dump-profile"]):
        rc, out, err = run(ingot, "run", cnn, *bad)
        check(f"bad value {' '.join(bad)} exits 2 with one line", rc == 2 and len(err.strip().splitlines()) == 1,
              f"rc {rc}\n{err}")

    return summary()


if __name__ == "__main__":
    sys.exit(main())
