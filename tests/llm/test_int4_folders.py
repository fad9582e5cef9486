#!/usr/bin/env python3
# Copyright ingot authors. Apache-2.0.
"""4-bit Hugging Face checkpoints (tests/data/int4_tiny, written by the quantizers' own code:
tests/llm/make_int4_cases.py): AutoAWQ's gemm packing, AutoGPTQ's (v1) format, and compressed-tensors' pack-quantized
W4A16, symmetric and with zero points; AutoGPTQ's act-order (desc_act) too. Each against the same model with the projections the
quantizer's own unpacking gives, as plain fp32 (its _dequant twin): `ingot generate` must give the
same logits bit for bit and the same tokens, with --quantization int4, none or unset (the blocks are
kept as they are, no second rounding). Unset, a checkpoint stored in 4 bits runs as int4 weights (as
vLLM runs a quantized checkpoint); `none` runs its values as floats: the precision ingot reports
says which. Quantized checkpoints ingot does not read are refused by
name, never run as garbage.

Usage: test_int4_folders.py --ingot build/tools/ingot
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
CASES = os.path.join(HERE, "..", "data", "int4_tiny")


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
    return np.load(logits), out_ids, res.stderr


def refused(ingot, folder, words, label):
    """`ingot generate` on the folder must exit 1 with `words` in its error; prints ok or FAIL."""
    res = subprocess.run([ingot, "generate", folder, "--prompt", "hi", "--max-tokens", "1"],
                         capture_output=True, text=True, timeout=120)
    if res.returncode != 1 or words not in res.stderr:
        print(f"FAIL: {label}: exit {res.returncode}, stderr {res.stderr!r}")
        return False
    print(f"ok: {label} refused: {res.stderr.strip()}")
    return True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ingot", required=True)
    ap.add_argument("--backend", choices=["cpu", "cuda"], default="cpu")
    a = ap.parse_args()
    failures = 0
    tmp = tempfile.mkdtemp(prefix="ingot-int4-")
    # GPTQ act-order (gptq_act): its blocks' groups are not runs of inputs, so it runs as its exact
    # floats, unset or none (--quantization int4 would round it again: not this comparison).
    stored = (([], True), (["--quantization", "int4"], True), (["--quantization", "none"], False))
    as_floats = (([], False), (["--quantization", "none"], False))
    for case in ("awq", "gptq", "gptq_act", "ct_sym", "ct_asym"):
        want, want_ids, want_err = generate(a.ingot, os.path.join(CASES, case + "_dequant"), a.backend, [], tmp)
        if "int4" in want_err:
            print(f"FAIL: {case}_dequant (fp32 weights) reports int4 weights: {want_err.strip()}")
            failures += 1
        for extra, runs_int4 in as_floats if case == "gptq_act" else stored:
            got, got_ids, err = generate(a.ingot, os.path.join(CASES, case), a.backend, extra, tmp)
            if ("int4 weights" in err) != runs_int4:
                print(f"FAIL: {case} {' '.join(extra) or '(unset)'}: int4 weights {not runs_int4} by its report, "
                      f"want {runs_int4}: {err.strip()}")
                failures += 1
            # CPU: the same fp32 weights, so the same bits. GPU: fp16 weights against the 4-bit
            # blocks read as they are, so fp16's rounding apart.
            same = np.array_equal(got, want) if a.backend == "cpu" else None
            cos = min(float(np.dot(x, y) / np.linalg.norm(x) / np.linalg.norm(y)) for x, y in zip(got, want))
            ok = same if same is not None else cos >= 0.9999
            label = case + (" with " + " ".join(extra) if extra else "")
            if not ok or got_ids != want_ids:
                print(f"FAIL: {label}: logits equal {same}, worst cosine {cos:.7f}, ids {got_ids} vs {want_ids}")
                failures += 1
            else:
                print(f"ok: {label}: the unpacked model's logits ({'bit for bit' if same else f'cosine {cos:.7f}'}) "
                      f"and tokens")
    # Quantized checkpoints it does not read: refused by name.
    ct_weights = lambda **kw: {"config_groups": {"group_0": {  # noqa: E731
        "targets": ["Linear"], "input_activations": kw.pop("acts", None),
        "weights": {"num_bits": 4, "type": "int", "symmetric": True, "strategy": "group", "group_size": 32, **kw}}}}
    for case, change, words in [("awq", {"quant_method": "exl2"}, "quant_method 'exl2'"),
                                ("gptq", {"checkpoint_format": "marlin"}, "checkpoint_format 'marlin'"),
                                ("gptq", {"bits": 8}, "bits 8"),
                                ("awq", {"version": "gemv"}, "version 'gemv'"),
                                ("awq", {"zero_point": False}, "zero_point false"),
                                ("awq", {"group_size": 48}, "group_size 48"),
                                ("ct_sym", {"format": "float-quantized"}, "format 'float-quantized'"),
                                ("ct_sym", ct_weights(num_bits=8), "8-bit int"),
                                ("ct_sym", ct_weights(strategy="channel"), "strategy 'channel'"),
                                ("ct_sym", ct_weights(actorder="group"), "actorder 'group'"),
                                ("ct_sym", ct_weights(acts={"num_bits": 8, "type": "int"}), "activations quantized"),
                                ("ct_sym", ct_weights(group_size=16), "group_size 16")]:
        folder = os.path.join(tmp, "changed")
        shutil.rmtree(folder, ignore_errors=True)
        shutil.copytree(os.path.join(CASES, case), folder)
        cfg = json.load(open(os.path.join(folder, "config.json")))
        cfg["quantization_config"].update(change)
        json.dump(cfg, open(os.path.join(folder, "config.json"), "w"))
        failures += not refused(a.ingot, folder, words, f"{case} with quantization_config {change}")
    # g_idx tensors that do not cut the inputs into groups of group_size: refused by name; and a
    # checkpoint that says desc_act but has no g_idx.
    from safetensors.numpy import load_file, save_file
    key = "model.layers.0.self_attn.q_proj.g_idx"
    for label, change, words in [("g_idx all zeros", lambda t: t.__setitem__(key, np.zeros_like(t[key])),
                                  "g_idx gives group 0 64 inputs, not group_size 32"),
                                 ("g_idx past the groups", lambda t: t.__setitem__(key, t[key] + 1),
                                  "outside [0, 2)"),
                                 ("no g_idx", lambda t: t.pop(key), "has no g_idx, and config.json says desc_act")]:
        folder = os.path.join(tmp, "bad_g_idx")
        shutil.rmtree(folder, ignore_errors=True)
        shutil.copytree(os.path.join(CASES, "gptq_act"), folder)
        tensors = load_file(os.path.join(folder, "model.safetensors"))
        change(tensors)
        save_file(tensors, os.path.join(folder, "model.safetensors"))
        failures += not refused(a.ingot, folder, words, label)
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"{failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
