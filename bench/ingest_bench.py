#!/usr/bin/env python3
# Copyright ingot authors. Apache-2.0.
"""What `ingot serve` spends taking large request bodies in (issue 19: plain gRPC and HTTP at
-b 16 carry 9.6 MB of fp32 per request), measured where the engine costs almost nothing.

The model reads one pixel per channel of an image batch, [N,3,224,224] -> [N,3] (CPU backend: its
compute is nothing beside the copies), served with max_batch_size 128, no queue delay, 2 instances. Client
processes (tritonclient.grpc or tritonclient.http, each request's body sent as bytes) send
--request-batch images per request for --duration seconds. Reported per protocol:

  - requests/s and MB/s of request bodies the server took in;
  - server CPU per request: the server process's user+system time (from /proc) over the
    requests answered. This is the figure to compare between builds: it does not depend on how
    much of the 2 cores the clients took;
  - the server's own split per request (ModelStatistics: queue, compute input / infer / output).

Every client checks its first answer against NumPy.

  python3 bench/ingest_bench.py --ingot build/tools/ingot --out /tmp/ingest
  python3 bench/ingest_bench.py --ingot build/tools/ingot --protocols grpc --clients 4 --duration 8
"""
import argparse
import json
import multiprocessing as mp
import os
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "server"))
from server_harness import Server, add_model  # noqa: E402

CONFIG = """name: "{name}"
max_batch_size: 128
input [ {{ name: "x" data_type: TYPE_FP32 dims: [ 3, 224, 224 ] }} ]
output [ {{ name: "y" data_type: TYPE_FP32 dims: [ 3 ] }} ]
dynamic_batching {{ preferred_batch_size: [ 128 ] max_queue_delay_microseconds: 0 }}
instance_group [ {{ count: 2 kind: KIND_CPU }} ]
ingot {{ backend: "cpu" }}
"""


def make_model(path):
    import onnx
    from onnx import TensorProto, helper
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 224, 224])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])
    # y = x[:, :, 0, 0]: the engine reads 12 bytes an image, so what is measured is the intake.
    inits = [helper.make_tensor(n, TensorProto.INT64, [2], v) for n, v in
             (("starts", [0, 0]), ("ends", [1, 1]), ("axes", [2, 3]), ("shape", [-1, 3]))]
    nodes = [helper.make_node("Slice", ["x", "starts", "ends", "axes"], ["corner"]),
             helper.make_node("Reshape", ["corner", "shape"], ["y"])]
    g = helper.make_graph(nodes, "ingest", [x], [y], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]), path)


def cpu_seconds(pid):
    """User + system CPU seconds of a process and its threads."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def client(proto, port, model, batch, deadline, seed, queue):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal([batch, 3, 224, 224]).astype(np.float32)
    if proto == "grpc":
        import tritonclient.grpc as tc
        c = tc.InferenceServerClient(f"127.0.0.1:{port}")
    else:
        import tritonclient.http as tc
        c = tc.InferenceServerClient(f"127.0.0.1:{port}", connection_timeout=120, network_timeout=120)
    inp = tc.InferInput("x", list(x.shape), "FP32")
    if proto == "grpc":
        inp.set_data_from_numpy(x)
    else:
        inp.set_data_from_numpy(x, binary_data=True)
    outs = [tc.InferRequestedOutput("y")] if proto == "grpc" else [tc.InferRequestedOutput("y", binary_data=True)]
    n, err, got = 0, None, None
    try:
        while time.time() < deadline:
            r = c.infer(model, [inp], outputs=outs)
            if got is None:
                got = r.as_numpy("y")
            n += 1
    except Exception as e:  # noqa: BLE001 - reported as the run's error
        err = f"{type(e).__name__}: {e}"
    ok = got is not None and np.array_equal(got, x[:, :, 0, 0])
    queue.put({"requests": n, "error": err, "checked": bool(ok)})


def model_stats(port, model):
    import tritonclient.http as th
    s = th.InferenceServerClient(f"127.0.0.1:{port}").get_inference_statistics(model)["model_stats"][0]
    st = s["inference_stats"]
    return {k: (st[k]["count"], st[k]["ns"]) for k in ("success", "queue", "compute_input", "compute_infer",
                                                       "compute_output")}


def run_protocol(server, proto, a):
    model = "m"
    port = server.grpc_port if proto == "grpc" else server.port
    queue = mp.Queue()
    # A warm-up request per client size first (the first batch of each size is not the point).
    warm = mp.Process(target=client, args=(proto, port, model, a.request_batch, time.time() + 1.0, 1, queue))
    warm.start()
    queue.get()
    warm.join()
    before_stats = model_stats(server.port, model)
    cpu0, t0 = cpu_seconds(server.proc.pid), time.time()
    deadline = t0 + a.duration
    procs = [mp.Process(target=client, args=(proto, port, model, a.request_batch, deadline, 10 + i, queue))
             for i in range(a.clients)]
    for p in procs:
        p.start()
    results = [queue.get() for _ in procs]
    for p in procs:
        p.join()
    wall, cpu = time.time() - t0, cpu_seconds(server.proc.pid) - cpu0
    after = model_stats(server.port, model)
    n = sum(r["requests"] for r in results)
    body = a.request_batch * 3 * 224 * 224 * 4
    split = {}
    count = after["success"][0] - before_stats["success"][0]
    for k in ("queue", "compute_input", "compute_infer", "compute_output"):
        split[k + "_ms"] = (after[k][1] - before_stats[k][1]) / max(1, count) / 1e6
    return {"protocol": proto, "requests": n, "wall_s": wall, "req_s": n / wall, "MB_s": n * body / wall / 1e6,
            "server_cpu_ms_per_request": 1000 * cpu / max(1, n), "server_cpu_s": cpu,
            "errors": [r["error"] for r in results if r["error"]], "checked": all(r["checked"] for r in results),
            **split}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ingot", required=True)
    ap.add_argument("--protocols", default="grpc,http")
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--request-batch", type=int, default=16)
    ap.add_argument("--duration", type=float, default=8.0)
    ap.add_argument("--out", default=None)
    ap.add_argument("--server-args", default="", help="extra `ingot serve` arguments")
    a = ap.parse_args()
    # Fresh interpreters: tritonclient.http's gevent and grpcio do not survive a fork.
    mp.set_start_method("spawn")
    work = tempfile.mkdtemp(prefix="ingot-ingest-")
    onnx_path = os.path.join(work, "m.onnx")
    make_model(onnx_path)
    repo = os.path.join(work, "repo")
    add_model(repo, "m", onnx_path, CONFIG.format(name="m"))
    server = Server(a.ingot, repo, "--access-log", "off", *a.server_args.split())
    rows = []
    try:
        for proto in [p.strip() for p in a.protocols.split(",") if p.strip()]:
            rows.append(run_protocol(server, proto, a))
            r = rows[-1]
            print(f"{proto}: {r['req_s']:.1f} req/s, {r['MB_s']:.0f} MB/s, server CPU {r['server_cpu_ms_per_request']:.2f}"
                  f" ms/request, split queue {r['queue_ms']:.2f} / in {r['compute_input_ms']:.2f} / infer "
                  f"{r['compute_infer_ms']:.2f} / out {r['compute_output_ms']:.2f} ms, checked {r['checked']}"
                  + (f", errors {r['errors'][:2]}" if r["errors"] else ""), flush=True)
    finally:
        server.stop()
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        json.dump({"rows": rows, "args": vars(a)}, open(os.path.join(a.out, "ingest.json"), "w"), indent=1)
    return 0 if all(r["checked"] and not r["errors"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
