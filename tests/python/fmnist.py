# Copyright ingot authors. Apache-2.0.
"""The Python tests' model and oracle: the Fashion-MNIST CNN (image [batch,1,28,28] -> logits) and
onnxruntime's outputs for it."""
import os

MODEL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "fashion_mnist", "cnn.onnx")


def reference(x):
    """onnxruntime on the model; its IR version (14, opset 17) lowered to 10 for onnxruntime
    builds that read IR <= 13 (the GPU machine's 1.30): opset 17 needs nothing newer."""
    import onnx
    import onnxruntime as ort
    m = onnx.load(MODEL)
    m.ir_version = min(m.ir_version, 10)
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {"image": x})[0]
