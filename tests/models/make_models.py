#!/usr/bin/env python3
"""Builds the whole-model test set with the onnx Python API and records onnxruntime's outputs.

Each model is written as <out>/<name>/model.onnx with test_data_set_<k>/{input,output}_<j>.pb,
the layout of ONNX's own node tests, so the same conformance runner checks ingot's CPU backend
against onnxruntime within fp32 tolerance:
  - cnn_small: Conv + BatchNormalization + Relu, MaxPool, a residual Add, GlobalAveragePool,
    Flatten and a Gemm head (opset 17).
  - transformer_encoder_2l: two encoder layers with LayerNormalization, MatMul/Softmax multi-head
    attention with an additive mask, a Gelu-op FFN in layer 0 and an Erf-form GELU in layer 1
    (opset 20).
  - mlp_symbolic_batch: a symbolic "batch" dim, run at batch 2 and batch 5 (two data sets).
"""
import argparse
import os
import shutil

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
import onnxruntime as ort

RNG = np.random.default_rng(20261129)


def w(name, *shape, scale=0.2):
    return numpy_helper.from_array((RNG.standard_normal(shape) * scale).astype(np.float32), name)


def const(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def cnn_small():
    inits, nodes = [], []

    def conv_bn_relu(x, cin, cout, name, stride=1, relu=True):
        inits.extend([w(f"{name}.w", cout, cin, 3, 3), w(f"{name}.b", cout, scale=0.05),
                      const(f"{name}.gamma", (1 + 0.1 * RNG.standard_normal(cout)).astype(np.float32)),
                      const(f"{name}.beta", (0.1 * RNG.standard_normal(cout)).astype(np.float32)),
                      const(f"{name}.mean", (0.1 * RNG.standard_normal(cout)).astype(np.float32)),
                      const(f"{name}.var", (0.5 + RNG.random(cout)).astype(np.float32))])
        nodes.append(helper.make_node("Conv", [x, f"{name}.w", f"{name}.b"], [f"{name}.conv"], name=f"{name}/conv",
                                      kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[stride, stride]))
        nodes.append(helper.make_node("BatchNormalization", [f"{name}.conv", f"{name}.gamma", f"{name}.beta",
                                                             f"{name}.mean", f"{name}.var"], [f"{name}.bn"],
                                      name=f"{name}/bn", epsilon=1e-5))
        if not relu:
            return f"{name}.bn"
        nodes.append(helper.make_node("Relu", [f"{name}.bn"], [f"{name}.out"], name=f"{name}/relu"))
        return f"{name}.out"

    x = conv_bn_relu("input", 3, 8, "stem")
    nodes.append(helper.make_node("MaxPool", [x], ["pool"], name="pool", kernel_shape=[2, 2], strides=[2, 2]))
    y = conv_bn_relu("pool", 8, 8, "block1a")
    y = conv_bn_relu(y, 8, 8, "block1b", relu=False)
    nodes.append(helper.make_node("Add", [y, "pool"], ["res"], name="residual_add"))
    nodes.append(helper.make_node("Relu", ["res"], ["res_relu"], name="res_relu"))
    z = conv_bn_relu("res_relu", 8, 16, "down", stride=2)
    nodes.append(helper.make_node("GlobalAveragePool", [z], ["gap"], name="gap"))
    nodes.append(helper.make_node("Flatten", ["gap"], ["flat"], name="flatten", axis=1))
    inits.extend([w("fc.w", 10, 16), w("fc.b", 10, scale=0.05)])
    nodes.append(helper.make_node("Gemm", ["flat", "fc.w", "fc.b"], ["logits"], name="fc", transB=1))
    graph = helper.make_graph(nodes, "cnn_small",
                              [helper.make_tensor_value_info("input", TensorProto.FLOAT, [2, 3, 32, 32])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [2, 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return model, [{"input": RNG.standard_normal((2, 3, 32, 32)).astype(np.float32)}]


def transformer_encoder_2l():
    B, S, H, NH = 2, 16, 32, 4
    D = H // NH
    inits, nodes = [], []
    inits.append(const("shape_split", np.array([B, S, NH, D], dtype=np.int64)))
    inits.append(const("shape_merge", np.array([B, S, H], dtype=np.int64)))
    inits.append(const("scale", np.array(1.0 / np.sqrt(D), dtype=np.float32)))
    inits.append(const("neg_big", np.array(-1e4, dtype=np.float32)))
    inits.append(const("one", np.array(1.0, dtype=np.float32)))
    inits.append(const("half", np.array(0.5, dtype=np.float32)))
    inits.append(const("sqrt2", np.array(np.sqrt(2.0), dtype=np.float32)))
    inits.append(const("mask_axes", np.array([1, 2], dtype=np.int64)))
    # mask [B, S] of 1 (keep) / 0 (pad) → additive [B, 1, 1, S]
    nodes.append(helper.make_node("Cast", ["mask"], ["mask_f"], to=TensorProto.FLOAT))
    nodes.append(helper.make_node("Sub", ["one", "mask_f"], ["mask_inv"]))
    nodes.append(helper.make_node("Mul", ["mask_inv", "neg_big"], ["mask_add2d"]))
    nodes.append(helper.make_node("Unsqueeze", ["mask_add2d", "mask_axes"], ["mask_add"]))
    x = "x"
    for layer in range(2):
        p = f"l{layer}"
        for n in ("q", "k", "v", "o"):
            inits.extend([w(f"{p}.{n}.w", H, H), w(f"{p}.{n}.b", H, scale=0.05)])
        inits.extend([const(f"{p}.ln1.g", (1 + 0.1 * RNG.standard_normal(H)).astype(np.float32)),
                      const(f"{p}.ln1.b", (0.1 * RNG.standard_normal(H)).astype(np.float32)),
                      const(f"{p}.ln2.g", (1 + 0.1 * RNG.standard_normal(H)).astype(np.float32)),
                      const(f"{p}.ln2.b", (0.1 * RNG.standard_normal(H)).astype(np.float32)),
                      w(f"{p}.ff1.w", H, 4 * H), w(f"{p}.ff1.b", 4 * H, scale=0.05),
                      w(f"{p}.ff2.w", 4 * H, H), w(f"{p}.ff2.b", H, scale=0.05)])
        heads = {}
        for n in ("q", "k", "v"):
            nodes.append(helper.make_node("MatMul", [x, f"{p}.{n}.w"], [f"{p}.{n}.mm"]))
            nodes.append(helper.make_node("Add", [f"{p}.{n}.mm", f"{p}.{n}.b"], [f"{p}.{n}.lin"]))
            nodes.append(helper.make_node("Reshape", [f"{p}.{n}.lin", "shape_split"], [f"{p}.{n}.split"]))
            perm = [0, 2, 3, 1] if n == "k" else [0, 2, 1, 3]
            nodes.append(helper.make_node("Transpose", [f"{p}.{n}.split"], [f"{p}.{n}.heads"], perm=perm))
            heads[n] = f"{p}.{n}.heads"
        nodes.append(helper.make_node("MatMul", [heads["q"], heads["k"]], [f"{p}.scores"]))
        nodes.append(helper.make_node("Mul", [f"{p}.scores", "scale"], [f"{p}.scaled"]))
        nodes.append(helper.make_node("Add", [f"{p}.scaled", "mask_add"], [f"{p}.masked"]))
        nodes.append(helper.make_node("Softmax", [f"{p}.masked"], [f"{p}.probs"], axis=-1))
        nodes.append(helper.make_node("MatMul", [f"{p}.probs", heads["v"]], [f"{p}.ctx"]))
        nodes.append(helper.make_node("Transpose", [f"{p}.ctx"], [f"{p}.ctx_t"], perm=[0, 2, 1, 3]))
        nodes.append(helper.make_node("Reshape", [f"{p}.ctx_t", "shape_merge"], [f"{p}.ctx_m"]))
        nodes.append(helper.make_node("MatMul", [f"{p}.ctx_m", f"{p}.o.w"], [f"{p}.o.mm"]))
        nodes.append(helper.make_node("Add", [f"{p}.o.mm", f"{p}.o.b"], [f"{p}.attn"]))
        nodes.append(helper.make_node("Add", [x, f"{p}.attn"], [f"{p}.res1"]))
        nodes.append(helper.make_node("LayerNormalization", [f"{p}.res1", f"{p}.ln1.g", f"{p}.ln1.b"], [f"{p}.ln1"],
                                      axis=-1, epsilon=1e-5))
        nodes.append(helper.make_node("MatMul", [f"{p}.ln1", f"{p}.ff1.w"], [f"{p}.ff1.mm"]))
        nodes.append(helper.make_node("Add", [f"{p}.ff1.mm", f"{p}.ff1.b"], [f"{p}.ff1"]))
        if layer == 0:
            nodes.append(helper.make_node("Gelu", [f"{p}.ff1"], [f"{p}.act"]))
        else:  # the Erf form exporters emit: 0.5 * x * (1 + erf(x / sqrt(2)))
            nodes.append(helper.make_node("Div", [f"{p}.ff1", "sqrt2"], [f"{p}.g_div"]))
            nodes.append(helper.make_node("Erf", [f"{p}.g_div"], [f"{p}.g_erf"]))
            nodes.append(helper.make_node("Add", [f"{p}.g_erf", "one"], [f"{p}.g_add"]))
            nodes.append(helper.make_node("Mul", [f"{p}.ff1", f"{p}.g_add"], [f"{p}.g_mul"]))
            nodes.append(helper.make_node("Mul", [f"{p}.g_mul", "half"], [f"{p}.act"]))
        nodes.append(helper.make_node("MatMul", [f"{p}.act", f"{p}.ff2.w"], [f"{p}.ff2.mm"]))
        nodes.append(helper.make_node("Add", [f"{p}.ff2.mm", f"{p}.ff2.b"], [f"{p}.ff2"]))
        nodes.append(helper.make_node("Add", [f"{p}.ln1", f"{p}.ff2"], [f"{p}.res2"]))
        out = "y" if layer == 1 else f"{p}.out"
        nodes.append(helper.make_node("LayerNormalization", [f"{p}.res2", f"{p}.ln2.g", f"{p}.ln2.b"], [out],
                                      axis=-1, epsilon=1e-5))
        x = out
    graph = helper.make_graph(nodes, "transformer_encoder_2l",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [B, S, H]),
                               helper.make_tensor_value_info("mask", TensorProto.INT64, [B, S])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [B, S, H])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    mask = np.ones((B, S), dtype=np.int64)
    mask[1, 11:] = 0  # the second sequence is padded
    return model, [{"x": RNG.standard_normal((B, S, H)).astype(np.float32), "mask": mask}]


def mlp_symbolic_batch():
    inits = [w("w1", 8, 16), w("b1", 16, scale=0.05), w("w2", 16, 4), w("b2", 4, scale=0.05)]
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Add", ["h", "b1"], ["hb"]),
             helper.make_node("Relu", ["hb"], ["hr"]), helper.make_node("MatMul", ["hr", "w2"], ["o"]),
             helper.make_node("Add", ["o", "b2"], ["ob"]), helper.make_node("Softmax", ["ob"], ["probs"], axis=-1)]
    graph = helper.make_graph(nodes, "mlp_symbolic_batch",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])],
                              [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["batch", 4])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return model, [{"x": RNG.standard_normal((2, 8)).astype(np.float32)},
                   {"x": RNG.standard_normal((5, 8)).astype(np.float32)}]


def write(out_dir, name, model, feeds_list):
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    d = os.path.join(out_dir, name)
    os.makedirs(d, exist_ok=True)
    onnx.save(model, os.path.join(d, "model.onnx"))
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for k, feeds in enumerate(feeds_list):
        ds = os.path.join(d, f"test_data_set_{k}")
        os.makedirs(ds, exist_ok=True)
        for j, vi in enumerate(model.graph.input):
            t = numpy_helper.from_array(feeds[vi.name], vi.name)
            open(os.path.join(ds, f"input_{j}.pb"), "wb").write(t.SerializeToString())
        outs = sess.run(None, feeds)
        for j, (vi, v) in enumerate(zip(model.graph.output, outs)):
            t = numpy_helper.from_array(v, vi.name)
            open(os.path.join(ds, f"output_{j}.pb"), "wb").write(t.SerializeToString())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-o", "--output", required=True)
    args = ap.parse_args()
    if os.path.exists(args.output):
        shutil.rmtree(args.output)
    for fn in (cnn_small, transformer_encoder_2l, mlp_symbolic_batch):
        model, feeds = fn()
        write(args.output, fn.__name__, model, feeds)
    print(f"wrote 3 models to {args.output} (reference outputs from onnxruntime {ort.__version__})")


if __name__ == "__main__":
    main()
