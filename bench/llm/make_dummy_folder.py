#!/usr/bin/env python3
# Copyright ingot authors. Apache-2.0.
"""A Hugging Face model folder with random weights of a config.json's shapes, for serving benchmarks
of real model sizes where the weights cannot travel (vLLM's --load-format dummy, as a folder that
`ingot serve` and transformers both load): config.json, model.safetensors (fp16, std 0.02; Hugging
Face's `safetensors` package), tokenizer.json (a byte-level BPE built with Hugging Face's
`tokenizers`: the 256 byte tokens, synthetic tokens up to the config's vocabulary so every id
decodes, and </s> as the last id; no merges, so text encodes byte by byte) and tokenizer_config.json.

  python3 bench/llm/make_dummy_folder.py bench/llm/llama-3.2-1b.json /tmp/llama1b [--seed 0]
  ingot serve /tmp/llama1b --backend cuda --dtype bf16 &
  python3 bench/serve_llm_bench.py --base-url http://127.0.0.1:8000/v1 --model llama1b ...
"""
import argparse
import json
import os
import sys

import numpy as np
from safetensors.numpy import save_file
from tokenizers import Tokenizer, decoders, models, pre_tokenizers


def write_byte_tokenizer(out, V):
    """tokenizer.json and tokenizer_config.json of a byte-level BPE with V ids (see above)."""
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    if V < len(alphabet) + 1:
        sys.exit(f"vocab_size {V} is smaller than the 256 byte tokens and </s>")
    vocab = {ch: i for i, ch in enumerate(alphabet)}
    for i in range(len(alphabet), V - 1):
        vocab[f"w{i}"] = i
    vocab["</s>"] = V - 1
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(["</s>"])
    tok.save(os.path.join(out, "tokenizer.json"))
    json.dump({"bos_token": None, "eos_token": "</s>"}, open(os.path.join(out, "tokenizer_config.json"), "w"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("config")
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    cfg = json.load(open(a.config))
    os.makedirs(a.out, exist_ok=True)
    json.dump(cfg, open(os.path.join(a.out, "config.json"), "w"), indent=1)
    V, d, ff, L = cfg["vocab_size"], cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    H, Hkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim", d // H)
    rng = np.random.default_rng(a.seed)

    def rand(*shape, center=0.0, std=0.02):
        return (rng.standard_normal(shape, dtype=np.float32) * std + center).astype(np.float16)

    w = {"model.embed_tokens.weight": rand(V, d), "model.norm.weight": rand(d, center=1.0, std=0.05)}
    if not cfg.get("tie_word_embeddings"):
        w["lm_head.weight"] = rand(V, d)
    for l in range(L):
        p = f"model.layers.{l}."
        w[p + "input_layernorm.weight"] = rand(d, center=1.0, std=0.05)
        w[p + "post_attention_layernorm.weight"] = rand(d, center=1.0, std=0.05)
        w[p + "self_attn.q_proj.weight"] = rand(H * hd, d)
        w[p + "self_attn.k_proj.weight"] = rand(Hkv * hd, d)
        w[p + "self_attn.v_proj.weight"] = rand(Hkv * hd, d)
        w[p + "self_attn.o_proj.weight"] = rand(d, H * hd)
        if cfg.get("attention_bias"):
            for n, rows in (("q", H * hd), ("k", Hkv * hd), ("v", Hkv * hd)):
                w[p + f"self_attn.{n}_proj.bias"] = rand(rows)
        w[p + "mlp.gate_proj.weight"] = rand(ff, d)
        w[p + "mlp.up_proj.weight"] = rand(ff, d)
        w[p + "mlp.down_proj.weight"] = rand(d, ff)
    save_file(w, os.path.join(a.out, "model.safetensors"))

    write_byte_tokenizer(a.out, V)
    params = sum(v.size for v in w.values())
    print(f"{a.out}: {params / 1e9:.3f}B parameters (fp16), vocabulary {V}")


if __name__ == "__main__":
    main()
