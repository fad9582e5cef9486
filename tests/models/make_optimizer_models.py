#!/usr/bin/env python3
"""Builds whole models shaped like PyTorch exports, for the graph optimizer (issue 4).

Written in the layout of make_models.py (<out>/<name>/model.onnx + test_data_set_0 with
onnxruntime reference outputs), so the conformance runner checks the optimized graph against
onnxruntime. Weights are random; what matters is the op patterns the passes must find:
  - resnet_bn (opset 18): Conv + BatchNormalization + Relu stem, MaxPool, three basic residual
    blocks (one strided, with a 1x1 Conv + BN downsample branch), GlobalAveragePool, Flatten, Gemm.
  - mobilenetv3_block (opset 20): Conv + BN + HardSwish stem, two inverted-residual blocks
    (1x1 expand, depthwise 3x3, squeeze-excitation GlobalAveragePool→Conv→Relu→Conv→
    HardSigmoid→Mul, 1x1 project, residual Add); the second block writes HardSwish as
    x * HardSigmoid(x) as some exporters do.
  - efficientnet_block (opset 18): MBConv blocks with SiLU written as x * Sigmoid(x) and a
    squeeze-excitation over ReduceMean (axes as an input).
  - densenet_block (opset 18): a dense block (Concat of every earlier feature map -> standalone
    BatchNormalization -> Relu -> Conv) and a transition.
  - bert_encoder_2l (opset 18): two post-LN encoder layers with LayerNorm decomposed into
    ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div/Mul/Add (ReduceMean axes as an input, opset 18),
    Erf-form GELU, multi-head attention with Reshape→Transpose head split, an additive
    padding mask (1 - mask) * finfo.min, Softmax, Transpose→Reshape head merge. Layer 0
    scales the scores by Div(√D) and transposes K explicitly; layer 1 scales Q and K by D^-¼
    each and folds K's transpose into the head-split perm.
  - bert_encoder_2l_opset20: the same encoder at opset 20 (a LayerNorm that may become the
    ai.onnx op and a GELU that may become ai.onnx Gelu).
"""
import argparse
import os
import shutil

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
import onnxruntime as ort

from make_models import write  # one writer for every test-model folder (same layout as ONNX's node tests)

RNG = np.random.default_rng(20261130)


def w(name, *shape, scale=0.2):
    return numpy_helper.from_array((RNG.standard_normal(shape) * scale).astype(np.float32), name)


def const(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


class Net:
    """Collects nodes and initializers; names stay readable like a PyTorch export's."""

    def __init__(self):
        self.nodes, self.inits = [], []

    def op(self, op_type, inputs, output, **attrs):
        self.nodes.append(helper.make_node(op_type, inputs, [output], name=output.replace(".", "/"), **attrs))
        return output

    def init(self, t):
        self.inits.append(t)
        return t.name

    def conv_bn(self, x, cin, cout, name, k=3, stride=1, group=1):
        self.init(w(f"{name}.w", cout, cin // group, k, k, scale=np.sqrt(2.0 / (cin // group * k * k))))
        self.init(const(f"{name}.gamma", (1 + 0.1 * RNG.standard_normal(cout)).astype(np.float32)))
        self.init(const(f"{name}.beta", (0.1 * RNG.standard_normal(cout)).astype(np.float32)))
        self.init(const(f"{name}.mean", (0.1 * RNG.standard_normal(cout)).astype(np.float32)))
        self.init(const(f"{name}.var", (0.5 + RNG.random(cout)).astype(np.float32)))
        p = k // 2
        c = self.op("Conv", [x, f"{name}.w"], f"{name}.conv", kernel_shape=[k, k], pads=[p, p, p, p],
                    strides=[stride, stride], group=group)
        return self.op("BatchNormalization", [c, f"{name}.gamma", f"{name}.beta", f"{name}.mean", f"{name}.var"],
                       f"{name}.bn", epsilon=1e-5)


def resnet_bn():
    n = Net()
    x = n.op("Relu", [n.conv_bn("input", 3, 16, "stem")], "stem.relu")
    x = n.op("MaxPool", [x], "pool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = 16
    for i, (cout, stride) in enumerate([(16, 1), (32, 2), (32, 1)]):
        b = f"layer{i}"
        y = n.op("Relu", [n.conv_bn(x, cin, cout, f"{b}.conv1", stride=stride)], f"{b}.relu1")
        y = n.conv_bn(y, cout, cout, f"{b}.conv2")
        short = x if stride == 1 and cin == cout else n.conv_bn(x, cin, cout, f"{b}.down", k=1, stride=stride)
        x = n.op("Relu", [n.op("Add", [y, short], f"{b}.add")], f"{b}.out")
        cin = cout
    x = n.op("GlobalAveragePool", [x], "gap")
    x = n.op("Flatten", [x], "flatten", axis=1)
    n.init(w("fc.w", 10, cin))
    n.init(w("fc.b", 10, scale=0.05))
    n.op("Gemm", [x, "fc.w", "fc.b"], "logits", transB=1)
    graph = helper.make_graph(n.nodes, "resnet_bn",
                              [helper.make_tensor_value_info("input", TensorProto.FLOAT, [2, 3, 32, 32])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [2, 10])], n.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    return model, [{"input": RNG.standard_normal((2, 3, 32, 32)).astype(np.float32)}]


def mobilenetv3_block():
    n = Net()

    def hswish(x, name, pieces):
        if not pieces:
            return n.op("HardSwish", [x], name)
        hs = n.op("HardSigmoid", [x], f"{name}.hsig", alpha=1.0 / 6.0, beta=0.5)
        return n.op("Mul", [x, hs], name)

    x = hswish(n.conv_bn("input", 3, 16, "stem", stride=2), "stem.act", False)
    for i, pieces in enumerate([False, True]):
        b, c, e, s = f"block{i}", 16, 48, 8
        y = hswish(n.conv_bn(x, c, e, f"{b}.expand", k=1), f"{b}.expand.act", pieces)
        y = hswish(n.conv_bn(y, e, e, f"{b}.dw", k=3, group=e), f"{b}.dw.act", pieces)
        # squeeze-excitation
        g = n.op("GlobalAveragePool", [y], f"{b}.se.pool")
        n.init(w(f"{b}.se.fc1.w", s, e, 1, 1, scale=0.3))
        n.init(w(f"{b}.se.fc1.b", s, scale=0.05))
        n.init(w(f"{b}.se.fc2.w", e, s, 1, 1, scale=0.3))
        n.init(w(f"{b}.se.fc2.b", e, scale=0.05))
        g = n.op("Conv", [g, f"{b}.se.fc1.w", f"{b}.se.fc1.b"], f"{b}.se.fc1", kernel_shape=[1, 1])
        g = n.op("Relu", [g], f"{b}.se.relu")
        g = n.op("Conv", [g, f"{b}.se.fc2.w", f"{b}.se.fc2.b"], f"{b}.se.fc2", kernel_shape=[1, 1])
        g = n.op("HardSigmoid", [g], f"{b}.se.gate", alpha=1.0 / 6.0, beta=0.5)
        y = n.op("Mul", [y, g], f"{b}.se.mul")
        y = n.conv_bn(y, e, c, f"{b}.project", k=1)
        x = n.op("Add", [x, y], f"{b}.add")
    graph = helper.make_graph(n.nodes, "mobilenetv3_block",
                              [helper.make_tensor_value_info("input", TensorProto.FLOAT, [2, 3, 32, 32])],
                              [helper.make_tensor_value_info(x, TensorProto.FLOAT, [2, 16, 16, 16])], n.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    return model, [{"input": RNG.standard_normal((2, 3, 32, 32)).astype(np.float32)}]


def silu(n, x, name):
    return n.op("Mul", [x, n.op("Sigmoid", [x], f"{name}.sig")], name)


def efficientnet_block():
    """EfficientNet's MBConv as torch's dynamo exporter writes it (opset 18): Conv + BN + SiLU
    (x * Sigmoid(x)), depthwise 3x3, squeeze-excitation ReduceMean(axes [2, 3] as an input,
    keepdims) -> Conv -> SiLU -> Conv -> Sigmoid -> Mul, 1x1 project, residual Add."""
    n = Net()
    x = silu(n, n.conv_bn("input", 3, 16, "stem", stride=2), "stem.act")
    n.init(const("se.axes", np.array([2, 3], dtype=np.int64)))
    for i in range(2):
        b, c, e, s = f"block{i}", 16, 64, 4
        y = silu(n, n.conv_bn(x, c, e, f"{b}.expand", k=1), f"{b}.expand.act")
        y = silu(n, n.conv_bn(y, e, e, f"{b}.dw", k=3, group=e), f"{b}.dw.act")
        g = n.op("ReduceMean", [y, "se.axes"], f"{b}.se.pool", keepdims=1)
        n.init(w(f"{b}.se.fc1.w", s, e, 1, 1, scale=0.3))
        n.init(w(f"{b}.se.fc1.b", s, scale=0.05))
        n.init(w(f"{b}.se.fc2.w", e, s, 1, 1, scale=0.3))
        n.init(w(f"{b}.se.fc2.b", e, scale=0.05))
        g = n.op("Conv", [g, f"{b}.se.fc1.w", f"{b}.se.fc1.b"], f"{b}.se.fc1", kernel_shape=[1, 1])
        g = silu(n, g, f"{b}.se.act")
        g = n.op("Conv", [g, f"{b}.se.fc2.w", f"{b}.se.fc2.b"], f"{b}.se.fc2", kernel_shape=[1, 1])
        g = n.op("Sigmoid", [g], f"{b}.se.gate")
        y = n.op("Mul", [y, g], f"{b}.se.mul")
        y = n.conv_bn(y, e, c, f"{b}.project", k=1)
        x = n.op("Add", [y, x], f"{b}.add")
    graph = helper.make_graph(n.nodes, "efficientnet_block",
                              [helper.make_tensor_value_info("input", TensorProto.FLOAT, [2, 3, 32, 32])],
                              [helper.make_tensor_value_info(x, TensorProto.FLOAT, [2, 16, 16, 16])], n.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    return model, [{"input": RNG.standard_normal((2, 3, 32, 32)).astype(np.float32)}]


def densenet_block():
    """DenseNet's dense block and transition (opset 18): every layer reads the Concat of all
    feature maps before it through a standalone BatchNormalization -> Relu -> Conv 1x1 -> BN ->
    Relu -> Conv 3x3 (pre-activation: no Conv before the first BN to fold it into); the
    transition is BN -> Relu -> Conv 1x1 -> AveragePool."""
    n = Net()

    def bn(x, c, name):
        n.init(const(f"{name}.gamma", (1 + 0.1 * RNG.standard_normal(c)).astype(np.float32)))
        n.init(const(f"{name}.beta", (0.1 * RNG.standard_normal(c)).astype(np.float32)))
        n.init(const(f"{name}.mean", (0.1 * RNG.standard_normal(c)).astype(np.float32)))
        n.init(const(f"{name}.var", (0.5 + RNG.random(c)).astype(np.float32)))
        return n.op("BatchNormalization", [x, f"{name}.gamma", f"{name}.beta", f"{name}.mean", f"{name}.var"],
                    f"{name}.bn", epsilon=1e-5)

    def conv(x, cin, cout, name, k):
        n.init(w(f"{name}.w", cout, cin, k, k, scale=np.sqrt(2.0 / (cin * k * k))))
        p = k // 2
        return n.op("Conv", [x, f"{name}.w"], name, kernel_shape=[k, k], pads=[p, p, p, p])

    features = [n.op("Relu", [n.conv_bn("input", 3, 16, "stem")], "stem.relu")]
    growth, c = 8, 16
    for i in range(3):
        b = f"dense{i}"
        x = features[0] if len(features) == 1 else n.op("Concat", features, f"{b}.cat", axis=1)
        y = conv(n.op("Relu", [bn(x, c, f"{b}.norm1")], f"{b}.relu1"), c, 4 * growth, f"{b}.conv1", 1)
        y = conv(n.op("Relu", [bn(y, 4 * growth, f"{b}.norm2")], f"{b}.relu2"), 4 * growth, growth, f"{b}.conv2", 3)
        features.append(y)
        c += growth
    x = n.op("Concat", features, "block.cat", axis=1)
    x = conv(n.op("Relu", [bn(x, c, "trans.norm")], "trans.relu"), c, c // 2, "trans.conv", 1)
    x = n.op("AveragePool", [x], "trans.pool", kernel_shape=[2, 2], strides=[2, 2])
    graph = helper.make_graph(n.nodes, "densenet_block",
                              [helper.make_tensor_value_info("input", TensorProto.FLOAT, [2, 3, 16, 16])],
                              [helper.make_tensor_value_info(x, TensorProto.FLOAT, [2, c // 2, 8, 8])], n.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    return model, [{"input": RNG.standard_normal((2, 3, 16, 16)).astype(np.float32)}]


def bert_encoder(opset):
    B, S, H, NH = 2, 12, 32, 4
    D = H // NH
    n = Net()
    n.init(const("shape_split", np.array([B, S, NH, D], dtype=np.int64)))
    n.init(const("shape_merge", np.array([B, S, H], dtype=np.int64)))
    n.init(const("sqrt_d", np.array(np.sqrt(D), dtype=np.float32)))
    n.init(const("qk_scale", np.array(D ** -0.25, dtype=np.float32)))
    n.init(const("min_f32", np.array(np.finfo(np.float32).min, dtype=np.float32)))
    n.init(const("one", np.array(1.0, dtype=np.float32)))
    n.init(const("half", np.array(0.5, dtype=np.float32)))
    n.init(const("two", np.array(2.0, dtype=np.float32)))
    n.init(const("eps", np.array(1e-12, dtype=np.float32)))
    n.init(const("sqrt2", np.array(np.sqrt(2.0), dtype=np.float32)))
    n.init(const("mask_axes", np.array([1, 2], dtype=np.int64)))
    n.init(const("ln_axes", np.array([-1], dtype=np.int64)))
    # attention_mask [B, S] of 1 (keep) / 0 (pad) → additive [B, 1, 1, S], as HF BERT does.
    m = n.op("Unsqueeze", ["attention_mask", "mask_axes"], "ext_mask.unsq")
    m = n.op("Cast", [m], "ext_mask.cast", to=TensorProto.FLOAT)
    m = n.op("Sub", ["one", m], "ext_mask.inv")
    mask = n.op("Mul", [m, "min_f32"], "ext_mask")

    def layernorm(x, name):
        n.init(const(f"{name}.g", (1 + 0.1 * RNG.standard_normal(H)).astype(np.float32)))
        n.init(const(f"{name}.b", (0.1 * RNG.standard_normal(H)).astype(np.float32)))

        def mean(v, out):
            if opset >= 18:
                return n.op("ReduceMean", [v, "ln_axes"], out)
            return n.op("ReduceMean", [v], out, axes=[-1])
        u = mean(x, f"{name}.mean")
        d = n.op("Sub", [x, u], f"{name}.sub")
        p = n.op("Pow", [d, "two"], f"{name}.pow")
        v = mean(p, f"{name}.var")
        s = n.op("Sqrt", [n.op("Add", [v, "eps"], f"{name}.add_eps")], f"{name}.sqrt")
        y = n.op("Div", [d, s], f"{name}.div")
        y = n.op("Mul", [y, f"{name}.g"], f"{name}.mul")
        return n.op("Add", [y, f"{name}.b"], f"{name}.out")

    def linear(x, cin, cout, name):
        n.init(w(f"{name}.w", cin, cout))
        n.init(w(f"{name}.b", cout, scale=0.05))
        return n.op("Add", [n.op("MatMul", [x, f"{name}.w"], f"{name}.mm"), f"{name}.b"], f"{name}.out")

    x = "hidden"
    for layer in range(2):
        p = f"layer{layer}"
        heads = {}
        for t in ("q", "k", "v"):
            lin = linear(x, H, H, f"{p}.attn.{t}")
            split = n.op("Reshape", [lin, "shape_split"], f"{p}.attn.{t}.split")
            perm = [0, 2, 3, 1] if (t == "k" and layer == 1) else [0, 2, 1, 3]
            heads[t] = n.op("Transpose", [split], f"{p}.attn.{t}.heads", perm=perm)
        if layer == 0:
            kt = n.op("Transpose", [heads["k"]], f"{p}.attn.k.t", perm=[0, 1, 3, 2])
            sc = n.op("MatMul", [heads["q"], kt], f"{p}.attn.scores")
            sc = n.op("Div", [sc, "sqrt_d"], f"{p}.attn.scaled")
        else:
            q = n.op("Mul", [heads["q"], "qk_scale"], f"{p}.attn.q.scaled")
            k = n.op("Mul", [heads["k"], "qk_scale"], f"{p}.attn.k.scaled")
            sc = n.op("MatMul", [q, k], f"{p}.attn.scaled")
        sc = n.op("Add", [sc, mask], f"{p}.attn.masked")
        pr = n.op("Softmax", [sc], f"{p}.attn.probs", axis=-1)
        c = n.op("MatMul", [pr, heads["v"]], f"{p}.attn.ctx")
        c = n.op("Transpose", [c], f"{p}.attn.ctx.t", perm=[0, 2, 1, 3])
        c = n.op("Reshape", [c, "shape_merge"], f"{p}.attn.ctx.merged")
        a = linear(c, H, H, f"{p}.attn.o")
        x1 = layernorm(n.op("Add", [a, x], f"{p}.attn.res"), f"{p}.ln1")
        f = linear(x1, H, 4 * H, f"{p}.ffn.fc1")
        g = n.op("Erf", [n.op("Div", [f, "sqrt2"], f"{p}.ffn.gelu.div")], f"{p}.ffn.gelu.erf")
        g = n.op("Add", [g, "one"], f"{p}.ffn.gelu.add")
        g = n.op("Mul", [f, g], f"{p}.ffn.gelu.mul")
        g = n.op("Mul", [g, "half"], f"{p}.ffn.gelu.out")
        f = linear(g, 4 * H, H, f"{p}.ffn.fc2")
        x = layernorm(n.op("Add", [f, x1], f"{p}.ffn.res"), f"{p}.ln2")
    n.nodes[-1].output[0] = "last_hidden_state"
    graph = helper.make_graph(n.nodes, f"bert_encoder_2l_opset{opset}",
                              [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, [B, S, H]),
                               helper.make_tensor_value_info("attention_mask", TensorProto.INT64, [B, S])],
                              [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, [B, S, H])],
                              n.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    mask = np.ones((B, S), dtype=np.int64)
    mask[1, 8:] = 0  # the second sequence is padded
    return model, [{"hidden": RNG.standard_normal((B, S, H)).astype(np.float32), "attention_mask": mask}]


def bert_encoder_2l():
    return bert_encoder(18)


def bert_encoder_2l_opset20():
    return bert_encoder(20)


def bert_torch_export(dynamo_kt=False):
    """One BERT layer written the way torch.onnx.export (legacy exporter, opset 18) writes
    transformers' BertModel with a dynamic batch: head split and merge shapes computed from the
    input's own Shape (Shape -> Gather -> Unsqueeze -> Concat -> Reshape), scaled_dot_product_attention
    decomposed with the scale split over Q and K^T, and Where(IsNaN(p), 0, p) after the Softmax.
    With dynamo_kt, K^T is spelled as the dynamo exporter does: Reshape to [-1, S, D] (from
    Shape/Slice/Concat of K's shape), Transpose [0, 2, 1], Reshape to [B, H, D, S]."""
    B, S, H, NH = 3, 10, 32, 4
    D = H // NH
    n = Net()
    for name, v in (("i0", 0), ("i1", 1)):
        n.init(const(name, np.array(v, dtype=np.int64)))
    n.init(const("ax0", np.array([0], dtype=np.int64)))
    n.init(const("heads_dims", np.array([NH, D], dtype=np.int64)))
    n.init(const("hidden_dim", np.array([H], dtype=np.int64)))
    n.init(const("sqrt_scale", np.array(D ** -0.25, dtype=np.float32)))
    n.init(const("min_f32", np.array(np.finfo(np.float32).min, dtype=np.float32)))
    n.init(const("one", np.array(1.0, dtype=np.float32)))
    n.init(const("zero_f", np.array(0.0, dtype=np.float32)))
    n.init(const("half", np.array(0.5, dtype=np.float32)))
    n.init(const("sqrt2", np.array(np.sqrt(2.0), dtype=np.float32)))
    n.init(const("mask_axes", np.array([1, 2], dtype=np.int64)))
    m = n.op("Unsqueeze", ["attention_mask", "mask_axes"], "ext.unsq")
    m = n.op("Cast", [m], "ext.cast", to=TensorProto.FLOAT)
    m = n.op("Sub", ["one", m], "ext.inv")
    mask = n.op("Mul", [m, "min_f32"], "ext.mask")
    x = "hidden"
    # Batch and sequence from the input's shape, as the exporter writes them.
    shp = n.op("Shape", [x], "shape")
    b = n.op("Gather", [shp, "i0"], "dim.b")
    s_ = n.op("Gather", [shp, "i1"], "dim.s")
    b1 = n.op("Unsqueeze", [b, "ax0"], "dim.b1")
    s1 = n.op("Unsqueeze", [s_, "ax0"], "dim.s1")
    split_shape = n.op("Concat", [b1, s1, "heads_dims"], "split.shape", axis=0)
    merge_shape = n.op("Concat", [b1, s1, "hidden_dim"], "merge.shape", axis=0)

    def linear(v, cin, cout, name):
        n.init(w(f"{name}.w", cin, cout))
        n.init(w(f"{name}.b", cout, scale=0.05))
        return n.op("Add", [n.op("MatMul", [v, f"{name}.w"], f"{name}.mm"), f"{name}.b"], f"{name}.out")

    heads = {}
    for t in ("q", "k", "v"):
        lin = linear(x, H, H, f"attn.{t}")
        sp = n.op("Reshape", [lin, split_shape], f"attn.{t}.split")
        heads[t] = n.op("Transpose", [sp], f"attn.{t}.heads", perm=[0, 2, 1, 3])
    q = n.op("Mul", [heads["q"], "sqrt_scale"], "attn.q.scaled")
    if dynamo_kt:
        for name, v in (("s0", [0]), ("s2", [2]), ("s3", [3]), ("s4", [4]), ("minus1", [-1])):
            n.init(const(name, np.array(v, dtype=np.int64)))
        ks = n.op("Shape", [heads["k"]], "attn.k.shape")
        lead = n.op("Slice", [ks, "s0", "s2"], "attn.k.lead")
        kd_s = n.op("Slice", [ks, "s2", "s3"], "attn.k.seq")
        kd_d = n.op("Slice", [ks, "s3", "s4"], "attn.k.dim")
        r1 = n.op("Reshape", [heads["k"], n.op("Concat", ["minus1", kd_s, kd_d], "attn.k.r1.shape", axis=0)],
                  "attn.k.r1")
        t2 = n.op("Transpose", [r1], "attn.k.t2", perm=[0, 2, 1])
        kt = n.op("Reshape", [t2, n.op("Concat", [lead, kd_d, kd_s], "attn.k.r2.shape", axis=0)], "attn.k.t")
    else:
        kt = n.op("Transpose", [heads["k"]], "attn.k.t", perm=[0, 1, 3, 2])
    k = n.op("Mul", [kt, "sqrt_scale"], "attn.k.scaled")
    sc = n.op("Add", [n.op("MatMul", [q, k], "attn.scores"), mask], "attn.masked")
    pr = n.op("Softmax", [sc], "attn.probs", axis=-1)
    nan = n.op("IsNaN", [pr], "attn.isnan")
    pr = n.op("Where", [nan, "zero_f", pr], "attn.guarded")
    c = n.op("MatMul", [pr, heads["v"]], "attn.ctx")
    c = n.op("Transpose", [c], "attn.ctx.t", perm=[0, 2, 1, 3])
    c = n.op("Reshape", [c, merge_shape], "attn.ctx.merged")
    a = linear(c, H, H, "attn.o")
    for name in ("ln1", "ln2"):
        n.init(const(f"{name}.g", (1 + 0.1 * RNG.standard_normal(H)).astype(np.float32)))
        n.init(const(f"{name}.b", (0.1 * RNG.standard_normal(H)).astype(np.float32)))
    x1 = n.op("LayerNormalization", [n.op("Add", [a, x], "attn.res"), "ln1.g", "ln1.b"], "ln1.out", axis=-1,
              epsilon=1e-12)
    f = linear(x1, H, 4 * H, "ffn.fc1")
    g = n.op("Erf", [n.op("Div", [f, "sqrt2"], "ffn.gelu.div")], "ffn.gelu.erf")
    g = n.op("Mul", [n.op("Mul", [f, n.op("Add", [g, "one"], "ffn.gelu.add")], "ffn.gelu.mul"), "half"],
             "ffn.gelu.out")
    f = linear(g, 4 * H, H, "ffn.fc2")
    n.op("LayerNormalization", [n.op("Add", [f, x1], "ffn.res"), "ln2.g", "ln2.b"], "last_hidden_state", axis=-1,
         epsilon=1e-12)
    graph = helper.make_graph(n.nodes, "bert_dynamo_export" if dynamo_kt else "bert_torch_export",
                              [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, ["batch", S, H]),
                               helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", S])],
                              [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", S, H])],
                              n.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    mask = np.ones((B, S), dtype=np.int64)
    mask[1, 6:] = 0
    mask[2, :] = 0  # a fully padded sequence: the NaN guard's zeros
    return model, [{"hidden": RNG.standard_normal((B, S, H)).astype(np.float32), "attention_mask": mask}]


def bert_dynamo_export():
    return bert_torch_export(dynamo_kt=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-o", "--output", required=True)
    args = ap.parse_args()
    if os.path.exists(args.output):
        shutil.rmtree(args.output)
    models = (resnet_bn, mobilenetv3_block, efficientnet_block, densenet_block, bert_encoder_2l, bert_encoder_2l_opset20, bert_torch_export,
              bert_dynamo_export)
    for fn in models:
        model, feeds = fn()
        write(args.output, fn.__name__, model, feeds)
    print(f"wrote {len(models)} models to {args.output} (reference outputs from onnxruntime {ort.__version__})")


if __name__ == "__main__":
    main()
