#!/usr/bin/env python3
# Copyright ingot authors. Apache-2.0.
"""4-bit Hugging Face checkpoints (tests/data/int4_tiny, written by the quantizers' own code:
tests/llm/make_int4_cases.py): AutoAWQ's gemm packing, AutoGPTQ's (v1) format, and compressed-tensors' pack-quantized
W4A16, symmetric and with zero points. Each against the same model with the projections the
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ingot", required=True)
    ap.add_argument("--backend", choices=["cpu", "cuda"], default="cpu")
    a = ap.parse_args()
    failures = 0
    tmp = tempfile.mkdtemp(prefix="ingot-int4-")
    for case in ("awq", "gptq", "ct_sym", "ct_asym"):
        want, want_ids, want_err = generate(a.ingot, os.path.join(CASES, case + "_dequant"), a.backend, [], tmp)
        if "int4" in want_err:
            print(f"FAIL: {case}_dequant (fp32 weights) reports int4 weights: {want_err.strip()}")
            failures += 1
        for extra, runs_int4 in (([], True), (["--quantization", "int4"], True), (["--quantization", "none"], False)):
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
                                ("gptq", {"desc_act": True}, "desc_act true"),
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
        res = subprocess.run([a.ingot, "generate", folder, "--prompt", "hi", "--max-tokens", "1"],
                             capture_output=True, text=True, timeout=120)
        if res.returncode != 1 or words not in res.stderr:
            print(f"FAIL: {case} with quantization_config {change}: exit {res.returncode}, stderr {res.stderr!r}")
            failures += 1
        else:
            print(f"ok: {case} with quantization_config {change} refused: {res.stderr.strip()}")
    # A GPTQ checkpoint whose g_idx is not k / group (act-order) although its config says desc_act
    # false: the tensor is checked, and refused by name.
    from safetensors.numpy import load_file, save_file
    folder = os.path.join(tmp, "act_order")
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(os.path.join(CASES, "gptq"), folder)
    tensors = load_file(os.path.join(folder, "model.safetensors"))
    key = "model.layers.0.self_attn.q_proj.g_idx"
    tensors[key] = tensors[key][::-1].copy()
    save_file(tensors, os.path.join(folder, "model.safetensors"))
    res = subprocess.run([a.ingot, "generate", folder, "--prompt", "hi", "--max-tokens", "1"],
                         capture_output=True, text=True, timeout=120)
    if res.returncode != 1 or "act-order groups" not in res.stderr:
        print(f"FAIL: a permuted g_idx: exit {res.returncode}, stderr {res.stderr!r}")
        failures += 1
    else:
        print(f"ok: a permuted g_idx refused: {res.stderr.strip()}")
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"{failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
