#!/usr/bin/env python3
# Copyright ingot authors. Apache-2.0.
"""What the Python API costs per call on the GPU (issue 21's done-when): ResNet-50 fp16 at batch 1,
one engine file, timed the same way on both sides: CUDA events around the enqueue on the stream,
then a synchronize, one query at a time (the host's launch is inside; `ingot run --export-times`'
computeMs is exactly that). Paths:

  ingot run     `ingot run --cuda-graph --no-data-transfers` (C++; before and after the Python runs)
  v3 stream     IExecutionContext.execute_async_v3 on a torch.cuda.Stream, addresses set once,
                set_cuda_graph_mode(True): a TensorRT script's loop
  v3 legacy     the same on torch's legacy default stream (handle 0)
  compile       ingot.compile's callable (the same engine): per call, checks the torch inputs,
                allocates the output tensor, binds, enqueues on the current stream
  compile run_into  the same callable writing into one fixed output tensor

Usage (the GPU machine; bench/python_part.sh runs it):
  python3 bench/python_overhead.py --ingot build/py/tools/ingot --work /tmp/po --out DIR
Prints a table (median and p90 ms, difference to ingot run's median in us) and writes DIR/python_overhead.json.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q / 100.0 * len(xs)))]


def ingot_run(a, engine, tag):
    times = os.path.join(a.work, f"times_{tag}.json")
    cmd = [a.ingot, "run", engine, "--cuda-graph", "--no-data-transfers", "--warmup-ms", "1000",
           "--iterations", str(a.iterations), "--duration", "0", "--export-times", times]
    r = subprocess.run(cmd, capture_output=True, text=True)
    with open(os.path.join(a.work, f"run_{tag}.log"), "w") as f:
        f.write(" ".join(cmd) + "\n" + r.stdout + r.stderr)
    if r.returncode != 0:
        sys.exit(f"ingot run failed ({r.returncode}): {r.stderr[-500:]}")
    graph = [ln for ln in r.stdout.splitlines() if "CUDA graph" in ln]
    ms = [e["computeMs"] for e in json.load(open(times))]
    return ms, (graph[0].strip() if graph else "no 'CUDA graph' line")


def time_calls(torch, stream, call, n, warmup):
    for _ in range(warmup):
        call()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    host = []
    for i in range(n):
        t0 = time.perf_counter()
        starts[i].record(stream)
        call()
        ends[i].record(stream)
        ends[i].synchronize()
        host.append((time.perf_counter() - t0) * 1e3)
    return [s.elapsed_time(e) for s, e in zip(starts, ends)], host


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ingot", required=True)
    ap.add_argument("--work", default="/tmp/python_overhead")
    ap.add_argument("--out", default=".")
    ap.add_argument("--iterations", type=int, default=3000)
    ap.add_argument("--model", default="resnet50")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    os.makedirs(a.out, exist_ok=True)
    import numpy as np
    import torch
    import torchvision
    import ingot

    onnx_path = os.path.join(a.work, f"{a.model}.onnx")
    engine_path = os.path.join(a.work, f"{a.model}_fp16.engine")
    torch.manual_seed(0)
    model = getattr(torchvision.models, a.model)().eval().cuda()
    x = torch.randn(1, 3, 224, 224, device="cuda")
    t = time.monotonic()
    with torch.no_grad():
        want = model(x).float().cpu().numpy()
        torch.onnx.export(model, (x,), onnx_path, input_names=["x"], output_names=["y"], dynamo=False,
                          opset_version=18, do_constant_folding=True)
    print(f"export {time.monotonic() - t:.1f} s", flush=True)
    t = time.monotonic()
    r = subprocess.run([a.ingot, "build", onnx_path, "--backend", "cuda", "--fp16", "--tactic-timing", "device",
                        "-o", engine_path], capture_output=True, text=True)
    open(os.path.join(a.work, "build.log"), "w").write(r.stdout + r.stderr)
    if r.returncode != 0:
        sys.exit(f"ingot build failed: {r.stderr[-800:]}")
    print(f"ingot build {time.monotonic() - t:.1f} s", flush=True)

    results = {}
    ms, graph = ingot_run(a, engine_path, "before")
    results["ingot run (before)"] = {"gpu_ms": ms, "note": graph}

    logger = ingot.Logger(ingot.Logger.WARNING)
    engine = ingot.Runtime(logger).deserialize_cuda_engine(open(engine_path, "rb").read())
    assert engine is not None and engine.backend == "cuda", "the engine did not load as a CUDA engine"
    y = torch.empty(tuple(engine.get_tensor_shape("y")), dtype=torch.float32, device="cuda")
    cos = None
    for tag, stream in (("v3 stream", torch.cuda.Stream()), ("v3 legacy", torch.cuda.default_stream())):
        ctx = engine.create_execution_context()
        ctx.set_cuda_graph_mode(True)
        ctx.set_input_shape("x", tuple(x.shape))
        ctx.set_tensor_address("x", x.data_ptr())
        ctx.set_tensor_address("y", y.data_ptr())
        handle = stream.cuda_stream
        torch.cuda.synchronize()
        gpu, host = time_calls(torch, stream, lambda: ctx.execute_async_v3(handle), a.iterations, 200)
        results[tag] = {"gpu_ms": gpu, "host_ms": host, "note": f"graph status '{ctx.cuda_graph_status}'"}
        got = y.float().cpu().numpy()
        cos = float(np.dot(got.ravel(), want.ravel()) / (np.linalg.norm(got) * np.linalg.norm(want)))
        results[tag]["cosine_vs_torch_fp32"] = cos
        del ctx

    run = ingot.CompiledModel(engine, True)
    out = {}

    def call():
        out["y"] = run(x)[0]
    gpu, host = time_calls(torch, torch.cuda.current_stream(), call, a.iterations, 200)
    results["compile"] = {"gpu_ms": gpu, "host_ms": host, "note": f"graph status '{run.context.cuda_graph_status}', "
                          f"{run.context.cuda_graphs_held} graphs held"}
    run2 = ingot.CompiledModel(engine, True)
    y2 = torch.empty_like(y)
    gpu, host = time_calls(torch, torch.cuda.current_stream(), lambda: run2.run_into([y2], x), a.iterations, 200)
    results["compile run_into"] = {"gpu_ms": gpu, "host_ms": host,
                                   "note": f"graph status '{run2.context.cuda_graph_status}', "
                                   f"{run2.context.cuda_graphs_held} graphs held"}

    ms, graph = ingot_run(a, engine_path, "after")
    results["ingot run (after)"] = {"gpu_ms": ms, "note": graph}

    base = statistics.mean([statistics.median(results[k]["gpu_ms"]) for k in ("ingot run (before)",
                                                                              "ingot run (after)")])
    print(f"\nResNet-50 fp16 b1, one engine; per query: CUDA events around the enqueue, then a synchronize "
          f"({a.iterations} queries each; cosine vs torch fp32 {cos:.5f})")
    print(f"{'path':20} {'median ms':>10} {'p90 ms':>8} {'host ms':>8} {'- ingot run us':>15}  note")
    summary = {}
    for k, v in results.items():
        med = statistics.median(v["gpu_ms"])
        host = statistics.median(v["host_ms"]) if "host_ms" in v else None
        d = (med - base) * 1e3
        summary[k] = {"median_ms": med, "p90_ms": pct(v["gpu_ms"], 90), "host_median_ms": host, "minus_run_us": d,
                      "note": v["note"]}
        if "cosine_vs_torch_fp32" in v:
            summary[k]["cosine_vs_torch_fp32"] = v["cosine_vs_torch_fp32"]
        print(f"{k:20} {med:10.4f} {pct(v['gpu_ms'], 90):8.4f} {'' if host is None else f'{host:8.4f}':>8} "
              f"{d:15.1f}  {v['note']}")
    worst = max(summary[k]["minus_run_us"] for k in ("v3 stream", "v3 legacy", "compile run_into"))
    print(f"bar: at most 10 us more than ingot run per call; worst of the TensorRT-style and fixed-buffer "
          f"paths {worst:+.1f} us; compile with new outputs each call {summary['compile']['minus_run_us']:+.1f} us")
    json.dump({"summary": summary, "iterations": a.iterations, "ingot_run_median_ms": base,
               "torch": torch.__version__, "gpu": torch.cuda.get_device_name()},
              open(os.path.join(a.out, "python_overhead.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
