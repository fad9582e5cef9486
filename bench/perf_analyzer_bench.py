#!/usr/bin/env python3
# Copyright ingot authors. Apache-2.0.
"""Triton's load generator against `ingot serve` (issue 19 item 3), on the GPU machine.

perf_analyzer (PyPI `perf-analyzer`, a manylinux_2_38 wheel: glibc >= 2.38, so the GPU machine
only; `bash bench/fetch_perf_analyzer.sh` downloads it here into build/perf_analyzer.whl to carry)
drives one `ingot serve` holding ResNet-50 fp16 twice: `resnet50` (fp32 inputs) and
`resnet50_fp16io` (fp16 inputs and outputs, ingot { reduced_io: true }); max_batch_size 128,
dynamic batching (2 ms), 2 instances. Each configuration is one perf_analyzer run (its own
stability rule: 3 windows within --stability %), CSV parsed: throughput, p50/p99 latency, the
server's queue / compute input / infer / output split per request. Then `ingot run --streams 2`
on the engine the server built, at batch 128, with copies: the server's throughput over it.

Configurations (--configs, comma-separated names; default: all, in this order, as far as
--max-minutes allows):
  g16s  gRPC  -b 16 c 8   system shared memory     h16s  HTTP  -b 16 c 8  system shared memory
  g16   gRPC  -b 16 c 8   request bodies           h16   HTTP  -b 16 c 8  request bodies
  g16c  gRPC  -b 16 c 8   CUDA shared memory       g16h  gRPC  -b 16 c 8  system shm, fp16 inputs
  g1c1, g1c16, g1c64, g1c256   gRPC -b 1 at concurrency 1, 16, 64, 256
  h1c1, h1c16, h1c64, h1c256   HTTP -b 1 at the same

  python3 bench/perf_analyzer_bench.py --ingot build/dev/tools/ingot --wheel build/perf_analyzer.whl --out "$OUT/pa"
  python3 bench/perf_analyzer_bench.py --self-test      # CSV parsing and the table, no server
"""
import argparse
import csv
import io
import json
import os
import resource
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))

CONFIGS = {  # name: (protocol, batch, concurrency, shared memory, model)
    "g16s": ("grpc", 16, 8, "system", "resnet50"), "h16s": ("http", 16, 8, "system", "resnet50"),
    "g16": ("grpc", 16, 8, "none", "resnet50"), "h16": ("http", 16, 8, "none", "resnet50"),
    "g16c": ("grpc", 16, 8, "cuda", "resnet50"), "g16h": ("grpc", 16, 8, "system", "resnet50_fp16io"),
    **{f"g1c{c}": ("grpc", 1, c, "none", "resnet50") for c in (1, 16, 64, 256)},
    **{f"h1c{c}": ("http", 1, c, "none", "resnet50") for c in (1, 16, 64, 256)},
}
COST_S = 40  # rough seconds per configuration (perf_analyzer's windows until stable)


def parse_csv(text):
    """perf_analyzer's -f CSV: one dict per concurrency row, times in microseconds, by header name."""
    rows = list(csv.DictReader(io.StringIO(text)))
    out = []
    for r in rows:
        num = lambda k: float(r[k]) if r.get(k) not in (None, "") else None  # noqa: E731
        out.append({"concurrency": num("Concurrency"), "throughput": num("Inferences/Second"),
                    "p50_us": num("p50 latency"), "p99_us": num("p99 latency"), "avg_us": num("Avg latency"),
                    "queue_us": num("Server Queue"), "compute_input_us": num("Server Compute Input"),
                    "compute_infer_us": num("Server Compute Infer"), "compute_output_us": num("Server Compute Output"),
                    "send_recv_us": num("Network+Server Send/Recv")})
    return out


def proc_memory(pid):
    """VmRSS and VmHWM (peak) of a process in MiB, from /proc (None where it is gone)."""
    try:
        fields = dict(line.split(":", 1) for line in open(f"/proc/{pid}/status") if ":" in line)
        return {k: round(int(fields[k].split()[0]) / 1024) for k in ("VmRSS", "VmHWM") if k in fields}
    except OSError:
        return None


def model_counts(client, model):
    """(inference_count, execution_count) of a model from the server's statistics (Triton's JSON)."""
    status, _, raw = client.request("GET", f"/v2/models/{model}/stats")
    if status != 200:
        return None
    st = (json.loads(raw).get("model_stats") or [{}])[0]
    return st.get("inference_count", 0), st.get("execution_count", 0)


def mean_batch(before, after):
    """Images per executed batch between two model_counts() readings (perf_analyzer's warm-up and
    unstable windows included), or None."""
    if not before or not after or after[1] <= before[1]:
        return None
    return (after[0] - before[0]) / (after[1] - before[1])


def ingot_run_b1(ingot, engine, ins):
    """`ingot run` at batch 1 on the served engine, one synchronized query at a time with copies and a
    CUDA graph: (median ms, p99 ms, log tail). Issue 19's bar for c1: p99 at most this p99 + 1 ms."""
    import re
    shapes = ",".join(f"{n}:{'x'.join(str(d) for d in [1] + list(dims))}" for n, _, dims in ins)
    cmd = [ingot, "run", engine, "--shapes", shapes, "--cuda-graph", "--iterations", "300", "--duration", "2"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    m = re.search(r"^Latency: .*?median = ([\d.]+) ms.*?percentile\(99%\) = ([\d.]+) ms", p.stdout, re.M)
    return (float(m.group(1)) if m else None), (float(m.group(2)) if m else None), p.stdout[-1200:] + p.stderr[-400:]


def run_watched(cmd, cap_mib, timeout_s=300, every_s=0.25):
    """Runs perf_analyzer with its RSS sampled every `every_s` seconds and stops it (SIGKILL) past
    `cap_mib` MiB or `timeout_s`, before the machine's OOM killer does. Returns (returncode, stdout,
    stderr, {peak_mib, mib_per_s, stopped}): mib_per_s is the RSS growth from the first sample to the
    peak; stopped says why it was stopped, or is None."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        p = subprocess.Popen(cmd, stdout=out, stderr=err, text=True)
        t0, first, peak, peak_t, stopped = time.time(), None, 0, 0.0, None
        while p.poll() is None:
            rss = (proc_memory(p.pid) or {}).get("VmRSS") or 0
            now = time.time() - t0
            if first is None and rss:
                first = (now, rss)
            if rss > peak:
                peak, peak_t = rss, now
            if rss > cap_mib:
                stopped = f"stopped at {rss:,} MiB RSS after {now:.0f} s (cap {cap_mib:,} MiB)"
            elif now > timeout_s:
                stopped = f"stopped after {timeout_s} s"
            if stopped:
                p.kill()
                p.wait()
                break
            time.sleep(every_s)
        out.seek(0)
        err.seek(0)
        growth = (peak - first[1]) / (peak_t - first[0]) if first and peak_t > first[0] else None
        return p.returncode, out.read(), err.read(), {"peak_mib": peak, "mib_per_s": growth, "stopped": stopped}


def fmt(v, digits=0):
    return "-" if v is None else f"{v:,.{digits}f}"


def table(results, run_rate):
    head = ["config", "proto", "b", "c", "shm", "inputs", "img/s", "x run", "p50 ms", "p99 ms", "queue", "in", "infer",
            "out", "batch", "stable"]
    lines = [head]
    for name, r in results.items():
        proto, b, c, shm, model = CONFIGS[name]
        m = r.get("row") or {}
        ratio = (m.get("throughput") or 0) / run_rate if run_rate and m.get("throughput") else None
        us = lambda k: fmt((m.get(k) or 0) / 1000.0, 2) if m.get(k) is not None else "-"  # noqa: E731
        lines.append([name, proto, str(b), str(c), shm, "fp16" if model.endswith("fp16io") else "fp32",
                      fmt(m.get("throughput")), fmt(ratio, 2) if ratio else "-", us("p50_us"), us("p99_us"),
                      us("queue_us"), us("compute_input_us"), us("compute_infer_us"), us("compute_output_us"),
                      fmt(r.get("mean_batch"), 1), "yes" if r.get("stable") else r.get("error", "no")[:40]])
    widths = [max(len(row[i]) for row in lines) for i in range(len(head))]
    return "\n".join("  ".join(v.ljust(w) for v, w in zip(row, widths)) for row in lines)


def self_test():
    sample = ("Concurrency,Inferences/Second,Client Send,Network+Server Send/Recv,Server Queue,Server Compute Input,"
              "Server Compute Infer,Server Compute Output,Client Recv,p50 latency,p90 latency,p95 latency,p99 latency,"
              "Avg latency,request/response,response wait\n8,12345.6,10,200,1500,300,4000,250,5,9000,9500,9800,12000,"
              "9100,0,0\n")
    rows = parse_csv(sample)
    assert rows == [{"concurrency": 8.0, "throughput": 12345.6, "p50_us": 9000.0, "p99_us": 12000.0, "avg_us": 9100.0,
                     "queue_us": 1500.0, "compute_input_us": 300.0, "compute_infer_us": 4000.0,
                     "compute_output_us": 250.0, "send_recv_us": 200.0}], rows
    assert mean_batch((100, 10), (1700, 110)) == 16.0 and mean_batch((5, 5), (5, 5)) is None
    t = table({"g16s": {"row": rows[0], "stable": True, "mean_batch": 16.0},
               "h1c1": {"error": "perf_analyzer rc 1: no stable window"}}, 20000.0)
    assert "12,346" in t and "0.62" in t and "12.00" in t and "16.0" in t and "no stable window" in t, t
    print(t)
    # The RSS watchdog: a child growing 10 MiB every 20 ms is stopped past the cap, and says so; a child that
    # ends on its own keeps its exit code and output.
    grow = [sys.executable, "-c", "import time\na = []\nfor _ in range(400):\n    a.append(bytearray(10 << 20))\n"
            "    time.sleep(0.02)\n"]
    rc, _, _, w = run_watched(grow, cap_mib=300, every_s=0.05)
    assert rc < 0 and w["stopped"] and "cap 300 MiB" in w["stopped"] and w["peak_mib"] > 300, (rc, w)
    assert w["mib_per_s"] and w["mib_per_s"] > 50, w
    rc, out, _, w = run_watched([sys.executable, "-c", "print('done')"], cap_mib=300, every_s=0.05)
    assert rc == 0 and out.strip() == "done" and w["stopped"] is None, (rc, out, w)
    print("self-test ok")
    return 0


def extract_wheel(wheel, dest):
    """The wheel's perf_analyzer executable (the GPU machine has no `unzip`)."""
    with zipfile.ZipFile(wheel) as z:
        z.extractall(dest)
    for root, _, files in os.walk(dest):
        for f in files:
            if f == "perf_analyzer":
                p = os.path.join(root, f)
                os.chmod(p, os.stat(p).st_mode | stat.S_IEXEC)
                return p
    raise RuntimeError(f"no perf_analyzer executable in {wheel}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ingot")
    ap.add_argument("--wheel", help="the perf-analyzer wheel (bench/fetch_perf_analyzer.sh)")
    ap.add_argument("--perf-analyzer", help="a perf_analyzer executable instead of --wheel")
    ap.add_argument("--onnx", help="serve this model instead of exporting ResNet-50 (needs torch)")
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--max-minutes", type=float, default=7.0)
    ap.add_argument("--measurement-ms", type=int, default=4000)
    ap.add_argument("--stability", type=int, default=10, help="perf_analyzer --stability-percentage")
    ap.add_argument("--short-window-ms", type=int, default=1000,
                    help="measurement window of the -b 1 request-body configurations at c > 1 (at most 4 "
                         "trials: perf_analyzer's memory grows fast there)")
    ap.add_argument("--client-rss-cap-mib", type=int, default=80000,
                    help="stop perf_analyzer past this RSS (MiB), before the machine's OOM killer does")
    ap.add_argument("--queue-delay-us", type=int, default=2000,
                    help="the models' max_queue_delay_microseconds (Triton's default is 0: a free instance takes "
                         "what is queued at once)")
    ap.add_argument("--out", default=os.environ.get("OUT", "perf-analyzer-out"))
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if a.self_test:
        return self_test()
    t_start = time.time()
    os.makedirs(a.out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="ingot-pa-")
    pa = a.perf_analyzer or extract_wheel(a.wheel, os.path.join(work, "pa"))
    sys.path.insert(0, HERE)
    sys.path.insert(0, os.path.join(HERE, "..", "tests", "server"))
    import serve_bench
    from server_harness import Server, add_model
    onnx_path = a.onnx
    if not onnx_path:
        import harness
        h = harness.Harness(harness.parser().parse_args(["--out", a.out, "--work", work]))
        model, _ = h.make_model("resnet50")
        onnx_path = os.path.join(work, "resnet50.onnx")
        print("export:", h.export("resnet50", model, onnx_path, "auto"), flush=True)
    ins, outs = serve_bench.signature(onnx_path)
    repo = os.path.join(work, "repo")
    cfg = argparse.Namespace(max_batch=128, queue_delay_us=a.queue_delay_us, instances=2, backend="cuda", fp16=True)
    for name, extra in (("resnet50", ""), ("resnet50_fp16io", "reduced_io: true ")):
        text = serve_bench.config_text(name, ins, outs, cfg)
        if extra:  # fp16 inputs and outputs: the config names them FP16, the engine takes them
            text = text.replace("TYPE_FP32", "TYPE_FP16").replace("fp16: true", "fp16: true " + extra)
        add_model(repo, name, onnx_path, text)
        data = onnx_path + ".data"
        if os.path.exists(data):
            shutil.copy(data, os.path.join(repo, name, "1", os.path.basename(data)))
    t0 = time.time()
    server = Server(a.ingot, repo, "--access-log", "off", startup_timeout=900)
    print(f"server up in {time.time() - t0:.1f} s (two engines built from the ONNX, prepared sizes warmed)", flush=True)
    results = {}
    from server_harness import Client
    stats_client = Client(server.port)
    try:
        for name in [n.strip() for n in a.configs.split(",") if n.strip()]:
            if name not in CONFIGS:
                results[name] = {"error": "unknown configuration"}
                continue
            if time.time() - t_start + COST_S > a.max_minutes * 60:
                print(f"{name}: skipped (--max-minutes)", flush=True)
                continue
            proto, b, c, shm, model = CONFIGS[name]
            port = server.grpc_port if proto == "grpc" else server.port
            csv_path = os.path.join(a.out, f"{name}.csv")
            cmd = [pa, "-m", model, "-b", str(b), "--concurrency-range", f"{c}:{c}", "-i", proto, "-u",
                   f"127.0.0.1:{port}", "--measurement-interval", str(a.measurement_ms), "--stability-percentage",
                   str(a.stability), "--max-trials", "8", "-f", csv_path]
            if shm != "none":
                cmd += ["--shared-memory", shm, "--output-shared-memory-size", str(4 * 1000 * b * 4)]
            elif b == 1 and c > 1:
                # perf_analyzer 2.60 grows fast here: OOM-killed at ~125 GB RSS after ~20 s of -b 1 at
                # c >= 16 (2026-12-05), in 2.5 s time windows and in count windows of 3000 requests
                # alike. Short windows and few trials, and run_watched stops it first and says how fast
                # it grew.
                cmd[cmd.index("--measurement-interval") + 1] = str(a.short_window_ms)
                cmd[cmd.index("--max-trials") + 1] = "4"
            t = time.time()
            before = model_counts(stats_client, model)
            rc, stdout, stderr, watch = run_watched(cmd, a.client_rss_cap_mib)
            p = argparse.Namespace(returncode=rc, stdout=stdout, stderr=stderr)
            after = model_counts(stats_client, model)
            open(os.path.join(a.out, f"{name}.log"), "w").write(" ".join(cmd) + "\n" + p.stdout + p.stderr)
            r = {"seconds": time.time() - t, "cmd": cmd, "server_memory": proc_memory(server.proc.pid),
                 "perf_analyzer_memory": watch, "mean_batch": mean_batch(before, after)}
            print(f"{name}: perf_analyzer peak RSS {watch['peak_mib']:,} MiB, growing "
                  f"{fmt(watch['mib_per_s'])} MiB/s" + (f"; {watch['stopped']}" if watch["stopped"] else ""), flush=True)
            if p.returncode < 0:  # killed by a signal: what the kernel said, and how big both processes were
                r["children_max_rss_kib"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
                r["dmesg"] = subprocess.run(["sh", "-c", "dmesg 2>&1 | tail -5"], capture_output=True,
                                            text=True).stdout[-800:]
            if p.returncode == 0 and os.path.exists(csv_path):
                rows = parse_csv(open(csv_path).read())
                r.update(row=rows[-1] if rows else None, stable="Failed to obtain stable" not in p.stdout + p.stderr)
            else:
                r["error"] = (f"perf_analyzer {watch['stopped']}" if watch["stopped"] else
                              f"perf_analyzer rc {p.returncode}: " + ((p.stderr or p.stdout).strip().splitlines() or [""])[-1])
            results[name] = r
            print(f"{name}: {fmt((r.get('row') or {}).get('throughput'))} img/s"
                  f"{'' if r.get('stable', False) else '  (' + r.get('error', 'not stable') + ')'}", flush=True)
        engine = os.path.join(repo, "resnet50", "1", "model.engine")
        a.dynamic_shapes = None
        run_rate, run_log = serve_bench.ingot_run_rate(argparse.Namespace(ingot=a.ingot, dynamic_shapes=None), engine,
                                                       [])
        b1_median, b1_p99, b1_log = ingot_run_b1(a.ingot, engine, ins)
        open(os.path.join(a.out, "ingot_run_b1.log"), "w").write(b1_log)
    finally:
        server.stop()
    print(f"max_queue_delay_microseconds {a.queue_delay_us}; server memory (MiB) after each configuration: " +
          ", ".join(f"{k} {(v.get('server_memory') or {}).get('VmRSS')}/{(v.get('server_memory') or {}).get('VmHWM')}"
                    for k, v in results.items()))
    for k, v in results.items():
        if v.get("dmesg") is not None:
            print(f"{k}: killed; children's max RSS {v.get('children_max_rss_kib')} KiB; dmesg: {v['dmesg'].strip()}")
    print(f"ingot run --streams 2 on the served engine (batch 128, copies): {fmt(run_rate)} img/s")
    print(f"ingot run on the served engine at batch 1 (copies, CUDA graph, synchronized): median {fmt(b1_median, 3)} ms, "
          f"p99 {fmt(b1_p99, 3)} ms (c1's bar: p99 at most {fmt(b1_p99 + 1 if b1_p99 else None, 3)} ms)")
    print("== perf_analyzer table ==")
    print(table(results, run_rate))
    json.dump({"results": results, "ingot_run_img_s": run_rate, "ingot_run_log": run_log},
              open(os.path.join(a.out, "perf_analyzer.json"), "w"), indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
