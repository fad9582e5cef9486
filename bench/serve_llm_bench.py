#!/usr/bin/env python3
# Copyright ingot authors. Apache-2.0.
"""Load test for an OpenAI-compatible completions server, in the spirit of vLLM's
benchmark_serving.py: N requests of random token-id prompts (input length fixed), each asking for a
fixed output length (ignore_eos), streamed; sent at a fixed concurrency or as a Poisson process at a
request rate. Per request: TTFT (send to first text chunk), ITL (between chunks), TPOT ((end - first)
/ (output tokens - 1)), end-to-end latency. Prints a summary table (mean / p50 / p99), request and
token throughput and the refused (503) count, and writes the numbers as JSON with --out.

  python3 bench/serve_llm_bench.py --gguf MODEL.gguf --ingot build/tools/ingot ...   # starts `ingot serve`
  python3 bench/serve_llm_bench.py --base-url http://127.0.0.1:8000/v1 --model NAME ...   # any server

Options: --num-prompts 64 --concurrency 8 | --request-rate R, --input-len 128 --output-len 128,
--seed 0, --vocab-low/--vocab-high (the token-id range of the random prompts).
"""
import argparse
import http.client
import json
import random
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse


def pct(v, p):
    if not v:
        return float("nan")
    s = sorted(v)
    k = (len(s) - 1) * p / 100.0
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def one_request(url, model, prompt, output_len):
    """Streams one completion; returns a dict of timings (seconds) or an error."""
    u = urllib.parse.urlparse(url)
    body = json.dumps({"model": model, "prompt": prompt, "max_tokens": output_len, "temperature": 0,
                       "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}})
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=3600)
    t0 = time.perf_counter()
    try:
        conn.request("POST", u.path.rstrip("/") + "/completions", body, {"Content-Type": "application/json"})
        resp = conn.getresponse()
        if resp.status != 200:
            return {"status": resp.status, "error": resp.read().decode()[:200]}
        first, last, itl, tokens = None, None, [], None
        buf = b""
        while True:
            chunk = resp.read1(65536) if hasattr(resp, "read1") else resp.read(1)
            if not chunk:
                break
            buf += chunk
            while b"\n\n" in buf:
                event, buf = buf.split(b"\n\n", 1)
                if not event.startswith(b"data: "):
                    continue
                data = event[6:]
                if data == b"[DONE]":
                    continue
                j = json.loads(data)
                if j.get("usage"):
                    tokens = j["usage"]["completion_tokens"]
                if j.get("choices") and j["choices"][0].get("text"):
                    now = time.perf_counter()
                    if first is None:
                        first = now
                    else:
                        itl.append(now - last)
                    last = now
        end = time.perf_counter()
        if first is None:
            return {"status": 200, "error": "no text came back"}
        n = tokens if tokens is not None else len(itl) + 1
        return {"status": 200, "ttft": first - t0, "e2e": end - t0, "itl": itl, "tokens": n,
                "tpot": (last - first) / (n - 1) if n > 1 else None}
    except OSError as e:
        return {"status": 0, "error": str(e)}
    finally:
        conn.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base-url", help="http://host:port/v1 of a running server")
    ap.add_argument("--model", default="model")
    ap.add_argument("--gguf", help="start `ingot serve` on this GGUF file or Hugging Face folder for the run")
    ap.add_argument("--ingot", default="build/tools/ingot")
    ap.add_argument("--serve-flags", default="", help="extra `ingot serve` flags, one string")
    ap.add_argument("--num-prompts", type=int, default=64)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--request-rate", type=float, default=0.0, help="requests/s (Poisson); 0: use --concurrency")
    ap.add_argument("--input-len", type=int, default=128)
    ap.add_argument("--output-len", type=int, default=128)
    ap.add_argument("--vocab-low", type=int, default=100)
    ap.add_argument("--vocab-high", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", help="write the results as JSON here")
    a = ap.parse_args()

    server = None
    if a.gguf:
        server = subprocess.Popen([a.ingot, "serve", a.gguf, "--port", "0", "--served-model-name", a.model,
                                   *a.serve_flags.split()], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        line = server.stdout.readline()
        if "http://" not in line:
            print("ingot serve did not start: " + line + server.stdout.read(), file=sys.stderr)
            return 1
        a.base_url = "http://" + line.split("http://", 1)[1].split()[0]
        # The server's later output (warnings, a crash's last words) is drained to stderr as it
        # comes, so a pipe that fills never stalls it and a death is explained.
        threading.Thread(target=lambda: [print("[ingot serve] " + l, end="", file=sys.stderr) for l in server.stdout],
                         daemon=True).start()
    if not a.base_url:
        print("give --base-url or --gguf", file=sys.stderr)
        return 2

    rng = random.Random(a.seed)
    prompts = [[rng.randrange(a.vocab_low, a.vocab_high) for _ in range(a.input_len)] for _ in range(a.num_prompts)]
    results = [None] * a.num_prompts
    lock = threading.Lock()
    next_i = [0]

    def worker():
        while True:
            with lock:
                i = next_i[0]
                next_i[0] += 1
            if i >= a.num_prompts:
                return
            results[i] = one_request(a.base_url, a.model, prompts[i], a.output_len)

    t0 = time.perf_counter()
    threads = []
    if a.request_rate > 0:
        arrivals = rng.expovariate
        for i in range(a.num_prompts):
            def run(i=i):
                results[i] = one_request(a.base_url, a.model, prompts[i], a.output_len)
            t = threading.Thread(target=run)
            t.start()
            threads.append(t)
            time.sleep(arrivals(a.request_rate))
    else:
        for _ in range(a.concurrency):
            t = threading.Thread(target=worker)
            t.start()
            threads.append(t)
    for t in threads:
        t.join()
    duration = time.perf_counter() - t0
    if server:
        if server.poll() is not None:
            print(f"ingot serve exited with status {server.returncode} during the run", file=sys.stderr)
        server.terminate()
        server.wait(timeout=30)

    ok = [r for r in results if r and "error" not in r]
    refused = sum(1 for r in results if r and r.get("status") == 503)
    failed = len(results) - len(ok) - refused
    out_tokens = sum(r["tokens"] for r in ok)
    ttft = [r["ttft"] * 1e3 for r in ok]
    tpot = [r["tpot"] * 1e3 for r in ok if r["tpot"] is not None]
    itl = [x * 1e3 for r in ok for x in r["itl"]]
    e2e = [r["e2e"] * 1e3 for r in ok]
    load = f"request rate {a.request_rate}/s" if a.request_rate > 0 else f"concurrency {a.concurrency}"
    summary = {
        "base_url": a.base_url, "model": a.model, "num_prompts": a.num_prompts, "load": load,
        "input_len": a.input_len, "output_len": a.output_len, "duration_s": duration,
        "completed": len(ok), "refused_503": refused, "failed": failed,
        "request_throughput": len(ok) / duration, "output_tok_s": out_tokens / duration,
        "total_tok_s": (out_tokens + a.input_len * len(ok)) / duration,
    }
    print(f"== serving benchmark: {a.num_prompts} prompts, {load}, in {a.input_len} / out {a.output_len} ==")
    print(f"completed {len(ok)}, refused (503) {refused}, failed {failed}, in {duration:.2f} s")
    print(f"request throughput {summary['request_throughput']:.3f} req/s, output {summary['output_tok_s']:.1f} tok/s, "
          f"total {summary['total_tok_s']:.1f} tok/s")
    print(f"{'metric (ms)':<12} {'mean':>10} {'p50':>10} {'p90':>10} {'p99':>10}")
    for name, v in (("TTFT", ttft), ("TPOT", tpot), ("ITL", itl), ("E2E", e2e)):
        mean = statistics.fmean(v) if v else float("nan")
        print(f"{name:<12} {mean:>10.2f} {pct(v, 50):>10.2f} {pct(v, 90):>10.2f} {pct(v, 99):>10.2f}")
        summary[name.lower()] = {"mean": mean, "p50": pct(v, 50), "p90": pct(v, 90), "p99": pct(v, 99)}
    for r in results:
        if r and "error" in r and r.get("status") != 503:
            print("error:", r["error"], file=sys.stderr)
            break
    if a.out:
        with open(a.out, "w") as f:
            json.dump(summary, f, indent=1)
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
