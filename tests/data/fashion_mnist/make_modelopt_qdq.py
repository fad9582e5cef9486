#!/usr/bin/env python3
# Copyright ingot authors. Apache-2.0.
"""Quantizes the Fashion-MNIST CNN (cnn.onnx) with NVIDIA ModelOpt's ONNX post-training
quantization, INT8 and FP8, as a TensorRT user would (`modelopt.onnx.quantization.quantize`, its
defaults: entropy calibration for INT8, max for FP8, fp16 for what stays unquantized), calibrated on
the first 1000 training images (the calibration set test_int8_accuracy.py uses). The outputs
(cnn.modelopt_int8.onnx, cnn.modelopt_fp8.onnx, ~100 KB each) are kept in the repository: ModelOpt
needs PyTorch (>= 2.8) and CuPy, which CI does not install, so CI evaluates the files it wrote.

Made with nvidia-modelopt 0.47.0, torch 2.15, onnx 1.21, onnxruntime 1.24 (2026-12-06), on the CPU
execution provider:
  python3 -m venv /tmp/tv && /tmp/tv/bin/pip install torch "nvidia-modelopt[onnx]"
  /tmp/tv/bin/python tests/data/fashion_mnist/make_modelopt_qdq.py
Data: Debian's dataset-fashion-mnist."""
import os
import shutil
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from train_cnn import load  # noqa: E402


def main():
    from modelopt.onnx.quantization import quantize
    xtr, _ = load("train")
    calib = np.ascontiguousarray(xtr[:1000])
    # ModelOpt writes shape information into the model it is given: it gets a copy, so the kept
    # fp32 model stays as train_cnn.py wrote it.
    src = os.path.join(tempfile.mkdtemp(prefix="modelopt-"), "cnn.onnx")
    shutil.copyfile(os.path.join(HERE, "cnn.onnx"), src)
    for mode in ("int8", "fp8"):
        out = os.path.join(HERE, f"cnn.modelopt_{mode}.onnx")
        quantize(src, quantize_mode=mode, calibration_data={"image": calib}, calibration_eps=["cpu"], output_path=out,
                 log_level="WARNING")
        print(f"wrote {out} ({os.path.getsize(out)} bytes)")


if __name__ == "__main__":
    main()
