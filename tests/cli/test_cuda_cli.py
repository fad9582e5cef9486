#!/usr/bin/env python3
"""`ingot run` and `ingot compare` on cuda engines (device-memory bindings, a stream, and the
trtexec-style H2D / GPU compute / D2H summary). Without a CUDA device (or in a build without
CUDA) it prints why it skips and passes. With one, the cuda engines' outputs are checked against
the CPU engine's on the very same inputs (same seed) with numpy, and `compare` against the
reference interpreter.

usage: test_cuda_cli.py --ingot PATH --models DIR
"""
import argparse
import json
import os
import shutil
import subprocess
import struct
import sys
import tempfile

import numpy as np

from cli_harness import check, run, summary, engine_checksum


def skip_reason(ingot, mlp, tmp):
    """Why the cuda checks cannot run here, or None when they can."""
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            p = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=60)
            if p.returncode != 0 or "GPU" not in p.stdout:
                lines = (p.stderr or p.stdout).strip().splitlines()
                return "nvidia-smi finds no GPU" + (": " + lines[0] if lines else "")
        except (OSError, subprocess.SubprocessError) as e:
            return f"nvidia-smi failed: {e}"
    # The binary itself is the final word (nvidia-smi may be missing inside containers).
    rc, out, err = run(ingot, "build", mlp, "--backend", "cuda", "--shapes", "x:2x8", "-o",
                       os.path.join(tmp, "probe.engine"))
    if rc == 0:
        return None
    text = (out + err).strip()
    for marker in ("no CUDA device", "without CUDA", "not available", "not built"):
        if marker in text:
            return text.splitlines()[-1] if text else marker
    return None  # some other failure: let the checks below report it


def load_outputs(folder):
    return {f[:-4]: np.load(os.path.join(folder, f)) for f in os.listdir(folder) if f.endswith(".npy")}


def same_outputs(name, cpu_dir, gpu_dir):
    cpu, gpu = load_outputs(cpu_dir), load_outputs(gpu_dir)
    ok = bool(cpu) and cpu.keys() == gpu.keys()
    detail = f"outputs cpu {sorted(cpu)} cuda {sorted(gpu)}"
    if ok:
        for k in cpu:
            if cpu[k].shape != gpu[k].shape or not np.allclose(cpu[k], gpu[k], rtol=1e-3, atol=1e-4):
                ok = False
                diff = np.abs(cpu[k].astype(np.float64) - gpu[k].astype(np.float64))
                detail = f"{k}: shapes {cpu[k].shape} vs {gpu[k].shape}, max abs diff {diff.max() if diff.size else 0}"
    check(f"{name}: cuda outputs match the cpu engine's (rtol 1e-3, atol 1e-4)", ok, detail)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ingot", required=True)
    ap.add_argument("--models", required=True)
    a = ap.parse_args()
    ingot = a.ingot
    cnn = os.path.join(a.models, "cnn_small", "model.onnx")
    mlp = os.path.join(a.models, "mlp_symbolic_batch", "model.onnx")
    with tempfile.TemporaryDirectory() as tmp:
        reason = skip_reason(ingot, mlp, tmp)
        if reason:
            print(f"skipped: {reason}")
            print("0 passed, 0 failed")
            return 0

        engines = {}
        for name, model, extra in (("cnn_small", cnn, []), ("mlp_symbolic_batch", mlp, ["--shapes", "x:5x8"])):
            eng = os.path.join(tmp, name + ".cuda.engine")
            rc, out, err = run(ingot, "build", model, "--backend", "cuda", "-o", eng, *extra)
            check(f"build {name} --backend cuda", rc == 0 and os.path.exists(eng), out + err)
            engines[name] = eng

        # Run the engine files (device bindings) and the CPU engine on the same seeded inputs.
        for name, model, extra in (("cnn_small", cnn, []), ("mlp_symbolic_batch", mlp, ["--shapes", "x:5x8"])):
            gpu_dir, cpu_dir = os.path.join(tmp, name + "_gpu"), os.path.join(tmp, name + "_cpu")
            os.makedirs(gpu_dir)
            os.makedirs(cpu_dir)
            times = os.path.join(tmp, name + "_times.json")
            rc, out, err = run(ingot, "run", engines[name], "--iterations", "20", "--seed", "7", "--save-outputs",
                               gpu_dir, "--export-times", times, *extra)
            ok = rc == 0 and "cuda engine (" in out
            for line in ("H2D Latency: min", "GPU Compute Time: min", "D2H Latency: min", "Enqueue Time: min",
                         "Latency: min", "Throughput:"):
                ok = ok and line in out
            check(f"run {name} cuda engine --iterations 20: H2D, GPU compute, D2H, enqueue, latency", ok,
                  out + err, detail_tail=3000)
            if rc == 0:
                its = json.load(open(times))
                good = len(its) == 20 and all(i["computeMs"] is not None and i["computeMs"] > 0 for i in its)
                good = good and all(
                    abs(i["latencyMs"] - (i["h2dMs"] + i["computeMs"] + i["d2hMs"])) < 1e-3 for i in its)
                check(f"run {name}: 20 timed queries, latency = H2D + compute + D2H", good, str(its[:2]))
            rc, out, err = run(ingot, "run", model, "--backend", "cpu", "--seed", "7", "--save-outputs", cpu_dir,
                               *extra)
            check(f"run {name} on the cpu engine", rc == 0, out + err)
            same_outputs(name, cpu_dir, gpu_dir)

        # An .onnx built for cuda on the fly.
        gpu_dir, cpu_dir = os.path.join(tmp, "fly_gpu"), os.path.join(tmp, "fly_cpu")
        os.makedirs(gpu_dir)
        os.makedirs(cpu_dir)
        rc, out, err = run(ingot, "run", mlp, "--backend", "cuda", "--shapes", "x:3x8", "--save-outputs", gpu_dir)
        check("run mlp.onnx --backend cuda --shapes x:3x8", rc == 0 and "probs  f32[3,4]" in out, out + err)
        run(ingot, "run", mlp, "--shapes", "x:3x8", "--save-outputs", cpu_dir)
        same_outputs("mlp.onnx --backend cuda", cpu_dir, gpu_dir)

        # --fp16 --reduced-io: fp16 input and output on the GPU, no Cast steps, the fp16 outputs
        # within fp16 tolerance of the fp32-I/O fp16 engine's on the same (fp16-exact) inputs.
        e_io, e_16 = os.path.join(tmp, "cnn_io16.engine"), os.path.join(tmp, "cnn_16.engine")
        rc, out, err = run(ingot, "build", cnn, "--backend", "cuda", "--fp16", "--reduced-io", "-o", e_io)
        rc2, out2, err2 = run(ingot, "build", cnn, "--backend", "cuda", "--fp16", "-o", e_16)
        rc3, insp, err3 = run(ingot, "inspect", e_io)
        check("build cnn --fp16 --reduced-io --backend cuda: f16 I/O, no Cast step",
              rc == 0 and rc2 == 0 and rc3 == 0 and " Cast " not in insp and "f16[" in insp.split("outputs:")[0],
              out + err + err2 + insp)
        x16 = np.random.default_rng(3).standard_normal((2, 3, 32, 32)).astype(np.float16)
        inp_name = "input"  # cnn_small's one input, [2, 3, 32, 32]
        f16_in, f32_in = os.path.join(tmp, "x16.npy"), os.path.join(tmp, "x32.npy")
        np.save(f16_in, x16)
        np.save(f32_in, x16.astype(np.float32))
        d_io, d_16 = os.path.join(tmp, "out_io16"), os.path.join(tmp, "out_16")
        os.makedirs(d_io)
        os.makedirs(d_16)
        rc, out, err = run(ingot, "run", e_io, "--load-inputs", f"{inp_name}:{f16_in}", "--save-outputs", d_io)
        rc2, out2, err2 = run(ingot, "run", e_16, "--load-inputs", f"{inp_name}:{f32_in}", "--save-outputs", d_16)
        ok, detail = rc == 0 and rc2 == 0, out + err + out2 + err2
        for f in sorted(os.listdir(d_16)) if ok else []:
            a16 = np.load(os.path.join(d_io, f)) if os.path.exists(os.path.join(d_io, f)) else None
            b32 = np.load(os.path.join(d_16, f))
            good = a16 is not None and a16.dtype == np.float16 and a16.shape == b32.shape and np.allclose(
                a16.astype(np.float32), b32, rtol=2e-3, atol=2e-3)
            ok &= good
            detail += f"\n{f}: {None if a16 is None else (a16.dtype, a16.shape)} vs {b32.dtype, b32.shape}"
        check("cnn --reduced-io on cuda: fp16 outputs match the fp32-I/O fp16 engine's", ok, detail)

        rc, out, err = run(ingot, "run", engines["cnn_small"], "--no-data-transfers", "--iterations", "5")
        check("--no-data-transfers: H2D/D2H skipped, throughput from GPU compute",
              rc == 0 and "H2D Latency: skipped" in out and "D2H Latency: skipped" in out
              and "from GPU compute time" in out and "GPU Compute Time: min" in out, out + err)

        rc, out, err = run(ingot, "run", engines["cnn_small"], "--streams", "2", "--iterations", "5")
        check("--streams 2 on a cuda engine", rc == 0 and "2 streams" in out, out + err)

        rc, out, err = run(ingot, "run", engines["cnn_small"], "--dump-profile", "--iterations", "3")
        check("--dump-profile on a cuda engine prints the per-layer table", rc == 0 and "=== Profile" in out,
              out + err)

        # compare: cuda engines against the reference interpreter.
        for name, model, extra in (("cnn_small", cnn, []), ("mlp_symbolic_batch", mlp, ["--shapes", "x:3x8"])):
            rc, out, err = run(ingot, "compare", model, "--backend", "cuda", "--atol", "1e-4", "--rtol", "1e-3",
                               *extra)
            check(f"compare {name} --backend cuda: PASS", rc == 0 and "vs cuda engine" in out
                  and out.rstrip().splitlines()[-1].startswith("PASS"), out + err)
        rc, out, err = run(ingot, "compare", cnn, "--engine", engines["cnn_small"], "--all-layers", "--atol", "1e-4",
                           "--rtol", "1e-3")
        check("compare cnn --engine (cuda) --all-layers: PASS", rc == 0 and "vs cuda engine" in out
              and out.rstrip().splitlines()[-1].startswith("PASS"), out + err)

        # An engine recorded for another GPU arch (same length, valid checksum) is refused in
        # one line that names both archs.
        data = bytearray(open(engines["cnn_small"], "rb").read())
        at = data.find(b"sm_")
        if at >= 0:
            data[at:at + 5] = b"sm_10"
            struct.pack_into("<Q", data, 48, engine_checksum(bytes(data)))
            other = os.path.join(tmp, "other_gpu.engine")
            open(other, "wb").write(bytes(data))
            rc, out, err = run(ingot, "run", other)
            lines = [l for l in err.strip().splitlines() if l]
            check("an engine for another GPU arch: one clear line, non-zero exit",
                  rc != 0 and len(lines) == 1 and "engine GPU arch" in err and "sm_10" in err, f"rc={rc} {err!r}")
        else:
            check("the cuda engine records its GPU arch", False, "no 'sm_' in the engine header")
    return summary()


if __name__ == "__main__":
    sys.exit(main())
