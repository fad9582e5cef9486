#!/usr/bin/env python3
"""`ingot serve` under load, on loopback (bounded to ~30 s):
  - N concurrent clients send a few thousand requests (batch 1..4, JSON and binary tensors) to a
    CPU engine of the symbolic-batch MLP; every answer must equal onnxruntime's output for that
    request alone, none may be lost, and the executed batches must average more than 1 request
    (nv_inference_count / nv_inference_exec_count); p50/p99 latency and the server overhead
    (latency of a lone request minus the engine's own execution time) are printed;
  - overload: a burst past max_queue_size gets 503 at once for the excess, correct answers for
    the rest; at concurrency 1024 over HTTP (three bursts: none lost, memory bounded) and over
    gRPC (tritonclient, one channel: UNAVAILABLE for the excess); 64 clients that disconnect
    mid-request leave the server serving and its queue empty;
  - a request past its queue timeout is answered with an error and never executed;
  - SIGTERM with requests queued: every one is answered, then the server exits 0.
Usage: test_server_load.py --ingot build/tools/ingot --models build/test-models"""
import argparse
import json
import os
import sys
import tempfile
import threading
import time

import numpy as np
import onnxruntime as ort

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_harness import Client, Server, add_model, check, run_concurrently, summary  # noqa: E402

MLP_CONFIG = """
name: "{name}"
max_batch_size: 16
input [ {{ name: "x" data_type: TYPE_FP32 dims: [ 8 ] }} ]
output [ {{ name: "probs" data_type: TYPE_FP32 dims: [ 4 ] }} ]
dynamic_batching {{
  preferred_batch_size: [ 16 ]
  max_queue_delay_microseconds: {delay}
  default_queue_policy {{ max_queue_size: {queue} default_timeout_microseconds: {timeout} }}
}}
instance_group [ {{ count: {instances} kind: KIND_CPU }} ]
"""


def config(name, delay, queue=0, timeout=0, instances=2):
    return MLP_CONFIG.format(name=name, delay=delay, queue=queue, timeout=timeout, instances=instances)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ingot", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--requests", type=int, default=3000)
    args = ap.parse_args()
    onnx_path = os.path.join(args.models, "mlp_symbolic_batch", "model.onnx")
    sess = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])

    repo = tempfile.mkdtemp(prefix="ingot-serve-load-")
    add_model(repo, "mlp", onnx_path, config("mlp", delay=2000))
    add_model(repo, "mlp_direct", onnx_path, "max_batch_size: 16\n")  # no batcher delay; I/O from the engine
    add_model(repo, "mlp_bounded", onnx_path, config("mlp_bounded", delay=300000, queue=4, instances=1))
    add_model(repo, "mlp_timeout", onnx_path, config("mlp_timeout", delay=2000000, timeout=50000, instances=1))
    access_log = os.path.join(repo, "access.log")
    server = Server(args.ingot, repo, "--access-log", access_log)
    print(f"server on 127.0.0.1:{server.port}, metrics on {server.metrics_port}", flush=True)
    check("the .onnx was built and its engine kept beside it",
          os.path.exists(os.path.join(repo, "mlp", "1", "model.engine")))

    # ---- load: every answer equals the request run alone --------------------------------------
    per_client = args.requests // args.clients
    rng_seed = 20261130

    def client_loop(i):
        rng = np.random.default_rng(rng_seed + i)
        c = Client(server.port)
        lat, bad, statuses = [], [], {}
        for k in range(per_client):
            x = rng.standard_normal((int(rng.integers(1, 5)), 8)).astype(np.float32)
            t0 = time.perf_counter()
            status, out = c.infer("mlp", {"x": x}, binary=(k % 2 == 0), outputs=["probs"], binary_outputs=(k % 3 == 0))
            lat.append(time.perf_counter() - t0)
            statuses[status] = statuses.get(status, 0) + 1
            if status != 200:
                bad.append(f"status {status}: {out}")
                continue
            want = sess.run(None, {"x": x})[0]
            got = out.get("probs")
            if got is None or got.shape != want.shape or not np.allclose(got, want, rtol=1e-5, atol=1e-6):
                bad.append(f"request {k} of client {i}: got {got}, want {want}")
        return lat, bad, statuses

    t0 = time.perf_counter()
    results = run_concurrently(args.clients, client_loop)
    wall = time.perf_counter() - t0
    lat = sorted(x for r in results for x in r[0])
    bad = [b for r in results for b in r[1]]
    total = per_client * args.clients
    check(f"{total} requests from {args.clients} clients all answered 200 and equal onnxruntime run alone",
          not bad and len(lat) == total, bad[:3])
    p50, p99 = lat[len(lat) // 2] * 1e3, lat[int(len(lat) * 0.99)] * 1e3
    print(f"load: {total} requests in {wall:.2f} s ({total / wall:.0f} req/s), latency p50 {p50:.3f} ms, "
          f"p99 {p99:.3f} ms")
    m, _ = server.metrics()
    success, count, execs = (m.get((k, "mlp"), 0) for k in
                             ("nv_inference_request_success", "nv_inference_count", "nv_inference_exec_count"))
    check("nv_inference_request_success counts every request", success == total, f"{success} vs {total}")
    mean_batch = count / execs if execs else 0
    print(f"load: {execs:.0f} executions of {count:.0f} inferences, mean executed batch {mean_batch:.2f} rows")
    check("mean executed batch size (nv_inference_count / nv_inference_exec_count) > 1", mean_batch > 1, mean_batch)
    check("nv_inference_pending_request_count is back to 0", m.get(("nv_inference_pending_request_count", "mlp")) == 0)
    split = {k: m.get((f"nv_inference_compute_{k}_duration_us", "mlp"), 0) for k in ("input", "infer", "output")}
    check("compute time split as Triton's: input, infer and output durations all counted",
          all(v > 0 for v in split.values()), split)
    status, _, body = Client(server.port).request("GET", "/v2/models/mlp/stats")
    st = json.loads(body)["model_stats"][0]["inference_stats"] if status == 200 else {}
    check("statistics extension: compute_input / compute_infer / compute_output",
          all(st.get(k, {}).get("count", 0) == success and st[k]["ns"] > 0
              for k in ("compute_input", "compute_infer", "compute_output")), st)

    # ---- overhead: a lone client, batch 1, against the engine's own execution time -------------
    # (mlp_direct has no dynamic_batching: a request runs as soon as it arrives.)
    c = Client(server.port)
    x = np.random.default_rng(1).standard_normal((1, 8)).astype(np.float32)
    before, _ = server.metrics()
    solo = []
    for _ in range(300):
        t = time.perf_counter()
        status, _out = c.infer("mlp_direct", {"x": x}, binary=True, outputs=["probs"], binary_outputs=True)
        solo.append(time.perf_counter() - t)
    after, _ = server.metrics()
    solo.sort()
    n_exec = after[("nv_inference_exec_count", "mlp_direct")] - before.get(("nv_inference_exec_count", "mlp_direct"), 0)
    compute_us = (after[("nv_inference_compute_infer_duration_us", "mlp_direct")] -
                  before.get(("nv_inference_compute_infer_duration_us", "mlp_direct"), 0)) / max(n_exec, 1)
    solo_p50_us = solo[len(solo) // 2] * 1e6
    print(f"overhead: lone batch-1 request p50 {solo_p50_us:.0f} us, engine execution {compute_us:.0f} us, "
          f"server overhead {solo_p50_us - compute_us:.0f} us (HTTP + JSON header + binary tensors, loopback, "
          f"model without dynamic batching)")
    check("overhead: every lone request answered", status == 200 and n_exec == 300, (status, n_exec))

    # ---- overload: a burst past max_queue_size ------------------------------------------------
    def burst(i):
        rng = np.random.default_rng(100 + i)
        xb = rng.standard_normal((1, 8)).astype(np.float32)
        status, out = Client(server.port).infer("mlp_bounded", {"x": xb})
        ok = status != 200 or np.allclose(out["probs"], sess.run(None, {"x": xb})[0], rtol=1e-5, atol=1e-6)
        return status, ok, out

    t = time.perf_counter()
    res = run_concurrently(24, burst)
    statuses = [r[0] for r in res]
    n503, n200 = statuses.count(503), statuses.count(200)
    print(f"overload: 24 concurrent requests, max_queue_size 4: {n200} answered, {n503} got 503 "
          f"({time.perf_counter() - t:.2f} s)")
    check("overload: every request is answered 200 or 503", n200 + n503 == 24, statuses)
    check("overload: the excess gets 503 and at least max_queue_size are served", n503 >= 1 and n200 >= 4, statuses)
    check("overload: the served answers are correct", all(r[1] for r in res))
    msg = next((r[2] for r in res if r[0] == 503), "")
    check("overload: the 503 says the queue is full", "queue full" in str(msg), msg)

    # ---- overload at concurrency 1024 (issue 19 item 4), HTTP and gRPC, memory bounded ----------
    def rss_mib():
        with open(f"/proc/{server.proc.pid}/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024.0

    def http_burst(i):
        xb = np.random.default_rng(1000 + i).standard_normal((1, 8)).astype(np.float32)
        try:
            status, out = Client(server.port, timeout=30).infer("mlp_bounded", {"x": xb}, binary=True)
        except OSError as e:  # a refused or reset connection is a lost request
            return "lost", False, str(e)
        ok = status != 200 or np.allclose(out["probs"], sess.run(None, {"x": xb})[0], rtol=1e-5, atol=1e-6)
        return status, ok, out

    rss = [rss_mib()]
    lost_total = []
    for rnd in range(3):
        t = time.perf_counter()
        res = run_concurrently(1024, http_burst)
        took = time.perf_counter() - t
        rss.append(rss_mib())
        statuses = [r[0] for r in res]
        n200, n503, lost = statuses.count(200), statuses.count(503), len(res) - statuses.count(200) - statuses.count(503)
        print(f"overload over HTTP, round {rnd}: 1024 concurrent requests, max_queue_size 4: {n200} answered, "
              f"{n503} got 503, {lost} lost, {took:.2f} s; server RSS {rss[-1]:.0f} MiB")
        lost_total += [r for r in res if r[0] not in (200, 503)]
        if rnd == 0:
            check("overload 1024 (HTTP): the served answers are correct", all(r[1] for r in res))
            check("overload 1024 (HTTP): the excess is refused at once (the burst ends within 20 s)",
                  n503 > 0 and took < 20, (n503, took))
    check("overload 1024 (HTTP): every request of the three bursts answered 200 or 503, none lost",
          not lost_total, (len(lost_total), lost_total[:3]))
    check("overload 1024 (HTTP): server memory bounded over three bursts (< 64 MiB growth after the first)",
          rss[3] - rss[1] < 64, rss)

    try:
        import tritonclient.grpc as tg
    except ImportError as e:
        tg = None
        print(f"skip the gRPC overload check: tritonclient[grpc] is not installed ({e})")
    if tg:
        gc = tg.InferenceServerClient(f"127.0.0.1:{server.grpc_port}")
        done, lock, answers = threading.Event(), threading.Lock(), []

        def on_answer(result, error, xb):
            ok = error is not None or np.allclose(result.as_numpy("probs"), sess.run(None, {"x": xb})[0], rtol=1e-5,
                                                  atol=1e-6)
            with lock:
                answers.append(("ok" if error is None else str(error.status()), ok, str(error or "")))
                if len(answers) == 1024:
                    done.set()

        t = time.perf_counter()
        for i in range(1024):
            xb = np.random.default_rng(3000 + i).standard_normal((1, 8)).astype(np.float32)
            ii = tg.InferInput("x", [1, 8], "FP32")
            ii.set_data_from_numpy(xb)
            gc.async_infer("mlp_bounded", [ii], callback=lambda result, error, xb=xb: on_answer(result, error, xb))
        done.wait(60)
        took = time.perf_counter() - t
        kinds = [a[0] for a in answers]
        n_ok, n_unavail = kinds.count("ok"), sum("UNAVAILABLE" in k for k in kinds)
        print(f"overload over gRPC: 1024 async requests on one channel: {n_ok} answered, {n_unavail} UNAVAILABLE, "
              f"{len(answers) - n_ok - n_unavail} other, {took:.2f} s")
        check("overload 1024 (gRPC): every request answered or UNAVAILABLE, none lost",
              len(answers) == 1024 and n_ok + n_unavail == 1024, [a for a in answers if a[0] != "ok"][:3])
        check("overload 1024 (gRPC): UNAVAILABLE says the queue is full; the served answers are correct",
              n_unavail > 0 and all(a[1] for a in answers) and
              all("queue full" in a[2] for a in answers if "UNAVAILABLE" in a[0]), answers[:2])
        gc.close()

    # ---- clients that disconnect mid-request cost nothing ---------------------------------------
    import socket
    xb = np.random.default_rng(5).standard_normal((1, 8)).astype(np.float32)
    body_json = json.dumps({"inputs": [{"name": "x", "shape": [1, 8], "datatype": "FP32",
                                        "data": xb.flatten().tolist()}]}).encode()
    raw = (b"POST /v2/models/mlp_bounded/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
           b"Content-Length: " + str(len(body_json)).encode() + b"\r\n\r\n" + body_json)
    for k in range(64):
        sock = socket.create_connection(("127.0.0.1", server.port))
        sock.sendall(raw if k % 2 == 0 else raw[:len(raw) // 2])  # whole request, or cut half-way
        sock.close()
    # The abandoned requests are still being read and queued for a while (on a loaded 2-core CI
    # machine, after the pending count first reads 0): ask until the queue takes ours, then until
    # it stays empty for a second, all within 20 s.
    deadline = time.time() + 20
    pending = ("nv_inference_pending_request_count", "mlp_bounded")
    status, out = Client(server.port).infer("mlp_bounded", {"x": xb})
    while status == 503 and time.time() < deadline:
        time.sleep(0.1)
        status, out = Client(server.port).infer("mlp_bounded", {"x": xb})
    quiet = 0
    while quiet < 10 and time.time() < deadline:
        quiet = quiet + 1 if server.metrics()[0].get(pending) == 0 else 0
        time.sleep(0.1)
    check("64 clients gone mid-request: the server still answers, correctly, and its queue drains",
          server.proc.poll() is None and status == 200 and quiet == 10 and
          np.allclose(out["probs"], sess.run(None, {"x": xb})[0], rtol=1e-5, atol=1e-6), (status, out, quiet))

    # ---- timeout: past default_timeout_microseconds, answered with an error, never executed ----
    status, out = Client(server.port).infer("mlp_timeout", {"x": x})
    check("a request past its queue timeout is answered 504 with a message", status == 504 and "timed out" in str(out),
          (status, out))
    time.sleep(0.1)
    m, _ = server.metrics()
    check("the timed-out request was never executed", m.get(("nv_inference_exec_count", "mlp_timeout"), 0) == 0)

    # ---- SIGTERM drains the queue -------------------------------------------------------------
    answers = []

    def late(i):
        xb = np.random.default_rng(200 + i).standard_normal((1, 8)).astype(np.float32)
        status, out = Client(server.port).infer("mlp_bounded", {"x": xb})
        answers.append((status, status == 200 and np.allclose(out["probs"], sess.run(None, {"x": xb})[0], rtol=1e-5,
                                                              atol=1e-6)))

    threads = [threading.Thread(target=late, args=(i,)) for i in range(3)]
    for th in threads:
        th.start()
    # Wait until all three are queued (the model waits 300 ms for a fuller batch), then SIGTERM.
    deadline = time.time() + 20
    pending = ("nv_inference_pending_request_count", "mlp_bounded")
    while time.time() < deadline and server.metrics()[0].get(pending) != 3:
        time.sleep(0.01)
    rc = server.stop()
    for th in threads:
        th.join()
    check("SIGTERM: the queued requests are answered correctly",
          len(answers) == 3 and all(a[1] for a in answers), answers)
    check("SIGTERM: the server exits 0", rc == 0, rc)
    lines = open(access_log).read().splitlines()
    check("the access log has one JSON line per request",
          len(lines) >= total and '"path":"/v2/models/mlp/infer"' in lines[0], lines[:2])
    return summary()


if __name__ == "__main__":
    sys.exit(main())
