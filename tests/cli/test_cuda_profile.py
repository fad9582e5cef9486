#!/usr/bin/env python3
"""`ingot run --cuda-graph` and the roofline figures of `--dump-profile` / `--export-profile` on
cuda engines. Without a CUDA device (or in a build without CUDA) it prints why it skips and
passes. With one:
  - --cuda-graph prints exactly one "CUDA graph: replaying" or "CUDA graph: not used (<reason>)"
    line, replays on a model whose every step runs on the GPU (mlp_symbolic_batch), and times the
    same number of queries as without it;
  - the profile names the GPU and its arch (checked against nvidia-smi's compute capability) and
    the table's peak rates; each step's roofline % is recomputed here from its FLOPs, bytes,
    precision and time as 100 * max(FLOPs / peak(precision), bytes / bandwidth) / time;
  - an --fp16 engine's Gemm steps run in f16 and a default one's in f32; with --onnx MODEL every
    GEMM step has FLOPs, bytes and a roofline figure.

usage: test_cuda_profile.py --ingot PATH --models DIR
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

from cli_harness import check, run, summary
from test_cuda_cli import skip_reason


def gpu_sm():
    """Compute capability of GPU 0 as major*10+minor, from nvidia-smi; None when unknown."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return None
    p = subprocess.run([smi, "--query-gpu=compute_cap", "--format=csv,noheader"], capture_output=True, text=True)
    m = re.match(r"\s*(\d+)\.(\d+)", p.stdout)
    return int(m.group(1)) * 10 + int(m.group(2)) if p.returncode == 0 and m else None


def expected_roofline(layer, peaks):
    """100 * time floor / time, from the layer's own figures; None when they do not give one."""
    rate = {"f16": peaks["f16Tflops"], "bf16": peaks["bf16Tflops"], "tf32": peaks["tf32Tflops"],
            "f32": peaks["f32Tflops"]}.get(layer["precision"])
    floor = None
    if layer["bytes"] is not None:
        floor = layer["bytes"] / (peaks["memoryTBps"] * 1e12)
    if layer["flops"]:
        if not rate:
            return None
        floor = max(floor or 0, layer["flops"] / (rate * 1e12))
    if floor is None or not layer["medianMs"]:
        return None
    return 100 * floor / (layer["medianMs"] / 1000)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ingot", required=True)
    ap.add_argument("--models", required=True)
    a = ap.parse_args()
    ingot = a.ingot
    mlp = os.path.join(a.models, "mlp_symbolic_batch", "model.onnx")
    tfm = os.path.join(a.models, "transformer_encoder_2l", "model.onnx")
    with tempfile.TemporaryDirectory() as tmp:
        why = skip_reason(ingot, mlp, tmp)
        if why:
            print(f"skip: {why}")
            return 0

        # --cuda-graph: one status line; an all-GPU engine replays.
        eng = os.path.join(tmp, "mlp.engine")
        rc, out, err = run(ingot, "build", mlp, "--backend", "cuda", "--shapes", "x:8x8", "-o", eng)
        check("build the mlp cuda engine", rc == 0, out + err)
        times = os.path.join(tmp, "t.json")
        rc, out, err = run(ingot, "run", eng, "--cuda-graph", "--iterations", "30", "--export-times", times)
        lines = [l for l in out.splitlines() if l.startswith("CUDA graph:")]
        check("--cuda-graph prints one status line", rc == 0 and len(lines) == 1, out + err)
        check("--cuda-graph replays an engine whose steps all run on the GPU",
              lines == ["CUDA graph: replaying"], "\n".join(lines) or out + err)
        t = json.load(open(times)) if rc == 0 else []
        check("--cuda-graph times the asked queries with GPU compute times",
              len(t) == 30 and all(e["computeMs"] > 0 for e in t), str(t[:2]))
        rc, out, err = run(ingot, "run", eng, "--cuda-graph", "--no-data-transfers", "--iterations", "20",
                           "--back-to-back", "50")
        b2b = re.search(r"Back-to-back: ([\d.]+) ms per query \(50 queries per stream.*CUDA events", out)
        med = re.search(r"GPU Compute Time: .*median = ([\d.]+) ms", out)
        # Back to back, the launch gaps a synchronized query pays are hidden: not slower than it.
        check("--back-to-back on a replayed graph: between CUDA events, at most the synchronized median",
              rc == 0 and bool(b2b) and bool(med) and 0 < float(b2b.group(1)) <= 1.5 * float(med.group(1)) + 0.01,
              out + err)
        rc, out, err = run(ingot, "run", eng, "--iterations", "5")
        check("without --cuda-graph there is no status line", rc == 0 and "CUDA graph:" not in out, out + err)
        rc, out, err = run(ingot, "run", eng, "--cuda-graph", "--streams", "2", "--iterations", "10")
        check("--cuda-graph with two streams (a graph per context)",
              rc == 0 and out.count("CUDA graph: ") == 1 and "2 streams" in out, out + err)

        # Roofline figures, recomputed from each layer's own numbers.
        sm = gpu_sm()
        for label, model, flags in (("fp32 mlp", mlp, ["--shapes", "x:64x8"]),
                                    ("fp16 transformer", tfm, ["--fp16"])):
            e = os.path.join(tmp, "m.engine")
            rc, out, err = run(ingot, "build", model, "--backend", "cuda", *flags, "-o", e, "--verbose")
            # Layers the precision pass kept in fp32 say so (no fp16 tactic, or weights out of range).
            kept_gemms = sum(1 for line in err.splitlines() if "stays fp32" in line and "Gemm" in line)
            check(f"{label}: build", rc == 0, out + err)
            prof = os.path.join(tmp, "p.json")
            rc, out, err = run(ingot, "run", e, "--dump-profile", "--export-profile", prof, "--iterations", "20",
                               "--onnx", model)
            p = json.load(open(prof)) if rc == 0 and os.path.exists(prof) else {}
            # Every step of these engines can be captured: the profile times them on the device.
            check(f"{label}: the profile reports device times (a graph with markers between steps)",
                  p.get("timing", "").startswith("device:") and re.search(r"^ms: device: ", out, re.M) is not None,
                  p.get("timing", "") + "\n" + out[-600:])
            check(f"{label}: profile names the GPU and its arch",
                  p.get("gpu", {}).get("sm") == sm and sm is not None and p["gpu"].get("name"), str(p.get("gpu")))
            peaks = p.get("peaks")
            if sm == 90:
                check(f"{label}: sm_90 peaks are the measured H200 figures",
                      peaks and peaks["f16Tflops"] == 790 and peaks["memoryTBps"] == 4.3, str(peaks))
            if not peaks:
                print(f"skip roofline checks: no peak table for sm_{sm}")
                continue
            layers = p.get("layers", [])
            bad = []
            for l in layers:
                want = expected_roofline(l, peaks)
                got = l["rooflinePercent"]
                if (want is None) != (got is None) or (want is not None and abs(want - got) > 1e-6 * max(1, want)):
                    bad.append((l["step"], l["name"], l["precision"], want, got))
            check(f"{label}: roofline % = max(FLOPs/peak, bytes/bandwidth) / time for every step",
                  layers and not bad and any(l["rooflinePercent"] is not None for l in layers), str(bad[:5]))
            gemms = [l["precision"] for l in layers if "Gemm" in l["op"] or "MatMul" in l["op"]]
            if "--fp16" in flags:
                # fp16 everywhere except the GEMMs the build names as kept in fp32.
                check(f"{label}: GEMM steps run in f16 but for those the build keeps in fp32",
                      "f16" in gemms and gemms.count("f32") <= kept_gemms and set(gemms) <= {"f16", "f32"},
                      f"{gemms}, {kept_gemms} kept in fp32 by the build")
            else:
                check(f"{label}: GEMM steps run in f32", gemms and set(gemms) == {"f32"}, str(gemms))
            gemms = [l for l in layers if "Gemm" in l["op"] or "MatMul" in l["op"]]
            check(f"{label}: with --onnx every GEMM step has FLOPs, bytes and a roofline figure",
                  gemms and all(l["flops"] and l["bytes"] and l["rooflinePercent"] is not None for l in gemms),
                  str(gemms[:3]))
            check(f"{label}: --dump-profile prints the roofline basis and a roofl% figure",
                  re.search(r"^roofline: .*\(sm_\d+\), peaks f16/bf16", out, re.M) is not None
                  and re.search(r"roofline floor of the steps with known figures: [\d.]+ ms", out) is not None, out)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
