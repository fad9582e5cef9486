#!/usr/bin/env python3
# Copyright ingot authors. Apache-2.0.
"""INT8 accuracy on real trained data (issue 20 item 5, CPU backend): the Fashion-MNIST CNN that
tests/data/fashion_mnist/train_cnn.py trained (88% top-1 in fp32), on the real 10k test images of
Debian's dataset-fashion-mnist:
  - the fp32 engine's top-1 equals onnxruntime's on the same model (the harness is right);
  - int8 engines calibrated on 1000 training images (10 batches) with each calibrator, and an FP8
    (E4M3, min-max) engine, keep top-1
    within 1 point of fp32 (entropy and percentile; min-max is printed, TensorRT users know it
    loses more), and agree with fp32's predictions on >= 97% of the images;
  - explicit quantization: onnxruntime's quantize_static in QDQ format (per-channel weights, the
    same calibration images) imports into ingot, and ingot's engine of it predicts what
    onnxruntime's execution of it predicts on >= 99% of the images.
Every figure is printed (the note and bench/RESULTS.md cite them). Skips, saying why, when the
dataset package is not installed.
Usage: test_int8_accuracy.py --ingot build/tools/ingot"""
import argparse
import os
import re
import sys
import tempfile

import numpy as np
import onnxruntime as ort

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL = os.path.join(HERE, "..", "data", "fashion_mnist", "cnn.onnx")
sys.path.insert(0, os.path.join(HERE, "..", "data", "fashion_mnist"))
from train_cnn import DATA, load  # noqa: E402  - the same images, read and normalized as in training
sys.path.insert(0, HERE)
from quant_test_util import FAILED, check, ingot  # noqa: E402
BATCH = 2000


def engine_logits(args, work, onnx_path, tag, xte, *build_flags):
    eng = os.path.join(work, f"{tag}.engine")
    log = ingot(args.ingot, "build", onnx_path, "-o", eng, "--shapes", f"image:{BATCH}x1x28x28", *build_flags)
    out = []
    for s in range(0, len(xte), BATCH):
        xin = os.path.join(work, "x.npy")
        np.save(xin, xte[s:s + BATCH])
        od = os.path.join(work, f"{tag}_out")
        ingot(args.ingot, "run", eng, "--load-inputs", f"image:{xin}", "--save-outputs", od, "--iterations", "1",
              "--warmup", "0")
        out.append(np.load(os.path.join(od, "logits.npy")))
    return np.concatenate(out), log


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ingot", required=True)
    args = ap.parse_args()
    if not os.path.exists(os.path.join(DATA, "t10k-images-idx3-ubyte.gz")):
        print(f"skip: {DATA} is missing (apt install dataset-fashion-mnist; scripts/setup.sh does)")
        return 0
    xtr, _ = load("train")
    xte, yte = load("t10k")
    work = tempfile.mkdtemp(prefix="ingot-int8-acc-")
    calib = os.path.join(work, "calib")
    os.makedirs(calib)
    for k in range(10):
        np.save(os.path.join(calib, f"batch{k:02d}.npy"), xtr[k * 100:(k + 1) * 100])

    sess = ort.InferenceSession(MODEL, providers=["CPUExecutionProvider"])
    ort_fp32 = np.concatenate([sess.run(None, {"image": xte[s:s + BATCH]})[0] for s in range(0, len(xte), BATCH)])
    fp32, _ = engine_logits(args, work, MODEL, "fp32", xte)
    acc = lambda logits: float((logits.argmax(1) == yte).mean() * 100)  # noqa: E731
    a32, aort = acc(fp32), acc(ort_fp32)
    print(f"fp32: ingot top-1 {a32:.2f}%, onnxruntime {aort:.2f}% (10000 test images)")
    check("fp32 engine: the same predictions as onnxruntime",
          (fp32.argmax(1) == ort_fp32.argmax(1)).mean() >= 0.9999 and abs(a32 - aort) < 0.02, (a32, aort))
    check("the trained model is a real classifier (fp32 top-1 >= 85%)", a32 >= 85, a32)

    results = {}
    for algo in ("entropy", "percentile", "minmax"):
        logits, log = engine_logits(args, work, MODEL, f"int8_{algo}", xte, "--int8", "--calibration-data", calib,
                                    "--calibrator", algo)
        a8 = acc(logits)
        agree = float((logits.argmax(1) == fp32.argmax(1)).mean() * 100)
        results[algo] = (a8, agree)
        print(f"int8 ({algo}): top-1 {a8:.2f}% ({a8 - a32:+.2f} vs fp32), same prediction as fp32 on {agree:.2f}%")
        check(f"int8 ({algo}): the build quantized all 4 layers", "4 layers quantized, 0 kept in float" in log, log[-800:])
    logits, log = engine_logits(args, work, MODEL, "fp8", xte, "--fp8", "--calibration-data", calib)
    a8 = acc(logits)
    agree = float((logits.argmax(1) == fp32.argmax(1)).mean() * 100)
    print(f"fp8 e4m3 (minmax): top-1 {a8:.2f}% ({a8 - a32:+.2f} vs fp32), same prediction as fp32 on {agree:.2f}%")
    check("fp8 (e4m3, min-max): top-1 within 1 point of fp32 and >= 97% agreement", a8 >= a32 - 1.0 and agree >= 97.0,
          (a8, a32, agree))
    for algo in ("entropy", "percentile"):
        a8, agree = results[algo]
        check(f"int8 ({algo}): top-1 within 1 point of fp32 and >= 97% agreement", a8 >= a32 - 1.0 and agree >= 97.0,
              (a8, a32, agree))

    # Explicit quantization: onnxruntime's QDQ model, imported by ingot.
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.batches = iter([{"image": xtr[k * 100:(k + 1) * 100]} for k in range(10)])

        def get_next(self):
            return next(self.batches, None)

    qdq = os.path.join(work, "cnn_qdq.onnx")
    # reduce_range (7-bit weights): onnxruntime's x86 int8 kernels without VNNI (AVX2: vpmaddubsw)
    # add pairs of u8 x s8 products in int16 and saturate, so its own predictions depend on the CPU
    # (this test agreed 100.00% on a VNNI machine, 98.28% on an AVX2-only AMD EPYC, where ingot's
    # exact int32 arithmetic did not change); with 7-bit weights no pair saturates, as onnxruntime's
    # quantization docs advise for non-VNNI machines, and the oracle is the same everywhere.
    quantize_static(MODEL, qdq, Reader(), quant_format=QuantFormat.QDQ, per_channel=True, reduce_range=True,
                    activation_type=QuantType.QInt8, weight_type=QuantType.QInt8)
    qs = ort.InferenceSession(qdq, providers=["CPUExecutionProvider"])
    ort_q = np.concatenate([qs.run(None, {"image": xte[s:s + BATCH]})[0] for s in range(0, len(xte), BATCH)])
    ing_q, _ = engine_logits(args, work, qdq, "qdq", xte)
    agree = float((ing_q.argmax(1) == ort_q.argmax(1)).mean() * 100)
    print(f"onnxruntime QDQ model: onnxruntime top-1 {acc(ort_q):.2f}%, ingot engine {acc(ing_q):.2f}%, "
          f"same prediction on {agree:.2f}%")
    check("explicit QDQ (onnxruntime quantize_static): ingot's engine predicts what onnxruntime does (>= 99%)",
          agree >= 99.0, agree)

    # Explicit quantization by NVIDIA ModelOpt's ONNX PTQ (cnn.modelopt_{int8,fp8}.onnx, made by
    # tests/data/fashion_mnist/make_modelopt_qdq.py: ModelOpt needs PyTorch, so CI reads the files it
    # wrote). ModelOpt keeps what it does not quantize in fp16. ingot's engine must predict what
    # onnxruntime's execution of the same file predicts, and stay within a point of fp32; the Q/DQ
    # nodes the optimizer leaves standing are counted (issue 20's bar: none between quantized layers).
    for mode in ("int8", "fp8"):
        path = os.path.join(os.path.dirname(MODEL), f"cnn.modelopt_{mode}.onnx")
        ms = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        ort_m = np.concatenate([ms.run(None, {"image": xte[s:s + BATCH]})[0] for s in range(0, len(xte), BATCH)])
        ing_m, _ = engine_logits(args, work, path, f"modelopt_{mode}", xte)
        agree = float((ing_m.argmax(1) == ort_m.argmax(1)).mean() * 100)
        report = ingot(args.ingot, "inspect", path, "--after-only")
        counts = {op: int(n) for op, n in re.findall(r"^\s+(\S+)\s+\d+ ->\s+(\d+)$", report, re.M)}
        quant = {op: n for op, n in counts.items() if op.startswith("ingot::Quant")}
        standing = counts.get("QuantizeLinear", 0) + counts.get("DequantizeLinear", 0)
        print(f"ModelOpt {mode}: onnxruntime top-1 {acc(ort_m):.2f}%, ingot engine {acc(ing_m):.2f}% "
              f"({acc(ing_m) - a32:+.2f} vs fp32), same prediction on {agree:.2f}%; quantized layers {quant or 'none'}, "
              f"standalone Q/DQ nodes left {standing}")
        check(f"ModelOpt {mode} Q/DQ model: ingot's engine predicts what onnxruntime does (>= 99%) and stays within "
              f"1 point of fp32", agree >= 99.0 and acc(ing_m) >= a32 - 1.0, (agree, acc(ing_m), a32))
        if mode == "int8":
            # ModelOpt quantizes the two convolutions; between them sit DQ -> MaxPool -> Q, which
            # fuse_quant_gemm runs on the int8 numbers. What may stay: the image's QuantizeLinear
            # and the DequantizeLinear before the float head (the second MaxPool and the Gemms).
            check("ModelOpt int8: both convolutions quantized, no Q/DQ between them (2 left, at the edges)",
                  quant.get("ingot::QuantConv", 0) == 2 and standing == 2, (quant, standing))
    print(f"{len(FAILED)} failed")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
