#!/usr/bin/env python3
# Copyright ingot authors. Apache-2.0.
"""`ingot serve` under high concurrency against `ingot run` on the same engine (issue 8's figure).

  1. a model repository with one model: --onnx PATH, or --export resnet50 (on the GPU machine:
     bench/harness.py's ResNet-50, random weights, BatchNorm calibrated), with a Triton config:
     max_batch_size, dynamic batching (preferred = max, --queue-delay-us), --instances instances,
     ingot { backend fp16 };
  2. `ingot serve` builds the engine (model.engine beside model.onnx) and serves it;
  3. --clients processes x --threads threads send infer requests of --request-batch items for
     --duration seconds, inputs and outputs through Triton's system shared-memory extension (each
     process registers its own POSIX region; request bodies carry only JSON) after --warmup seconds
     of the same load (each batch size's first batch builds its cuDNN plans), so the server is
     measured, not Python's sockets; one answer per process is checked against onnxruntime (CPU
     backend) or for finiteness (cuda, fp16);
  4. `ingot run` on the engine the server built, at the max batch, with and without host<->device
     copies (--streams 2);
  5. prints one table: server items/s, mean executed batch (nv_inference_count /
     nv_inference_exec_count), request latency p50/p99, `ingot run`'s items/s and the ratio of the
     server to ingot run's best, then where a request's time went (queue, compute input / infer /
     output, from the server's metrics); writes serve_bench.json into --out.

  python3 bench/serve_bench.py --ingot build/tools/ingot --export resnet50 --backend cuda --fp16 \\
      --max-batch 128 --request-batch 16 --clients 8 --threads 4 --duration 15 --out "$OUT"
  python3 bench/serve_bench.py --ingot build/tools/ingot --onnx M.onnx --backend cpu ...   # dry run
"""
import argparse
import json
import multiprocessing as mp
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "server"))
from server_harness import Server, add_model  # noqa: E402

ONNX_TO_NP = {1: np.float32, 10: np.float16, 6: np.int32, 7: np.int64}
NP_TO_V2 = {np.float32: "FP32", np.float16: "FP16", np.int32: "INT32", np.int64: "INT64"}
V2_TO_PB = {"FP32": "TYPE_FP32", "FP16": "TYPE_FP16", "INT32": "TYPE_INT32", "INT64": "TYPE_INT64"}


def signature(onnx_path):
    """[(name, numpy dtype, dims without the batch dim)] for the inputs and the outputs."""
    import onnx
    m = onnx.load(onnx_path, load_external_data=False)
    init = {i.name for i in m.graph.initializer}

    def one(v):
        t = v.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else -1 for d in t.shape.dim]
        return v.name, ONNX_TO_NP[t.elem_type], dims[1:]
    return [one(v) for v in m.graph.input if v.name not in init], [one(v) for v in m.graph.output]


def config_text(name, ins, outs, a):
    def tensors(ts):
        return ", ".join(f'{{ name: "{n}" data_type: {V2_TO_PB[NP_TO_V2[dt]]} dims: [ {", ".join(map(str, d))} ] }}'
                         for n, dt, d in ts)
    kind = "KIND_GPU" if a.backend == "cuda" else "KIND_CPU"
    return (f'name: "{name}"\nmax_batch_size: {a.max_batch}\ninput [ {tensors(ins)} ]\noutput [ {tensors(outs)} ]\n'
            f"dynamic_batching {{ preferred_batch_size: [ {a.max_batch} ] "
            f"max_queue_delay_microseconds: {a.queue_delay_us} }}\n"
            f"instance_group [ {{ count: {a.instances} kind: {kind} }} ]\n"
            f'ingot {{ backend: "{a.backend}" fp16: {"true" if a.fp16 else "false"} }}\n')


def client_process(index, port, model, ins, outs, a, measure_from, deadline, queue):
    """One load process: its own shared-memory region (inputs then outputs), --threads senders."""
    import http.client
    from multiprocessing import shared_memory
    b = a.request_batch
    rng = np.random.default_rng(100 + index)
    tensors, layout, offset = {}, [], 0
    for n, dt, d in ins:
        x = rng.standard_normal([b] + d).astype(dt) if np.issubdtype(dt, np.floating) else np.zeros([b] + d, dt)
        tensors[n] = x
        layout.append(("in", n, dt, [b] + d, offset, x.nbytes))
        offset += x.nbytes
    for n, dt, d in outs:
        nbytes = int(np.prod([b] + d)) * np.dtype(dt).itemsize
        # Each thread writes its outputs at its own offset.
        for t in range(a.threads):
            layout.append(("out", f"{n}#{t}", dt, [b] + d, offset, nbytes))
            offset += nbytes
    shm = shared_memory.SharedMemory(create=True, size=offset)
    region = f"client{index}"
    try:
        for kind, n, dt, shape, off, nbytes in layout:
            if kind == "in":
                shm.buf[off:off + nbytes] = tensors[n].tobytes()
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        conn.request("POST", f"/v2/systemsharedmemory/region/{region}/register",
                     json.dumps({"key": "/" + shm.name, "offset": 0, "byte_size": offset}))
        r = conn.getresponse()
        body = r.read()
        if r.status != 200:
            queue.put({"error": f"register: {r.status} {body[:200]!r}"})
            return

        def request_body(t):
            req = {"inputs": [], "outputs": []}
            for kind, n, dt, shape, off, nbytes in layout:
                p = {"shared_memory_region": region, "shared_memory_offset": off, "shared_memory_byte_size": nbytes}
                if kind == "in":
                    req["inputs"].append({"name": n, "shape": shape, "datatype": NP_TO_V2[dt], "parameters": p})
                elif n.endswith(f"#{t}"):
                    req["outputs"].append({"name": n.split("#")[0], "parameters": p})
            return json.dumps(req).encode()

        lat, counts, errors = [[] for _ in range(a.threads)], [0] * a.threads, []
        spans = [[None, None] for _ in range(a.threads)]  # first request's start, last answer's end

        def sender(t):
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            body = request_body(t)
            path = f"/v2/models/{model}/infer"
            try:
                while time.time() < deadline:
                    t0 = time.perf_counter()
                    sent = time.time()
                    c.request("POST", path, body, {"Content-Type": "application/json"})
                    r = c.getresponse()
                    data = r.read()
                    if r.status != 200:
                        errors.append(f"{r.status} {data[:200]!r}")
                        return
                    if sent < measure_from:
                        continue  # warm-up: every batch size's plans get built (first use)
                    lat[t].append(time.perf_counter() - t0)
                    counts[t] += 1
                    if spans[t][0] is None:
                        spans[t][0] = sent
                    spans[t][1] = time.time()
            except Exception as e:  # noqa: BLE001 - counted as an error of the run
                errors.append(f"{type(e).__name__}: {e}")

        threads = [threading.Thread(target=sender, args=(t,)) for t in range(a.threads)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        got = {}
        for kind, n, dt, shape, off, nbytes in layout:
            if kind == "out" and n.endswith("#0"):
                got[n.split("#")[0]] = np.frombuffer(bytes(shm.buf[off:off + nbytes]), dtype=dt).reshape(shape)
        starts = [s[0] for s in spans if s[0] is not None]
        ends = [s[1] for s in spans if s[1] is not None]
        queue.put({"requests": sum(counts), "latency_s": [x for l in lat for x in l], "errors": errors,
                   "span": [min(starts), max(ends)] if starts else None,
                   "inputs": {k: v for k, v in tensors.items()} if index == 0 else None, "outputs": got})
        # A new connection: the registering one sat idle past the server's keep-alive timeout.
        conn.close()
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        conn.request("POST", f"/v2/systemsharedmemory/region/{region}/unregister", b"")
        conn.getresponse().read()
    finally:
        shm.close()
        shm.unlink()


def ingot_run_rate(a, engine, extra):
    shape = None
    cmd = [a.ingot, "run", engine, "--iterations", "50", "--duration", "2", "--streams", "2"] + extra
    if a.dynamic_shapes:
        shape = a.dynamic_shapes
        cmd += ["--shapes", shape]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    m = re.search(r"^Throughput: [\d.]+ qps, ([\d.]+) items/s", p.stdout, re.M)
    return (float(m.group(1)) if m else None), p.stdout[-1500:] + p.stderr[-500:]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ingot", required=True)
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--onnx", help="the model to serve (batch dim first, symbolic)")
    src.add_argument("--export", choices=["resnet50"], help="export it here first (needs torch: the GPU machine)")
    ap.add_argument("--backend", choices=["cuda", "cpu"], default="cuda")
    ap.add_argument("--fp16", action="store_true")
    ap.add_argument("--max-batch", type=int, default=128)
    ap.add_argument("--request-batch", type=int, default=16, help="items per infer request")
    ap.add_argument("--queue-delay-us", type=int, default=2000)
    ap.add_argument("--instances", type=int, default=2)
    ap.add_argument("--clients", type=int, default=8, help="client processes")
    ap.add_argument("--threads", type=int, default=4, help="concurrent requests per client process")
    ap.add_argument("--duration", type=float, default=15.0, help="measured seconds, after the warm-up")
    ap.add_argument("--warmup", type=float, default=10.0,
                    help="seconds of load before measuring (cuDNN plans are built on each batch size's first use)")
    ap.add_argument("--out", default=os.environ.get("OUT", "serve-bench-out"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="ingot-serve-bench-")
    onnx_path = a.onnx
    if a.export:
        sys.path.insert(0, HERE)
        import harness
        h = harness.Harness(harness.parser().parse_args(["--out", a.out, "--work", work]))
        model, _ = h.make_model(a.export)
        onnx_path = os.path.join(work, f"{a.export}.onnx")
        print("export:", h.export(a.export, model, onnx_path, "auto"), flush=True)
    ins, outs = signature(onnx_path)
    name = "model"
    repo = os.path.join(work, "repo")
    add_model(repo, name, onnx_path, config_text(name, ins, outs, a))
    # The exporters write large weights beside the model (<model>.onnx.data), named in it.
    import onnx
    for t in onnx.load(onnx_path, load_external_data=False).graph.initializer:
        for e in t.external_data:
            if e.key == "location" and not os.path.exists(os.path.join(repo, name, "1", e.value)):
                shutil.copy(os.path.join(os.path.dirname(os.path.abspath(onnx_path)), e.value),
                            os.path.join(repo, name, "1", e.value))
    a.dynamic_shapes = ",".join(f"{n}:{'x'.join(str(v) for v in [a.max_batch] + d)}" for n, _, d in ins)
    t0 = time.time()
    server = Server(a.ingot, repo, startup_timeout=900)
    print(f"server up in {time.time() - t0:.1f} s (engine built from the ONNX on load)", flush=True)
    results = {"config": vars(a).copy(), "errors": []}
    try:
        queue = mp.Queue()
        measure_from = time.time() + 2.0 + a.warmup
        deadline = measure_from + a.duration
        procs = [mp.Process(target=client_process,
                            args=(i, server.port, name, ins, outs, a, measure_from, deadline, queue))
                 for i in range(a.clients)]
        for p in procs:
            p.start()
        reports = [queue.get(timeout=a.duration + 600) for _ in procs]
        for p in procs:
            p.join()
        spans = [r["span"] for r in reports if r.get("span")]
        # Measured from the first request sent to the last answer received, over every sender.
        wall = (max(s[1] for s in spans) - min(s[0] for s in spans)) if spans else 0.0
        metrics, _ = server.metrics()
    finally:
        server.stop()
    errors = [r["error"] for r in reports if "error" in r] + [e for r in reports for e in r.get("errors", [])]
    results["errors"] = errors[:20]
    requests = sum(r.get("requests", 0) for r in reports)
    lat = sorted(x for r in reports for x in r.get("latency_s", []))
    items = requests * a.request_batch
    count = metrics.get(("nv_inference_count", name), 0.0)
    execs = metrics.get(("nv_inference_exec_count", name), 0.0)
    served = metrics.get(("nv_inference_request_success", name), 0.0)
    # Where a request's time went, per request, as Triton splits it (warm-up included).
    split_ms = {k: metrics.get((f"nv_inference_{k}_duration_us", name), 0.0) / 1e3 / max(served, 1)
                for k in ("request", "queue", "compute_input", "compute_infer", "compute_output")}
    rate = items / max(wall, 1e-9)
    # Correctness of one answer: onnxruntime on the CPU backend, finite values on the GPU (fp16).
    check = "not checked"
    r0 = next((r for r in reports if r.get("inputs")), None)
    if r0 and r0["outputs"]:
        if a.backend == "cpu" and not a.fp16:
            import onnxruntime as ort
            want = ort.InferenceSession(onnx_path).run(None, {k: v for k, v in r0["inputs"].items()})
            ok = all(np.allclose(r0["outputs"][n], w, rtol=1e-4, atol=1e-5) for (n, _, _), w in zip(outs, want))
            check = "equal to onnxruntime" if ok else "DIFFERS from onnxruntime"
        else:
            ok = all(np.isfinite(v.astype(np.float64)).all() and np.std(v.astype(np.float64)) > 0
                     for v in r0["outputs"].values())
            check = "finite, not constant" if ok else "NOT finite or constant"
    engine = os.path.join(repo, name, "1", "model.engine")
    run_with, log_with = ingot_run_rate(a, engine, [])
    run_without, log_without = ingot_run_rate(a, engine, ["--no-data-transfers"])
    best = max([v for v in (run_with, run_without) if v] or [0])
    results.update({"requests": requests, "items": items, "wall_s": wall, "server_items_per_s": rate,
                    "mean_batch": (count / execs) if execs else None, "answer_check": check,
                    "per_request_ms": split_ms,
                    "latency_ms_p50": 1e3 * lat[len(lat) // 2] if lat else None,
                    "latency_ms_p99": 1e3 * lat[min(len(lat) - 1, int(len(lat) * 0.99))] if lat else None,
                    "ingot_run_items_per_s": {"with_transfers": run_with, "no_transfers": run_without},
                    "ratio_to_ingot_run_best": rate / best if best else None,
                    "ingot_run_logs": [log_with, log_without]})
    with open(os.path.join(a.out, "serve_bench.json"), "w") as f:
        json.dump(results, f, indent=1, default=str)
    mb = f"{results['mean_batch']:.1f}" if results["mean_batch"] else "-"
    print(f"\n{'server items/s':>15} {'mean batch':>10} {'p50 ms':>8} {'p99 ms':>8} {'run (copies)':>13} "
          f"{'run (no copies)':>15} {'server/best run':>15}  answer")
    fmt = lambda v: f"{v:.0f}" if v else "-"  # noqa: E731
    print(f"{rate:15.0f} {mb:>10} {results['latency_ms_p50'] or 0:8.2f} {results['latency_ms_p99'] or 0:8.2f} "
          f"{fmt(run_with):>13} {fmt(run_without):>15} "
          f"{(results['ratio_to_ingot_run_best'] or 0):15.2f}  {check}")
    print("per request (ms, warm-up included): " + ", ".join(f"{k} {v:.2f}" for k, v in split_ms.items()))
    print(f"({requests} requests of {a.request_batch} from {a.clients}x{a.threads} senders in {wall:.1f} s; "
          f"errors: {len(errors)}; serve_bench.json in {a.out})")
    return 1 if errors or requests == 0 or "DIFFERS" in check or "NOT" in check else 0


if __name__ == "__main__":
    sys.exit(main())
