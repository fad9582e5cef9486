#!/usr/bin/env python3
"""The GPU benchmark harness (bench/harness.py) where CI can run it: without torch or a GPU.
  - its own --self-test (table, speedups, JSON and markdown on made-up numbers);
  - a dry run of its ingot plumbing on CPU engines (--ingot-backend cpu): small stand-ins with
    the I/O names and shapes of ResNet-50 and BERT are built into engines (per batch and one
    shared profile), timed with and without --cuda-graph, profiled (top steps and timing chart),
    and their saved outputs compared by the harness's own cosine code against onnxruntime on the
    same inputs; then the results files are written and read back.

usage: test_bench_harness.py --ingot PATH
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from cli_harness import check, summary

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(HERE, "..", "..", "bench")
sys.path.insert(0, BENCH)
import harness  # noqa: E402


def resnet_stand_in(path, rng):
    """input [batch,3,224,224] -> Conv 3x3 -> Relu -> GlobalAveragePool -> Flatten -> Gemm -> logits."""
    w = numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), "conv.w")
    fc = numpy_helper.from_array(rng.standard_normal((10, 8)).astype(np.float32), "fc.w")
    fb = numpy_helper.from_array(rng.standard_normal(10).astype(np.float32), "fc.b")
    nodes = [helper.make_node("Conv", ["input", "conv.w"], ["c"], "conv", pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("Relu", ["c"], ["r"], "relu"),
             helper.make_node("GlobalAveragePool", ["r"], ["g"], "gap"),
             helper.make_node("Flatten", ["g"], ["f"], "flatten"),
             helper.make_node("Gemm", ["f", "fc.w", "fc.b"], ["logits"], "fc", transB=1)]
    g = helper.make_graph(nodes, "resnet_stand_in",
                          [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 3, 224, 224])],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 10])], [w, fc, fb])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]), path)


def bert_stand_in(path, rng):
    """input_ids, attention_mask [batch,128] -> embedding * mask -> LayerNorm -> last_hidden_state;
    mean over the sequence -> pooler_output."""
    emb = numpy_helper.from_array((0.02 * rng.standard_normal((harness.BERT_VOCAB, 16))).astype(np.float32), "emb")
    scale = numpy_helper.from_array(np.ones(16, np.float32), "ln.scale")
    bias = numpy_helper.from_array(np.zeros(16, np.float32), "ln.bias")
    axes = numpy_helper.from_array(np.array([2], np.int64), "axes2")
    axes1 = numpy_helper.from_array(np.array([1], np.int64), "axes1")
    nodes = [helper.make_node("Gather", ["emb", "input_ids"], ["e"], "embed"),
             helper.make_node("Cast", ["attention_mask"], ["m"], "mask_f", to=TensorProto.FLOAT),
             helper.make_node("Unsqueeze", ["m", "axes2"], ["m3"], "mask_3d"),
             helper.make_node("Mul", ["e", "m3"], ["em"], "masked"),
             helper.make_node("LayerNormalization", ["em", "ln.scale", "ln.bias"], ["last_hidden_state"], "ln",
                              axis=-1),
             helper.make_node("ReduceMean", ["last_hidden_state", "axes1"], ["pooler_output"], "pool", keepdims=0)]
    seq = harness.SEQ_LEN
    g = helper.make_graph(nodes, "bert_stand_in",
                          [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", seq]),
                           helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", seq])],
                          [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", seq, 16]),
                           helper.make_tensor_value_info("pooler_output", TensorProto.FLOAT, ["batch", 16])],
                          [emb, scale, bias, axes, axes1])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]), path)


def inputs_for(name, batch, rng):
    if name == "resnet50":
        return [rng.standard_normal((batch, 3, 224, 224)).astype(np.float32)]
    ids = rng.integers(0, harness.BERT_VOCAB, (batch, harness.SEQ_LEN), dtype=np.int64)
    mask = (np.arange(harness.SEQ_LEN)[None, :] < rng.integers(64, 129, (batch, 1))).astype(np.int64)
    return [ids, mask]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ingot", required=True)
    a = ap.parse_args()
    p = subprocess.run([sys.executable, os.path.join(BENCH, "harness.py"), "--self-test"], capture_output=True,
                       text=True)
    check("harness --self-test passes", p.returncode == 0 and "0 failed" in p.stdout, p.stdout + p.stderr)
    p = subprocess.run([sys.executable, os.path.join(BENCH, "perf_analyzer_bench.py"), "--self-test"],
                       capture_output=True, text=True)
    check("perf_analyzer_bench --self-test passes (CSV parsing, table)", p.returncode == 0 and "self-test ok" in p.stdout,
          p.stdout + p.stderr)

    rng = np.random.default_rng(7)
    with tempfile.TemporaryDirectory() as tmp:
        out, work = os.path.join(tmp, "out"), os.path.join(tmp, "work")
        os.makedirs(out)
        args = harness.parser().parse_args(["--ingot", os.path.abspath(a.ingot), "--out", out, "--work", work,
                                            "--ingot-backend", "cpu", "--iterations", "5", "--duration-s", "0",
                                            "--warmup-ms", "0", "--max-minutes", "5", "--commit", "test"])
        h = harness.Harness(args)
        for name, make, big in (("resnet50", resnet_stand_in, 4), ("bert", bert_stand_in, 3)):
            model = os.path.join(work, f"{name}.onnx")
            make(model, rng)
            engines = {}
            rec = h.build(name, model, os.path.join(work, f"{name}_b1.engine"), [1], "batch 1")
            check(f"{name}: build at batch 1 through the harness", rec["ok"], str(rec))
            if rec["ok"]:
                engines[1] = os.path.join(work, f"{name}_b1.engine")
            rec = h.build(name, model, os.path.join(work, f"{name}_shared.engine"), [1, big], f"batch 1..{big}")
            check(f"{name}: build one profile for batch 1..{big}", rec["ok"], str(rec))
            if rec["ok"]:
                engines[big] = os.path.join(work, f"{name}_shared.engine")
            sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
            for b, engine in sorted(engines.items()):
                row = {"model": name, "batch": b, "unit": harness.MODELS[name][3]}
                h.results["rows"].append(row)
                inputs = inputs_for(name, b, rng)
                load = h.save_inputs(name, b, inputs)
                row["ingot"], status = h.ingot_time(name, engine, b, load, graph=False)
                check(f"{name} batch {b}: timed (median of the --export-times entries)",
                      harness.per_query(row["ingot"]) is not None and row["ingot"]["queries"] == 5, str(row["ingot"]))
                check(f"{name} batch {b}: no CUDA graph line without --cuda-graph", status is None, str(status))
                row["ingot_graph"], status = h.ingot_time(name, engine, b, load, graph=True)
                check(f"{name} batch {b}: --cuda-graph on a CPU engine still times (and prints no graph line)",
                      harness.per_query(row["ingot_graph"]) is not None and status is None, str(row["ingot_graph"]))
                got, error = h.ingot_outputs(name, engine, b, load)
                want = sess.run(harness.MODELS[name][2], dict(zip(harness.MODELS[name][1], inputs)))
                row["accuracy"] = harness.compare_outputs(harness.MODELS[name][2], got or {}, want)
                cos = harness.min_cosine(row)
                check(f"{name} batch {b}: every output saved and compared (cosine vs onnxruntime > 0.99999)",
                      error is None and set(row["accuracy"]["cosine"]) == set(harness.MODELS[name][2])
                      and cos is not None and cos > 0.99999, f"{error} {row['accuracy']}")
                h.ingot_profile(name, engine, b, load, model)
                prof = h.results["profiles"].get(f"{name} batch {b}", {})
                top = prof.get("top", [])
                check(f"{name} batch {b}: profile keeps the most expensive steps, longest first",
                      0 < len(top) <= 5 and all(top[i]["medianMs"] >= top[i + 1]["medianMs"]
                                                for i in range(len(top) - 1)), str(prof))
                if name == "resnet50":
                    conv = [l for l in top if l["op"].endswith("Conv")]
                    check(f"{name} batch {b}: --onnx gives the engine's Conv steps their FLOPs",
                          conv and all(l["flops"] for l in conv), str(top))
                check(f"{name} batch {b}: timing chart written",
                      os.path.exists(os.path.join(out, f"{name}_b{b}_timing.svg")), os.listdir(out))
        h.save()
        back = json.load(open(os.path.join(out, "bench.json")))
        md = open(os.path.join(out, "bench.md")).read()
        check("bench.json holds every measured row", len(back["rows"]) == 4, str(back["rows"])[:500])
        check("bench.md holds the table and the top steps", md.count("| resnet50 |") == 2 and "| bert |" in md
              and "Five most expensive ingot steps" in md, md[:1500])
        print(harness.text_table(h.results))
    return summary()


if __name__ == "__main__":
    sys.exit(main())
