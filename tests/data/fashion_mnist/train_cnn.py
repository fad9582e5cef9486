#!/usr/bin/env python3
# Copyright ingot authors. Apache-2.0.
"""Trains the small Fashion-MNIST CNN that the INT8 accuracy test quantizes (issue 20 item 5), in
NumPy on the CPU (no PyTorch on our machines), and writes it as ONNX. Run once; the model
(tests/data/fashion_mnist/cnn.onnx, ~25 KB) is kept in the repository, so CI only evaluates it.

  conv 3x3 (1->16) + ReLU + maxpool 2 -> conv 3x3 (16->32) + ReLU + maxpool 2 -> FC 800->64 + ReLU
  -> FC 64->10; inputs [N,1,28,28] scaled to [0,1] then normalized (mean 0.2860, std 0.3530).

Data: Debian's dataset-fashion-mnist (/usr/share/datasets/fashion-mnist, the real 60k/10k images).
Usage: train_cnn.py [--epochs 6] [-o tests/data/fashion_mnist/cnn.onnx]"""
import argparse
import gzip
import os
import time

import numpy as np

DATA = "/usr/share/datasets/fashion-mnist"
MEAN, STD = 0.2860, 0.3530


def load(kind):
    with gzip.open(os.path.join(DATA, f"{kind}-images-idx3-ubyte.gz")) as f:
        x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 1, 28, 28)
    with gzip.open(os.path.join(DATA, f"{kind}-labels-idx1-ubyte.gz")) as f:
        y = np.frombuffer(f.read(), np.uint8, offset=8)
    return ((x.astype(np.float32) / 255.0 - MEAN) / STD), y.astype(np.int64)


def im2col(x, k):
    n, c, h, w = x.shape
    oh, ow = h - k + 1, w - k + 1
    s = x.strides
    cols = np.lib.stride_tricks.as_strided(x, (n, c, k, k, oh, ow), (s[0], s[1], s[2], s[3], s[2], s[3]))
    return cols.transpose(0, 4, 5, 1, 2, 3).reshape(n * oh * ow, c * k * k), oh, ow


def col2im(dcols, shape, k):
    n, c, h, w = shape
    oh, ow = h - k + 1, w - k + 1
    d = dcols.reshape(n, oh, ow, c, k, k)
    dx = np.zeros(shape, np.float32)
    for i in range(k):
        for j in range(k):
            dx[:, :, i:i + oh, j:j + ow] += d[:, :, :, :, i, j].transpose(0, 3, 1, 2)
    return dx


class Conv:
    def __init__(self, cin, cout, k, rng):
        self.k = k
        self.w = (rng.standard_normal((cout, cin * k * k)) * np.sqrt(2.0 / (cin * k * k))).astype(np.float32)
        self.b = np.zeros(cout, np.float32)

    def forward(self, x):
        self.shape = x.shape
        self.cols, oh, ow = im2col(x, self.k)
        y = self.cols @ self.w.T + self.b
        return y.reshape(x.shape[0], oh, ow, -1).transpose(0, 3, 1, 2)

    def backward(self, dy):
        d = dy.transpose(0, 2, 3, 1).reshape(-1, self.w.shape[0])
        self.dw = d.T @ self.cols
        self.db = d.sum(0)
        return col2im(d @ self.w, self.shape, self.k)


class Pool:
    """2x2 max pooling, stride 2, odd rows/columns dropped (ONNX MaxPool's floor)."""

    def forward(self, x):
        n, c, h, w = x.shape
        self.shape = x.shape
        r = x[:, :, :h // 2 * 2, :w // 2 * 2].reshape(n, c, h // 2, 2, w // 2, 2)
        y = r.max(axis=(3, 5))
        self.mask = r == y[:, :, :, None, :, None]
        return y

    def backward(self, dy):
        d = self.mask * dy[:, :, :, None, :, None]
        n, c, h2, _, w2, _ = d.shape
        dx = np.zeros(self.shape, np.float32)
        dx[:, :, :h2 * 2, :w2 * 2] = d.reshape(n, c, h2 * 2, w2 * 2)
        return dx


class Dense:
    def __init__(self, i, o, rng):
        self.w = (rng.standard_normal((o, i)) * np.sqrt(2.0 / i)).astype(np.float32)
        self.b = np.zeros(o, np.float32)

    def forward(self, x):
        self.x = x
        return x @ self.w.T + self.b

    def backward(self, dy):
        self.dw = dy.T @ self.x
        self.db = dy.sum(0)
        return dy @ self.w


def to_onnx(c1, c2, f1, f2, path):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    inits = [numpy_helper.from_array(c1.w.reshape(16, 1, 3, 3), "conv1.w"), numpy_helper.from_array(c1.b, "conv1.b"),
             numpy_helper.from_array(c2.w.reshape(32, 16, 3, 3), "conv2.w"), numpy_helper.from_array(c2.b, "conv2.b"),
             numpy_helper.from_array(f1.w, "fc1.w"), numpy_helper.from_array(f1.b, "fc1.b"),
             numpy_helper.from_array(f2.w, "fc2.w"), numpy_helper.from_array(f2.b, "fc2.b"),
             numpy_helper.from_array(np.array([0, -1], np.int64), "flat_shape")]
    N = helper.make_node
    nodes = [N("Conv", ["image", "conv1.w", "conv1.b"], ["c1"], name="conv1"), N("Relu", ["c1"], ["r1"], name="relu1"),
             N("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2], name="pool1"),
             N("Conv", ["p1", "conv2.w", "conv2.b"], ["c2"], name="conv2"), N("Relu", ["c2"], ["r2"], name="relu2"),
             N("MaxPool", ["r2"], ["p2"], kernel_shape=[2, 2], strides=[2, 2], name="pool2"),
             N("Reshape", ["p2", "flat_shape"], ["flat"], name="flatten"),
             N("Gemm", ["flat", "fc1.w", "fc1.b"], ["h"], transB=1, name="fc1"), N("Relu", ["h"], ["hr"], name="relu3"),
             N("Gemm", ["hr", "fc2.w", "fc2.b"], ["logits"], transB=1, name="fc2")]
    g = helper.make_graph(nodes, "fashion_mnist_cnn",
                          [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["batch", 1, 28, 28])],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 10])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="ingot train_cnn.py")
    onnx.checker.check_model(m)
    onnx.save(m, path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=6)
    ap.add_argument("-o", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "cnn.onnx"))
    a = ap.parse_args()
    xtr, ytr = load("train")
    xte, yte = load("t10k")
    rng = np.random.default_rng(0)
    c1, c2, f1, f2 = Conv(1, 16, 3, rng), Conv(16, 32, 3, rng), Dense(800, 64, rng), Dense(64, 10, rng)
    p1, p2 = Pool(), Pool()
    params = [c1, c2, f1, f2]
    mom = {id(p): (np.zeros_like(p.w), np.zeros_like(p.b)) for p in params}

    def forward(x):
        h1 = np.maximum(c1.forward(x), 0)
        m1 = p1.forward(h1)
        h2 = np.maximum(c2.forward(m1), 0)
        m2 = p2.forward(h2)
        h3 = np.maximum(f1.forward(m2.reshape(len(x), -1)), 0)
        return f2.forward(h3), (h1, h2, h3, m2.shape)

    lr, bs = 0.05, 128
    for epoch in range(a.epochs):
        t = time.time()
        order = rng.permutation(len(xtr))
        for s in range(0, len(order), bs):
            idx = order[s:s + bs]
            x, y = xtr[idx], ytr[idx]
            logits, (h1, h2, h3, m2s) = forward(x)
            p = np.exp(logits - logits.max(1, keepdims=True))
            p /= p.sum(1, keepdims=True)
            d = p
            d[np.arange(len(y)), y] -= 1
            d /= len(y)
            d = f2.backward(d) * (h3 > 0)
            d = f1.backward(d).reshape(m2s)
            d = p2.backward(d) * (h2 > 0)
            d = c2.backward(d)
            d = p1.backward(d) * (h1 > 0)
            c1.backward(d)
            for prm in params:
                vw, vb = mom[id(prm)]
                vw *= 0.9
                vw += prm.dw
                vb *= 0.9
                vb += prm.db
                prm.w -= lr * vw
                prm.b -= lr * vb
        correct = sum((forward(xte[s:s + 1000])[0].argmax(1) == yte[s:s + 1000]).sum() for s in range(0, 10000, 1000))
        print(f"epoch {epoch + 1}: test accuracy {correct / 100:.2f}% ({time.time() - t:.0f} s)", flush=True)
        lr *= 0.5
    to_onnx(c1, c2, f1, f2, a.o)
    print(f"wrote {a.o}")


if __name__ == "__main__":
    main()
