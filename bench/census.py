#!/usr/bin/env python3
# Copyright ingot authors. Apache-2.0.
"""The model census of issue 18: ingot fp16 engines against torch.compile on 27 public architectures.

On the GPU machine (torch, torchvision, timm, transformers, onnx there; no network, random weights),
for every model of the table below (one row per model, five families: cnn, vit, seg, text, decoder):
  1. builds the PyTorch model with random weights in eval mode (BatchNorm statistics settled first:
     train mode, momentum None, 4 random batches; torchvision ViT's zero-initialised head re-drawn),
  2. exports it to ONNX per batch with the default (dynamo) exporter, fp32, static batch; the legacy
     exporter (dynamo=False, opset 18) when dynamo fails, recorded; with --legacy-too also a second row
     for the models marked L: a legacy export with a dynamic batch axis,
  3. builds an ingot fp16 CUDA engine per batch (`ingot build --backend cuda --fp16 --reduced-io
     --tactic-timing device --timing-cache FILE`, a fresh cache per build: cold build seconds; fp16
     inputs and outputs as PyTorch's fp16 model has them, --io fp32 for fp32 ends) and reads the step list
     (`ingot inspect`): steps, steps on `cuda.host_fallback`, Transpose and Cast steps; keeps the
     build's host-fallback warnings (they name the node),
  4. times it as bench/harness.py does (`ingot run --cuda-graph --no-data-transfers --load-inputs ...
     --export-times`: median GPU time per synchronized query, host launch included) and notes whether
     the CUDA graph replayed; an engine with host-fallback steps is timed on a few queries only,
  5. times PyTorch fp16 on the same inputs, device-resident: torch.compile(mode="reduce-overhead")
     under inference_mode (channels_last for cnn/seg models; --cnn-layouts both tries contiguous too
     and keeps the faster), warmed; both one synchronized query at a time (harness.py's torch_time:
     the same CUDA-event timing as ingot's) and back to back (--b2b-count queries between two events),
  6. checks accuracy: cosine of ingot's outputs against PyTorch fp32 on the same inputs, beside
     PyTorch fp16's (eager) own cosine,
  7. writes census.json and census.md (markdown for bench/RESULTS.md: date, command, commit) after
     every stage, so a run cut short keeps what it measured, and prints ONE compact table last.

Back to back, ingot is timed by `ingot run --back-to-back N` (N = --b2b-count queries between two
CUDA events, one synchronize, median of 5 trials), PyTorch the same way; where an engine has no such
number (an old binary, a host-fallback engine timed on a few queries) the back-to-back ratio uses
ingot's synchronized time instead, marked `*` (a lower bound of ingot's ratio).

Two batches per model, each its own engine built from its own static-batch export: batch 1 and a large
one (cnn 64, seg 16, vit/text/decoder 32); --batches overrides. The whole census does not fit one
10-minute device call: run it in parts (--models / --family, --max-minutes skips a model whose rough
cost, from COST below, would not fit) and merge the parts' census.json files (no torch needed):

  # the fast way (16 cores there): prepare in parallel (GPU tests may run beside it), then time
  python3 bench/census.py --ingot build/dev/tools/ingot --out "$OUT/p" --work /tmp/cw --prepare-jobs 8 --prepare-only --models resnet50,bert
  python3 bench/census.py --ingot build/dev/tools/ingot --out "$OUT/census" --work /tmp/cw --max-minutes 7 --models resnet50,bert
  python3 bench/census.py --ingot build/dev/tools/ingot --out "$OUT/census" --max-minutes 8 --family cnn
  python3 bench/census.py --ingot build/dev/tools/ingot --out "$OUT/census" --models bert,gpt2,llama --legacy-too
  python3 bench/census.py --merge part1/census.json part2/census.json --out merged   # table, census.md
  python3 bench/census.py --list          # the model table: family, input, rough cost
  python3 bench/census.py --self-test     # table/geomean/JSON/merge/parsing logic on made-up numbers
  INGOT_CENSUS=1 INGOT_CENSUS_ARGS="--family text" B=build/dev bash bench/device.sh   # from the device script

Ratio = torch.compile time / ingot time per query at the same batch (> 1: ingot is faster). Bars
(issue 18): built with zero host-fallback steps and a CUDA graph, ratio >= 1 per row and geomean >= 1.3
per batch, ingot cosine >= PyTorch fp16's, cold build <= 60 s.
"""
import argparse
import contextlib
import copy
import datetime
import gc
import json
import math
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402  (cosine, timing parse, the ingot runner, torch_time, git_commit, fmt_ms)

FAMILIES = ("cnn", "vit", "seg", "text", "decoder")
BIG_BATCH = {"cnn": 64, "seg": 16, "vit": 32, "text": 32, "decoder": 32}
CHANNELS_LAST_FAMILIES = ("cnn", "seg")  # torch.compile gets channels_last for these
SEQ_LEN = 128
HOST_FALLBACK = "cuda.host_fallback"
BUILD_BAR_S = 60.0


def _m(family, src, arch, inputs, cost, legacy=False, res=224, vocab=0):
    """One census model: where it comes from, what it takes, its rough cost (s) for a full default
    run (two batches: exports, cold builds, ingot runs, torch.compile twice), and whether it gets a
    legacy-export row with --legacy-too."""
    return {"family": family, "src": src, "arch": arch, "inputs": inputs, "cost": cost, "legacy": legacy,
            "res": res, "vocab": vocab}


# Grouped by family, in table order. Costs are guesses from GPU.md/RESULTS.md (exports 5-20 s, cold
# builds 10-30 s, torch.compile reduce-overhead 15-60 s per batch); census.json records each model's
# real wall time ("wall_s") to correct them.
MODELS = {
    "resnet50": _m("cnn", "torchvision", "resnet50", "image", 130, legacy=True),
    "resnext50_32x4d": _m("cnn", "torchvision", "resnext50_32x4d", "image", 140),
    "regnet_y_1_6gf": _m("cnn", "torchvision", "regnet_y_1_6gf", "image", 150),
    "mobilenet_v2": _m("cnn", "torchvision", "mobilenet_v2", "image", 110),
    "mobilenet_v3_large": _m("cnn", "torchvision", "mobilenet_v3_large", "image", 140, legacy=True),
    "efficientnet_b0": _m("cnn", "torchvision", "efficientnet_b0", "image", 150),
    "efficientnet_v2_s": _m("cnn", "torchvision", "efficientnet_v2_s", "image", 190),
    "mnasnet1_0": _m("cnn", "torchvision", "mnasnet1_0", "image", 110),
    "squeezenet1_1": _m("cnn", "torchvision", "squeezenet1_1", "image", 80),
    "shufflenet_v2_x1_0": _m("cnn", "torchvision", "shufflenet_v2_x1_0", "image", 110),
    "densenet121": _m("cnn", "torchvision", "densenet121", "image", 200),
    "convnext_tiny": _m("cnn", "torchvision", "convnext_tiny", "image", 140),
    "vit_b_16": _m("vit", "torchvision", "vit_b_16", "image", 140),
    "swin_t": _m("vit", "torchvision", "swin_t", "image", 190),
    "deit_small": _m("vit", "timm", "deit_small_patch16_224", "image", 120),
    "maxvit_t": _m("vit", "torchvision", "maxvit_t", "image", 260),
    "deeplabv3_mobilenet_v3_large": _m("seg", "torchvision", "deeplabv3_mobilenet_v3_large", "image", 170, res=320),
    "lraspp_mobilenet_v3_large": _m("seg", "torchvision", "lraspp_mobilenet_v3_large", "image", 130, res=320),
    "fcn_resnet50": _m("seg", "torchvision", "fcn_resnet50", "image", 160, res=320),
    "bert": _m("text", "hf", "bert", "text", 130, legacy=True, vocab=30522),
    "distilbert": _m("text", "hf", "distilbert", "text", 100, vocab=30522),
    "roberta": _m("text", "hf", "roberta", "text", 130, vocab=50265),
    "t5_encoder": _m("text", "hf", "t5_encoder", "text", 120, vocab=32128),
    "whisper_encoder": _m("text", "hf", "whisper_encoder", "audio", 140),
    "gpt2": _m("decoder", "hf", "gpt2", "tokens", 140, legacy=True, vocab=50257),
    "llama": _m("decoder", "hf", "llama", "tokens", 120, vocab=32000),
    "qwen2": _m("decoder", "hf", "qwen2", "tokens", 120, vocab=32000),
}

INPUT_NAMES = {"image": ["input"], "text": ["input_ids", "attention_mask"], "tokens": ["input_ids"],
               "audio": ["input_features"]}
WHISPER_MELS, WHISPER_FRAMES = 80, 3000


def input_desc(spec):
    """What one query is, without the batch dim (for the table)."""
    kind = spec["inputs"]
    if kind == "image":
        return f"3x{spec['res']}x{spec['res']}"
    if kind == "audio":
        return f"{WHISPER_MELS}x{WHISPER_FRAMES}"
    return f"s{SEQ_LEN}" + ("+mask" if kind == "text" else "")


# Seconds one prepared model's timed part took on the H200 (census of 2026-12-02, sessions 13 and 14
# (the profiled rows' times divided by 1.25):
# both batches, torch.compile warm from the prepare step). The rough COST above halved was up to 3x
# too high for the transformers, so the last models of a call were skipped while they would fit.
PREPARED_S = {
    "swin_t": 50, "maxvit_t": 117, "t5_encoder": 19, "whisper_encoder": 23, "convnext_tiny": 36,
    "deeplabv3_mobilenet_v3_large": 68, "lraspp_mobilenet_v3_large": 41, "mnasnet1_0": 41, "fcn_resnet50": 56,
    "mobilenet_v3_large": 47, "llama": 42, "roberta": 35, "densenet121": 74, "shufflenet_v2_x1_0": 31, "gpt2": 56,
    "mobilenet_v2": 43, "squeezenet1_1": 40, "efficientnet_v2_s": 90, "regnet_y_1_6gf": 65, "distilbert": 23,
    "qwen2": 34, "bert": 39, "resnet50": 56, "resnext50_32x4d": 37, "vit_b_16": 30, "deit_small": 20,
    "efficientnet_b0": 85,
}


def estimate_s(name, a, n_batches):
    """Rough seconds a model takes with these flags: its COST (two batches, torch.compile) scaled by
    what is skipped or added. Only used to decide whether a model still fits --max-minutes."""
    est = MODELS[name]["cost"] * n_batches / 2.0
    if a.skip_torch:
        est *= 0.45
    elif a.no_compile:
        est *= 0.55
    if getattr(a, "cnn_layouts", "") == "both" and MODELS[name]["family"] in CHANNELS_LAST_FAMILIES and not (
            a.skip_torch or a.no_compile):
        est *= 1.35
    if a.legacy_too and MODELS[name]["legacy"]:
        est *= 1.4
    return est


# Seconds a model's prepare() took on the H200 machine with 8-9 preparing beside it (prep.log of
# the census parts of sessions 16-18, the longest seen). The preparation of a part lasts as long as
# its slowest model: MaxViT's 207 s held session 18's call 3 for 100 s after the others were done,
# and four of its eight models did not fit the time left.
PREP_WALL_S = {
    "distilbert": 44, "gpt2": 46, "qwen2": 52, "squeezenet1_1": 45, "t5_encoder": 49, "llama": 49, "deit_small": 58,
    "whisper_encoder": 60, "convnext_tiny": 60, "vit_b_16": 63, "fcn_resnet50": 65, "mobilenet_v2": 67,
    "resnet50": 67, "mnasnet1_0": 67, "resnext50_32x4d": 68, "shufflenet_v2_x1_0": 70, "bert": 73, "roberta": 74,
    "mobilenet_v3_large": 76, "deeplabv3_mobilenet_v3_large": 86, "lraspp_mobilenet_v3_large": 86,
    "efficientnet_b0": 87, "regnet_y_1_6gf": 94, "densenet121": 98, "efficientnet_v2_s": 110, "swin_t": 140,
    "maxvit_t": 207,
}


def n_batches_of(name, a):
    return len(parse_batches(a.batches)) if a.batches else 2


def timed_estimate_s(name, a, prepared):
    """Rough seconds of a model's timed run: after prepare() its measured time where there is one
    (15% spare, 10% more with --profile), else half the rough cost; unprepared, the rough cost."""
    n = n_batches_of(name, a)
    est = estimate_s(name, a, n)
    if not prepared:
        return est
    measured = PREPARED_S.get(name)
    return measured * (1.25 if a.profile else 1.15) * n / 2.0 if measured else est * 0.5


def plan_part(names, limit_s, a, margin_s=20, prepared=()):
    """The models of one device call, in the given order, that fit `limit_s` seconds: the parallel
    preparation lasts as long as its slowest model (PREP_WALL_S, 90 s when unknown), then the timed
    runs add up. A model that would not fit is left out before anything is prepared for it (its
    preparation would only delay the others). `prepared`: models already prepared (an earlier call
    on the same machine), which add no preparation. Returns (chosen, [(name, why)])."""
    chosen, skipped, prep, timed = [], [], 0.0, 0.0
    for m in names:
        p = prep if m in prepared else max(prep, PREP_WALL_S.get(m, 90))
        t = timed + timed_estimate_s(m, a, prepared=True)
        if p + t + margin_s <= limit_s:
            chosen.append(m)
            prep, timed = p, t
        else:
            own = timed_estimate_s(m, a, prepared=True) + (0.0 if m in prepared else PREP_WALL_S.get(m, 90))
            skipped.append((m, f"about {p:.0f} s preparing + {t:.0f} s timing with the models before it > "
                               f"{limit_s - margin_s:.0f} s (alone about {own:.0f} s)"))
    return chosen, skipped


def select_models(models_arg, family_arg):
    """(names, notes about unknown names/families) from --models and --family: table order, or
    --models' own order (what runs first when the time budget cannot take them all)."""
    notes = []
    names = list(MODELS)
    if family_arg:
        fams = [f.strip() for f in family_arg.split(",") if f.strip()]
        for f in fams:
            if f not in FAMILIES:
                notes.append(f"unknown family '{f}' (known: {', '.join(FAMILIES)})")
        names = [n for n in names if MODELS[n]["family"] in fams]
    if models_arg:
        want = [m.strip() for m in models_arg.split(",") if m.strip()]
        for m in want:
            if m not in MODELS:
                notes.append(f"unknown model '{m}' skipped (see --list)")
        names = [m for m in dict.fromkeys(want) if m in names]
    return names, notes


def parse_batches(text):
    """'1,64' -> [1, 64] (sorted, unique, positive); ValueError otherwise."""
    vals = sorted({int(x) for x in text.split(",") if x.strip()})
    if not vals or vals[0] < 1:
        raise ValueError(f"--batches needs positive integers, got '{text}'")
    return vals


# ---- what ingot printed (no torch: tested by --self-test) -----------------------------------

def parse_build_output(stdout, stderr):
    """Facts from `ingot build`'s summary (tools/build_command.cc) and its warnings: engine steps,
    fused nodes, the builder's own seconds, precision casts, channels-last convs and reformats, and
    the warning lines about steps left on the host (they name the node)."""
    rec = {}
    pats = {"steps_reported": r"^\s*engine steps\s+(\d+)", "fused": r"^\s*engine steps\s+\d+ \((\d+) fused\)",
            "builder_s": r"^\s*build time\s+([0-9.eE+-]+) s", "precision_casts": r"cast layers?\b",
            "channels_last_convs": r"^\s*channels-last\s+(\d+) convolutions",
            "layout_transposes": r"channels-last\s+\d+ convolutions, (\d+) transpose"}
    for key, pat in pats.items():
        if key == "precision_casts":
            m = re.search(r"reduced precision (\d+) layers, (\d+) cast layers", stdout)
            if m:
                rec["reduced_precision_layers"], rec["precision_casts"] = int(m.group(1)), int(m.group(2))
            continue
        m = re.search(pat, stdout, re.M)
        if m:
            rec[key] = float(m.group(1)) if key == "builder_s" else int(m.group(1))
    # Newer builds print '  split fusions    N ...' and '  host fallback    N steps' with one indented
    # line per step ("<op> '<node>' (<domain> opset N): why"); older ones only warn on stderr.
    m = re.search(r"^\s*split fusions\s+(\d+)", stdout, re.M)
    if m:
        rec["split_fusions"] = int(m.group(1))
    # '  build time       12.3 s (optimize 0.4, split 1.0, ..., tactics 8.1, ...)': where a build went.
    m = re.search(r"^\s*build time\s+[0-9.eE+-]+ s \(([^)]*)\)", stdout, re.M)
    if m:
        rec["build_phases"] = {k: float(v) for k, v in re.findall(r"([\w+]+) ([0-9.]+)", m.group(1))}
    lines = stdout.splitlines()
    for k, line in enumerate(lines):
        m = re.match(r"^(\s*)host fallback\s+(\d+) steps?", line)
        if m:
            rec["host_fallback_reported"] = int(m.group(2))
            indent = len(m.group(1))
            steps = []
            for nxt in lines[k + 1:]:
                if len(nxt) - len(nxt.lstrip()) <= indent or not nxt.strip():
                    break
                steps.append(nxt.strip())
            rec["host_steps"] = steps
            break
    warnings = [l.strip() for l in stderr.splitlines() if l.strip().lower().startswith("warning")]
    rec["host_fallback_warnings"] = [w for w in warnings if re.search(r"host|CPU|fallback", w, re.I)]
    rec["other_warnings"] = len(warnings) - len(rec["host_fallback_warnings"])
    return rec


def error_line(stdout, stderr, rc):
    """The one line saying why an ingot command failed: its last 'ingot <command>:' or 'error:' line
    (progress lines come before it on stderr), else the last line, else the exit code."""
    lines = [l.strip() for l in (stderr + "\n" + stdout).splitlines() if l.strip()]
    for l in reversed(lines):
        if re.match(r"^(ingot [a-z]+:|error:)", l):
            return l[:300]
    return (lines[-1] if lines else f"rc {rc}")[:300]


def base_op(op):
    return op.rsplit("::", 1)[-1]


def parse_inspect(text):
    """Engine facts from `ingot inspect E.engine` (tools/inspect_command.cc prints the I/O and one
    step per line: '#  op  name  tactic  prec  layout  fuses', columns at least two spaces apart; it
    has no JSON form): steps, host-fallback steps, Transpose and Cast steps, op counts, and the float
    I/O count (an fp16 engine of fp32 I/O casts each once at its edge, so Casts beyond that count are
    inside the body: 'cast_body_est')."""
    section, steps, io = None, [], []
    header = re.search(r"ingot engine, backend (\S+), (\d+) steps", text)
    for line in text.splitlines():
        if re.match(r"^(inputs|outputs|profiles|memory|steps):\s*$", line):
            section = line.strip()[:-1]
            continue
        if not line.startswith("  "):
            if line.strip() and section == "steps" and not re.match(r"^\s", line):
                section = None
            continue
        parts = re.split(r"\s{2,}", line.strip())
        if section in ("inputs", "outputs") and len(parts) >= 2:
            io.append({"io": section, "name": parts[0], "type": parts[1]})
        elif section == "steps" and parts and parts[0].isdigit() and len(parts) >= 2:
            steps.append({"op": parts[1], "name": parts[2] if len(parts) > 2 else "",
                          "tactic": parts[3] if len(parts) > 3 else "",
                          "host_fallback": HOST_FALLBACK in parts})
    ops = {}
    for s in steps:
        ops[s["op"]] = ops.get(s["op"], 0) + 1
    casts = sum(base_op(s["op"]) == "Cast" for s in steps)
    float_io = sum(t["type"].startswith("f32") for t in io)
    return {"backend": header.group(1) if header else None, "steps": len(steps),
            "host_fallback": sum(s["host_fallback"] for s in steps),
            "host_fallback_steps": [f"{s['op']} '{s['name']}'" for s in steps if s["host_fallback"]][:20],
            "transpose": sum(base_op(s["op"]) == "Transpose" for s in steps), "cast": casts,
            "cast_body_est": max(0, casts - float_io), "ops": dict(sorted(ops.items(), key=lambda kv: -kv[1])),
            "io": io}


# ---- rows, ratios, table and files (no torch: tested by --self-test) -------------------------

def num(x):
    """x when it is a finite positive number, else None."""
    return x if isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0 and math.isfinite(x) else None


def batch_list(row):
    """[(batch, entry)] of a row, smallest batch first."""
    return sorted(((int(b), e) for b, e in (row.get("batches") or {}).items()), key=lambda t: t[0])


def slots(row):
    """(entry of the smallest batch, entry of the largest batch when larger) — the table's b1 and bN."""
    bl = batch_list(row)
    if not bl:
        return None, None
    return bl[0][1], (bl[-1][1] if len(bl) > 1 else None)


def ratio(entry, mode):
    """(torch.compile time / ingot time, lower_bound) for mode 'lat' or 'b2b'; (None, False) when either
    side is missing. Without an ingot back-to-back time, its synchronized time stands in: ingot's real
    back-to-back time is no longer, so the ratio is a lower bound (lower_bound True)."""
    if not entry:
        return None, False
    ing, tor = entry.get("ingot") or {}, entry.get("torch") or {}
    t = num(tor.get(mode + "_ms"))
    i = num(ing.get(mode + "_ms"))
    bound = False
    if i is None and mode == "b2b":
        i, bound = num(ing.get("lat_ms")), True
    if t is None or i is None:
        return None, False
    return t / i, bound


def geomean(values):
    vals = [v for v in values if num(v)]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else None


def min_cos(values):
    """Lowest of a list of cosines; nan when any is nan (a non-finite or misshapen output)."""
    vals = [v for v in values if isinstance(v, (int, float))]
    if any(math.isnan(v) for v in vals):
        return float("nan")
    return min(vals) if vals else None


def row_facts(row):
    """Everything the table shows about a row, from its per-batch entries."""
    bl = batch_list(row)
    builds = [e.get("build") or {} for _, e in bl]
    ok = [b for b in builds if b.get("ok")]
    first = next((b for b in builds if b.get("ok")), {})
    f = {"steps": first.get("steps"), "transpose": first.get("transpose"), "cast": first.get("cast")}
    f["host_fallback"] = max((b.get("host_fallback") or 0 for b in ok), default=None) if ok else None
    if not bl:
        f["built"] = "skip" if row.get("status") == "skipped" else "no"
    elif ok and len(ok) == len(bl):
        f["built"] = "yes"
    elif ok:
        f["built"] = "part"
    else:
        f["built"] = "skip" if row.get("status") == "skipped" else "no"
    graphs = [(e.get("ingot") or {}).get("graph") for _, e in bl if num((e.get("ingot") or {}).get("lat_ms"))]
    f["graph"] = "-" if not graphs else ("yes" if all(graphs) else "no")
    f["cos_ingot"] = min_cos([v for _, e in bl for v in ((e.get("accuracy") or {}).get("cosine") or {}).values()])
    f["cos_torch16"] = min_cos([v for _, e in bl
                                for v in ((e.get("accuracy") or {}).get("torch_fp16") or {}).values()])
    f["degenerate"] = any((e.get("accuracy") or {}).get("degenerate") for _, e in bl)
    secs = [b.get("seconds") for b in ok if num(b.get("seconds"))]
    f["build_s"] = [b.get("seconds") if b.get("ok") else None for b in builds]
    f["build_max_s"] = max(secs) if secs and len(ok) == len(bl) else None
    return f


def exporter_tag(row):
    """dyn, leg, or dyn>leg (the dynamo export failed at some batch and legacy was used)."""
    kinds = [(e.get("export") or {}).get("exporter") for _, e in batch_list(row)]
    kinds = [k for k in kinds if k]
    if row.get("variant") == "legacy":
        return "leg"
    if not kinds:
        return "-"
    return "dyn" if all(k == "dynamo" for k in kinds) else ("leg" if all(k == "legacy" for k in kinds) else "dyn>leg")


def row_label(row):
    return row["model"] + (" (legacy)" if row.get("variant") == "legacy" else "")


def fmt_num(x, digits=3):
    if not num(x):
        return "-"
    return f"{x:.{digits}f}" if x < 10 else (f"{x:.2f}" if x < 100 else f"{x:.1f}")


def ms_pair(entry, who):
    """'lat/b2b' ms of ingot or torch in a batch entry ('-' for what did not run)."""
    e = (entry or {}).get(who) or {}
    if not e:
        return "-"
    if e.get("skipped") and not num(e.get("lat_ms")):
        return "skip"
    if e.get("error") and not num(e.get("lat_ms")):
        return "err"
    return f"{fmt_num(e.get('lat_ms'))}/{fmt_num(e.get('b2b_ms'))}"


def ratio_text(entry):
    """'lat ratio/b2b ratio' of a batch entry; '*' on a b2b ratio that uses ingot's synchronized time."""
    r1, _ = ratio(entry, "lat")
    r2, bound = ratio(entry, "b2b")
    if r1 is None and r2 is None:
        return "-"
    a = fmt_ratio(r1) if r1 is not None else "-"
    b = (fmt_ratio(r2) + ("*" if bound else "")) if r2 is not None else "-"
    return f"{a}/{b}"


def fmt_ratio(r):
    """Two decimals; two significant digits below 0.1 (a host-fallback row at 0.0032x is not 0.00x)."""
    return f"{r:.2f}" if r >= 0.1 else f"{r:.2g}"


def cos_text(x):
    if x is None:
        return "-"
    return "nan" if math.isnan(x) else f"{x:.6f}"


def slot_labels(rows):
    """Header labels of the two batch slots: 'b1' (or 'b<S>' when the smallest batch is not 1) and 'bN'."""
    smalls = {batch_list(r)[0][0] for r in rows if batch_list(r)}
    small = "b1" if smalls <= {1} else ("b" + str(smalls.pop()) if len(smalls) == 1 else "bS")
    return small, "bN"


def table_rows(results):
    """The table as lists of strings, header first (text and markdown share it)."""
    rows = results["rows"]
    s, n = slot_labels(rows)
    head = ["model", "fam", "exp", "built", "steps", "fb", "T/C", "graph", "cos ingot", "cos t16",
            f"{s} ingot", f"{s} torch", f"{s} x", "N", f"{n} ingot", f"{n} torch", f"{n} x", "build s"]
    out = [head]
    for r in rows:
        f = row_facts(r)
        e1, e2 = slots(r)
        big = batch_list(r)[-1][0] if len(batch_list(r)) > 1 else None
        tc = f"{f['transpose']}/{f['cast']}" if f["transpose"] is not None else "-"
        builds = "/".join(f"{x:.0f}" if num(x) else "-" for x in f["build_s"]) or "-"
        out.append([row_label(r), r.get("family", "?"), exporter_tag(r), f["built"],
                    str(f["steps"]) if f["steps"] is not None else "-",
                    str(f["host_fallback"]) if f["host_fallback"] is not None else "-", tc, f["graph"],
                    cos_text(f["cos_ingot"]), "degen" if f["degenerate"] else cos_text(f["cos_torch16"]),
                    ms_pair(e1, "ingot"), ms_pair(e1, "torch"), ratio_text(e1),
                    str(big) if big else "-", ms_pair(e2, "ingot"), ms_pair(e2, "torch"), ratio_text(e2), builds])
    return out


def summary(results):
    """Geomeans of the ratios per batch slot and mode, and how many rows meet each bar of issue 18."""
    rows = results["rows"]
    out = {"rows": len(rows), "geomean": {}}
    for slot in (0, 1):
        for mode in ("lat", "b2b"):
            vals, bound = [], False
            for r in rows:
                e = slots(r)[slot]
                v, b = ratio(e, mode)
                if v is not None:
                    vals.append(v)
                    bound |= b
            g = geomean(vals)
            out["geomean"][f"{'b1' if slot == 0 else 'bN'}_{mode}"] = {
                "value": g, "n": len(vals), "lower_bound": bound}
    facts = [(r, row_facts(r)) for r in rows]
    measured = [(r, f) for r, f in facts if r.get("status") != "skipped"]

    def count(pred, among=measured):
        return {"met": sum(1 for r, f in among if pred(r, f)), "of": len(among)}

    bars = {
        "built (every batch)": count(lambda r, f: f["built"] == "yes"),
        "zero host-fallback steps": count(lambda r, f: f["host_fallback"] == 0),
        "CUDA graph": count(lambda r, f: f["graph"] == "yes"),
        "cold build <= 60 s": count(lambda r, f: f["build_max_s"] is not None and f["build_max_s"] <= BUILD_BAR_S),
    }
    for slot, label in ((0, "b1"), (1, "bN")):
        for mode in ("lat", "b2b"):
            with_ratio = [(r, f) for r, f in measured if ratio(slots(r)[slot], mode)[0] is not None]
            bars[f"{label} {mode} ratio >= 1.0"] = count(
                lambda r, f, s=slot, m=mode: ratio(slots(r)[s], m)[0] >= 1.0, with_ratio)
    cos_rows = [(r, f) for r, f in measured if f["cos_ingot"] is not None and f["cos_torch16"] is not None
                and not f["degenerate"]]
    bars["cosine >= torch fp16"] = count(
        lambda r, f: not math.isnan(f["cos_ingot"]) and (math.isnan(f["cos_torch16"])
                                                         or f["cos_ingot"] >= f["cos_torch16"]), cos_rows)
    out["bars"] = bars
    out["degenerate"] = [row_label(r) for r, f in facts if f["degenerate"]]
    return out


LEGEND = ("ms per query as lat/b2b: lat = one synchronized query at a time (CUDA events, host launch included), "
          "b2b = back to back (N queries between two CUDA events, one sync)\n"
          "x = torch.compile / ingot (> 1: ingot faster) as lat/b2b, * = against ingot's synchronized time (a lower "
          "bound); fb = host-fallback steps; T/C = Transpose/Cast steps; build s = cold, per batch")


def summary_lines(results):
    s = summary(results)
    lines = []
    for key, g in s["geomean"].items():
        if g["value"] is not None:
            lines.append(f"geomean {key.replace('_', ' ')}: {g['value']:.2f}x over {g['n']} rows"
                         + (" (lower bound: ingot b2b from its synchronized time)" if g["lower_bound"] else ""))
        else:
            lines.append(f"geomean {key.replace('_', ' ')}: -")
    lines.append("bars: " + "; ".join(f"{k} {v['met']}/{v['of']}" for k, v in s["bars"].items()))
    if s["degenerate"]:
        lines.append("degenerate reference output (cosine says nothing): " + ", ".join(s["degenerate"]))
    return lines


def text_table(results):
    return "\n".join(harness.align_table(table_rows(results), 4) + [LEGEND] + summary_lines(results))


def row_notes(r):
    """The markdown notes of one row: why it did not build or run, what the builder warned, how
    PyTorch ran."""
    notes, label = [], row_label(r)
    if r.get("reason"):
        notes.append(f"{label}: {r['reason']}")
    for b, e in batch_list(r):
        ex = e.get("export") or {}
        if ex.get("fallback_from"):
            notes.append(f"{label} b{b} export: legacy, after {ex['fallback_from']}")
        bld = e.get("build") or {}
        w = bld.get("host_steps") or bld.get("host_fallback_warnings") or []
        if w:
            notes.append(f"{label} b{b} build: {len(w)} host-fallback steps: "
                         + " | ".join(x[:160] for x in w[:3]) + (" ..." if len(w) > 3 else ""))
        if bld.get("split_fusions"):
            notes.append(f"{label} b{b} build: {bld['split_fusions']} fused layers split back into GPU steps")
        if bld.get("cast_body_est"):
            notes.append(f"{label} b{b}: {bld['cast_body_est']} Cast steps beyond the edge casts of the float I/O")
        ing = e.get("ingot") or {}
        if ing.get("graph_status"):
            notes.append(f"{label} b{b} ingot --cuda-graph: not used ({ing['graph_status']}), timed without it")
        if ing.get("few_queries"):
            notes.append(f"{label} b{b} ingot timed on {ing.get('queries', '?')} queries only (host fallback)")
        if ing.get("skipped"):
            notes.append(f"{label} b{b} ingot: {ing['skipped']}")
        alt = e.get("ingot_alt") or {}
        if alt:
            notes.append(f"{label} b{b} ingot with {alt.get('env')}: "
                         + (alt["error"] if alt.get("error") else
                            f"{ms_pair(e, 'ingot_alt')} ms (lat/b2b), against {ms_pair(e, 'ingot')} ms"))
        tor = e.get("torch") or {}
        if tor.get("layout") and num(tor.get("lat_ms")):
            tried = tor.get("tried") or {}
            other = "; ".join(f"{k}: {fmt_num(v.get('lat_ms'))}/{fmt_num(v.get('b2b_ms'))} ms" if num(v.get("lat_ms"))
                              else f"{k}: {v.get('error') or v.get('skipped') or '-'}"
                              for k, v in tried.items() if k != tor["layout"])
            notes.append(f"{label} b{b} torch.compile: {tor['layout']}, compile {fmt_num(tor.get('compile_s'), 1)} s"
                         + (f" (also tried {other})" if other else "")
                         + (f"; eager {fmt_num((e.get('eager') or {}).get('lat_ms'))}/"
                            f"{fmt_num((e.get('eager') or {}).get('b2b_ms'))} ms" if e.get("eager") else ""))
        elif tor.get("error") or tor.get("skipped"):
            notes.append(f"{label} b{b} torch.compile: {tor.get('error') or tor.get('skipped')}")
        acc = e.get("accuracy") or {}
        if acc.get("error"):
            notes.append(f"{label} b{b} accuracy: {acc['error']}")
        if acc.get("degenerate"):
            notes.append(f"{label} b{b}: the fp32 reference output is constant (degenerate): cosine says nothing")
        if acc.get("non_finite"):
            notes.append(f"{label} b{b}: NaN/Inf in ingot's outputs; ingot run --check-finite: "
                         + " | ".join(acc["non_finite"][:5]))
    meta = r.get("meta") or {}
    if meta.get("attention"):
        notes.append(f"{label}: attention exported {meta['attention'].get('export')}, "
                     f"timed in PyTorch {meta['attention'].get('torch')}")
    return notes


def markdown(results):
    rows = table_rows(results)
    env = results.get("env", {})
    out = [f"## {results.get('date', '?')} — model census (issue 18): ingot fp16 vs torch.compile reduce-overhead", ""]
    parts = results.get("parts")
    if parts:
        out.append(f"Merged from {len(parts)} census runs:")
        for p in parts:
            out.append(f"- {p.get('date', '?')}, commit {p.get('commit', '?')}, binary {p.get('ingot_version', '?')}, "
                       f"`{p.get('command', '?')}` (wall {p.get('wall_s') or 0:.0f} s, {p.get('rows', 0)} rows)")
    else:
        out.append(f"- Commit: {results.get('commit', 'unknown')}; binary: {results.get('ingot_version', '?')}")
        out.append(f"- Command: `{results.get('command', '?')}` (wall {results.get('wall_s') or 0:.0f} s)")
    out.append(f"- Machine: {env.get('gpu', '?')}; torch {env.get('torch', '?')}, torchvision "
               f"{env.get('torchvision', '?')}, timm {env.get('timm', '?')}, transformers {env.get('transformers', '?')}, "
               f"onnx {env.get('onnx', '?')}")
    st = results.get("settings", {})
    out.append("- Models: random weights, BatchNorm statistics settled on 4 random batches (train mode, momentum "
               "None); exported per batch with the default (dynamo) exporter, static batch (legacy rows: "
               "dynamo=False, opset 18, a dynamic batch axis, one export built per batch with --shapes); one "
               "ingot engine per batch: `ingot build --backend cuda --fp16 --tactic-timing "
               f"{st.get('tactic_timing', 'device')}` with a fresh timing cache (cold)"
               + (f" and `{st.get('build_args')}`" if st.get("build_args") else "") + ".")
    out.append(f"- Timing, ms per query, median, inputs on the device: lat = one query at a time, CUDA events "
               f"around it, synchronized before the next (host launch included): ingot `ingot run E --cuda-graph "
               f"--no-data-transfers --load-inputs ... --iterations {st.get('iterations', '?')} --duration "
               f"{st.get('duration_s', '?')} --warmup-ms {st.get('warmup_ms', '?')} --export-times` (median GPU "
               "time per query), PyTorch harness.py's torch_time with the same counts; b2b = "
               f"{st.get('b2b_count', '?')} queries between two CUDA events, then one sync, median of the trials "
               f"(ingot: `--back-to-back {st.get('b2b_count', '?')}`, 5 trials; a `*` ratio uses ingot's lat, a "
               "lower bound, where that number is missing). PyTorch: fp16 "
               "module, torch.compile(mode='reduce-overhead', dynamic=False) under inference_mode, "
               "cudagraph_mark_step_begin before each call, warmed; channels_last for cnn/seg models.")
    out.append("- cos: lowest output cosine over both batches against PyTorch fp32 (TF32 off) on the same "
               "inputs: ingot fp16 engine, and PyTorch fp16 eager (t16). x: torch.compile / ingot (> 1: ingot faster).")
    out.append("")
    out.append("| " + " | ".join(rows[0]) + " |")
    out.append("|" + "|".join("---" for _ in rows[0]) + "|")
    for r in rows[1:]:
        out.append("| " + " | ".join(c.replace("|", "/") for c in r) + " |")
    out += [""] + [f"- {l}" for l in summary_lines(results)]
    notes = []
    for r in results["rows"]:
        notes += row_notes(r)
    notes += results.get("notes", [])
    if notes:
        out += ["", "Notes:", ""] + [f"- {n}" for n in notes]
    return "\n".join(out) + "\n"


def save(results, out_dir):
    with open(os.path.join(out_dir, "census.json"), "w") as f:
        json.dump(results, f, indent=1, default=str)
    with open(os.path.join(out_dir, "census.md"), "w") as f:
        f.write(markdown(results))


def row_key(row):
    return f"{row.get('model')}/{row.get('variant', 'dynamo')}"


def row_weight(row):
    """How much a row measured (a merge keeps, per model, the later row unless it measured less)."""
    return sum(1 for _, e in batch_list(row) for k in ("build", "ingot", "torch")
               if (e.get(k) or {}).get("ok") or num((e.get(k) or {}).get("lat_ms")))


def merge(results_list):
    """One results dict from several census.json contents: rows by model and variant (a later run's row
    replaces an earlier one unless it measured less, e.g. skipped), in the model table's order."""
    rows, parts, notes = {}, [], []
    for res in results_list:
        parts.append({k: res.get(k) for k in ("date", "commit", "command", "wall_s", "ingot_version")}
                     | {"rows": len(res.get("rows", []))})
        notes += res.get("notes", [])
        for r in res.get("rows", []):
            k = row_key(r)
            if k not in rows or row_weight(r) >= row_weight(rows[k]):
                rows[k] = r
    order = {n: i for i, n in enumerate(MODELS)}
    merged = sorted(rows.values(), key=lambda r: (order.get(r.get("model"), len(order)), r.get("variant") != "dynamo"))
    last = results_list[-1] if results_list else {}
    commits = sorted({p["commit"] for p in parts if p.get("commit")})
    return {"kind": "ingot-census", "date": ", ".join(sorted({(p.get("date") or "?")[:10] for p in parts})),
            "commit": ", ".join(commits), "command": "bench/census.py --merge ...", "env": last.get("env", {}),
            "settings": last.get("settings", {}), "ingot_version": last.get("ingot_version"),
            "parts": parts, "rows": merged, "notes": notes}


# ---- the GPU run -----------------------------------------------------------------------------

def flat_outputs(o):
    """A model's outputs as a flat tuple of tensors: torchvision's tensor or OrderedDict (segmentation),
    transformers' tuple or ModelOutput; None entries dropped."""
    import torch
    if isinstance(o, torch.Tensor):
        return (o,)
    if isinstance(o, dict):
        vals = list(o.values())
    elif isinstance(o, (tuple, list)):
        vals = list(o)
    elif hasattr(o, "to_tuple"):
        vals = list(o.to_tuple())
    else:
        return ()
    out = []
    for v in vals:
        if isinstance(v, torch.Tensor):
            out.append(v)
        elif isinstance(v, (tuple, list, dict)):
            out.extend(flat_outputs(v))
    return tuple(out)


def wrap(model, names, kwargs, by_keyword):
    """nn.Module taking the census inputs positionally (what torch.onnx.export and torch.compile see)
    and returning a flat tuple of tensors. transformers models get their inputs by keyword, plus
    `kwargs` (use_cache=False, return_dict=False)."""
    import torch

    def call(m, args):
        if by_keyword:
            return flat_outputs(m(**dict(zip(names, args)), **kwargs))
        return flat_outputs(m(*args, **kwargs))

    class One(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, a):
            return call(self.m, (a,))

    class Two(One):
        def forward(self, a, b):
            return call(self.m, (a, b))

    return (One if len(names) == 1 else Two)(model)


def hf_model(cls, cfg, attn):
    """A transformers model of `cls` from `cfg` with the attention implementation `attn` ('eager':
    explicit MatMul/Softmax, the pattern ingot's optimizer fuses; 'sdpa': PyTorch's fused kernel), or
    the class default when it refuses; (model, implementation used)."""
    try:
        m = cls._from_config(copy.deepcopy(cfg), attn_implementation=attn)
    except (TypeError, ValueError, AttributeError, ImportError):
        c = copy.deepcopy(cfg)
        try:
            c._attn_implementation = attn
            m = cls(c)
        except (TypeError, ValueError, AttributeError, ImportError):
            m = cls(copy.deepcopy(cfg))
    used = getattr(m.config, "_attn_implementation", None) or "default"
    return m, used


def torch_settings():
    """fp32 references stay fp32 (no TF32); PyTorch at its best for fixed shapes (cuDNN benchmark)."""
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True


def _prepare_one(job):
    """A --prepare-jobs worker: Census.prepare of one model in this (spawned) process; (name, seconds
    or the error line)."""
    args, work, name = job
    a = copy.copy(args)
    a.work = work
    c = Census(a)
    try:
        return c.prepare(name)
    except Exception:  # noqa: BLE001 - the timed run redoes this model
        return name, c.log_exception(name, "prepare")


class Built:
    """A census model on the GPU: `ref` (fp32, exported and the accuracy reference), `timed` (fp32,
    what PyTorch is timed with, after .half()), `meta` (what was built and how)."""

    def __init__(self, ref, timed, meta):
        self.ref, self.timed, self.meta = ref, timed, meta


class Census(harness.Harness):
    """The census run. Reuses harness.Harness's `ingot()` (the binary under a timeout inside the
    budget, logged), `torch_time()` (PyTorch's synchronized per-query timing) and the GPU clock
    sampler; everything model-specific is here."""

    def __init__(self, args):  # noqa: super().__init__ is harness-specific; the fields it reads are set here
        self.a = args
        self.budget = harness.Budget(args.max_minutes)
        self.out = os.path.abspath(args.out)
        self.logs = os.path.join(self.out, "logs")
        os.makedirs(self.logs, exist_ok=True)
        self.work = os.path.abspath(args.work) if args.work else tempfile.mkdtemp(prefix="ingot-census-")
        os.makedirs(self.work, exist_ok=True)
        self.t0 = time.monotonic()
        self.current_names = []  # input names of the model being measured
        self.results = {"kind": "ingot-census",
                        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                        "command": " ".join([os.path.relpath(sys.argv[0])] + sys.argv[1:]),
                        "commit": args.commit or harness.git_commit(), "rows": [], "notes": [],
                        "settings": {k: v for k, v in vars(args).items() if k not in ("merge", "self_test")}}

    # -- plumbing
    def log(self, msg):
        line = f"[{time.monotonic() - self.t0:6.1f}s] {msg}"
        print(line, flush=True)
        with open(os.path.join(self.logs, "census.log"), "a") as f:
            f.write(line + "\n")

    def save(self):
        self.results["wall_s"] = time.monotonic() - self.t0
        save(self.results, self.out)

    def log_exception(self, tag, what):
        """Writes the traceback to logs/<tag>_error.log; returns the one-line reason for the row."""
        with open(os.path.join(self.logs, f"{tag}_error.log"), "a") as f:
            f.write(f"== {what}\n{traceback.format_exc()}\n")
        e = sys.exc_info()[1]
        first = str(e).strip().splitlines()[0][:240] if str(e).strip() else ""
        return f"{what}: {type(e).__name__}: {first}"

    def batches(self, spec):
        return parse_batches(self.a.batches) if self.a.batches else [1, BIG_BATCH[spec["family"]]]

    # -- models and inputs
    def make_model(self, name, state=None):
        """The PyTorch model of census row `name` on the GPU, eval mode, random weights, BatchNorm
        statistics settled; with `state` (a --prepare-jobs worker's), its weights and statistics
        instead: the very weights the worker exported."""
        import torch
        spec = MODELS[name]
        torch.manual_seed(0)
        meta = {"source": spec["src"], "arch": spec["arch"]}
        names = INPUT_NAMES[spec["inputs"]]
        if spec["src"] == "torchvision":
            import torchvision
            kw = {"weights": None}
            if spec["family"] == "seg":
                kw.update(weights_backbone=None, aux_loss=False)
            m = torchvision.models.get_model(spec["arch"], **kw)
            if spec["arch"].startswith("vit_"):
                # torchvision zero-initialises ViT's head: the output would be all zeros.
                head = m.heads.head
                torch.nn.init.normal_(head.weight, std=0.02)
                torch.nn.init.zeros_(head.bias)
                meta["note"] = "ViT head re-drawn (torchvision initialises it to zero)"
            ref = wrap(m, names, {}, by_keyword=False)
            timed = ref
        elif spec["src"] == "timm":
            import timm
            ref = timed = wrap(timm.create_model(spec["arch"], pretrained=False), names, {}, by_keyword=False)
        else:
            ref, timed, meta2 = self.make_hf(spec)
            meta.update(meta2)
        ref = ref.cuda().eval()
        if state is not None:
            ref.load_state_dict(state["weights"])
            meta["batchnorms"] = state["batchnorms"]
        else:
            meta["batchnorms"] = self.settle_batchnorm(ref, spec, meta)
        timed = timed.cuda().eval()
        if timed is not ref:
            timed.load_state_dict(ref.state_dict())
        meta["parameters"] = sum(p.numel() for p in ref.parameters())
        return Built(ref, timed, meta)

    def make_hf(self, spec):
        """(export/reference module, timed module, meta) for a transformers model: the exported one with
        --export-attn (default eager), the timed one with --torch-attn (default sdpa), same weights."""
        import torch
        import transformers as T
        arch = spec["arch"]
        decoder = spec["family"] == "decoder"
        if arch == "bert":
            cls, cfg = T.BertModel, T.BertConfig()
        elif arch == "distilbert":
            cls, cfg = T.DistilBertModel, T.DistilBertConfig()
        elif arch == "roberta":  # roberta-base's dims
            cls, cfg = T.RobertaModel, T.RobertaConfig(vocab_size=50265, max_position_embeddings=514,
                                                       type_vocab_size=1, pad_token_id=1)
        elif arch == "t5_encoder":  # t5-small's dims (T5Config's defaults)
            cls, cfg = T.T5EncoderModel, T.T5Config()
        elif arch == "whisper_encoder":  # whisper-tiny's dims (WhisperConfig's defaults)
            try:
                from transformers.models.whisper.modeling_whisper import WhisperEncoder as cls
            except ImportError:
                cls = None
            cfg = T.WhisperConfig()
        elif arch == "gpt2":
            cls, cfg = T.GPT2LMHeadModel, T.GPT2Config(n_layer=6)
        elif arch == "llama":  # RMSNorm, rotary embeddings, GQA (2 KV heads), gated SiLU MLP
            cls, cfg = T.LlamaForCausalLM, T.LlamaConfig(
                vocab_size=32000, hidden_size=512, intermediate_size=1536, num_hidden_layers=4,
                num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=2048, tie_word_embeddings=False)
        elif arch == "qwen2":
            cls, cfg = T.Qwen2ForCausalLM, T.Qwen2Config(
                vocab_size=32000, hidden_size=512, intermediate_size=1536, num_hidden_layers=4,
                num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=2048, tie_word_embeddings=False)
        else:
            raise ValueError(f"no transformers recipe for '{arch}'")
        if decoder:
            cfg.use_cache = False
        if cls is None:  # WhisperEncoder not importable by path: the full model's encoder
            def cls_build(c, attn):
                full, used = hf_model(T.WhisperModel, c, attn)
                return full.get_encoder(), used
        else:
            def cls_build(c, attn):
                return hf_model(cls, c, attn)
        exp, exp_attn = cls_build(cfg, self.a.export_attn)
        tim, tim_attn = cls_build(cfg, self.a.torch_attn)
        names = INPUT_NAMES[spec["inputs"]]
        kwargs = {"return_dict": False}
        if decoder:
            kwargs["use_cache"] = False
        # transformers versions differ in which call options a model takes: drop the ones refused.
        sample = [t.cuda() for t in self.make_inputs(spec, 2, 7)]
        exp = exp.cuda().eval()
        for drop in (None, "return_dict"):
            if drop:
                kwargs.pop(drop, None)
            try:
                with torch.no_grad():
                    flat = wrap(exp, names, kwargs, True)(*sample)
                if not flat:
                    raise RuntimeError("the model returned no tensor")
                break
            except TypeError:
                if drop:
                    raise
        meta = {"attention": {"export": exp_attn, "torch": tim_attn}, "call_kwargs": dict(kwargs),
                "config": {k: getattr(cfg, k) for k in ("hidden_size", "d_model", "num_hidden_layers", "n_layer",
                                                         "num_attention_heads", "num_key_value_heads", "vocab_size")
                           if hasattr(cfg, k)}}
        return wrap(exp, names, kwargs, True), wrap(tim, names, kwargs, True), meta

    def settle_batchnorm(self, model, spec, meta):
        """Random weights with BatchNorm's initial statistics (mean 0, var 1) let activations grow layer
        after layer, so outputs are near-degenerate and a cosine check says nothing: a few train-mode
        passes on random inputs with a cumulative average (momentum None) give real statistics. Returns
        the number of BatchNorm layers."""
        import torch
        bns = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
        if not bns:
            return 0
        for bn in bns:
            bn.momentum = None
            bn.reset_running_stats()
        model.train()
        with torch.no_grad():
            for i in range(4):
                model(*[t.cuda() for t in self.make_inputs(spec, 16 if spec["family"] != "seg" else 8, 100 + i)])
        model.eval()
        return len(bns)

    def make_inputs(self, spec, batch, seed):
        """CPU tensors of one query at `batch`: images N(0,1), token ids, padded masks (random lengths in
        [SEQ_LEN/2, SEQ_LEN], so the mask matters), or Whisper log-mel features."""
        import torch
        g = torch.Generator(device="cpu").manual_seed(seed)
        kind = spec["inputs"]
        if kind == "image":
            return [torch.randn(batch, 3, spec["res"], spec["res"], generator=g)]
        if kind == "audio":
            return [torch.randn(batch, WHISPER_MELS, WHISPER_FRAMES, generator=g)]
        ids = torch.randint(3, spec["vocab"], (batch, SEQ_LEN), generator=g, dtype=torch.int64)
        if kind == "tokens":
            return [ids]
        lengths = torch.randint(SEQ_LEN // 2, SEQ_LEN + 1, (batch,), generator=g)
        mask = (torch.arange(SEQ_LEN)[None, :] < lengths[:, None]).to(torch.int64)
        return [ids, mask]

    def reference(self, model, inputs):
        """fp32 outputs (numpy, in output order) of `model` on `inputs`, TF32 off."""
        import torch
        with torch.inference_mode():
            return [o.float().cpu().numpy() for o in flat_outputs(model(*[t.cuda() for t in inputs]))]

    # -- export
    def export(self, tag, model, inputs, n_out, path, dynamo, dynamic_batch=False):
        """torch.onnx.export of `model` on `inputs`; the exporter's chatter goes to logs/<tag>_export.log.
        Returns the ONNX file's facts (opset, input/output names, node count) and seconds."""
        import torch
        for f in (path, path + ".data"):
            if os.path.exists(f):
                os.remove(f)
        names_in = list(self.current_names)
        if len(names_in) != len(inputs):
            raise ValueError(f"{len(inputs)} inputs for the names {names_in}")
        names_out = [f"out{i}" for i in range(n_out)]
        kw = {"input_names": names_in, "output_names": names_out, "dynamo": dynamo}
        if not dynamo:
            kw.update(opset_version=18, do_constant_folding=True)
            if dynamic_batch:
                kw["dynamic_axes"] = {n: {0: "batch"} for n in names_in + names_out}
        t = time.monotonic()
        with open(os.path.join(self.logs, f"{tag}_export.log"), "a") as logf, \
                contextlib.redirect_stdout(logf), contextlib.redirect_stderr(logf):
            print(f"== {'dynamo' if dynamo else 'legacy'} export of {tag}, dynamic batch {dynamic_batch}", flush=True)
            with torch.no_grad():
                torch.onnx.export(model, tuple(x.cuda() for x in inputs), path, **kw)
        info = {"exporter": "dynamo" if dynamo else "legacy", "seconds": time.monotonic() - t,
                "dynamic_batch": dynamic_batch}
        info.update(onnx_facts(path))
        return info

    def export_auto(self, tag, model, inputs, n_out, path):
        """The dynamo exporter, static batch; the legacy one (opset 18) when it fails, saying why."""
        try:
            return self.export(tag, model, inputs, n_out, path, dynamo=True)
        except Exception:  # noqa: BLE001 - any exporter failure falls back
            why = self.log_exception(tag, "dynamo export")
            self.log(f"{tag}: {why}; trying the legacy exporter")
        try:
            info = self.export(tag, model, inputs, n_out, path, dynamo=False)
        except Exception:  # noqa: BLE001
            raise RuntimeError(f"{why}; then {self.log_exception(tag, 'legacy export')}") from None
        info["fallback_from"] = why[:300]
        return info

    # -- ingot
    def build(self, tag, onnx_path, engine, shapes=None):
        """Cold `ingot build` of an fp16 CUDA engine (a fresh timing cache), then `ingot inspect`: a
        record with ok, seconds (wall, process included), error, the build's summary facts and
        warnings, and the engine's step counts."""
        cache = engine + ".timing-cache"
        for f in (engine, cache):
            if os.path.exists(f):
                os.remove(f)
        args = ["build", onnx_path, "-o", engine, "--backend", "cuda", "--fp16", "--tactic-timing",
                self.a.tactic_timing, "--timing-cache", cache]
        if self.a.io == "fp16":
            args.append("--reduced-io")
        if shapes:
            args += ["--shapes", shapes]
        args += shlex.split(self.a.build_args or "")
        t = time.monotonic()
        rc, out, err = self.ingot(f"{tag}_build", *args, cap=self.a.build_cap_s)
        rec = {"seconds": time.monotonic() - t, "ok": rc == 0 and os.path.exists(engine)}
        rec.update(parse_build_output(out, err))
        if not rec["ok"]:
            rec["error"] = error_line(out, err, rc)
            return rec
        rc, out, err = self.ingot(f"{tag}_inspect", "inspect", engine, cap=60)
        if rc == 0:
            facts = parse_inspect(out)
            facts.pop("io", None)
            rec.update(facts)
        else:
            rec["inspect_error"] = error_line(out, err, rc)
            if "host_fallback_reported" in rec:
                rec["host_fallback"] = rec["host_fallback_reported"]
        return rec

    def ingot_time(self, tag, engine, load, few=False, save_outputs=None, profile=None, env=None):
        """`ingot run --cuda-graph --no-data-transfers` as harness.py times it: the median GPU time per
        synchronized query (--export-times' computeMs: CUDA events around the enqueue, so the host's
        launch is inside). Whether the graph replayed, and why not, from its 'CUDA graph:' line (when it
        cannot capture, the run goes on without it). few: a handful of queries (host-fallback engines
        can take seconds per query)."""
        times = os.path.join(self.work, f"{tag}_times.json")
        if os.path.exists(times):
            os.remove(times)
        if few:
            counts = ["--warmup", "1", "--warmup-ms", "0", "--iterations", "3", "--duration", "0"]
        else:
            counts = ["--warmup-ms", str(self.a.warmup_ms), "--iterations", str(self.a.iterations),
                      "--duration", str(self.a.duration_s)]
        b2b = [] if few else ["--back-to-back", str(self.a.b2b_count)]
        # The first query's outputs (before the timed ones) saved by the same process: one engine load
        # and warm-up per batch instead of two.
        save = ["--save-outputs", save_outputs] if save_outputs else []
        # --profile: the per-layer profile from the same process, after the timed queries (its
        # listener runs stay out of them): no second engine load and CUDA start per batch.
        prof = ["--dump-profile", "--export-profile", profile] if profile else []
        rc, out, err = self.ingot(f"{tag}_run", "run", engine, "--load-inputs", load, "--no-data-transfers",
                                  *save, *counts, *b2b, "--export-times", times, "--cuda-graph", *prof,
                                  cap=self.a.slow_cap_s * 2 if few else 120, env=env)
        if rc != 0 or not os.path.exists(times):
            return {"error": error_line(out, err, rc)}
        entries = json.load(open(times))
        status = harness.graph_status(out)
        m = re.search(r"Back-to-back: ([\d.]+) ms per query", out)
        res = {"lat_ms": harness.parse_times(entries), "b2b_ms": float(m.group(1)) if m else None,
               "queries": len(entries),
               "graph": status == "", "graph_status": status if status else (None if status == "" else
                                                                              "no 'CUDA graph:' line"),
               **harness.load_facts(out)}
        if few:
            res["few_queries"] = True
        return res

    def ingot_outputs(self, tag, engine, load, names):
        """The engine's outputs on the loaded inputs: ({name: array}, None) or (None, error)."""
        import numpy as np
        out_dir = os.path.join(self.work, f"{tag}_outputs")
        shutil.rmtree(out_dir, ignore_errors=True)
        os.makedirs(out_dir)
        rc, out, err = self.ingot(f"{tag}_outputs", "run", engine, "--load-inputs", load, "--save-outputs", out_dir,
                                  cap=max(120, self.a.slow_cap_s * 2))
        if rc != 0:
            return None, error_line(out, err, rc)
        return self.read_outputs(out_dir, names), None

    def non_finite_report(self, tag, engine, load):
        """`ingot run --check-finite` on the engine: the lines naming the outputs with NaN/Inf and the
        first steps whose outputs hold them (the first is where they start), or None without any."""
        rc, out, err = self.ingot(f"{tag}_finite", "run", engine, "--load-inputs", load, "--check-finite",
                                  cap=max(120, self.a.slow_cap_s * 2))
        lines = [ln.strip() for ln in out.splitlines() if ln.startswith(("output ", "non-finite check", "  step ", "  inputs of step "))]
        return lines[:7] or None

    def read_outputs(self, out_dir, names):
        """{name: array} of the .npy files `ingot run --save-outputs out_dir` wrote; removes the folder."""
        import numpy as np
        got = {}
        for n in names:
            f = os.path.join(out_dir, n.replace("/", "_") + ".npy")
            if os.path.exists(f):
                got[n] = np.load(f)
        shutil.rmtree(out_dir, ignore_errors=True)
        return got

    def save_inputs(self, tag, names, inputs):
        """The inputs as .npy files for `ingot run --load-inputs`; the flag's value."""
        import numpy as np
        files = []
        for n, t in zip(names, inputs):
            f = os.path.join(self.work, f"{tag}_{n}.npy")
            a = t.numpy() if hasattr(t, "numpy") else np.asarray(t)
            if self.a.io == "fp16" and a.dtype == np.float32:
                a = a.astype(np.float16)  # what PyTorch's fp16 model is given (t.half())
            np.save(f, a)
            files.append(f"{n}:{f}")
        return ",".join(files)

    def ingot_measure(self, tag, entry, engine, inputs, want, slow_hint_ms, batch, small_batch):
        """Times the engine and checks its outputs, into `entry`. An engine with host-fallback steps gets
        a few queries only, and none where batch 1's time says one query at this batch would take
        longer than --slow-cap-s / 5."""
        facts = entry["export"]
        pairs = onnx_inputs(facts.get("inputs"), self.current_names, inputs)
        load = self.save_inputs(tag, [n for n, _ in pairs], [t for _, t in pairs])
        # Host-fallback steps (from inspect; the build's warnings when inspect said nothing) synchronize.
        few = bool(entry["build"].get("host_fallback") or entry["build"].get("host_fallback_warnings"))
        if few and slow_hint_ms and batch > small_batch:
            predicted = slow_hint_ms * batch / small_batch
            if predicted * 5 > self.a.slow_cap_s * 1000:
                entry["ingot"] = {"skipped": f"host fallback: b{small_batch} took {slow_hint_ms:.1f} ms, about "
                                             f"{predicted / 1000:.0f} s per query predicted here"}
                entry["accuracy"] = {"error": "not run (see ingot)"}
                return
        self.log(f"{tag}: ingot run" + (" (few queries: host fallback)" if few else ""))
        out_dir = os.path.join(self.work, f"{tag}_outputs")
        shutil.rmtree(out_dir, ignore_errors=True)
        prof = os.path.join(self.logs, f"{tag}_profile.json") if self.a.profile and not few else None
        if prof and os.path.exists(prof):
            os.remove(prof)
        entry["ingot"] = self.ingot_time(tag, engine, load, few, save_outputs=out_dir, profile=prof)
        if self.a.also_env and not few:
            # The same engine timed again under other settings (e.g. INGOT_PDL=0): what one runtime
            # switch is worth on each row, in the same call.
            k, _, v = self.a.also_env.partition("=")
            self.log(f"{tag}: ingot run with {k}={v}")
            alt = self.ingot_time(f"{tag}_alt", engine, load, env={k: v})
            alt["env"] = self.a.also_env
            entry["ingot_alt"] = alt
        self.save()
        out_names = facts.get("outputs") or [f"out{i}" for i in range(len(want))]
        if entry["ingot"].get("error") or not os.path.isdir(out_dir):
            got, error = self.ingot_outputs(tag, engine, load, out_names)  # the timed run failed: a plain run
        else:
            got, error = self.read_outputs(out_dir, out_names), None
        if error:
            entry["accuracy"] = {"error": error}
            return
        if len(out_names) != len(want):
            entry.setdefault("notes", []).append(f"ONNX has {len(out_names)} outputs, PyTorch {len(want)}: "
                                                 "compared by position")
        entry["accuracy"] = harness.compare_outputs(out_names, got, want)
        entry["accuracy"]["degenerate"] = any(degenerate(w) for w in want)
        import numpy as np
        if any(not np.all(np.isfinite(np.asarray(g, dtype=np.float64))) for g in got.values()):
            # Where the NaN/Inf start, in this call: the engine and its inputs are still here.
            entry["accuracy"]["non_finite"] = self.non_finite_report(tag, engine, load) or [
                "ingot run --check-finite gave no report"]
        if prof and os.path.exists(prof):
            entry["profile_top"] = harness.top_layers(json.load(open(prof)))
        elif prof:
            self.census_profile(tag, entry, engine, load)  # the timed run wrote none: a run of its own

    def census_profile(self, tag, entry, engine, load):
        """--profile: the per-layer table (`ingot run --dump-profile`) into logs/<tag>_profile.log and
        logs/<tag>_profile.json, and the row's top steps (where the time goes) into census.json."""
        prof = os.path.join(self.logs, f"{tag}_profile.json")
        rc, out, err = self.ingot(f"{tag}_profile", "run", engine, "--load-inputs", load, "--dump-profile",
                                  "--export-profile", prof, "--iterations", "20", cap=120)
        if rc == 0 and os.path.exists(prof):
            entry["profile_top"] = harness.top_layers(json.load(open(prof)))
        else:
            entry["profile_error"] = error_line(out, err, rc)

    # -- PyTorch
    def b2b_time(self, fn, sync_mark=False):
        """Median ms per query of --b2b-count calls of fn() enqueued back to back between two CUDA
        events, then one synchronize; trials until --iterations queries and --duration-s (at least 3)."""
        import torch
        mark = torch.compiler.cudagraph_mark_step_begin if sync_mark else None
        count = self.a.b2b_count
        for _ in range(3):
            if mark:
                mark()
            fn()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        per, t0 = [], time.monotonic()
        while len(per) < 3 or len(per) * count < self.a.iterations or time.monotonic() - t0 < self.a.duration_s:
            start.record()
            for _ in range(count):
                if mark:
                    mark()
                fn()
            end.record()
            end.synchronize()
            per.append(start.elapsed_time(end) / count)
        return {"ms": statistics.median(per), "queries": len(per) * count, "trials": len(per)}

    def torch_measure(self, tag, spec, m16, inputs, want, entry):
        """PyTorch fp16 on the same inputs, on the device: eager fp16's cosine against fp32 (always), eager
        timing (--eager), and torch.compile reduce-overhead timed both ways (unless --skip-torch /
        --no-compile); for cnn/seg models in channels_last (and contiguous with --cnn-layouts both,
        keeping the faster back-to-back)."""
        import torch
        dev16 = [t.cuda().half() if t.is_floating_point() else t.cuda() for t in inputs]
        acc = entry.setdefault("accuracy", {})
        with torch.inference_mode():
            half = [o.float().cpu().numpy() for o in flat_outputs(m16(*dev16))]
        acc["torch_fp16"] = {f"out{i}": harness.cosine(h, w) for i, (h, w) in enumerate(zip(half, want))}
        acc.setdefault("degenerate", any(degenerate(w) for w in want))
        del half
        if self.a.skip_torch:
            entry["torch"] = {"skipped": "--skip-torch"}
            return
        if self.a.eager:
            with torch.inference_mode():
                lat = self.torch_time(lambda: m16(*dev16))
                b2b = self.b2b_time(lambda: m16(*dev16))
            entry["eager"] = {"lat_ms": lat["ms"], "b2b_ms": b2b["ms"], "queries": lat["queries"]}
        if self.a.no_compile:
            entry["torch"] = {"skipped": "--no-compile"}
            return
        if spec["family"] in CHANNELS_LAST_FAMILIES:
            layouts = {"both": ["channels_last", "contiguous"]}.get(self.a.cnn_layouts, [self.a.cnn_layouts])
        else:
            layouts = ["contiguous"]
        tried = {}
        for layout in layouts:
            if tried and self.budget.left() < 90:
                tried[layout] = {"skipped": f"time budget ({self.budget.left():.0f} s left)"}
                continue
            tried[layout] = self.compiled_time(tag, m16, dev16, want, layout)
        m16.to(memory_format=torch.contiguous_format)
        good = {k: v for k, v in tried.items() if num(v.get("b2b_ms"))}
        if not good:
            first = next(iter(tried.values()))
            entry["torch"] = {"error": first.get("error") or first.get("skipped") or "no time", "tried": tried}
            return
        layout = min(good, key=lambda k: good[k]["b2b_ms"])
        entry["torch"] = dict(good[layout], layout=layout,
                              tried={k: {x: v.get(x) for x in ("lat_ms", "b2b_ms", "compile_s", "error", "skipped")
                                         if v.get(x) is not None} for k, v in tried.items()})
        acc["torch_compile_fp16"] = entry["torch"].pop("cosine", None)

    def compiled_time(self, tag, m16, dev16, want, layout, warm_only=False):
        """torch.compile(mode='reduce-overhead', dynamic=False) of m16 in `layout`: compile seconds (the
        first 3 calls: compile, CUDA graph recording, first replay), synchronized and back-to-back ms per
        query, and the compiled outputs' cosine. warm_only: compile and the 3 calls, no timing (a
        --prepare-jobs worker filling Inductor's on-disk caches)."""
        import torch
        fmt = torch.channels_last if layout == "channels_last" else torch.contiguous_format
        m16.to(memory_format=fmt)
        x = [t.contiguous(memory_format=fmt) if t.dim() == 4 and t.is_floating_point() else t for t in dev16]
        mark = torch.compiler.cudagraph_mark_step_begin
        fn = None
        try:
            torch._dynamo.reset()
            self.log(f"{tag}: torch.compile reduce-overhead ({layout})")
            t = time.monotonic()
            fn = torch.compile(m16, mode="reduce-overhead", dynamic=False)
            with torch.inference_mode():
                for _ in range(3):
                    mark()
                    fn(*x)
                torch.cuda.synchronize()
                compile_s = time.monotonic() - t
                if warm_only:
                    return {"compile_s": compile_s}
                lat = self.torch_time(lambda: fn(*x), sync_mark=True)
                b2b = self.b2b_time(lambda: fn(*x), sync_mark=True)
                if self.a.torch_profile:
                    self.torch_kernel_table(tag, lambda: fn(*x), mark)
                mark()
                outs = [o.float().cpu().numpy() for o in flat_outputs(fn(*x))]
            return {"lat_ms": lat["ms"], "b2b_ms": b2b["ms"], "compile_s": compile_s, "queries": lat["queries"],
                    "b2b_queries": b2b["queries"],
                    "cosine": {f"out{i}": harness.cosine(o, w) for i, (o, w) in enumerate(zip(outs, want))}}
        except Exception:  # noqa: BLE001
            return {"error": self.log_exception(tag, f"torch.compile ({layout})")}
        finally:
            del fn
            torch._dynamo.reset()
            gc.collect()
            torch.cuda.empty_cache()

    def torch_kernel_table(self, tag, fn, mark, iterations=20):
        """--torch-profile: torch.profiler's CUDA kernels of `iterations` compiled queries (the other side
        of --profile's per-layer table), per-query device us, into logs/<tag>_torch_profile.log."""
        import torch
        from torch.profiler import ProfilerActivity, profile
        try:
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(iterations):
                    mark()
                    fn()
                torch.cuda.synchronize()
            kernels = {}
            for ev in prof.events():
                if ev.device_type != torch.autograd.DeviceType.CUDA:
                    continue
                k = kernels.setdefault(ev.name, [0.0, 0])
                k[0] += ev.device_time if hasattr(ev, "device_time") else ev.cuda_time
                k[1] += 1
            total = sum(v[0] for v in kernels.values()) / iterations
            lines = [f"# {tag}: torch.compile's CUDA kernels, us per query over {iterations} queries; "
                     f"sum {total:.1f} us", f"{'us/query':>10} {'calls/q':>8}  kernel"]
            for name, (us, n) in sorted(kernels.items(), key=lambda kv: -kv[1][0]):
                lines.append(f"{us / iterations:10.2f} {n / iterations:8.1f}  {name[:160]}")
            with open(os.path.join(self.logs, f"{tag}_torch_profile.log"), "w") as f:
                f.write("\n".join(lines) + "\n")
        except Exception:  # noqa: BLE001
            self.log_exception(tag, "torch profiler")

    # -- one model
    def new_row(self, name, variant):
        spec = MODELS[name]
        row = {"model": name, "variant": variant, "family": spec["family"], "input": input_desc(spec),
               "status": "running", "reason": "", "batches": {}}
        self.results["rows"].append(row)
        return row

    def run_model(self, name, row):
        """The dynamo row of `name` (and its legacy row with --legacy-too), batch by batch; each stage
        in its own try so one failure keeps the rest."""
        import torch
        spec = MODELS[name]
        self.current_names = INPUT_NAMES[spec["inputs"]]
        prep = self.load_prepared(name)
        self.log(f"{name}: building the PyTorch model" + (" (prepared weights)" if prep else ""))
        built = self.make_model(name, state=prep)
        row["meta"] = built.meta
        if prep:
            row["meta"]["prepared"] = {"seconds": prep.get("seconds"), "torch_warm": prep.get("torch_warm")}
        m16 = copy.deepcopy(built.timed).half().eval()
        batches = self.batches(spec)
        lat_small = None
        for b in batches:
            entry = row["batches"][str(b)] = {"batch": b}
            tag = f"{name}_b{b}"
            try:
                inputs = self.make_inputs(spec, b, 1000 + b)
                onnx_path = os.path.join(self.work, f"{tag}.onnx")
                engine = os.path.join(self.work, f"{tag}.engine")
                bprep = (prep or {}).get("batches", {}).get(str(b))
                if bprep:
                    want, entry["export"] = bprep["want"], bprep["export"]
                else:
                    want = self.reference(built.ref, inputs)
                    self.log(f"{tag}: export")
                    try:
                        entry["export"] = self.export_auto(tag, built.ref, inputs, len(want), onnx_path)
                    except Exception:  # noqa: BLE001
                        entry["export"] = {"error": self.log_exception(tag, "export")}
                self.save()
                if not entry["export"].get("error"):
                    self.log(f"{tag}: ingot build")
                    entry["build"] = self.build(tag, onnx_path, engine)
                    self.log(f"{tag}: build " + (f"{entry['build']['seconds']:.1f} s, {entry['build'].get('steps')} "
                                                 f"steps, {entry['build'].get('host_fallback')} on the host"
                                                 if entry["build"]["ok"] else entry["build"]["error"]))
                    self.save()
                    if entry["build"]["ok"]:
                        try:
                            self.ingot_measure(tag, entry, engine, inputs, want, lat_small, b, batches[0])
                        except Exception:  # noqa: BLE001
                            entry.setdefault("ingot", {"error": self.log_exception(tag, "ingot run")})
                        if b == batches[0]:
                            lat_small = num((entry.get("ingot") or {}).get("lat_ms"))
                self.save()
                try:
                    self.torch_measure(tag, spec, m16, inputs, want, entry)
                except Exception:  # noqa: BLE001
                    entry["torch"] = {"error": self.log_exception(tag, "torch")}
                self.log(f"{tag}: ingot {ms_pair(entry, 'ingot')} ms, torch.compile {ms_pair(entry, 'torch')} ms, "
                         f"x {ratio_text(entry)}")
            except Exception:  # noqa: BLE001
                entry["error"] = self.log_exception(tag, f"batch {b}")
            finally:
                self.cleanup(tag)
                self.save()
        if self.a.legacy_too and spec["legacy"]:
            lrow = self.new_row(name, "legacy")
            try:
                self.run_legacy(name, spec, built, row, lrow, batches)
            except Exception:  # noqa: BLE001
                lrow["reason"] = self.log_exception(f"{name}_legacy", "legacy row")
            finalize_row(lrow)
        del built, m16
        gc.collect()
        torch.cuda.empty_cache()
        if prep and not self.a.keep_work:
            os.remove(self.prep_path(name))

    def run_legacy(self, name, spec, built, row, lrow, batches):
        """The legacy-export row: dynamo=False, opset 18, a dynamic batch axis (exported once at batch 2),
        an engine per batch built with --shapes; PyTorch's numbers are the dynamo row's (same module,
        same inputs)."""
        tag = f"{name}_legacy"
        path = os.path.join(self.work, f"{tag}.onnx")
        sample = self.make_inputs(spec, 2, 7)
        n_out = len(self.reference(built.ref, sample))
        self.log(f"{tag}: legacy export, dynamic batch")
        try:
            info = self.export(tag, built.ref, sample, n_out, path, dynamo=False, dynamic_batch=True)
        except Exception:  # noqa: BLE001
            lrow["reason"] = self.log_exception(tag, "legacy export")
            return
        lat_small = None
        for b in batches:
            btag = f"{tag}_b{b}"
            entry = lrow["batches"][str(b)] = {"batch": b, "export": info}
            try:
                inputs = self.make_inputs(spec, b, 1000 + b)
                want = self.reference(built.ref, inputs)
                pairs = onnx_inputs(info.get("inputs"), self.current_names, inputs)
                shapes = ",".join(f"{n}:{'x'.join(str(d) for d in t.shape)}" for n, t in pairs)
                engine = os.path.join(self.work, f"{btag}.engine")
                self.log(f"{btag}: ingot build --shapes {shapes}")
                entry["build"] = self.build(btag, path, engine, shapes)
                self.save()
                if entry["build"]["ok"]:
                    self.ingot_measure(btag, entry, engine, inputs, want, lat_small, b, batches[0])
                    if b == batches[0]:
                        lat_small = num((entry.get("ingot") or {}).get("lat_ms"))
                twin = row["batches"].get(str(b)) or {}
                if twin.get("torch"):
                    entry["torch"] = dict(twin["torch"], note="measured once, in the dynamo row")
                if (twin.get("accuracy") or {}).get("torch_fp16"):
                    entry.setdefault("accuracy", {})["torch_fp16"] = twin["accuracy"]["torch_fp16"]
            except Exception:  # noqa: BLE001
                entry["error"] = self.log_exception(btag, f"legacy batch {b}")
            finally:
                self.cleanup(btag)
                self.save()
        self.cleanup(tag)

    # -- the parallel preparation (--prepare-jobs)
    def prep_path(self, name):
        return os.path.join(self.work, f"{name}_prepared.pt")

    def prepare(self, name):
        """A model's untimed work, in a worker process while no timing runs: the model with settled
        BatchNorm statistics, per batch the fp32 reference outputs and the ONNX export, and
        torch.compile of the fp16 model at each batch and layout (its FX-graph and Triton kernels land in
        Inductor's on-disk caches, so the timed compile later mostly loads them). Written to
        <work>/<name>_prepared.pt; the timed run (run_model) reads it instead of redoing the work."""
        import torch
        torch_settings()
        t0 = time.monotonic()
        spec = MODELS[name]
        self.current_names = INPUT_NAMES[spec["inputs"]]
        built = self.make_model(name)
        out = {"weights": built.ref.state_dict(), "batchnorms": built.meta.get("batchnorms", 0), "batches": {},
               "torch_warm": {}}
        m16 = copy.deepcopy(built.timed).half().eval()
        for b in self.batches(spec):
            tag = f"{name}_b{b}"
            inputs = self.make_inputs(spec, b, 1000 + b)
            want = self.reference(built.ref, inputs)
            try:
                export = self.export_auto(tag, built.ref, inputs, len(want), os.path.join(self.work, f"{tag}.onnx"))
            except Exception:  # noqa: BLE001
                export = {"error": self.log_exception(tag, "export")}
            out["batches"][str(b)] = {"want": want, "export": export}
            if self.a.skip_torch or self.a.no_compile:
                continue
            dev16 = [t.cuda().half() if t.is_floating_point() else t.cuda() for t in inputs]
            layouts = (["channels_last", "contiguous"] if self.a.cnn_layouts == "both" else [self.a.cnn_layouts]) \
                if spec["family"] in CHANNELS_LAST_FAMILIES else ["contiguous"]
            for layout in layouts:
                r = self.compiled_time(tag, m16, dev16, want, layout, warm_only=True)
                out["torch_warm"][f"{b}/{layout}"] = r.get("compile_s") or r.get("error")
            m16.to(memory_format=torch.contiguous_format)
        out["seconds"] = time.monotonic() - t0
        tmp = self.prep_path(name) + ".tmp"
        torch.save(out, tmp)
        os.replace(tmp, self.prep_path(name))
        return name, out["seconds"]

    def load_prepared(self, name):
        """The worker's record for `name`, or None (not prepared, or it failed)."""
        p = self.prep_path(name)
        if not os.path.exists(p):
            return None
        import torch
        try:
            return torch.load(p, weights_only=False)
        except Exception:  # noqa: BLE001
            self.log(f"{name}: {self.log_exception(name, 'load prepared')}")
            return None

    def prepare_all(self, names):
        """--prepare-jobs N: prepare() of every model in N worker processes before anything is timed
        (so nothing competes with the timing); a failed model is redone in the timed run."""
        import multiprocessing as mp
        # Models an earlier call on the same machine prepared in this --work folder are kept.
        done = [n for n in names if os.path.exists(self.prep_path(n))]
        if done:
            self.log(f"already prepared in {self.work}: {', '.join(done)}")
        names = [n for n in names if n not in done]
        if not names:
            return
        jobs = min(self.a.prepare_jobs, len(names))
        self.log(f"preparing {len(names)} models in {jobs} processes (exports, references, torch.compile caches)")
        t = time.monotonic()
        with mp.get_context("spawn").Pool(jobs) as pool:
            for r in pool.imap_unordered(_prepare_one, [(self.a, self.work, n) for n in names]):
                self.log(f"prepared {r[0]}: " + (f"{r[1]:.0f} s" if isinstance(r[1], float) else str(r[1])))
        self.results["prepare_s"] = time.monotonic() - t
        self.log(f"prepared in {self.results['prepare_s']:.0f} s")

    def cleanup(self, tag):
        """Removes a batch's ONNX, weights, engine and input files from the work folder (disk stays small
        over 27 models), unless --keep-work."""
        # The build's timing cache (every candidate tactic's time per layer) stays with the logs: it
        # says why a tactic won (GPT-2's LM head kept the plain cuBLASLt variant, 2026-12-02).
        cache = os.path.join(self.work, f"{tag}.engine.timing-cache")
        if os.path.exists(cache):
            shutil.copy(cache, os.path.join(self.logs, f"{tag}.timing-cache"))
        if self.a.keep_work:
            return
        for f in os.listdir(self.work):
            if f.startswith(tag + ".") or f.startswith(tag + "_"):
                p = os.path.join(self.work, f)
                shutil.rmtree(p, ignore_errors=True) if os.path.isdir(p) else os.remove(p)

    def run(self, names):
        import torch
        env = {"torch": torch.__version__, "python": sys.version.split()[0]}
        for mod in ("torchvision", "timm", "transformers", "onnx"):
            try:
                env[mod] = __import__(mod).__version__
            except Exception:  # noqa: BLE001 - a missing package only costs its rows
                env[mod] = "missing"
        if torch.cuda.is_available():
            env["gpu"] = torch.cuda.get_device_name(0)
        self.results["env"] = env
        torch_settings()
        rc, out, _ = self.ingot("version", "--version", cap=30)
        self.results["ingot_version"] = out.strip() if rc == 0 else f"? (rc {rc})"
        self.log(f"census of {len(names)} models: {', '.join(names)}; budget {self.a.max_minutes} min")
        if self.a.prepare_jobs > 0:
            self.prepare_all(names)
        if self.a.prepare_only:
            self.log(f"prepared files in {self.work}: time them with --work {self.work}")
            return 0
        sampler = self.start_gpu_sampler()
        try:
            for name in names:
                # exports, references and Inductor's compile done by prepare(), or not
                est = timed_estimate_s(name, self.a, os.path.exists(self.prep_path(name)))
                if self.budget.left() < est:
                    row = self.new_row(name, "dynamo")
                    row["status"] = "skipped"
                    row["reason"] = f"skipped: would not fit (about {est:.0f} s, {self.budget.left():.0f} s left)"
                    self.log(f"{name}: {row['reason']}")
                    self.save()
                    continue
                row = self.new_row(name, "dynamo")
                t = time.monotonic()
                try:
                    self.run_model(name, row)
                except Exception:  # noqa: BLE001 - one model's failure must not stop the census
                    row["reason"] = self.log_exception(name, "model")
                    self.log(f"{name}: {row['reason']}")
                row["wall_s"], row["estimate_s"] = time.monotonic() - t, est
                finalize_row(row)
                self.log(f"{name}: {time.monotonic() - t:.0f} s (estimated {est:.0f} s)")
                try:
                    torch._dynamo.reset()
                    gc.collect()
                    torch.cuda.empty_cache()
                except Exception:  # noqa: BLE001
                    pass
                self.save()
        finally:
            if sampler:
                sampler.terminate()
                sampler.wait()
        self.save()
        if not self.a.keep_work and not self.a.work:
            shutil.rmtree(self.work, ignore_errors=True)
        print()
        print("== census table ==")
        print(text_table(self.results))
        print(f"(wall {time.monotonic() - self.t0:.0f} s; census.json, census.md, logs/ in {self.out})")
        return 0


def onnx_inputs(onnx_names, names, tensors):
    """[(ONNX input name, tensor)]: by name when the ONNX file's inputs are among the names the model
    was exported with (an exporter may drop an unused one), else by position when the counts match."""
    onnx_names = list(onnx_names or names)
    if set(onnx_names) <= set(names):
        return [(n, tensors[names.index(n)]) for n in onnx_names]
    if len(onnx_names) == len(tensors):
        return list(zip(onnx_names, tensors))
    raise RuntimeError(f"the ONNX file's inputs {onnx_names} do not match the model's {names}")


def onnx_facts(path):
    """Opset, graph input names (initializers excluded), output names and node count of an ONNX file."""
    import onnx
    m = onnx.load(path, load_external_data=False)
    init = {i.name for i in m.graph.initializer}
    return {"opset": next((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), None),
            "inputs": [i.name for i in m.graph.input if i.name not in init],
            "outputs": [o.name for o in m.graph.output], "nodes": len(m.graph.node)}


def degenerate(a):
    """True when an output is constant (a cosine against it says nothing), e.g. a zero-initialised head."""
    import numpy as np
    a = np.asarray(a)
    return a.size > 0 and bool(np.all(a == a.flat[0]))


def finalize_row(row):
    """The row's status and one-line reason, from its batches (the first error met, stage by stage)."""
    if row.get("status") == "skipped":
        return
    reasons = []
    for b, e in batch_list(row):
        for key, what in (("error", None), ("export", "export"), ("build", "build"), ("ingot", "ingot run"),
                          ("accuracy", "accuracy"), ("torch", "torch.compile")):
            v = e.get(key)
            if key == "error" and v:
                reasons.append(f"b{b}: {v}")
            elif isinstance(v, dict) and v.get("error"):
                reasons.append(f"b{b} {what}: {v['error']}")
    if reasons and not row.get("reason"):
        row["reason"] = reasons[0][:300] + (f" (+{len(reasons) - 1} more)" if len(reasons) > 1 else "")
    f = row_facts(row)
    timed = all(num((e.get("ingot") or {}).get("lat_ms")) for _, e in batch_list(row)) and batch_list(row)
    row["status"] = "ok" if f["built"] == "yes" and timed and not reasons else (
        "failed" if f["built"] in ("no", "skip") else "partial")


# ---- self-test (no torch, no GPU) ------------------------------------------------------------

FAKE_INSPECT = """{engine}: ingot engine, backend cuda, 6 steps, 1 profile
inputs:
  input  f32[1,3,224,224]
outputs:
  out0  f32[1,1000]
profiles:
  (every input fixed)
memory:
  arena            1.00 MiB per context (1048576 B)
  lower bound      1.00 MiB (1048576 B, largest sum of live activations)
  weights          50.00 MiB shared
  workspace        0 B
steps:
  #    op                name                                tactic                 prec   layout   fuses
  0    Cast              input/cast_f16                      cuda.cast              f16    -        -
  1    Transpose         input/cast_f16/nhwc                 cuda.transpose         f16    -        -
  2    ingot::FusedConv  /conv1/Conv                         cuda.cudnn_graph_conv  f16    nhwc     /conv1/Conv, /relu/Relu
  3    ingot::FusedConv  /features/0/block/squeeze_excitation_with_a_long_name/Conv  {tactic}  f16    nchw     /se/Conv, /se/HardSigmoid
  4    Cast              /mid/cast                           cuda.cast              f32    -        -
  5    Cast              out0/cast_f32                       cuda.cast              f32    -        -
"""

FAKE_INGOT = r'''#!/usr/bin/env python3
# A stand-in for the ingot binary (census.py --self-test): canned build/inspect/run output.
import json, os, sys
a = sys.argv[1:]
base = os.path.basename(a[1]) if len(a) > 1 else ""
if a[0] == "--version":
    print("ingot 0.0.0 (fake)"); sys.exit(0)
if a[0] == "build":
    out = a[a.index("-o") + 1]
    if "broken" in base:
        print("  choosing tactics: 1/4 steps", file=sys.stderr)
        print("ingot build: unsupported op 'Foo' (node 'bar')", file=sys.stderr); sys.exit(1)
    open(out, "w").write("engine")
    if base.startswith("fb"):
        print("warning: no CUDA tactic for HardSwish '/features/1/hs': it runs on the CPU with copies around it "
              "(no CUDA graph capture)", file=sys.stderr)
    print("built " + out + "\n  model nodes      10\n  engine steps     6 (3 fused)\n"
          "  reduced precision 5 layers, 3 cast layers at fp32 boundaries\n"
          "  channels-last    1 convolutions, 1 transpose layers at NCHW boundaries\n"
          "  tactics timed    9, timing-cache hits 0\n  build time       1.5 s")
    sys.exit(0)
if a[0] == "inspect":
    print(open(os.environ["FAKE_INSPECT"]).read().format(engine=a[1],
          tactic="cuda.host_fallback" if base.startswith("fb") else "cuda.cudnn_graph_conv"))
    sys.exit(0)
if a[0] == "run":
    assert "--load-inputs" in a and ":" in a[a.index("--load-inputs") + 1]
    if "--check-finite" in a:
        print("outputs:\n  out0  f32[1,3]  min 1  max 1  mean 1  std 0  nan 2")
        print("output out0: 2 NaN, 0 Inf of 3 in rows 0 (1 of 1)")
        print("non-finite check (every step's outputs, one run): 2 of 6 tensors hold NaN or Inf; the first at step 3")
        print("  step 3  Mul 'mul_1'  tactic cuda.elementwise.binary  -> y [1,3]: 2 NaN, 0 Inf of 3; rows 0 (1 of 1)")
        print("  inputs of step 3 (largest finite |x|): a 6.55e+04")
        print("ingot run: --check-finite: an output holds NaN or Inf", file=sys.stderr)
        sys.exit(1)
    if "--save-outputs" in a:
        import numpy as np
        np.save(os.path.join(a[a.index("--save-outputs") + 1], "out0.npy"), np.array([1.0, 2.0, 3.0], np.float32))
        sys.exit(0)
    assert "--no-data-transfers" in a and "--cuda-graph" in a
    n = int(a[a.index("--iterations") + 1])
    json.dump([{"computeMs": 0.30 + 0.01 * (i % 3), "latencyMs": 0.31} for i in range(n)],
              open(a[a.index("--export-times") + 1], "w"))
    print("engine load: 12.5 ms (read, deserialize, weights to the device)")
    print("CUDA graph: " + ("not used (step 3 (HardSwish) runs tactic cuda.host_fallback, which synchronizes "
                            "with the host)" if base.startswith("fb") else "replaying"))
    print("first query: 40.0 ms (host wall time, includes the tactics' first-use setup)")
    sys.exit(0)
sys.exit(2)
'''


def fake_results():
    """Made-up census results covering every kind of row the table must show."""
    def ing(lat, graph=True, status=""):
        return {"lat_ms": lat, "b2b_ms": None, "graph": graph, "graph_status": status, "queries": 100}

    def tor(lat, b2b, layout="channels_last"):
        return {"lat_ms": lat, "b2b_ms": b2b, "compile_s": 30.0, "layout": layout,
                "tried": {"channels_last": {"lat_ms": lat, "b2b_ms": b2b}, "contiguous": {"lat_ms": 0.9, "b2b_ms": 0.6}}}

    def bld(steps, fb=0, t=2, c=2, s=14.0):
        return {"ok": True, "seconds": s, "steps": steps, "host_fallback": fb, "transpose": t, "cast": c,
                "cast_body_est": max(0, c - 2), "host_fallback_warnings": ["warning: no CUDA tactic for X"] * fb}

    acc = {"cosine": {"out0": 0.99972}, "torch_fp16": {"out0": 0.99960}, "degenerate": False}
    rows = [
        {"model": "resnet50", "variant": "dynamo", "family": "cnn", "input": "3x224x224", "status": "ok", "reason": "",
         "batches": {"1": {"batch": 1, "export": {"exporter": "dynamo", "opset": 20}, "build": bld(75),
                           "ingot": ing(0.32), "torch": tor(0.775, 0.467), "accuracy": acc},
                     "64": {"batch": 64, "export": {"exporter": "dynamo"}, "build": bld(75, s=24.0),
                            "ingot": ing(3.2), "torch": tor(4.8, 4.0), "accuracy": acc}}},
        {"model": "mobilenet_v3_large", "variant": "dynamo", "family": "cnn", "input": "3x224x224", "status": "partial",
         "reason": "", "batches": {
             "1": {"batch": 1, "export": {"exporter": "dynamo"}, "build": bld(80, fb=12, t=6, c=9, s=70.0),
                   "ingot": dict(ing(158.6, graph=False, status="step 3 runs on the host"), few_queries=True, queries=3),
                   "torch": tor(0.5, 0.335), "accuracy": acc},
             "64": {"batch": 64, "export": {"exporter": "dynamo"}, "build": bld(80, fb=12, s=65.0),
                    "ingot": {"skipped": "host fallback: too slow"}, "torch": tor(2.0, 1.8),
                    "accuracy": {"error": "not run (see ingot)"}}}},
        {"model": "vit_b_16", "variant": "dynamo", "family": "vit", "input": "3x224x224", "status": "failed",
         "reason": "b1 build: ingot build: unsupported op", "batches": {
             "1": {"batch": 1, "export": {"exporter": "legacy", "fallback_from": "dynamo export: X"},
                   "build": {"ok": False, "seconds": 3.0, "error": "ingot build: unsupported op"},
                   "torch": tor(0.9, 0.677, "contiguous"),
                   "accuracy": {"torch_fp16": {"out0": 1.0, "out1": 0.99}, "degenerate": True}}}},
        {"model": "bert", "variant": "legacy", "family": "text", "input": "s128+mask", "status": "ok", "reason": "",
         "batches": {"1": {"batch": 1, "export": {"exporter": "legacy"}, "build": bld(94, t=0, c=3, s=12.0),
                           "ingot": ing(0.5), "torch": tor(0.9, 0.676, "contiguous"),
                           "accuracy": {"cosine": {"out0": 0.999999, "out1": float("nan")},
                                        "torch_fp16": {"out0": 0.999999, "out1": 0.999998}}},
                     "32": {"batch": 32, "export": {"exporter": "legacy"}, "build": bld(94, s=13.0),
                            "ingot": ing(1.6), "torch": tor(2.0, 1.5, "contiguous"), "accuracy": acc}}},
        {"model": "qwen2", "variant": "dynamo", "family": "decoder", "input": "s128", "status": "skipped",
         "reason": "skipped: would not fit (about 120 s, 30 s left)", "batches": {}},
    ]
    return {"kind": "ingot-census", "date": "2026-12-02 10:00 UTC", "commit": "abc1234", "command": "census --self-test",
            "wall_s": 1.0, "env": {"gpu": "fake"}, "ingot_version": "ingot 0 (fake)", "notes": ["a run note"],
            "settings": {"iterations": 100, "duration_s": 0.5, "warmup_ms": 200, "b2b_count": 100,
                         "tactic_timing": "device"}, "rows": rows}


def self_test():
    """The table/geomean/bars/JSON/markdown/merge logic and the parsing of ingot's output on made-up
    numbers, and the ingot invocations against a fake binary; exits non-zero on a wrong figure."""
    failures = []

    def expect(name, cond):
        print(("ok   " if cond else "FAIL ") + name)
        if not cond:
            failures.append(name)

    expect("every model has a preparation time for the planner", set(PREP_WALL_S) == set(MODELS))
    pa = parser().parse_args([])
    chosen, skipped = plan_part(["distilbert", "maxvit_t", "gpt2", "qwen2"], 300, pa)
    expect("plan_part leaves out the model whose preparation would hold the call, keeps the order",
           chosen == ["distilbert", "gpt2", "qwen2"] and [m for m, _ in skipped] == ["maxvit_t"])
    chosen, skipped = plan_part(["distilbert", "maxvit_t", "gpt2", "qwen2"], 300, pa, prepared={"maxvit_t"})
    expect("plan_part: a model prepared by an earlier call adds only its timed run",
           chosen == ["distilbert", "maxvit_t", "gpt2"] and [m for m, _ in skipped] == ["qwen2"])
    expect("plan_part says what a left-out model would take alone",
           "alone about" in skipped[0][1] and "with the models before it" in skipped[0][1])
    chosen, skipped = plan_part(["distilbert", "gpt2", "qwen2"], 200, pa)
    expect("plan_part stops adding timed runs at the limit",
           chosen == ["distilbert", "gpt2"] and [m for m, _ in skipped] == ["qwen2"])
    expect("timed_estimate_s: prepared and measured is below the rough cost",
           timed_estimate_s("gpt2", pa, True) < timed_estimate_s("gpt2", pa, False))
    fams = {s["family"] for s in MODELS.values()}
    expect("at least 24 models over the five families", len(MODELS) >= 24 and fams == set(FAMILIES))
    expect("at least ResNet-50, MobileNetV3-L and BERT get a legacy row",
           all(MODELS[n]["legacy"] for n in ("resnet50", "mobilenet_v3_large", "bert")))
    expect("every model has inputs, a cost and (token inputs) a vocabulary",
           all(s["inputs"] in INPUT_NAMES and s["cost"] > 0 and (s["vocab"] > 0 or s["inputs"] in ("image", "audio"))
               for s in MODELS.values()))
    names, notes = select_models("bert,resnet50,nope", "")
    expect("--models runs in its own order and notes unknown names", names == ["bert", "resnet50"] and len(notes) == 1)
    names, notes = select_models("", "seg,decoder")
    expect("--family selects whole families", names[0] == "deeplabv3_mobilenet_v3_large" and "qwen2" in names
           and all(MODELS[n]["family"] in ("seg", "decoder") for n in names) and not notes)
    expect("--batches parses and sorts", parse_batches("64, 1") == [1, 64])
    try:
        parse_batches("0,2")
        expect("--batches refuses 0", False)
    except ValueError:
        expect("--batches refuses 0", True)
    a = parser().parse_args(["--legacy-too"])
    expect("cost estimate scales with flags", estimate_s("resnet50", a, 2) == 130 * 1.4
           and estimate_s("squeezenet1_1", a, 1) == 40)

    res = fake_results()
    r0, r1, r2, r3, r4 = res["rows"]
    e0 = r0["batches"]["1"]
    v, bound = ratio(e0, "lat")
    expect("latency ratio = torch / ingot", abs(v - 0.775 / 0.32) < 1e-12 and not bound)
    v, bound = ratio(e0, "b2b")
    expect("b2b ratio uses ingot's synchronized time when it has no b2b, as a lower bound",
           abs(v - 0.467 / 0.32) < 1e-12 and bound)
    expect("no ratio without both sides", ratio(r2["batches"]["1"], "lat") == (None, False)
           and ratio(r1["batches"]["64"], "b2b") == (None, False))
    f0, f1, f2, f3 = row_facts(r0), row_facts(r1), row_facts(r2), row_facts(r3)
    expect("row facts: built, graph, host fallback, steps",
           f0["built"] == "yes" and f0["graph"] == "yes" and f0["host_fallback"] == 0 and f0["steps"] == 75
           and f1["graph"] == "no" and f1["host_fallback"] == 12 and f2["built"] == "no" and f2["graph"] == "-")
    expect("row cosine is the lowest over batches and outputs; nan wins",
           f0["cos_ingot"] == 0.99972 and math.isnan(f3["cos_ingot"]) and f2["cos_torch16"] == 0.99 and f2["degenerate"])
    expect("cold build max only when every batch built", f0["build_max_s"] == 24.0 and f2["build_max_s"] is None)
    expect("exporter tags", exporter_tag(r0) == "dyn" and exporter_tag(r2) == "leg" and exporter_tag(r3) == "leg")
    s = summary(res)
    g = s["geomean"]["b1_lat"]
    want_g = math.exp((math.log(0.775 / 0.32) + math.log(0.5 / 158.6) + math.log(0.9 / 0.5)) / 3)
    expect("b1 latency geomean over the rows with both sides", g["n"] == 3 and abs(g["value"] - want_g) < 1e-12)
    g = s["geomean"]["bN_b2b"]
    expect("bN b2b geomean flagged as a lower bound", g["n"] == 2 and g["lower_bound"]
           and abs(g["value"] - math.sqrt(4.0 / 3.2 * 1.5 / 1.6)) < 1e-12)
    b = s["bars"]
    expect("bars count rows (skipped rows left out)",
           b["built (every batch)"] == {"met": 3, "of": 4} and b["zero host-fallback steps"] == {"met": 2, "of": 4}
           and b["CUDA graph"] == {"met": 2, "of": 4} and b["cold build <= 60 s"] == {"met": 2, "of": 4}
           and b["b1 lat ratio >= 1.0"] == {"met": 2, "of": 3} and b["bN lat ratio >= 1.0"] == {"met": 2, "of": 2})
    expect("cosine bar: degenerate rows left out, nan fails", b["cosine >= torch fp16"] == {"met": 2, "of": 3}
           and s["degenerate"] == ["vit_b_16"])
    rows = table_rows(res)
    expect("one table row per census row, plus the header", len(rows) == 6 and len(set(map(len, rows))) == 1)
    expect("table cells: ms pairs, ratios with *, batch, builds",
           rows[1][10] == "0.320/-" and rows[1][11] == "0.775/0.467" and rows[1][12] == "2.42/1.46*"
           and rows[1][13] == "64" and rows[1][17] == "14/24" and rows[1][6] == "2/2")
    expect("skipped, failed and degenerate cells", rows[2][14] == "skip" and rows[3][3] == "no"
           and rows[3][9] == "degen" and rows[3][10] == "-" and rows[5][3] == "skip" and rows[4][0] == "bert (legacy)")
    text = text_table(res)
    expect("text table: header, rule, 5 rows, legend, 4 geomeans, bars, degenerate line",
           len(text.splitlines()) == 2 + 5 + 2 + 4 + 1 + 1 and "0.0032/0.0021*" in text)
    with tempfile.TemporaryDirectory() as tmp:
        save(res, tmp)
        back = json.load(open(os.path.join(tmp, "census.json")))
        md = open(os.path.join(tmp, "census.md")).read()
        expect("census.json round-trips", back["rows"][0]["batches"]["1"]["ingot"]["lat_ms"] == 0.32)
        md_rows = [l for l in md.splitlines() if l.startswith("| ")]
        expect("census.md holds the table, the commit and the command", len(md_rows) == 6 and "abc1234" in md
               and "`census --self-test`" in md and "2.42/1.46*" in md)
        expect("census.md notes reasons, fallbacks, host-fallback warnings and graph status",
               "vit_b_16: b1 build: ingot build: unsupported op" in md and "export: legacy, after dynamo export" in md
               and "12 host-fallback steps: warning" in md and "not used (step 3 runs on the host)" in md
               and "qwen2: skipped: would not fit" in md and "also tried contiguous" in md)
        # Merge: the second run measures bert/legacy again and re-runs resnet50 skipped (kept from the first).
        res2 = json.loads(json.dumps(res))
        res2["commit"] = "def5678"
        res2["rows"] = [dict(r0, status="skipped", batches={}), dict(r4, status="ok", batches=r0["batches"])]
        p1, p2 = os.path.join(tmp, "a.json"), os.path.join(tmp, "b.json")
        json.dump(res, open(p1, "w"))
        json.dump(res2, open(p2, "w"))
        m = merge([json.load(open(p1)), json.load(open(p2))])
        keys = [row_key(r) for r in m["rows"]]
        expect("merge: one row per model and variant in table order",
               keys == ["resnet50/dynamo", "mobilenet_v3_large/dynamo", "vit_b_16/dynamo", "bert/legacy",
                        "qwen2/dynamo"])
        expect("merge: a later skipped row does not replace a measured one; a measured one does",
               m["rows"][0]["status"] == "ok" and m["rows"][4]["status"] == "ok")
        expect("merge: parts and commits recorded", len(m["parts"]) == 2 and m["commit"] == "abc1234, def5678"
               and "Merged from 2 census runs" in markdown(m))

        # ingot's output, parsed.
        insp = FAKE_INSPECT.format(engine="e.engine", tactic=HOST_FALLBACK)
        p = parse_inspect(insp)
        expect("inspect: steps, host fallback, Transpose/Cast, body casts",
               p["steps"] == 6 and p["host_fallback"] == 1 and p["transpose"] == 1 and p["cast"] == 3
               and p["cast_body_est"] == 1 and p["ops"]["ingot::FusedConv"] == 2 and p["backend"] == "cuda"
               and p["host_fallback_steps"][0].startswith("ingot::FusedConv '/features/0/block/"))
        bo = parse_build_output("built x\n  engine steps     6 (3 fused)\n  reduced precision 5 layers, 3 cast layers "
                                "at fp32 boundaries\n  build time       1.5 s\n",
                                "  choosing tactics: 1/4\nwarning: no CUDA tactic for HardSwish 'hs': it runs on the "
                                "CPU with copies around it\nwarning: timing cache stale\n")
        expect("build output: steps, casts, seconds, host-fallback warnings",
               bo["steps_reported"] == 6 and bo["fused"] == 3 and bo["precision_casts"] == 3 and bo["builder_s"] == 1.5
               and len(bo["host_fallback_warnings"]) == 1 and bo["other_warnings"] == 1)
        bo = parse_build_output("built x\n  engine steps     6 (3 fused)\n  split fusions    2 fused layers split\n"
                                "  host fallback    2 steps (CPU round trips, no CUDA graph):\n"
                                "    HardSwish '/f/1/hs' (onnx opset 20): no CUDA kernel\n"
                                "    Loop 'l' (onnx opset 20): subgraph\n  tactics timed    9\n",
                                "warning: host fallback: HardSwish '/f/1/hs' (onnx opset 20): no CUDA kernel; it runs "
                                "on the CPU\n")
        expect("build output (newer form): split fusions, host-fallback steps listed",
               bo["split_fusions"] == 2 and bo["host_fallback_reported"] == 2 and len(bo["host_steps"]) == 2
               and bo["host_steps"][1].startswith("Loop") and len(bo["host_fallback_warnings"]) == 1)
        bo = parse_build_output("  host fallback    0 steps\n  tactics timed    9\n", "")
        expect("build output: zero host-fallback steps", bo["host_fallback_reported"] == 0 and bo["host_steps"] == [])
        expect("build error line", error_line("", "  choosing tactics\ningot build: unsupported op 'X'\n", 1)
               == "ingot build: unsupported op 'X'" and error_line("", "", 3) == "rc 3")

        # The ingot invocations against a fake binary.
        fake = os.path.join(tmp, "ingot")
        with open(fake, "w") as f:
            f.write(FAKE_INGOT.replace("/usr/bin/env python3", sys.executable, 1))
        os.chmod(fake, 0o755)
        with open(os.path.join(tmp, "inspect.txt"), "w") as f:
            f.write(FAKE_INSPECT)
        os.environ["FAKE_INSPECT"] = os.path.join(tmp, "inspect.txt")
        c = Census(parser().parse_args(["--ingot", fake, "--out", os.path.join(tmp, "out"),
                                        "--work", os.path.join(tmp, "work"), "--iterations", "7",
                                        "--build-args", "--opt-level 3"]))
        c.current_names = ["input"]
        rec = c.build("m_b1", os.path.join(tmp, "m.onnx"), os.path.join(c.work, "m_b1.engine"))
        expect("build: ok, steps from inspect, no host fallback", rec["ok"] and rec["steps"] == 6
               and rec["host_fallback"] == 0 and rec["fused"] == 3)
        log = open(os.path.join(c.logs, "m_b1_build.log")).read()
        expect("build command: cuda fp16, device tactic timing, a fresh cache, extra args",
               "--backend cuda --fp16 --tactic-timing device --timing-cache" in log and "--opt-level 3" in log)
        rec = c.build("fb_b1", os.path.join(tmp, "fb.onnx"), os.path.join(c.work, "fb_b1.engine"))
        expect("build with host fallback: counted and warned", rec["host_fallback"] == 1
               and len(rec["host_fallback_warnings"]) == 1)
        rec = c.build("broken_b1", os.path.join(tmp, "broken.onnx"), os.path.join(c.work, "broken.engine"))
        expect("failed build: the error line", not rec["ok"] and rec["error"] == "ingot build: unsupported op 'Foo' (node 'bar')")
        t = c.ingot_time("m_b1", os.path.join(c.work, "m_b1.engine"), "input:/x.npy")
        expect("ingot run: median GPU time, graph replaying, load time",
               abs(t["lat_ms"] - 0.31) < 1e-12 and t["graph"] and t["queries"] == 7 and t["load_ms"] == 12.5 and not t["graph_status"])
        t = c.ingot_time("fb_b1", os.path.join(c.work, "fb_b1.engine"), "input:/x.npy", few=True)
        expect("ingot run on a host-fallback engine: few queries, no graph, why",
               t["queries"] == 3 and not t["graph"] and "host_fallback" in t["graph_status"] and t["few_queries"])
        got, err = c.ingot_outputs("m_b1", os.path.join(c.work, "m_b1.engine"), "input:/x.npy", ["out0"])
        expect("ingot outputs read back", err is None and list(got) == ["out0"] and got["out0"].shape == (3,))
        rep = c.non_finite_report("m_b1", os.path.join(c.work, "m_b1.engine"), "input:/x.npy")
        expect("--check-finite report: the output line, the first step, its inputs' |x|, nothing else",
               rep is not None and len(rep) == 4 and rep[0].startswith("output out0: 2 NaN")
               and rep[2].startswith("step 3  Mul 'mul_1'") and rep[3].endswith("a 6.55e+04"))
        c.cleanup("m_b1")
        left = os.listdir(c.work)
        expect("cleanup removes a tag's files only", not any(f.startswith("m_b1") for f in left)
               and any(f.startswith("fb_b1") for f in left))
        expect("ONNX inputs matched by name, or by position",
               onnx_inputs(["attention_mask"], ["input_ids", "attention_mask"], ["I", "M"]) == [("attention_mask", "M")]
               and onnx_inputs(["x"], ["input"], ["T"]) == [("x", "T")])
    expect("harness cosine reused: equal vectors 1", abs(harness.cosine([1.0, 2.0], [2.0, 4.0]) - 1) < 1e-12)
    print(text)
    print(f"{len(failures)} failed")
    return 1 if failures else 0


# ---- command line ----------------------------------------------------------------------------

def parser():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="See the module docstring (head -60 bench/census.py) for what is measured how.")
    ap.add_argument("--ingot", default="build-cuda/tools/ingot", help="the ingot binary (built with CUDA)")
    ap.add_argument("--out", default=os.environ.get("OUT", "census-out"),
                    help="where census.json, census.md and logs/ go (default $OUT)")
    ap.add_argument("--work", help="scratch folder for ONNX files, engines and inputs (default: a temporary one)")
    ap.add_argument("--keep-work", action="store_true", help="keep every model's files in the scratch folder")
    ap.add_argument("--profile", action="store_true",
                    help="also a per-layer profile of every engine (logs/<model>_b<N>_profile.{log,json}; "
                         "its top steps in census.json)")
    ap.add_argument("--torch-profile", action="store_true",
                    help="also torch.profiler's CUDA kernel table of each torch.compile run "
                         "(logs/<model>_b<N>_torch_profile.log)")
    ap.add_argument("--models", default="", help="comma-separated model names (--list shows them)")
    ap.add_argument("--family", default="", help="comma-separated families: " + ",".join(FAMILIES))
    ap.add_argument("--max-minutes", type=float, default=9.0,
                    help="time budget: a model whose rough cost (COST table) would not fit is skipped, saying so")
    ap.add_argument("--batches", default="", help="batches for every model, e.g. 1,64 (default: 1 and the "
                                                  "family's large batch: cnn 64, seg 16, vit/text/decoder 32)")
    ap.add_argument("--legacy-too", action="store_true",
                    help="also a row exported with dynamo=False, opset 18, a dynamic batch axis, for the models "
                         "marked L in --list (ResNet-50, MobileNetV3-L, BERT, GPT-2)")
    ap.add_argument("--skip-torch", action="store_true",
                    help="no PyTorch timing (PyTorch still exports and gives the fp32/fp16 references)")
    ap.add_argument("--no-compile", action="store_true", help="no torch.compile (use --eager for eager times)")
    ap.add_argument("--eager", action="store_true", help="also time PyTorch eager fp16 (JSON and notes only)")
    ap.add_argument("--cnn-layouts", choices=["channels_last", "contiguous", "both"], default="channels_last",
                    help="memory format torch.compile gets for cnn/seg models; both: try both, keep the faster")
    ap.add_argument("--iterations", type=int, default=100, help="timed queries per measurement (at least)")
    ap.add_argument("--duration-s", type=float, default=0.5, help="and at least this long")
    ap.add_argument("--warmup-ms", type=int, default=200, help="warm-up before timing")
    ap.add_argument("--also-env", default="", metavar="KEY=VALUE",
                    help="time each engine a second time with this environment variable set (e.g. INGOT_PDL=0); "
                         "the row's notes give both")
    ap.add_argument("--b2b-count", type=int, default=100, help="PyTorch queries per back-to-back trial")
    ap.add_argument("--tactic-timing", choices=["stream", "device"], default="device",
                    help="ingot build --tactic-timing (device: GPU time alone, for CUDA-graph replay)")
    ap.add_argument("--io", choices=["fp16", "fp32"], default="fp16",
                    help="the engines' float inputs and outputs: fp16 (`--reduced-io`: the types PyTorch's fp16 "
                         "model takes and gives, so neither side converts; default) or fp32 (a Cast at each end "
                         "that the PyTorch side does not run)")
    ap.add_argument("--prepare-jobs", type=int, default=0,
                    help="N > 0: first, in N processes, build every selected model, export it, compute its fp32 "
                         "references and run torch.compile once per batch (filling Inductor's on-disk caches), "
                         "then time one model at a time as without it: on the 16-core GPU machine this takes "
                         "the CPU-bound half of the census off the timed path (the torch.compile seconds "
                         "recorded are then warm-cache compiles)")
    ap.add_argument("--prepare-only", action="store_true",
                    help="with --prepare-jobs and --work DIR: prepare and stop (a later run with the same --work "
                         "times what was prepared), so GPU tests can run beside the preparation")
    ap.add_argument("--build-args", default="", help="more ingot build flags, one string (e.g. '--opt-level 4')")
    ap.add_argument("--build-cap-s", type=float, default=180, help="longest one ingot build may take (bar: 60 s)")
    ap.add_argument("--slow-cap-s", type=float, default=60,
                    help="an engine with host-fallback steps is timed on a few queries, and not at all at a "
                         "batch where five queries would take longer than this, predicted from the small batch")
    ap.add_argument("--export-attn", default="eager",
                    help="attention implementation of the exported transformers models (eager|sdpa)")
    ap.add_argument("--torch-attn", default="sdpa", help="attention implementation PyTorch is timed with")
    ap.add_argument("--commit", help="commit to record (default: git, else $INGOT_COMMIT)")
    ap.add_argument("--merge", nargs="+", metavar="CENSUS_JSON",
                    help="combine earlier census.json files: print the table (and write census.json/.md to --out "
                         "when given)")
    ap.add_argument("--list", action="store_true", help="print the model table and exit")
    ap.add_argument("--plan-s", type=float, default=None, metavar="SECONDS",
                    help="print the models of --models that one device call of SECONDS fits (preparation, "
                         "then timing; bench/census_part.sh) comma-separated, the rest on stderr, and exit")
    ap.add_argument("--self-test", action="store_true", help="check the table/JSON/merge logic on made-up numbers")
    return ap


def list_models():
    print(f"{'model':30} {'family':8} {'source':12} {'input':12} {'cost s':>6}  legacy row")
    for n, s in MODELS.items():
        print(f"{n:30} {s['family']:8} {s['src']:12} {input_desc(s):12} {s['cost']:6d}  {'L' if s['legacy'] else ''}")
    print(f"{len(MODELS)} models, about {sum(s['cost'] for s in MODELS.values()) / 60:.0f} min in all "
          "(rough; --legacy-too adds the L rows)")
    return 0


def main():
    argv = sys.argv[1:]
    a = parser().parse_args(argv)
    if a.self_test:
        return self_test()
    if a.list:
        return list_models()
    if a.plan_s is not None:
        names, notes = select_models(a.models, a.family)
        # With --work, what an earlier call on this machine prepared there costs no preparation.
        prepared = {n for n in names if a.work and os.path.exists(os.path.join(a.work, f"{n}_prepared.pt"))}
        chosen, skipped = plan_part(names, a.plan_s, a, prepared=prepared)
        for m, why in skipped:
            print(f"{m}: left out of this call: {why}", file=sys.stderr)
        print(",".join(chosen))
        return 0
    if a.merge:
        merged = merge([json.load(open(p)) for p in a.merge])
        if any(x == "--out" or x.startswith("--out=") for x in argv):
            os.makedirs(a.out, exist_ok=True)
            save(merged, a.out)
        else:
            print(markdown(merged))
        print("== census table ==")
        print(text_table(merged))
        return 0
    try:
        if a.batches:
            parse_batches(a.batches)
    except ValueError as e:
        print(f"census: {e}", file=sys.stderr)
        return 2
    if not os.path.exists(a.ingot):
        print(f"census: no ingot binary at '{a.ingot}' (build with -DINGOT_CUDA=ON, or pass --ingot)", file=sys.stderr)
        return 2
    a.ingot = os.path.abspath(a.ingot)
    names, notes = select_models(a.models, a.family)
    if not names:
        print("census: no model selected (" + "; ".join(notes) + ")", file=sys.stderr)
        return 2
    os.makedirs(a.out, exist_ok=True)
    c = Census(a)
    c.results["notes"] += notes
    return c.run(names)


if __name__ == "__main__":
    sys.exit(main())
