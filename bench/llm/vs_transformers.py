#!/usr/bin/env python3
# Copyright ingot authors. Apache-2.0.
"""Issue 22's correctness check on the GPU machine: ingot against Hugging Face transformers on the
same random weights (a folder written by make_dummy_folder.py from a config.json).

- fp32: ingot's CPU reference decoder against transformers fp32 on the GPU (TF32 off): greedy tokens
  of P prompts x N tokens, equal sequences counted; at the first difference, transformers' own gap
  between its top two logits says whether the tie was too close for two fp32 summation orders.
- fp16 / bf16: ingot's GPU decoder against transformers in the same precision and against fp32:
  the cosine of the logits after each prompt (min and mean over prompts), and greedy agreement.

  python3 bench/llm/vs_transformers.py --ingot build/dev/tools/ingot --config bench/llm/llama-tiny-4l.json \\
      [--prompts 64 --prompt-len 32 --tokens 128] [--fp32-prompts P --fp32-tokens N] [--out DIR]
Bars (issue 22): fp32 greedy sequences all equal; fp16/bf16 logit cosine >= 0.999. Prints a table;
exit status 0 whatever the numbers (the table says which bars hold), 1 when a run fails.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def run(cmd, what):
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{what} failed ({r.returncode}): {r.stderr[-2000:]}")
    return time.perf_counter() - t0


def cosine(a, b):
    a, b = a.astype(np.float64), b.astype(np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-30))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ingot", required=True)
    ap.add_argument("--config", required=True)
    ap.add_argument("--prompts", type=int, default=64)
    ap.add_argument("--prompt-len", type=int, default=32)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--fp32-prompts", type=int, default=None, help="default --prompts (the CPU decoder is slow at 1B)")
    ap.add_argument("--fp32-tokens", type=int, default=None, help="default --tokens")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    import torch
    import transformers
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    out = a.out or tempfile.mkdtemp(prefix="vs_hf_")
    os.makedirs(out, exist_ok=True)
    folder = os.path.join(out, "model")
    run([sys.executable, os.path.join(HERE, "make_dummy_folder.py"), a.config, folder, "--seed", str(a.seed)],
        "make_dummy_folder")
    cfg = json.load(open(a.config))
    V = cfg["vocab_size"]
    rng = np.random.default_rng(a.seed + 1)
    prompts = rng.integers(300, min(V - 1, 30000), size=(a.prompts, a.prompt_len)).tolist()
    P32 = min(a.fp32_prompts or a.prompts, a.prompts)
    N32 = a.fp32_tokens or a.tokens
    print(f"transformers {transformers.__version__}, torch {torch.__version__}, {torch.cuda.get_device_name()}; "
          f"{a.config}: {a.prompts} prompts x {a.prompt_len} tokens, {a.tokens} generated "
          f"(fp32: {P32} x {N32})", flush=True)

    # ingot: the CPU decoder (fp32), the GPU decoder (fp16, bf16).
    ids32 = os.path.join(out, "ids32.json")
    json.dump(prompts[:P32], open(ids32, "w"))
    ids = os.path.join(out, "ids.json")
    json.dump(prompts, open(ids, "w"))
    runs = {"fp32": ([], ids32, N32), "fp16": (["--backend", "cuda", "--dtype", "fp16"], ids, a.tokens),
            "bf16": (["--backend", "cuda", "--dtype", "bf16"], ids, a.tokens)}
    ig = {}
    for name, (flags, idf, n) in runs.items():
        dt = run([a.ingot, "generate", folder, "--prompt-ids-file", idf, "--max-tokens", str(n), "--ignore-eos",
                  "--logits-out", os.path.join(out, f"ingot_{name}.npy"), "--json-out", os.path.join(out, f"ingot_{name}.json"),
                  *flags], f"ingot generate ({name})")
        ig[name] = (np.load(os.path.join(out, f"ingot_{name}.npy")),
                    [r["token_ids"] for r in json.load(open(os.path.join(out, f"ingot_{name}.json")))["results"]])
        print(f"ingot {name}: {dt:.1f} s", flush=True)

    # transformers on the GPU, each precision.
    hf = {}
    for name, dtype in (("fp32", torch.float32), ("fp16", torch.float16), ("bf16", torch.bfloat16)):
        m = transformers.AutoModelForCausalLM.from_pretrained(folder, torch_dtype=dtype).cuda().eval()
        n_p, n_t = (P32, N32) if name == "fp32" else (a.prompts, a.tokens)
        x = torch.tensor(prompts[:n_p], device="cuda")
        with torch.no_grad():
            last = torch.cat([m(x[i:i + 16]).logits[:, -1].float() for i in range(0, n_p, 16)]).cpu().numpy()
            g = m.generate(x, max_new_tokens=n_t, min_new_tokens=n_t, do_sample=False, output_scores=True,
                           return_dict_in_generate=True, pad_token_id=0)
        toks = g.sequences[:, a.prompt_len:].cpu().tolist()
        scores = torch.stack(g.scores, 1).float().cpu().numpy()  # [prompts, steps, vocab]
        hf[name] = (last, toks, scores)
        del m
        torch.cuda.empty_cache()

    rows = []
    # fp32 greedy: whole sequences equal; where not, transformers' top-two gap at the first difference.
    t_ig = ig["fp32"][1]
    _, t_hf, s_hf = hf["fp32"]
    equal = sum(1 for p, q in zip(t_ig, t_hf) if p == q)
    gaps = []
    for i, (p, q) in enumerate(zip(t_ig, t_hf)):
        if p == q:
            continue
        k = next(j for j, (u, v) in enumerate(zip(p, q)) if u != v)
        top = np.sort(s_hf[i, k])[-2:]
        gaps.append((i, k, float(top[1] - top[0])))
    print(f"\nfp32 greedy (ingot CPU vs transformers GPU, TF32 off): {equal}/{len(t_hf)} sequences of {N32} tokens equal")
    for i, k, gap in gaps[:10]:
        print(f"  prompt {i}: first difference at token {k}; transformers' top-two gap there {gap:.2e}")
    cos32 = [cosine(u, v) for u, v in zip(ig["fp32"][0], hf["fp32"][0])]
    print(f"fp32 last-position logits cosine: min {min(cos32):.8f}")
    rows.append(("fp32 greedy sequences equal", f"{equal}/{len(t_hf)}", equal == len(t_hf)))
    for name in ("fp16", "bf16"):
        li, ti = ig[name]
        lh, th, _ = hf[name]
        l32 = hf["fp32"][0]
        c_same = [cosine(u, v) for u, v in zip(li, lh)]
        c_32 = [cosine(u, l32[i]) for i, u in enumerate(li[:P32])]
        c_hf32 = [cosine(u, l32[i]) for i, u in enumerate(lh[:P32])]
        agree = np.mean([np.mean([x == y for x, y in zip(p, q)]) for p, q in zip(ti, th)])
        print(f"{name}: logits cosine vs transformers {name} min {min(c_same):.6f} mean {np.mean(c_same):.6f}; "
              f"vs fp32 min {min(c_32):.6f} (transformers {name} vs fp32: min {min(c_hf32):.6f}); "
              f"greedy tokens agreeing {100 * agree:.1f}%")
        rows.append((f"{name} logits cosine vs transformers {name} (min)", f"{min(c_same):.6f}", min(c_same) >= 0.999))
    print("\n== ingot vs transformers ==")
    for what, val, ok in rows:
        print(f"{what:<48} {val:>12}  {'meets the bar' if ok else 'BELOW THE BAR'}")
    json.dump({"rows": rows, "fp32_first_differences": gaps}, open(os.path.join(out, "summary.json"), "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
