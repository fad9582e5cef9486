#!/usr/bin/env python3
"""End-to-end checks of `ingot inspect`: node tables and op counts of models before and after
the optimizer (the before column checked against the onnx package's own reading of the file),
what the optimizer must have fused in a ResNet-style and a BERT-style model, Graphviz output,
engine inspection (I/O, profiles, memory, steps), the per-step timing chart drawn from a profile
(--profile, parsed as XML and checked against the profile's times), and one clear error line for
bad input."""
import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

import onnx

from cli_harness import check, run, summary


def parse_table(out, heading):
    """Rows of the '<heading> (N nodes):' table: dicts with op, name and fuses (a list)."""
    lines = out.splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith(heading + " (")), None)
    if start is None:
        return None
    rows = []
    for line in lines[start + 2:]:  # skip the column header
        if not line.strip():
            break
        fuses = []
        if "   fuses: " in line:
            line, f = line.split("   fuses: ", 1)
            fuses = [x.strip() for x in f.split(",")]
        idx, op, name = line.split()[:3]
        rows.append({"index": int(idx), "op": op, "name": name, "fuses": fuses})
    return rows


def parse_counts(out):
    """op → (before, after) from the 'op counts (before -> after):' block."""
    lines = out.splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith("op counts")), None)
    counts = {}
    if start is None:
        return counts
    for line in lines[start + 1:]:
        m = re.match(r"\s+(\S+)\s+(\d+) ->\s+(\d+)$", line)
        if not m:
            break
        counts[m.group(1)] = (int(m.group(2)), int(m.group(3)))
    return counts


def onnx_op_counts(path):
    """Op counts straight from the file (the independent side of the 'before' column)."""
    g = onnx.load(path).graph
    c = collections.Counter((n.domain + "::" if n.domain not in ("", "ai.onnx") else "") + n.op_type for n in g.node)
    return dict(c)


def print_counts(label, counts):
    print(f"     {label}: op counts before -> after")
    for op, (b, a) in sorted(counts.items()):
        print(f"       {op:<24} {b:>4} -> {a:>4}")


SVG = "{http://www.w3.org/2000/svg}"
GEMM_OPS = {"ingot::FusedGemm", "Gemm", "MatMul", "ingot::FusedMatMul"}
ATTENTION_OPS = {"ingot::Attention", "Attention", "com.microsoft::Attention"}
LAYERNORM_OPS = {"LayerNormalization", "ingot::LayerNormalization", "ingot::LayerNorm"}


def check_bert_layers(label, rows):
    """Per encoder layer (nodes named 'layerN/...'): at most three projections (or one fused
    QKV), one attention, one output projection, two LayerNorms, one GEMM with GELU in its
    epilogue, one GEMM (+residual); nothing else: the head split/merge Reshape/Transposes are
    absorbed into the (3-D) attention op."""
    layers = collections.defaultdict(list)
    for r in rows:
        m = re.match(r"layer(\d+)/", r["name"])
        if m:
            layers[int(m.group(1))].append(r)
    check(f"{label}: both encoder layers found in the after-table", sorted(layers) == [0, 1], sorted(layers))
    for li, nodes in sorted(layers.items()):
        ops = collections.Counter(n["op"] for n in nodes)
        gemms = [n for n in nodes if n["op"] in GEMM_OPS]
        gelu_gemms = [n for n in gemms if any("gelu" in f for f in n["fuses"])]
        n_att = sum(ops[o] for o in ATTENTION_OPS)
        n_ln = sum(ops[o] for o in LAYERNORM_OPS)
        other = {o: c for o, c in ops.items() if o not in GEMM_OPS | ATTENTION_OPS | LAYERNORM_OPS}
        print(f"     {label} layer{li}: {dict(sorted(ops.items()))}")
        check(f"{label} layer{li}: one attention op", n_att == 1, dict(ops))
        check(f"{label} layer{li}: two LayerNormalization", n_ln == 2, dict(ops))
        check(f"{label} layer{li}: at most 6 GEMMs (3 projections or fused QKV, out, fc1+GELU, fc2+residual)",
              len(gemms) <= 6, [n["name"] for n in gemms])
        check(f"{label} layer{li}: GELU fused into a GEMM", len(gelu_gemms) == 1,
              "GEMMs: " + "; ".join(f"{n['name']} fuses {n['fuses']}" for n in gemms) + f"; other ops {other}")
        check(f"{label} layer{li}: nothing left outside those (no head split/merge Reshape/Transpose)",
              not other, other)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ingot", required=True)
    ap.add_argument("--models", required=True, help="folder written by tests/models/make_models.py")
    ap.add_argument("--optimizer-models", required=True, help="folder written by tests/models/make_optimizer_models.py")
    a = ap.parse_args()
    ingot = a.ingot
    mlp = os.path.join(a.models, "mlp_symbolic_batch", "model.onnx")
    resnet = os.path.join(a.optimizer_models, "resnet_bn", "model.onnx")
    berts = [os.path.join(a.optimizer_models, n, "model.onnx") for n in ("bert_encoder_2l", "bert_encoder_2l_opset20")]
    have_dot = shutil.which("dot") is not None

    rc, out, err = run(ingot, "--help")
    check("ingot --help lists inspect", rc == 0 and "inspect" in out, out + err)
    rc, out, err = run(ingot, "inspect", "--help")
    check("inspect --help", rc == 0 and "--dot" in out and "--disable-pass" in out, out + err)

    # Every optimizer model: 'before' equals the file's own op counts; report before -> after.
    for path in [resnet, *berts, os.path.join(a.optimizer_models, "mobilenetv3_block", "model.onnx")]:
        label = os.path.basename(os.path.dirname(path))
        rc, out, err = run(ingot, "inspect", path)
        counts = parse_counts(out)
        check(f"{label}: inspect succeeds", rc == 0 and counts, out[-2000:] + err)
        if not counts:
            continue
        total = counts.pop("total", (-1, -1))
        check(f"{label}: totals add up", total == (sum(b for b, _ in counts.values()), sum(a_ for _, a_ in counts.values())),
              f"{total}")
        before = {op: b for op, (b, _) in counts.items() if b}
        check(f"{label}: 'before' counts equal the onnx package's", before == onnx_op_counts(path),
              f"{before} vs {onnx_op_counts(path)}")
        after_rows = parse_table(out, "after optimization") or []
        after = collections.Counter(r["op"] for r in after_rows)
        check(f"{label}: 'after' counts match the after-table", {o: c for o, (_, c) in counts.items() if c} == dict(after),
              f"{counts} vs {after}")
        print_counts(label, dict(counts, total=total))

    # ResNet: BN folded, every Relu in a conv epilogue.
    rc, out, err = run(ingot, "inspect", resnet, "--after-only")
    rows = parse_table(out, "after optimization") or []
    ops = collections.Counter(r["op"] for r in rows)
    check("resnet_bn: --after-only prints only the after-table",
          rows and parse_table(out, "before optimization") is None, out[:500])
    check("resnet_bn: no BatchNormalization after optimization", rows and ops["BatchNormalization"] == 0, dict(ops))
    check("resnet_bn: no standalone Relu after optimization", rows and ops["Relu"] == 0, dict(ops))
    fused = [r for r in rows if r["op"] == "ingot::FusedConv"]
    check("resnet_bn: the stem FusedConv lists conv, bn and relu",
          any(r["fuses"] == ["stem/conv", "stem/bn", "stem/relu"] for r in fused), fused[:2])

    rc, out, err = run(ingot, "inspect", resnet, "--disable-pass", "fold_batchnorm", "--after-only")
    ops = collections.Counter(r["op"] for r in parse_table(out, "after optimization") or [])
    check("resnet_bn: --disable-pass fold_batchnorm keeps the BatchNormalization nodes",
          rc == 0 and ops["BatchNormalization"] == 8, dict(ops))
    rc, out, err = run(ingot, "inspect", resnet, "--no-optimize")
    counts = parse_counts(out)
    check("resnet_bn: --no-optimize leaves the graph as imported",
          rc == 0 and counts and all(b == a_ for b, a_ in counts.values()), counts)

    for path in berts:
        label = os.path.basename(os.path.dirname(path))
        rc, out, err = run(ingot, "inspect", path, "--after-only")
        check_bert_layers(label, parse_table(out, "after optimization") or [])

    with tempfile.TemporaryDirectory() as tmp:
        # Graphviz text of the optimized graph.
        rc, dot_text, err = run(ingot, "inspect", resnet, "--dot", "-")
        ok = rc == 0 and re.match(r'\s*digraph\s+"[^"]*"\s*\{', dot_text) and dot_text.rstrip().endswith("}")
        check("--dot - writes a digraph to stdout (report on stderr)", ok and "after optimization" in err, dot_text[:300])
        check("--dot graph has FusedConv nodes and shape-labeled edges",
              "FusedConv" in dot_text and 'label="f32[2,16,32,32]"' in dot_text, dot_text[:500])
        dot_file = os.path.join(tmp, "resnet.dot")
        rc, out, err = run(ingot, "inspect", resnet, "--dot", dot_file)
        check("--dot FILE writes the same text", rc == 0 and open(dot_file).read() == dot_text, err)
        if have_dot:
            p = subprocess.run(["dot", "-Tcanon", dot_file], capture_output=True, text=True)
            check("Graphviz parses the --dot output as a digraph", p.returncode == 0 and p.stdout.startswith("digraph"),
                  p.stderr)
            svg = os.path.join(tmp, "resnet.svg")
            rc, out, err = run(ingot, "inspect", resnet, "--svg", svg)
            check("--svg renders an SVG", rc == 0 and os.path.exists(svg) and "<svg" in open(svg).read(), err)
        else:
            print("skip --svg rendering and dot parsing: Graphviz 'dot' is not on PATH")
        empty_bin = os.path.join(tmp, "emptybin")
        os.mkdir(empty_bin)
        rc, out, err = run(ingot, "inspect", resnet, "--svg", os.path.join(tmp, "x.svg"),
                           env=dict(os.environ, PATH=empty_bin))
        check("--svg without Graphviz: clear error", rc != 0 and "Graphviz 'dot'" in err and err.count("\n") == 1, err)

        # Engines: one with an open batch dim and a profile, one fused CNN.
        mlp_engine = os.path.join(tmp, "mlp.engine")
        rc, out, err = run(ingot, "build", mlp, "-o", mlp_engine, "--min-shapes", "x:1x8", "--opt-shapes", "x:4x8",
                           "--max-shapes", "x:16x8")
        check("build the mlp engine", rc == 0, out + err)
        rc, out, err = run(ingot, "inspect", mlp_engine)
        check("engine inspect prints backend, symbolic I/O and the profile",
              rc == 0 and "backend cpu" in out and "x  f32[batch,8]" in out and "probs  f32[batch,4]" in out
              and "min [1,8]  opt [4,8]  max [16,8]" in out, out + err)
        arena = re.search(r"arena\s+.*\((\d+) B\)", out)
        lower = re.search(r"lower bound\s+.*\((\d+) B,", out)
        check("engine inspect prints the arena and its lower bound",
              arena and lower and int(lower.group(1)) <= int(arena.group(1)) and int(arena.group(1)) > 0, out)
        resnet_engine = os.path.join(tmp, "resnet.engine")
        rc, out, err = run(ingot, "build", resnet, "-o", resnet_engine)
        rc, out, err = run(ingot, "inspect", resnet_engine, "--dot", os.path.join(tmp, "engine.dot"))
        steps = re.findall(r"^\s+\d+\s+(\S+)\s+\S+\s+\S+", out.split("steps:")[-1], re.M) if "steps:" in out else []
        check("engine inspect lists the steps with what they fuse",
              rc == 0 and steps.count("ingot::FusedConv") >= 1 and "stem/conv, stem/bn, stem/relu" in out, out + err)
        edot = open(os.path.join(tmp, "engine.dot")).read() if rc == 0 else ""
        check("engine --dot draws the step graph", edot.startswith("digraph") and "FusedConv" in edot and "->" in edot,
              edot[:300])

        # Timing chart from a profile of the engine: one bar per step, longest first, widths
        # proportional to the profile's times (read here from the JSON, not from the chart).
        prof = os.path.join(tmp, "resnet_profile.json")
        rc, out, err = run(ingot, "run", resnet_engine, "--export-profile", prof, "--iterations", "5")
        check("profile the resnet engine", rc == 0 and os.path.exists(prof), out + err)
        layers = json.load(open(prof))["layers"] if rc == 0 else []
        chart = os.path.join(tmp, "chart.svg")
        rc, out, err = run(ingot, "inspect", resnet_engine, "--profile", prof, "--timing-svg", chart)
        check("--profile --timing-svg writes the chart and says so",
              rc == 0 and os.path.exists(chart) and "timing chart: " + chart in out, out + err)
        bars, texts = [], []
        try:
            root = ET.parse(chart).getroot()
            bars = [e for e in root.iter(SVG + "rect") if e.get("class") == "bar"]
            texts = ["".join(e.itertext()) for e in root.iter(SVG + "text")]
            parsed = root.tag == SVG + "svg"
        except (ET.ParseError, OSError) as e:
            parsed = False
            texts = [str(e)]
        check("timing chart is well-formed SVG", parsed, texts[:1])
        check("timing chart has one bar per engine step",
              len(layers) == len(steps) > 0
              and sorted(int(b.get("data-step")) for b in bars) == list(range(len(steps))),
              f"{len(bars)} bars, {len(steps)} steps")
        want_ms = [layers[int(b.get("data-step"))]["medianMs"] for b in bars] if len(bars) == len(layers) else []
        widths = [float(b.get("width")) for b in bars]
        check("timing chart bars are sorted longest first",
              bool(want_ms) and all(want_ms[i] >= want_ms[i + 1] for i in range(len(want_ms) - 1)), str(want_ms))
        longest = max(want_ms, default=0)
        scale = max(widths, default=0) / longest if longest > 0 else 0
        check("timing chart bar widths are proportional to the steps' times",
              scale > 0 and all(abs(w - scale * ms) <= 0.002 * max(widths) + 1e-3 for w, ms in zip(widths, want_ms)),
              f"widths {widths[:6]} ms {want_ms[:6]}")
        labelled = all(any(f"#{l['step']} " in t and l["name"] in t for t in texts) for l in layers)
        total = sum(l["medianMs"] for l in layers)
        check("timing chart labels every step with its name and shows ms and % of total",
              bool(layers) and labelled
              and all(any(f"{100 * l['medianMs'] / total:.1f}%" in t for t in texts) for l in layers[:5]), texts[:8])
        if have_dot:
            rc, out, err = run(ingot, "inspect", resnet_engine, "--profile", prof, "--svg",
                               os.path.join(tmp, "eng.svg"))
            check("--profile with --svg OUT.svg writes OUT.timing.svg beside the graph",
                  rc == 0 and os.path.exists(os.path.join(tmp, "eng.timing.svg"))
                  and os.path.exists(os.path.join(tmp, "eng.svg")), out + err)
        mlp_prof = os.path.join(tmp, "mlp_profile.json")
        run(ingot, "run", mlp_engine, "--export-profile", mlp_prof, "--iterations", "2")
        broken = os.path.join(tmp, "broken.json")
        open(broken, "w").write('{"layers": [{"step": 0,')

        # --diff: a baseline profile against an edited copy (one step slower, one with another
        # tactic, one gone, one renamed as a fusion would, one new), matched and sorted as documented.
        base = json.load(open(prof)) if os.path.exists(prof) else {"layers": []}
        edited = json.loads(json.dumps(base))
        ls = edited["layers"]
        diff_ok = len(ls) >= 5
        if diff_ok:
            ls[0]["medianMs"] += 5.0                      # the largest change
            ls[1]["tactic"] = "cpu.other"                # a tactic that changed
            gone_name = ls[2]["name"]
            renamed = dict(ls[3], name="renamed_step", origins=[ls[3]["name"]])
            ls[3] = renamed                              # matched through its origin
            del ls[2]
            ls.append({"step": 99, "op": "Cast", "name": "new_cast", "tactic": "cpu.reference", "origins": [],
                       "medianMs": 0.5})
            edited_path = os.path.join(tmp, "edited_profile.json")
            json.dump(edited, open(edited_path, "w"))
            diff_svg = os.path.join(tmp, "diff.svg")
            rc, out, err = run(ingot, "inspect", "--diff", prof, edited_path, "--diff-svg", diff_svg)
            total_a = sum(l["medianMs"] for l in base["layers"])
            total_b = sum(l["medianMs"] for l in edited["layers"])
            m = re.search(r"^total ([\d.]+) ms \((\d+) steps\) -> ([\d.]+) ms \((\d+) steps\)", out, re.M)
            check("--diff prints both totals and step counts",
                  rc == 0 and m and abs(float(m.group(1)) - total_a) < 1e-3 and abs(float(m.group(3)) - total_b) < 1e-3
                  and int(m.group(2)) == len(base["layers"]) and int(m.group(4)) == len(edited["layers"]), out + err)
            rows = [l for l in out.splitlines() if re.match(r"^\s+[+-]?[\d.]+\s+(\S+)\s+(\S+)\s+\S", l)]
            check("--diff puts the largest change first", bool(rows) and rows[0].split()[0] == "+5.0000"
                  and base["layers"][0]["name"] in rows[0], "\n".join(rows[:3]))
            check("--diff shows a changed tactic", any("-> cpu.other" in r for r in rows), out)
            check("--diff matches a renamed step by its origin",
                  any(f"{base['layers'][3]['name']} (" in r and "-> renamed_step (" in r for r in rows), out)
            check("--diff lists steps only in A and only in B",
                  f"only in A: {gone_name} (" in out and "only in B: new_cast (Cast)" in out, out)
            try:
                droot = ET.parse(diff_svg).getroot()
                pairs = [e for e in droot.iter(SVG + "rect") if e.get("class") in ("a", "b")]
            except (ET.ParseError, OSError):
                pairs = []
            check("--diff-svg draws a pair of bars per row (at most 40 rows)",
                  len(pairs) == 2 * min(40, len(rows)), f"{len(pairs)} bars, {len(rows)} rows")
            # Profiles timed differently (host wall time against device time) are flagged; the same
            # basis is not.
            check("--diff of two profiles of one basis has no timing warning", "warning:" not in out, out)
            timed = json.loads(json.dumps(base))
            timed["timing"] = "device: each step's GPU time in a CUDA graph replay"
            timed_path = os.path.join(tmp, "device_profile.json")
            json.dump(timed, open(timed_path, "w"))
            rc, out, err = run(ingot, "inspect", "--diff", prof, timed_path)
            check("--diff warns when A is timed on the host and B on the device",
                  rc == 0 and "warning: A's steps are timed on the host, B's on the device" in out, out + err)
        check("--diff test profile has steps", diff_ok, str(len(ls)))

        # Errors: one line on stderr, a non-zero exit.
        junk = os.path.join(tmp, "junk.onnx")
        open(junk, "wb").write(os.urandom(300))
        junk_engine = os.path.join(tmp, "junk.engine")
        open(junk_engine, "wb").write(os.urandom(300))
        junk_other = os.path.join(tmp, "junk.bin")
        open(junk_other, "wb").write(os.urandom(300))
        bad_cases = [
            ("missing file", ["inspect", os.path.join(tmp, "nope.onnx")], "cannot open"),
            ("random bytes as a model", ["inspect", junk], "invalid model"),
            ("random bytes as an engine", ["inspect", junk_engine], "ingot inspect:"),
            ("neither model nor engine", ["inspect", junk_other], "neither an ingot engine nor an ONNX model"),
            ("unknown flag", ["inspect", resnet, "--bogus"], "unknown option '--bogus'"),
            ("unknown pass", ["inspect", resnet, "--disable-pass", "no_such_pass"], "unknown pass 'no_such_pass'"),
            ("model flag on an engine", ["inspect", mlp_engine, "--no-optimize"], "apply to ONNX models"),
            ("no file", ["inspect"], "need a model or engine file"),
            ("flag without value", ["inspect", resnet, "--dot"], "--dot needs a value"),
            ("profile of another engine", ["inspect", resnet_engine, "--profile", mlp_prof, "--timing-svg", chart],
             "the engine has"),
            ("malformed profile", ["inspect", resnet_engine, "--profile", broken, "--timing-svg", chart],
             "malformed JSON"),
            ("missing profile", ["inspect", resnet_engine, "--profile", os.path.join(tmp, "no.json"), "--timing-svg",
                                 chart], "cannot open profile"),
            ("--profile on a model", ["inspect", resnet, "--profile", prof, "--timing-svg", chart],
             "applies to engines"),
            ("--profile with nowhere to draw", ["inspect", resnet_engine, "--profile", prof], "--profile needs --svg"),
            ("--timing-svg without --profile", ["inspect", resnet_engine, "--timing-svg", chart], "--profile"),
            ("--diff with one profile", ["inspect", "--diff", prof], "--diff takes two profiles"),
            ("--diff of a missing profile", ["inspect", "--diff", prof, os.path.join(tmp, "no.json")],
             "cannot open profile"),
            ("--diff of a malformed profile", ["inspect", "--diff", broken, prof], "malformed JSON"),
            ("--diff of JSON without layers", ["inspect", "--diff", prof, os.path.join(tmp, "nolayers.json")],
             "no \"layers\" array"),
        ]
        open(os.path.join(tmp, "nolayers.json"), "w").write('{"steps": []}')
        for name, args, expect in bad_cases:
            rc, out, err = run(ingot, *args)
            lines = [l for l in err.strip().splitlines() if l]
            check(f"error: {name}", rc != 0 and rc < 128 and len(lines) == 1 and expect in err, f"rc={rc} stderr={err!r}")

    return summary()


if __name__ == "__main__":
    sys.exit(main())
