#!/usr/bin/env python3
# Copyright ingot authors. Apache-2.0.
"""The benchmark harness of issues 6 and 7: ingot against PyTorch on the GPU machine, in one call.

For ResNet-50 (torchvision) and BERT-base at sequence length 128 (transformers BertModel from a
BertConfig), both with random weights in eval mode, it
  1. exports the model to ONNX (torch.onnx.export, opset 18, a dynamic batch axis; the dynamo
     exporter first, the legacy one (dynamo=False) when that fails, see --exporter),
  2. builds ingot fp16 CUDA engines (`ingot build --backend cuda --fp16 ... --timing-cache`) for
     batch 1 and the throughput batch (ResNet-50 128, BERT 64): one engine per batch, or one
     profile covering both with --engine-mode shared,
  3. times `ingot run` with and without --cuda-graph at both batches (--no-data-transfers: inputs
     stay on the device; the median of the per-query GPU times of --export-times, CUDA events),
  4. times PyTorch fp16 on the same inputs, device-resident: eager, eager + CUDA graph
     (torch.cuda.CUDAGraph), torch.compile(mode="reduce-overhead") and, with --max-autotune and
     when the time budget allows, mode="max-autotune"; each query between CUDA events after
     warm-up, synchronized per query like ingot's, median,
  5. checks ingot's outputs against PyTorch fp32 on the same inputs (cosine per output, via
     `ingot run --load-inputs name:file.npy --save-outputs DIR`),
  6. prints ONE table (model, batch, ingot with/without CUDA graph, torch eager / graph /
     compile, speedup of ingot over torch.compile) and writes bench.json and bench.md (with the
     five most expensive ingot steps per engine) into --out ($OUT on the device).
Everything honours --max-minutes: a stage that would not fit is skipped and says so; results
are written after every stage, so a run cut short still leaves what it measured.

  python3 bench/harness.py --ingot build-cuda/tools/ingot --out "$OUT" --max-minutes 9
  python3 bench/harness.py --self-test      # table/JSON logic on made-up numbers (no torch, no GPU)

Speedup = torch.compile time / ingot time per query at the same batch (> 1: ingot is faster;
for throughput rows this equals ingot items/s over torch.compile items/s). The ingot time is the
better of with and without --cuda-graph.
"""
import argparse
import datetime
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback

MODELS = {
    # name: (throughput batch, input names, output names, what a query is)
    "resnet50": (128, ["input"], ["logits"], "img"),
    "bert": (64, ["input_ids", "attention_mask"], ["last_hidden_state", "pooler_output"], "seq"),
}
SEQ_LEN = 128
BERT_VOCAB = 30522

# Rough stage costs in seconds, to decide what still fits in the budget (a stage that would not
# fit is skipped, not started). Seen on the H200 (2026-12-01): exports 10-12 s, cold builds 10-21 s,
# the torch stage with torch.compile reduce-overhead 15-24 s per batch; compile was 120 here until
# then, which skipped BERT's torch.compile with 107-120 s still left. torch.compile max-autotune
# took 78.5 s for BERT b1 (session 7); 300 here skipped its b64 row with 217 s left. ResNet-50's
# max-autotune took 307 s at b1 (session 8: Triton conv templates), hence its own cost.
COST = {"export": 60, "build": 60, "ingot_run": 15, "accuracy": 20, "torch": 20, "compile": 45,
        "max_autotune": 150, "max_autotune_resnet50": 320}


class Budget:
    def __init__(self, minutes):
        self.end = time.monotonic() + 60.0 * minutes

    def left(self):
        return self.end - time.monotonic()

    def fits(self, stage, scale=1.0):
        return self.left() > COST[stage] * scale


# ---- results, table and files (no torch needed: tested on the CPU machine by --self-test) -----

def fmt_ms(ms):
    if ms is None:
        return "-"
    return f"{ms:.3f} ms" if ms < 10 else f"{ms:.2f} ms"


def fmt_rate(items_per_s):
    if items_per_s is None:
        return "-"
    return f"{items_per_s / 1000:.1f}k/s" if items_per_s >= 1000 else f"{items_per_s:.0f}/s"


def per_query(entry):
    """Median ms per query of a measurement entry, or None when it did not run."""
    if not isinstance(entry, dict):
        return None
    ms = entry.get("ms")
    return ms if isinstance(ms, (int, float)) and ms > 0 and math.isfinite(ms) else None


def best_ingot(row):
    """(ms, which) of the faster ingot run of a row; (None, None) when neither ran."""
    cands = [(per_query(row.get(k)), k) for k in ("ingot_graph", "ingot")]
    cands = [c for c in cands if c[0] is not None]
    return min(cands) if cands else (None, None)


def speedup(row, baseline="compile"):
    """torch `baseline` time / best ingot time; None when either is missing."""
    ingot_ms, _ = best_ingot(row)
    base = per_query(row.get(baseline))
    return base / ingot_ms if ingot_ms and base else None


COLUMNS = [("ingot_graph", "ingot+graph"), ("ingot", "ingot"), ("eager", "eager"),
           ("eager_graph", "eager+graph"), ("compile", "compile RO"), ("max_autotune", "compile MA")]


def cell(row, key):
    ms = per_query(row.get(key))
    if ms is None:
        e = row.get(key)
        return "skip" if isinstance(e, dict) and e.get("skipped") else "-"
    if row["batch"] == 1:
        return fmt_ms(ms)
    return fmt_rate(row["batch"] * 1000.0 / ms)


def min_cosine(row):
    """The lowest output cosine of a row (nan when any is nan: a non-finite or misshapen output)."""
    acc = row.get("accuracy") or {}
    vals = [v for v in (acc.get("cosine") or {}).values() if isinstance(v, (int, float))]
    if any(math.isnan(v) for v in vals):
        return float("nan")
    return min(vals) if vals else None


def table_rows(results):
    """The table as lists of strings, header first."""
    head = ["model", "batch", "metric"] + [c[1] for c in COLUMNS] + ["vs RO", "vs MA", "cos min"]
    rows = [head]
    for r in results["rows"]:
        s = speedup(r)
        s_ma = speedup(r, "max_autotune")
        cos = min_cosine(r)
        rows.append([r["model"], str(r["batch"]), "latency" if r["batch"] == 1 else r["unit"] + "/s"]
                    + [cell(r, k) for k, _ in COLUMNS]
                    + [f"{s:.2f}x" if s else "-", f"{s_ma:.2f}x" if s_ma else "-",
                       f"{cos:.5f}" if cos is not None else "-"])
    return rows


def align_table(rows, left_columns):
    """Rows of cells (the first one the header) as aligned text lines: the first `left_columns` columns
    left-aligned, the rest right-aligned, a dashed rule under the header. census.py uses it too."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for n, r in enumerate(rows):
        lines.append("  ".join(v.ljust(w) if i < left_columns else v.rjust(w) for i, (v, w) in enumerate(zip(r, widths))))
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return lines


def text_table(results):
    return "\n".join(align_table(table_rows(results), 3))


def markdown(results):
    rows = table_rows(results)
    out = [f"## {results['date']} — benchmark harness (ingot fp16 vs PyTorch fp16)", ""]
    out.append(f"- Commit: {results.get('commit', 'unknown')} (git where the harness ran); binary: "
               f"{results.get('ingot_version', '?')}")
    env = results.get("env", {})
    out.append(f"- Machine: {env.get('gpu', '?')}; torch {env.get('torch', '?')}, "
               f"torchvision {env.get('torchvision', '?')}, transformers {env.get('transformers', '?')}")
    out.append(f"- Command: `{results.get('command', '?')}` (wall {results.get('wall_s', 0):.0f} s)")
    out.append("- Timing: median GPU time per query between CUDA events after warm-up, inputs on the "
               "device, synchronized per query (ingot: `ingot run --no-data-transfers`); batch 1 in ms, "
               "larger batches in items/s. `vs RO`/`vs MA`: torch.compile reduce-overhead / "
               "max-autotune time over the better ingot time (> 1: ingot faster). `cos min`: lowest "
               "cosine of an ingot output against PyTorch fp32 on the same inputs.")
    out.append("")
    out.append("| " + " | ".join(rows[0]) + " |")
    out.append("|" + "|".join("---" for _ in rows[0]) + "|")
    for r in rows[1:]:
        out.append("| " + " | ".join(r) + " |")
    notes = []
    for r in results["rows"]:
        for key, _ in COLUMNS:
            e = r.get(key)
            if isinstance(e, dict) and (e.get("skipped") or e.get("error")):
                notes.append(f"{r['model']} batch {r['batch']} {key}: {e.get('skipped') or e.get('error')}")
        plain = r.get("ingot") if isinstance(r.get("ingot"), dict) else {}
        if plain.get("load_ms") is not None:
            notes.append(f"{r['model']} batch {r['batch']} ingot engine load {plain['load_ms']:.1f} ms"
                         + (f", first query {plain['first_query_ms']:.1f} ms (plans built on first use)"
                            if plain.get("first_query_ms") is not None else ""))
        if r.get("cuda_graph_status") is not None:
            notes.append(f"{r['model']} batch {r['batch']} ingot --cuda-graph: {r['cuda_graph_status'] or 'replaying'}")
        acc = r.get("accuracy") or {}
        if acc.get("cosine"):
            notes.append(f"{r['model']} batch {r['batch']} cosine vs PyTorch fp32: ingot "
                         + ", ".join(f"{k} {v:.6f}" for k, v in acc["cosine"].items())
                         + ("; torch fp16 " + ", ".join(f"{k} {v:.6f}" for k, v in acc["torch_fp16"].items())
                            if acc.get("torch_fp16") else ""))
        elif acc.get("error"):
            notes.append(f"{r['model']} batch {r['batch']} accuracy: {acc['error']}")
    for m in results.get("models", {}).values():
        for b in m.get("builds", []):
            notes.append(f"{m['name']} build ({b['what']}): " + (f"{b['seconds']:.1f} s" if b.get("ok")
                                                                 else f"failed: {b.get('error', '?')}"))
        if m.get("export"):
            notes.append(f"{m['name']} export: {m['export']}")
    for n in results.get("notes", []):
        notes.append(n)
    if notes:
        out += ["", "Notes:", ""] + [f"- {n}" for n in notes]
    for key, prof in sorted(results.get("profiles", {}).items()):
        layers = prof.get("top") or []
        if not layers:
            continue
        out += ["", f"Five most expensive ingot steps, {key} (of {prof.get('total_ms', 0):.3f} ms summed over "
                    f"{prof.get('steps', 0)} steps):", "",
                "| step | op | name | tactic | prec | ms | host ms | % | TFLOP/s | GB/s | roofline % |",
                "|---|---|---|---|---|---|---|---|---|---|---|"]
        for l in layers:
            def num(k, d=2):
                v = l.get(k)
                return f"{v:.{d}f}" if isinstance(v, (int, float)) else "-"
            out.append(f"| {l.get('step')} | {l.get('op')} | {l.get('name')} | {l.get('tactic')} | "
                       f"{l.get('precision', '-')} | {num('medianMs', 4)} | {num('enqueueMs', 4)} | "
                       f"{num('percent', 1)} | {num('tflops')} | "
                       f"{num('gbps', 0)} | {num('rooflinePercent', 1)} |")
    return "\n".join(out) + "\n"


def top_layers(profile, n=5):
    layers = sorted(profile.get("layers", []), key=lambda l: -(l.get("medianMs") or 0))
    return {"top": layers[:n], "total_ms": sum(l.get("medianMs") or 0 for l in profile.get("layers", [])),
            "steps": len(profile.get("layers", []))}


def save(results, out_dir):
    with open(os.path.join(out_dir, "bench.json"), "w") as f:
        json.dump(results, f, indent=1, default=str)
    with open(os.path.join(out_dir, "bench.md"), "w") as f:
        f.write(markdown(results))


def self_test():
    """The table/JSON/markdown logic on made-up numbers; exits non-zero on a wrong figure."""
    results = {"date": "2026-01-01", "commit": "abc1234", "command": "harness --self-test", "wall_s": 1.0,
               "env": {"gpu": "fake"}, "rows": [], "models": {}, "notes": [], "profiles": {}}
    results["rows"] = [
        {"model": "resnet50", "batch": 1, "unit": "img", "ingot": {"ms": 0.50}, "ingot_graph": {"ms": 0.40},
         "eager": {"ms": 5.9}, "eager_graph": {"ms": 0.92}, "compile": {"ms": 0.52},
         "max_autotune": {"skipped": "no --max-autotune"}, "accuracy": {"cosine": {"logits": 0.99995}}},
        {"model": "resnet50", "batch": 128, "unit": "img", "ingot": {"ms": 4.0}, "ingot_graph": {"ms": 4.2},
         "eager": {"ms": 8.0}, "eager_graph": {"ms": 7.5}, "compile": {"ms": 4.8}, "max_autotune": {"ms": 4.4},
         "accuracy": {"cosine": {"logits": 0.99991}}},
        {"model": "bert", "batch": 64, "unit": "seq", "ingot": {"error": "build failed"}, "eager": {"ms": 6.1},
         "compile": {"ms": 4.5}, "accuracy": {"error": "no engine"}},
    ]
    results["profiles"] = {"resnet50 batch 1": top_layers({"layers": [
        {"step": i, "op": "ingot::FusedConv", "name": f"conv{i}", "tactic": "t", "medianMs": 0.01 * i,
         "percent": 1.0, "tflops": 1.5, "gbps": 100.0, "rooflinePercent": 12.0} for i in range(9)]})}
    failures = []

    def expect(name, cond):
        print(("ok   " if cond else "FAIL ") + name)
        if not cond:
            failures.append(name)

    r0, r1, r2 = results["rows"]
    expect("best ingot time is the faster of graph / no graph", best_ingot(r0) == (0.40, "ingot_graph")
           and best_ingot(r1) == (4.0, "ingot"))
    expect("speedup = compile time / best ingot time", abs(speedup(r0) - 0.52 / 0.40) < 1e-12
           and abs(speedup(r1) - 4.8 / 4.0) < 1e-12 and speedup(r2) is None)
    expect("speedup vs max-autotune only where it ran", speedup(r0, "max_autotune") is None
           and abs(speedup(r1, "max_autotune") - 1.1) < 1e-12)
    rows = table_rows(results)
    expect("one table row per measurement row, plus the header", len(rows) == 4)
    expect("batch 1 shows ms, larger batches items/s", rows[1][3] == "0.400 ms" and rows[2][4] == "32.0k/s"
           and rows[2][3] == "30.5k/s")
    expect("the speedup column reads 1.30x for 0.52 ms / 0.40 ms", rows[1][-3] == "1.30x")
    expect("skipped and failed cells", rows[1][8] == "skip" and rows[3][3] == "-" and rows[3][4] == "-")
    expect("cosine column is the lowest output cosine", rows[1][-1] == "0.99995" and rows[3][-1] == "-")
    expect("a nan cosine shows as nan", min_cosine({"accuracy": {"cosine": {"a": 0.99, "b": float("nan")}}}) != 0.99)
    text = text_table(results)
    expect("text table has a header, a rule and three rows", len(text.splitlines()) == 5)
    with tempfile.TemporaryDirectory() as tmp:
        save(results, tmp)
        back = json.load(open(os.path.join(tmp, "bench.json")))
        md = open(os.path.join(tmp, "bench.md")).read()
    expect("bench.json round-trips", back["rows"][0]["ingot_graph"]["ms"] == 0.40)
    md_rows = [l for l in md.splitlines() if l.startswith("| resnet50") or l.startswith("| bert")]
    expect("bench.md holds the table", len(md_rows) == 3 and "1.30x" in md_rows[0])
    expect("bench.md lists the five most expensive steps, longest first",
           "| 8 | ingot::FusedConv | conv8 |" in md and "| 4 | ingot::FusedConv | conv4 |" in md
           and "| 3 | ingot::FusedConv | conv3 |" not in md and md.index("conv8") < md.index("conv4"))
    expect("bench.md notes failures and skips", "bert batch 64 ingot: build failed" in md
           and "max_autotune: no --max-autotune" in md)
    t = parse_times([{"computeMs": 1.0, "latencyMs": 9}, {"computeMs": 3.0}, {"computeMs": 2.0}])
    expect("ingot time is the median of the per-query GPU compute times", t == 2.0)
    expect("CUDA graph status line parsed",
           graph_status("x\nCUDA graph: replaying\n") == ""
           and graph_status("CUDA graph: not used (step 3 'Loop' runs on the host)\n") ==
           "not used (step 3 'Loop' runs on the host)" and graph_status("nothing") is None)
    expect("engine load and first query parsed from ingot run",
           load_facts("engine load: 25.6 ms (read, ...)\nfirst query: 812.0 ms (host wall time)\n")
           == {"load_ms": 25.6, "first_query_ms": 812.0} and load_facts("nothing") == {})
    expect("cosine of equal vectors is 1, of opposite -1",
           abs(cosine([1.0, 2.0, 3.0], [2.0, 4.0, 6.0]) - 1) < 1e-12
           and abs(cosine([1.0, -1.0], [-1.0, 1.0]) + 1) < 1e-12)
    expect("cosine of non-finite data is nan", math.isnan(cosine([1.0, float("inf")], [1.0, 1.0])))
    print(text)
    print(f"{len(failures)} failed")
    return 1 if failures else 0


def parse_times(entries):
    """Median GPU compute time of `ingot run --export-times` entries (latency for CPU engines, which
    have no GPU time: dry runs)."""
    vals = [e["computeMs"] for e in entries if isinstance(e.get("computeMs"), (int, float)) and e["computeMs"] > 0]
    if not vals:
        vals = [e["latencyMs"] for e in entries if isinstance(e.get("latencyMs"), (int, float)) and e["latencyMs"] > 0]
    return statistics.median(vals) if vals else None


def compare_outputs(names, got, want):
    """Cosine per output of ingot's outputs `got` ({name: array}) against the reference list `want`."""
    acc = {"cosine": {}}
    for n, w in zip(names, want):
        if n not in got:
            acc.setdefault("missing", []).append(n)
            continue
        g = got[n]
        if tuple(g.shape) != tuple(w.shape):
            acc.setdefault("shape_mismatch", {})[n] = [list(g.shape), list(w.shape)]
            acc["cosine"][n] = float("nan")
        else:
            acc["cosine"][n] = cosine(g, w)
    return acc


def graph_status(stdout):
    """'' when `ingot run --cuda-graph` says it replays, the reason when not, None when it said nothing."""
    m = re.search(r"^CUDA graph: (.*)$", stdout, re.M)
    if not m:
        return None
    return "" if m.group(1).strip() == "replaying" else m.group(1).strip()


def load_facts(stdout):
    """{'load_ms', 'first_query_ms'} that `ingot run` printed ('engine load: X ms', 'first query: Y ms')."""
    facts = {}
    for key, pat in (("load_ms", r"^engine load: ([0-9.]+) ms"), ("first_query_ms", r"^first query: ([0-9.]+) ms")):
        m = re.search(pat, stdout, re.M)
        if m:
            facts[key] = float(m.group(1))
    return facts


def cosine(a, b):
    """Cosine similarity in float64 of two arrays (numpy arrays or lists); nan when non-finite."""
    import numpy as np
    a = np.asarray(a, dtype=np.float64).ravel()
    b = np.asarray(b, dtype=np.float64).ravel()
    if a.shape != b.shape or not (np.isfinite(a).all() and np.isfinite(b).all()):
        return float("nan")
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    if na == 0 or nb == 0:
        return 1.0 if na == nb else 0.0
    return float(np.dot(a, b) / (na * nb))


# ---- the GPU run ----------------------------------------------------------------------------

class Harness:
    def __init__(self, args):
        self.a = args
        self.budget = Budget(args.max_minutes)
        self.out = os.path.abspath(args.out)
        self.logs = os.path.join(self.out, "logs")
        os.makedirs(self.logs, exist_ok=True)
        self.work = args.work or tempfile.mkdtemp(prefix="ingot-bench-")
        os.makedirs(self.work, exist_ok=True)
        self.t0 = time.monotonic()
        self.results = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                        "command": " ".join([os.path.relpath(sys.argv[0])] + sys.argv[1:]),
                        "commit": args.commit or git_commit(), "rows": [], "models": {}, "notes": [],
                        "profiles": {}, "settings": {k: v for k, v in vars(args).items()}}

    # -- helpers
    def log(self, msg):
        line = f"[{time.monotonic() - self.t0:6.1f}s] {msg}"
        print(line, flush=True)
        with open(os.path.join(self.logs, "harness.log"), "a") as f:
            f.write(line + "\n")

    def save(self):
        self.results["wall_s"] = time.monotonic() - self.t0
        save(self.results, self.out)

    def ingot(self, log_name, *args, cap=600, env=None):
        """Runs the ingot binary with a timeout inside the budget; (rc, stdout, stderr). env: variables
        added to this process's environment for the run."""
        timeout = max(5.0, min(cap, self.budget.left() - 5))
        cmd = [self.a.ingot, *args]
        t = time.monotonic()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                               env={**os.environ, **env} if env else None)
            rc, out, err = p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired as e:
            out = e.stdout or ""
            rc, err = 124, f"timed out after {timeout:.0f} s"
            out = out.decode(errors="replace") if isinstance(out, bytes) else out
        with open(os.path.join(self.logs, log_name + ".log"), "w") as f:
            f.write(f"$ {' '.join(f'{k}={v}' for k, v in (env or {}).items())}{' ' if env else ''}{' '.join(cmd)}\n# rc {rc}, {time.monotonic() - t:.1f} s\n{out}\n--- stderr\n{err}\n")
        return rc, out, err

    # -- models
    def make_model(self, name):
        """(fp32 module for export and reference, fp16 module for torch timing, inputs maker)."""
        import torch
        torch.manual_seed(0)
        if name == "resnet50":
            import torchvision
            m = torchvision.models.resnet50(weights=None)
            if self.a.resnet_weights:
                # Trained weights (e.g. torchvision's IMAGENET1K_V2 file, fetched elsewhere): the
                # model issue 7's cosine bar presumes; random weights amplify any rounding.
                m.load_state_dict(torch.load(self.a.resnet_weights, map_location="cpu", weights_only=True))
                self.results["notes"].append(f"resnet50: weights from {self.a.resnet_weights}")
            elif not self.a.no_bn_calibration:
                # Random weights with BatchNorm's initial running stats (mean 0, var 1) let the
                # residual stream grow block after block; a few training-mode passes on random
                # images give BatchNorm real statistics, so activations stay in fp16 range.
                for mod in m.modules():
                    if isinstance(mod, torch.nn.BatchNorm2d):
                        mod.momentum = None  # cumulative average
                m = m.cuda().train()
                with torch.no_grad():
                    for _ in range(4):
                        m(torch.randn(16, 3, 224, 224, device="cuda"))
            m = m.eval().cuda()
            timed = m
        else:
            import transformers
            cfg = transformers.BertConfig()  # bert-base-uncased dims: 12 layers, hidden 768, 12 heads
            m = bert_with_attention(transformers, cfg, self.a.bert_export_attn).eval().cuda()
            timed = bert_with_attention(transformers, cfg, self.a.bert_torch_attn).eval().cuda()
            timed.load_state_dict(m.state_dict())
            m, timed = BertOutputs(m).eval(), BertOutputs(timed).eval()
        import copy
        timed16 = copy.deepcopy(timed).half().eval()
        return m, timed16

    def make_inputs(self, name, batch, seed):
        import torch
        g = torch.Generator(device="cpu").manual_seed(seed)
        if name == "resnet50":
            return [torch.randn(batch, 3, 224, 224, generator=g)]
        ids = torch.randint(0, BERT_VOCAB, (batch, SEQ_LEN), generator=g, dtype=torch.int64)
        # Padded sequences of random lengths in [SEQ_LEN/2, SEQ_LEN], so the mask matters.
        lengths = torch.randint(SEQ_LEN // 2, SEQ_LEN + 1, (batch,), generator=g)
        mask = (torch.arange(SEQ_LEN)[None, :] < lengths[:, None]).to(torch.int64)
        return [ids, mask]

    def export(self, name, model, path, exporter):
        import torch
        names_in, names_out = MODELS[name][1], MODELS[name][2]
        sample = tuple(t.cuda() for t in self.make_inputs(name, 2, 1))
        dyn = {n: {0: "batch"} for n in names_in + names_out}
        attempts = {"dynamo": [True], "legacy": [False], "auto": [True, False]}[exporter]
        errors = []
        for dynamo in attempts:
            label = "dynamo" if dynamo else "legacy (dynamo=False)"
            try:
                if os.path.exists(path):
                    os.remove(path)
                t = time.monotonic()
                with torch.no_grad():
                    kwargs = dict(input_names=names_in, output_names=names_out, opset_version=18,
                                  dynamic_axes=dyn, dynamo=dynamo)
                    if not dynamo:
                        kwargs["do_constant_folding"] = True
                    torch.onnx.export(model, sample, path, **kwargs)
                return f"{label}, opset 18, {time.monotonic() - t:.1f} s" + (
                    f" (after: {'; '.join(errors)})" if errors else "")
            except Exception as e:  # noqa: BLE001 - any exporter failure falls back
                errors.append(f"{label} failed: {type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}")
                with open(os.path.join(self.logs, f"{name}_export.log"), "a") as f:
                    f.write(traceback.format_exc() + "\n")
        raise RuntimeError("; ".join(errors))

    def build(self, name, onnx_path, engine, batches, what):
        names_in = MODELS[name][1]

        def dims(b):
            return f"{b}x3x224x224" if name == "resnet50" else f"{b}x{SEQ_LEN}"
        lo, hi = min(batches), max(batches)
        opt = hi if len(batches) == 1 else (self.a.shared_opt_batch or hi)
        shape_args = ["--min-shapes", ",".join(f"{n}:{dims(lo)}" for n in names_in),
                      "--opt-shapes", ",".join(f"{n}:{dims(opt)}" for n in names_in),
                      "--max-shapes", ",".join(f"{n}:{dims(hi)}" for n in names_in)]
        if self.a.ingot_backend == "cuda":
            backend_args = ["--backend", "cuda", "--fp16", "--timing-cache", os.path.join(self.work, "timing.cache"),
                            "--tactic-timing", self.a.tactic_timing] + (["--reduced-io"] if self.a.reduced_io else [])
        else:  # a dry run of the plumbing on a CPU machine
            backend_args = ["--backend", "cpu"]
        t = time.monotonic()
        rc, out, err = self.ingot(f"{name}_build_{what.replace(' ', '_')}", "build", onnx_path, "-o", engine,
                                  *backend_args, *shape_args, cap=self.a.build_cap_s)
        rec = {"what": what, "seconds": time.monotonic() - t, "ok": rc == 0 and os.path.exists(engine)}
        if not rec["ok"]:
            rec["error"] = (err.strip().splitlines() or [f"rc {rc}"])[-1][:300]
        summary = [l for l in out.splitlines() if l.strip()]
        rec["summary"] = summary[-3:]
        return rec

    def save_inputs(self, name, batch, tensors):
        files = []
        import numpy as np
        for n, t in zip(MODELS[name][1], tensors):
            f = os.path.join(self.work, f"{name}_b{batch}_{n}.npy")
            a = t.numpy() if hasattr(t, "numpy") else np.asarray(t)
            if self.a.reduced_io and a.dtype == np.float32 and self.a.ingot_backend == "cuda":
                a = a.astype(np.float16)  # --reduced-io engines take fp16 inputs, as the fp16 torch module
            np.save(f, a)
            files.append(f"{n}:{f}")
        return ",".join(files)

    def ingot_time(self, name, engine, batch, load, graph):
        times = os.path.join(self.work, f"{name}_b{batch}_{'graph' if graph else 'plain'}_times.json")
        args = ["run", engine, "--load-inputs", load, "--no-data-transfers", "--warmup-ms", str(self.a.warmup_ms),
                "--iterations", str(self.a.iterations), "--duration", str(self.a.duration_s),
                "--export-times", times]
        if graph:
            args.append("--cuda-graph")
        rc, out, err = self.ingot(f"{name}_b{batch}_run{'_graph' if graph else ''}", *args, cap=120)
        if rc != 0 or not os.path.exists(times):
            return {"error": (err.strip().splitlines() or [f"rc {rc}"])[-1][:300]}, None
        ms = parse_times(json.load(open(times)))
        return {"ms": ms, "queries": len(json.load(open(times))), **load_facts(out)}, graph_status(out)

    def ingot_profile(self, name, engine, batch, load, onnx_path=None):
        """Per-step profile (--onnx: weight shapes, for Conv FLOPs and weight bytes), its top steps
        into the results and its timing chart into --out."""
        prof = os.path.join(self.out, f"{name}_b{batch}_profile.json")
        extra = ["--onnx", onnx_path] if onnx_path and os.path.exists(onnx_path) else []
        rc, out, err = self.ingot(f"{name}_b{batch}_profile", "run", engine, "--load-inputs", load, *extra,
                                  "--dump-profile", "--export-profile", prof, "--iterations", "20", cap=120)
        if rc != 0 or not os.path.exists(prof):
            return
        self.results["profiles"][f"{name} batch {batch}"] = top_layers(json.load(open(prof)))
        # The per-step bar chart (plain SVG, no Graphviz needed).
        self.ingot(f"{name}_b{batch}_chart", "inspect", engine, "--profile", prof, "--timing-svg",
                   os.path.join(self.out, f"{name}_b{batch}_timing.svg"), cap=60)

    def ingot_outputs(self, name, engine, batch, load):
        """The engine's outputs on the loaded inputs: ({output name: array}, None) or (None, error)."""
        import numpy as np
        out_dir = os.path.join(self.work, f"{name}_b{batch}_outputs")
        os.makedirs(out_dir, exist_ok=True)
        rc, out, err = self.ingot(f"{name}_b{batch}_outputs", "run", engine, "--load-inputs", load,
                                  "--save-outputs", out_dir, cap=120)
        if rc != 0:
            return None, (err.strip().splitlines() or [f"rc {rc}"])[-1][:300]
        got = {}
        for n in MODELS[name][2]:
            f = os.path.join(out_dir, n.replace("/", "_") + ".npy")
            if os.path.exists(f):
                got[n] = np.load(f)
        return got, None

    def accuracy(self, name, engine, batch, load, inputs, ref, timed16):
        import torch
        got, error = self.ingot_outputs(name, engine, batch, load)
        if error:
            return {"error": error}
        dev = [t.cuda() for t in inputs]
        with torch.inference_mode():
            want = [o.float().cpu().numpy() for o in as_tuple(ref(*dev))]
            half = [o.float().cpu().numpy()
                    for o in as_tuple(timed16(*[t.half() if t.is_floating_point() else t for t in dev]))]
        acc = compare_outputs(MODELS[name][2], got, want)
        acc["torch_fp16"] = {n: cosine(h, w) for n, h, w in zip(MODELS[name][2], half, want)}
        return acc

    def torch_time(self, fn, sync_mark=False):
        """Median ms per call of fn() between CUDA events, one synchronized query at a time."""
        import torch
        mark = getattr(getattr(torch, "compiler", None), "cudagraph_mark_step_begin", None) if sync_mark else None
        t_end = time.monotonic() + self.a.warmup_ms / 1000.0
        n = 0
        while n < 3 or time.monotonic() < t_end:
            if mark:
                mark()
            fn()
            n += 1
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        times = []
        t0 = time.monotonic()
        while len(times) < self.a.iterations or time.monotonic() - t0 < self.a.duration_s:
            if mark:
                mark()
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        return {"ms": statistics.median(times), "queries": len(times)}

    def torch_modes(self, name, row, timed16, dev16, compile_ok):
        import torch
        try:
            with torch.inference_mode():
                row["eager"] = self.torch_time(lambda: timed16(*dev16))
        except Exception as e:  # noqa: BLE001
            row["eager"] = {"error": f"{type(e).__name__}: {str(e)[:200]}"}
        # Eager + CUDA graph: capture one call on static inputs, replay it.
        try:
            with torch.inference_mode():
                s = torch.cuda.Stream()
                s.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(s):
                    for _ in range(3):
                        timed16(*dev16)
                torch.cuda.current_stream().wait_stream(s)
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    timed16(*dev16)
                row["eager_graph"] = self.torch_time(g.replay)
                del g
        except Exception as e:  # noqa: BLE001
            row["eager_graph"] = {"error": f"{type(e).__name__}: {str(e)[:200]}"}
        modes = [("compile", "reduce-overhead")]
        if self.a.max_autotune:
            modes.append(("max_autotune", "max-autotune"))
        elif "max_autotune" not in row:
            row["max_autotune"] = {"skipped": "not asked (--max-autotune)"}
        for key, mode in modes:
            stage = "compile" if key == "compile" else "max_autotune"
            if stage + "_" + name in COST:
                stage += "_" + name
            if not compile_ok:
                row[key] = {"skipped": "not asked (--no-compile)"}
                continue
            if not self.budget.fits(stage):
                row[key] = {"skipped": f"time budget ({self.budget.left():.0f} s left)"}
                continue
            try:
                torch._dynamo.reset()
                t = time.monotonic()
                fn = torch.compile(timed16, mode=mode, dynamic=False)
                with torch.inference_mode():
                    torch.compiler.cudagraph_mark_step_begin()
                    fn(*dev16)
                    torch.cuda.synchronize()
                    compile_s = time.monotonic() - t
                    row[key] = self.torch_time(lambda: fn(*dev16), sync_mark=True)
                row[key]["compile_s"] = compile_s
                del fn
            except Exception as e:  # noqa: BLE001
                row[key] = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"}
                with open(os.path.join(self.logs, f"{name}_{key}.log"), "a") as f:
                    f.write(traceback.format_exc() + "\n")
            torch.cuda.empty_cache()

    def run_model(self, name):
        import torch
        big, names_in, names_out, unit = MODELS[name]
        big = {"resnet50": self.a.resnet_batch, "bert": self.a.bert_batch}[name] or big
        batches = [big] if self.a.only_big_batch else [1, big]
        info = {"name": name, "builds": []}
        self.results["models"][name] = info
        rows = {b: {"model": name, "batch": b, "unit": unit} for b in batches}
        self.results["rows"] += [rows[b] for b in batches]
        self.log(f"{name}: building the PyTorch model")
        ref, timed16 = self.make_model(name)
        onnx_path = os.path.join(self.work, f"{name}.onnx")
        engines = {}
        if not self.budget.fits("export"):
            info["export"] = "skipped (time budget)"
        else:
            self.log(f"{name}: exporting to ONNX")
            try:
                info["export"] = self.export(name, ref, onnx_path, self.a.exporter)
            except Exception as e:  # noqa: BLE001
                info["export"] = f"failed: {e}"
        self.save()
        if os.path.exists(onnx_path) and not info["export"].startswith(("failed", "skipped")):
            self.build_all(name, onnx_path, batches, big, info, engines)
            # A dynamo export ingot cannot build: try the legacy exporter's graph before giving up.
            if (not engines and self.a.exporter == "auto" and info["export"].startswith("dynamo")
                    and self.budget.fits("export") and self.budget.fits("build", 2)):
                self.log(f"{name}: no engine from the dynamo export; exporting with dynamo=False")
                try:
                    info["export"] += "; ingot could not build it, so: " + self.export(name, ref, onnx_path, "legacy")
                    self.build_all(name, onnx_path, batches, big, info, engines)
                except Exception as e:  # noqa: BLE001
                    info["export"] += f"; legacy export failed: {e}"
            self.save()
        self.measure(name, batches, rows, engines, ref, timed16)
        del ref, timed16
        torch.cuda.empty_cache()

    def build_all(self, name, onnx_path, batches, big, info, engines):
        """Builds the engines of `name`; fills engines[batch] with the path of each one that built."""
        if self.a.engine_mode == "shared":
            plan = [(batches, os.path.join(self.work, f"{name}_b1-{big}.engine"), f"batch 1..{big}")]
        else:
            plan = [([b], os.path.join(self.work, f"{name}_b{b}.engine"), f"batch {b}") for b in batches]
        for bs, path, what in plan:
            if not self.budget.fits("build"):
                info["builds"].append({"what": what, "ok": False, "error": "skipped (time budget)"})
                continue
            self.log(f"{name}: ingot build, {what}")
            rec = self.build(name, onnx_path, path, bs, what)
            info["builds"].append(rec)
            self.log(f"{name}: build {what}: " + (f"{rec['seconds']:.1f} s" if rec["ok"] else rec["error"]))
            if rec["ok"]:
                for b in bs:
                    engines[b] = path
            self.save()
        if self.a.warm_build and engines.get(1) and self.budget.fits("build", 0.5):
            # Same model and shapes again: every timing from the cache (issue 7: <= 10 s).
            rec = self.build(name, onnx_path, os.path.join(self.work, f"{name}_warm.engine"),
                             [1] if self.a.engine_mode != "shared" else batches, "warm timing cache")
            info["builds"].append(rec)
            self.save()

    def measure(self, name, batches, rows, engines, ref, timed16):
        for b in batches:
            row = rows[b]
            inputs = self.make_inputs(name, b, 1000 + b)
            load = self.save_inputs(name, b, inputs)
            engine = engines.get(b)
            if engine:
                for graph in (False, True):
                    key = "ingot_graph" if graph else "ingot"
                    if not self.budget.fits("ingot_run"):
                        row[key] = {"skipped": "time budget"}
                        continue
                    self.log(f"{name}: ingot run batch {b}" + (" --cuda-graph" if graph else ""))
                    row[key], status = self.ingot_time(name, engine, b, load, graph)
                    if graph:
                        row["cuda_graph_status"] = status if status is not None else "no 'CUDA graph:' line"
                if self.budget.fits("accuracy"):
                    self.log(f"{name}: accuracy batch {b}")
                    try:
                        row["accuracy"] = self.accuracy(name, engine, b, load, inputs, ref, timed16)
                    except Exception as e:  # noqa: BLE001
                        row["accuracy"] = {"error": f"{type(e).__name__}: {e}"}
                if self.a.profile and self.budget.fits("ingot_run"):
                    self.ingot_profile(name, engine, b, load, os.path.join(self.work, f"{name}.onnx"))
            else:
                row["ingot"] = row["ingot_graph"] = {"error": "no engine"}
            self.save()
            if not self.budget.fits("torch"):
                row["eager"] = {"skipped": "time budget"}
                continue
            self.log(f"{name}: torch batch {b}")
            dev16 = [t.cuda().half() if t.is_floating_point() else t.cuda() for t in inputs]
            self.torch_modes(name, row, timed16, dev16, compile_ok=not self.a.no_compile)
            self.log(f"{name} batch {b}: " + ", ".join(f"{k} {per_query(row.get(k)):.3f} ms" for k, _ in COLUMNS
                                                       if per_query(row.get(k))))
            self.save()

    def run(self):
        import torch
        env = {"torch": torch.__version__, "python": sys.version.split()[0]}
        try:
            import torchvision
            env["torchvision"] = torchvision.__version__
        except ImportError:
            pass
        try:
            import transformers
            env["transformers"] = transformers.__version__
        except ImportError:
            pass
        if torch.cuda.is_available():
            env["gpu"] = torch.cuda.get_device_name(0)
        self.results["env"] = env
        # fp32 references stay fp32 (no TF32 in matmuls or convolutions).
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        # PyTorch at its best for fixed shapes: cuDNN picks convolution algorithms by timing them.
        torch.backends.cudnn.benchmark = not self.a.no_cudnn_benchmark
        rc, out, _ = self.ingot("version", "--version", cap=30)
        self.results["ingot_version"] = out.strip() if rc == 0 else f"? (rc {rc})"
        sampler = self.start_gpu_sampler()
        try:
            self.run_models()
        finally:
            if sampler:
                sampler.terminate()
                sampler.wait()
        self.save()
        print()
        print(text_table(self.results))
        print(f"\n(wall {time.monotonic() - self.t0:.0f} s; bench.json, bench.md, logs/ in {self.out})")
        if not self.a.keep_work and not self.a.work:
            shutil.rmtree(self.work, ignore_errors=True)
        return 0

    def start_gpu_sampler(self):
        """nvidia-smi sampling SM clock, power, temperature and throttle reasons every 250 ms into
        logs/gpu_clocks.csv for the whole run (session 7 saw BERT b64 at 3.15 ms replayed back to back
        against 2.96 ms with idle gaps between queries: this is the record to tell whether clocks drop
        under sustained load). None where there is no nvidia-smi."""
        if not shutil.which("nvidia-smi"):
            return None
        try:
            with open(os.path.join(self.logs, "gpu_clocks.csv"), "w") as log:  # the child keeps its own descriptor
                log.write(f"# sampling from {datetime.datetime.now(datetime.timezone.utc):%Y/%m/%d %H:%M:%S} UTC, "
                          f"harness log time {time.monotonic() - self.t0:.1f} s\n")
                log.flush()
                return subprocess.Popen(
                    ["nvidia-smi", "--query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,"
                     "clocks_throttle_reasons.active", "--format=csv", "-lms", "250"],
                    stdout=log, stderr=subprocess.DEVNULL)
        except OSError:
            return None

    def run_models(self):
        for name in self.a.models.split(","):
            if name not in MODELS:
                self.results["notes"].append(f"unknown model '{name}' skipped (known: {', '.join(MODELS)})")
                continue
            if self.budget.left() < 90:
                self.results["notes"].append(f"{name}: not run, time budget spent")
                continue
            try:
                self.run_model(name)
            except Exception as e:  # noqa: BLE001 - one model's failure must not lose the other's numbers
                self.results["notes"].append(f"{name}: {type(e).__name__}: {e}")
                with open(os.path.join(self.logs, f"{name}_error.log"), "a") as f:
                    f.write(traceback.format_exc())
            self.save()


def as_tuple(outputs):
    """A model's outputs as a tuple (ResNet-50 returns one tensor, BertOutputs a tuple)."""
    return tuple(outputs) if isinstance(outputs, (tuple, list)) else (outputs,)


def bert_with_attention(transformers, cfg, attn):
    """BertModel with the given attention implementation ("eager": explicit MatMul/Softmax, the
    pattern ingot's optimizer fuses; "sdpa": PyTorch's fused kernel)."""
    try:
        return transformers.BertModel._from_config(cfg, attn_implementation=attn)
    except (TypeError, ValueError, AttributeError):
        import copy
        c = copy.deepcopy(cfg)
        c._attn_implementation = attn
        return transformers.BertModel(c)


def _bert_outputs_class():
    import torch

    class BertOutputs(torch.nn.Module):
        """BertModel returning a tuple (last_hidden_state, pooler_output) from (ids, mask)."""

        def __init__(self, bert):
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask):
            o = self.bert(input_ids=input_ids, attention_mask=attention_mask, return_dict=True)
            return o.last_hidden_state, o.pooler_output

    return BertOutputs


def BertOutputs(bert):  # noqa: N802 - reads as the class it builds
    return _bert_outputs_class()(bert)


def bert_base_last_hidden_state():
    """BERT-base (transformers, random weights, eager attention, no pooler) as a module from
    (input_ids, attention_mask) to the last hidden state, in eval mode: the model of the INT8 and
    tuning scripts (bench/quant_part.sh, bench/tune_part.sh)."""
    import torch
    import transformers

    bert = bert_with_attention(transformers, transformers.BertConfig(), "eager")
    if hasattr(bert, "pooler"):
        bert.pooler = None

    class LastHidden(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask):
            return self.bert(input_ids=input_ids, attention_mask=attention_mask, return_dict=False)[0]

    return LastHidden().eval()


def git_commit():
    try:
        p = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True, timeout=10)
        if p.returncode == 0:
            return p.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        pass
    return os.environ.get("INGOT_COMMIT", "unknown")


def parser():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ingot", default="build-cuda/tools/ingot", help="the ingot binary (built with CUDA)")
    ap.add_argument("--out", default=os.environ.get("OUT", "bench-out"), help="where results go (default $OUT)")
    ap.add_argument("--work", help="scratch folder for models, engines and inputs (default: a temporary one)")
    ap.add_argument("--keep-work", action="store_true", help="keep the temporary scratch folder")
    ap.add_argument("--max-minutes", type=float, default=9.0, help="time budget of the whole run")
    ap.add_argument("--models", default="resnet50,bert", help="comma-separated: resnet50, bert")
    ap.add_argument("--resnet-batch", type=int, default=0, help="ResNet-50 throughput batch (default 128)")
    ap.add_argument("--bert-batch", type=int, default=0, help="BERT throughput batch (default 64)")
    ap.add_argument("--only-big-batch", action="store_true",
                    help="measure the throughput batch only (e.g. to fit torch.compile max-autotune's "
                         "long compile of one row into a run)")
    ap.add_argument("--engine-mode", choices=["per-batch", "shared"], default="per-batch",
                    help="one engine per batch (each tuned at its batch), or one profile min 1 .. max N")
    ap.add_argument("--shared-opt-batch", type=int, default=0, help="opt batch of the shared profile (default N)")
    ap.add_argument("--exporter", choices=["auto", "dynamo", "legacy"], default="auto",
                    help="auto: the dynamo exporter, the legacy one (dynamo=False) when it fails")
    ap.add_argument("--bert-export-attn", default="eager", help="attention implementation exported (eager|sdpa)")
    ap.add_argument("--bert-torch-attn", default="sdpa", help="attention implementation PyTorch is timed with")
    ap.add_argument("--resnet-weights", metavar="PATH",
                    help="ResNet-50 state_dict to load (torchvision's resnet50 layout) instead of random "
                         "weights with calibrated BatchNorm")
    ap.add_argument("--no-bn-calibration", action="store_true",
                    help="keep ResNet-50's initial BatchNorm statistics (activations may overflow fp16)")
    ap.add_argument("--iterations", type=int, default=200, help="timed queries per measurement (at least)")
    ap.add_argument("--duration-s", type=float, default=1.0, help="and at least this long")
    ap.add_argument("--warmup-ms", type=int, default=300, help="warm-up before timing")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    ap.add_argument("--no-cudnn-benchmark", action="store_true",
                    help="leave torch.backends.cudnn.benchmark off (default: on, PyTorch's faster setting)")
    ap.add_argument("--max-autotune", action="store_true", help="also torch.compile(mode='max-autotune')")
    ap.add_argument("--no-profile", dest="profile", action="store_false",
                    help="skip the per-step ingot profile (top-5 steps, timing chart)")
    ap.add_argument("--warm-build", action="store_true", help="rebuild with the warm timing cache, timed")
    ap.add_argument("--reduced-io", action="store_true",
                    help="ingot build --reduced-io: fp16 engine inputs and outputs, as the fp16 PyTorch "
                         "module takes and gives (default: the model's fp32 I/O, cast at the engine's edges)")
    ap.add_argument("--tactic-timing", choices=["stream", "device"], default="stream",
                    help="ingot build --tactic-timing: what tactic timings count (device: GPU time alone, "
                         "for the CUDA-graph replays the ratios use)")
    ap.add_argument("--build-cap-s", type=float, default=120,
                    help="longest one ingot build may take (issue 7 asks for <= 60 s)")
    ap.add_argument("--ingot-backend", choices=["cuda", "cpu"], default="cuda",
                    help="cpu: build CPU fp32 engines (a dry run of the plumbing on a machine without a GPU)")
    ap.add_argument("--commit", help="commit to record (default: git, else $INGOT_COMMIT)")
    ap.add_argument("--self-test", action="store_true", help="check the table/JSON logic on made-up numbers")
    return ap


def main():
    a = parser().parse_args()
    if a.self_test:
        return self_test()
    if not os.path.exists(a.ingot):
        print(f"harness: no ingot binary at '{a.ingot}' (build with -DINGOT_CUDA=ON, or pass --ingot)",
              file=sys.stderr)
        return 2
    a.ingot = os.path.abspath(a.ingot)
    os.makedirs(a.out, exist_ok=True)
    return Harness(a).run()


if __name__ == "__main__":
    sys.exit(main())
