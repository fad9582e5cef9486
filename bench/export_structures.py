#!/usr/bin/env python3
# Copyright ingot authors. Apache-2.0.
"""On the GPU machine (torch there, no network): export ResNet-50 and BERT-base the way the
harness does (dynamo and legacy exporters, opset 18, dynamic batch) and write each graph with its
float weights stripped (dims and dtypes kept, data dropped; integer and small tensors kept) so the structures travel back to a CPU
machine, where tests/models/restore_weights.py fills random weights for import and optimizer work.

  python3 bench/export_structures.py OUT_DIR [INGOT]   (with INGOT: also try an fp16 CUDA build of each)
"""
import os
import subprocess
import sys
import traceback

import onnx
import torch

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402  (the same models and inputs as the benchmark)


def strip(path, out):
    m = onnx.load(path)
    for t in m.graph.initializer:
        # Integer tensors (shapes, axes, indices) and small ones carry the graph's meaning: kept.
        n = 1
        for d in t.dims:
            n *= d
        if t.data_type not in (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16) or n <= 64:
            continue
        if t.data_location == onnx.TensorProto.EXTERNAL:
            del t.external_data[:]
            t.data_location = onnx.TensorProto.DEFAULT
        t.ClearField("raw_data")
        for f in ("float_data", "int32_data", "int64_data", "double_data", "uint64_data", "string_data"):
            t.ClearField(f)
    onnx.save(m, out)


def main():
    out = sys.argv[1]
    ingot = sys.argv[2] if len(sys.argv) > 2 else None
    os.makedirs(out, exist_ok=True)
    h = harness.Harness(harness.parser().parse_args(["--ingot", "/bin/true", "--out", out]))
    report = open(os.path.join(out, "builds.log"), "w")
    for name in ("resnet50", "bert"):
        model, _ = h.make_model(name)
        for exporter in ("dynamo", "legacy"):
            path = os.path.join(out, f"{name}_{exporter}_full.onnx")
            try:
                h.export(name, model, path, exporter)
                strip(path, os.path.join(out, f"{name}_{exporter}.onnx"))
                print(name, exporter, "exported", flush=True)
                if ingot:
                    dims = "1x3x224x224" if name == "resnet50" else "1x128"
                    shapes = ",".join(f"{n}:{dims}" for n in harness.MODELS[name][1])
                    p = subprocess.run([ingot, "build", path, "-o", path + ".engine", "--backend", "cuda", "--fp16",
                                        "--shapes", shapes, "--timing-cache", os.path.join(out, "cache"), "-v"],
                                       capture_output=True, text=True, timeout=120)
                    report.write(f"== {name} {exporter}: rc {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-12000:]}\n")
                    report.flush()
            except Exception:  # noqa: BLE001
                report.write(f"== {name} {exporter}: export failed\n{traceback.format_exc()}\n")
            for f in os.listdir(out):
                if f.startswith(f"{name}_{exporter}_full"):
                    os.remove(os.path.join(out, f))
    report.close()


if __name__ == "__main__":
    main()
