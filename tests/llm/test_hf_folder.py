#!/usr/bin/env python3
# Copyright ingot authors. Apache-2.0.
"""`ingot generate HF_FOLDER`: a Hugging Face model folder (config.json, safetensors written by
Hugging Face's `safetensors` package, tokenizer.json trained by Hugging Face's `tokenizers`,
tokenizer_config.json) against a NumPy fp64 reference of transformers' Llama written here from its
modeling code's conventions: rotate-half rotary embeddings (q * cos + rotate_half(q) * sin with the
frequencies repeated twice), Llama-3 frequency scaling, grouped-query attention by repeating K/V
heads, RMSNorm, SiLU-gated MLP, tied or untied head, Qwen2's q/k/v biases. Three folders: Llama
(fp32, one file), Qwen2 (fp16 weights, sharded with model.safetensors.index.json, tied
embeddings), Llama-3 scaling. Every greedy token must match the reference's (a near-tie of the top
two logits ends the comparison there, said so). Broken folders are one clear error.

Usage: test_hf_folder.py --ingot build/tools/ingot
"""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
from safetensors.numpy import save_file
from tokenizers import ByteLevelBPETokenizer

CORPUS = ["the quick brown fox jumps over the lazy dog", "hello world, hello ingot", "a model folder of weights",
          "tokens and merges and bytes", "the capital of france is paris"] * 20


def make_tokenizer(folder):
    tok = ByteLevelBPETokenizer()
    tok.train_from_iterator(CORPUS, vocab_size=400, min_frequency=1, special_tokens=["<s>", "</s>"])
    tok.save(os.path.join(folder, "tokenizer.json"))
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": "<s>", "eos_token": {"content": "</s>"}}, f)
    return tok.get_vocab_size()


def make_folder(root, name, vocab, cfg, dtype=np.float32, shards=1, seed=0):
    folder = os.path.join(root, name)
    os.makedirs(folder)
    cfg = dict(cfg, vocab_size=vocab)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(cfg, f)
    rng = np.random.default_rng(seed)
    d, ff, L = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    H, Hkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = d // H
    w = {"model.embed_tokens.weight": rng.normal(0, 0.5, (vocab, d)),
         "model.norm.weight": 1 + rng.normal(0, 0.1, d)}
    if not cfg.get("tie_word_embeddings"):
        w["lm_head.weight"] = rng.normal(0, 0.2, (vocab, d))
    for l in range(L):
        p = f"model.layers.{l}."
        w[p + "input_layernorm.weight"] = 1 + rng.normal(0, 0.1, d)
        w[p + "post_attention_layernorm.weight"] = 1 + rng.normal(0, 0.1, d)
        w[p + "self_attn.q_proj.weight"] = rng.normal(0, 0.3, (H * hd, d))
        w[p + "self_attn.k_proj.weight"] = rng.normal(0, 0.3, (Hkv * hd, d))
        w[p + "self_attn.v_proj.weight"] = rng.normal(0, 0.2, (Hkv * hd, d))
        w[p + "self_attn.o_proj.weight"] = rng.normal(0, 0.2, (d, H * hd))
        if cfg.get("attention_bias"):
            w[p + "self_attn.q_proj.bias"] = rng.normal(0, 0.2, H * hd)
            w[p + "self_attn.k_proj.bias"] = rng.normal(0, 0.2, Hkv * hd)
            w[p + "self_attn.v_proj.bias"] = rng.normal(0, 0.2, Hkv * hd)
        w[p + "mlp.gate_proj.weight"] = rng.normal(0, 0.2, (ff, d))
        w[p + "mlp.up_proj.weight"] = rng.normal(0, 0.2, (ff, d))
        w[p + "mlp.down_proj.weight"] = rng.normal(0, 0.2, (d, ff))
    w = {k: v.astype(dtype) for k, v in w.items()}
    names = sorted(w)
    if shards == 1:
        save_file(w, os.path.join(folder, "model.safetensors"))
    else:
        weight_map = {}
        for s in range(shards):
            file = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
            part = {n: w[n] for n in names[s::shards]}
            save_file(part, os.path.join(folder, file))
            weight_map.update({n: file for n in part})
        with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {}, "weight_map": weight_map}, f)
    return folder, cfg, {k: v.astype(np.float64) for k, v in w.items()}


class HfLlama:
    """transformers' LlamaForCausalLM / Qwen2ForCausalLM forward, in NumPy fp64 (whole sequence)."""

    def __init__(self, cfg, w):
        self.c, self.w = cfg, w
        d, H = cfg["hidden_size"], cfg["num_attention_heads"]
        self.hd = d // H
        inv = 1.0 / (cfg.get("rope_theta", 10000.0) ** (np.arange(0, self.hd, 2) / self.hd))
        rs = cfg.get("rope_scaling")
        if rs and rs.get("rope_type") == "llama3":  # transformers' _compute_llama3_parameters
            factor, lo, hi, old = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"], \
                rs["original_max_position_embeddings"]
            wavelen = 2 * math.pi / inv
            scaled = np.where(wavelen > old / lo, inv / factor, inv)
            smooth = (old / wavelen - lo) / (hi - lo)
            smoothed = (1 - smooth) * scaled / factor + smooth * scaled
            medium = ~(wavelen < old / hi) & ~(wavelen > old / lo)
            inv = np.where(medium, smoothed, scaled)
        self.inv = inv

    def rms(self, x, g):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + self.c.get("rms_norm_eps", 1e-6)) * g

    @staticmethod
    def rotate_half(x):
        h = x.shape[-1] // 2
        return np.concatenate([-x[..., h:], x[..., :h]], axis=-1)

    def logits(self, ids):
        c, w, hd = self.c, self.w, self.hd
        H, Hkv, T = c["num_attention_heads"], c["num_key_value_heads"], len(ids)
        x = w["model.embed_tokens.weight"][ids]
        freqs = np.outer(np.arange(T), self.inv)
        emb = np.concatenate([freqs, freqs], axis=-1)
        cos, sin = np.cos(emb)[:, None, :], np.sin(emb)[:, None, :]
        mask = np.triu(np.full((T, T), -np.inf), 1)
        for l in range(c["num_hidden_layers"]):
            p = f"model.layers.{l}."
            h = self.rms(x, w[p + "input_layernorm.weight"])
            proj = lambda n, nh: (h @ w[p + f"self_attn.{n}_proj.weight"].T
                                  + w.get(p + f"self_attn.{n}_proj.bias", 0)).reshape(T, nh, hd)
            q, k, v = proj("q", H), proj("k", Hkv), proj("v", Hkv)
            q = q * cos + self.rotate_half(q) * sin
            k = k * cos + self.rotate_half(k) * sin
            k, v = np.repeat(k, H // Hkv, axis=1), np.repeat(v, H // Hkv, axis=1)
            s = np.einsum("thd,shd->hts", q, k) / math.sqrt(hd) + mask
            s = np.exp(s - s.max(-1, keepdims=True))
            s /= s.sum(-1, keepdims=True)
            att = np.einsum("hts,shd->thd", s, v).reshape(T, H * hd)
            x = x + att @ w[p + "self_attn.o_proj.weight"].T
            h = self.rms(x, w[p + "post_attention_layernorm.weight"])
            g = h @ w[p + "mlp.gate_proj.weight"].T
            u = h @ w[p + "mlp.up_proj.weight"].T
            x = x + (g / (1 + np.exp(-g)) * u) @ w[p + "mlp.down_proj.weight"].T
        x = self.rms(x[-1], w["model.norm.weight"])
        head = w.get("lm_head.weight", w["model.embed_tokens.weight"])
        return head @ x


def generate(ingot, folder, prompt, n):
    res = subprocess.run([ingot, "generate", folder, "--prompt", prompt, "--max-tokens", str(n), "--print-ids",
                          "--ignore-eos"], capture_output=True, text=True, errors="replace", timeout=300)
    if res.returncode != 0:
        return None, None, res
    prompt_ids = ids = None
    for ln in res.stdout.splitlines():
        if ln.startswith("prompt ids:"):
            prompt_ids = [int(t) for t in ln.split(":")[1].split()]
        elif ln.startswith("ids:"):
            ids = [int(t) for t in ln.split(":")[1].split()]
    return prompt_ids, ids, res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ingot", required=True)
    a = ap.parse_args()
    root = tempfile.mkdtemp(prefix="ingot-hf-")
    tok_dir = os.path.join(root, "tok")
    os.makedirs(tok_dir)
    vocab = make_tokenizer(tok_dir)
    base = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 96,
            "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "rms_norm_eps": 1e-5,
            "max_position_embeddings": 512, "rope_theta": 10000.0, "tie_word_embeddings": False}
    cases = [("llama_f32", base, np.float32, 1),
             ("qwen2_f16_sharded", dict(base, model_type="qwen2", architectures=["Qwen2ForCausalLM"],
                                        attention_bias=True, tie_word_embeddings=True, num_key_value_heads=1,
                                        rope_theta=1000000.0), np.float16, 3),
             ("llama3_scaling", dict(base, rope_theta=500000.0,
                                     rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                                   "high_freq_factor": 4.0,
                                                   "original_max_position_embeddings": 16}), np.float32, 1)]
    failures = compared = 0
    n = 12
    for i, (name, cfg, dtype, shards) in enumerate(cases):
        folder, cfg, w = make_folder(root, name, vocab, cfg, dtype, shards, seed=i)
        for f in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(os.path.join(tok_dir, f), folder)
        ref = HfLlama(cfg, w)
        prompt_ids, got, res = generate(a.ingot, folder, "hello world, the quick brown fox", n)
        if got is None or prompt_ids is None:
            print(f"FAIL: {name}: ingot generate exited {res.returncode}:\n{res.stdout}\n{res.stderr}")
            failures += 1
            continue
        seq, ok = list(prompt_ids), 0
        for j, t in enumerate(got):
            lg = ref.logits(seq)
            want = int(np.argmax(lg))
            if t != want:
                top = np.sort(lg)[-2:]
                if abs(lg[t] - lg[want]) <= 1e-3 * max(1.0, abs(top[-1])):
                    print(f"note: {name}: token {j}: a near-tie of the top two logits: compared up to here")
                    break
                print(f"FAIL: {name}: token {j}: ingot {t}, reference {want} (logits {lg[t]:.4f} vs {lg[want]:.4f})")
                failures += 1
                break
            ok += 1
            seq.append(t)
        compared += ok
        print(f"{'ok' if ok == len(got) else 'compared'}: {name}: {ok} of {len(got)} greedy tokens equal to the NumPy "
              f"reference (prompt {len(prompt_ids)} ids)")
    # Broken folders: one clear error naming what is wrong.
    folder = os.path.join(root, "llama_f32")
    broken = os.path.join(root, "broken")
    shutil.copytree(folder, broken)
    os.remove(os.path.join(broken, "tokenizer.json"))
    _, _, res = generate(a.ingot, broken, "x", 1)
    if res.returncode != 1 or "tokenizer.json" not in res.stderr:
        print(f"FAIL: a folder without tokenizer.json: exit {res.returncode}, {res.stderr!r}")
        failures += 1
    shutil.copy(os.path.join(folder, "tokenizer.json"), broken)
    cfg = json.load(open(os.path.join(broken, "config.json")))
    cfg["num_hidden_layers"] = 3
    json.dump(cfg, open(os.path.join(broken, "config.json"), "w"))
    _, _, res = generate(a.ingot, broken, "x", 1)
    if res.returncode != 1 or "model.layers.2." not in res.stderr:
        print(f"FAIL: a config with a layer the weights lack: exit {res.returncode}, {res.stderr!r}")
        failures += 1
    print(f"{compared} greedy tokens equal to the reference, {failures} failures")
    return 1 if failures or compared < 2 * n else 0


if __name__ == "__main__":
    sys.exit(main())
