#!/usr/bin/env python3
# Copyright ingot authors. Apache-2.0.
"""An AutoAWQ checkpoint (tests/data/awq_tiny/awq: projections packed by AutoAWQ's own
WQLinear_GEMM, tests/llm/make_awq_case.py) against the same model with the projections AutoAWQ's
unpacking gives, as plain fp32 (tests/data/awq_tiny/dequant): `ingot generate` on each must give the
same logits bit for bit and the same tokens, with and without --quantization int4 (the AWQ blocks
are kept as they are, no second rounding). Quantized checkpoints ingot does not read are refused by
name, never run as garbage.

Usage: test_awq_folder.py --ingot build/tools/ingot [--backend cpu|cuda]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
CASE = os.path.join(HERE, "..", "data", "awq_tiny")


def generate(ingot, folder, backend, extra, tmp):
    ids = os.path.join(tmp, "ids.json")
    with open(ids, "w") as f:
        json.dump([[1, 2, 3, 4, 5], [7, 8, 9], list(range(20, 60))], f)
    logits = os.path.join(tmp, "logits.npy")
    res = subprocess.run([ingot, "generate", folder, "--prompt-ids-file", ids, "--max-tokens", "6", "--ignore-eos",
                          "--logits-out", logits, "--print-ids", "--backend", backend, *extra],
                         capture_output=True, text=True, timeout=300)
    if res.returncode != 0:
        sys.exit(f"FAIL: ingot generate {folder} {' '.join(extra)}: exit {res.returncode}\n{res.stderr}")
    out_ids = [ln for ln in res.stdout.splitlines() if ln.startswith("ids:")]
    return np.load(logits), out_ids


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ingot", required=True)
    ap.add_argument("--backend", choices=["cpu", "cuda"], default="cpu")
    a = ap.parse_args()
    failures = 0
    tmp = tempfile.mkdtemp(prefix="ingot-awq-")
    want, want_ids = generate(a.ingot, os.path.join(CASE, "dequant"), a.backend, [], tmp)
    for extra in ([], ["--quantization", "int4"]):
        got, got_ids = generate(a.ingot, os.path.join(CASE, "awq"), a.backend, extra, tmp)
        # CPU: the same fp32 weights, so the same bits. GPU: fp16 weights against the 4-bit blocks
        # read as they are, so fp16's rounding apart.
        same = np.array_equal(got, want) if a.backend == "cpu" else None
        cos = min(float(np.dot(x, y) / np.linalg.norm(x) / np.linalg.norm(y)) for x, y in zip(got, want))
        ok = same if same is not None else cos >= 0.9999
        label = "AWQ folder" + (" with " + " ".join(extra) if extra else "")
        if not ok or got_ids != want_ids:
            print(f"FAIL: {label}: logits equal {same}, worst cosine {cos:.7f}, ids {got_ids} vs {want_ids}")
            failures += 1
        else:
            print(f"ok: {label}: the dequantized model's logits ({'bit for bit' if same else f'cosine {cos:.7f}'}) "
                  f"and tokens")
    # Quantized checkpoints it does not read: refused by name.
    for change, words in [({"quant_method": "gptq"}, "quant_method 'gptq'"),
                          ({"version": "gemv"}, "version 'gemv'"),
                          ({"zero_point": False}, "zero_point false"),
                          ({"group_size": 48}, "group_size 48")]:
        folder = os.path.join(tmp, "changed")
        shutil.rmtree(folder, ignore_errors=True)
        shutil.copytree(os.path.join(CASE, "awq"), folder)
        cfg = json.load(open(os.path.join(folder, "config.json")))
        cfg["quantization_config"].update(change)
        json.dump(cfg, open(os.path.join(folder, "config.json"), "w"))
        res = subprocess.run([a.ingot, "generate", folder, "--prompt", "hi", "--max-tokens", "1"],
                             capture_output=True, text=True, timeout=120)
        if res.returncode != 1 or words not in res.stderr:
            print(f"FAIL: quantization_config {change}: exit {res.returncode}, stderr {res.stderr!r}")
            failures += 1
        else:
            print(f"ok: quantization_config {change} refused: {res.stderr.strip()}")
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"{failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
