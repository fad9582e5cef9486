#!/usr/bin/env python3
# Copyright ingot authors. Apache-2.0.
"""`ingot serve` under the serving benchmark's load on a random-weight model (issue 22's serving
figure, here on the CPU at toy size): random weights emit random byte-level tokens, whose text is
often ill-formed UTF-8. Every streamed request must complete with all its tokens and parse as JSON
(once, such text killed the server from inside the JSON writer).

  python3 tests/llm/test_serve_random_tokens.py --ingot build/tools/ingot
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINY = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 2000,
        "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
        "tie_word_embeddings": False, "bos_token_id": 0, "eos_token_id": 1999}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ingot", required=True)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        cfg = os.path.join(d, "config.json")
        json.dump(TINY, open(cfg, "w"))
        folder = os.path.join(d, "model")
        subprocess.run([sys.executable, os.path.join(ROOT, "bench/llm/make_dummy_folder.py"), cfg, folder], check=True)
        out = os.path.join(d, "serve.json")
        n, out_len = 24, 40
        r = subprocess.run([sys.executable, os.path.join(ROOT, "bench/serve_llm_bench.py"), "--gguf", folder,
                            "--ingot", a.ingot, "--model", "dummy", "--serve-flags",
                            "--kv-blocks 2048 --max-num-seqs 8 --max-num-batched-tokens 128", "--num-prompts", str(n),
                            "--concurrency", "8", "--input-len", "60", "--output-len", str(out_len),
                            "--vocab-low", "3", "--vocab-high", "1999", "--out", out],
                           capture_output=True, text=True, timeout=600)
        print(r.stdout)
        if r.returncode != 0:
            print(r.stderr[-3000:], file=sys.stderr)
            print(f"FAIL: the serving benchmark exited with {r.returncode}")
            return 1
        s = json.load(open(out))
        bad = []
        if s["completed"] != n:
            bad.append(f"{s['completed']} of {n} requests completed ({s['failed']} failed, {s['refused_503']} refused)")
        if round(s["output_tok_s"] * s["duration_s"]) != n * out_len:
            bad.append(f"{s['output_tok_s'] * s['duration_s']:.0f} output tokens, {n * out_len} expected")
        for b in bad:
            print("FAIL:", b)
        if not bad:
            print(f"ok: {n} streamed requests of {out_len} random tokens each completed")
        return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
