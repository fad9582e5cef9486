#!/usr/bin/env python3
"""End-to-end checks of the ingot command: help, version, run on the CPU backend with random and
.npy inputs, and a clear one-line error with a non-zero exit for each kind of bad input."""
import argparse
import os
import struct
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

from cli_harness import check, engine_checksum, summary
from cli_harness import run as _run


def run(ingot, *args):
    return _run(ingot, *args, timeout=120)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ingot", required=True)
    ap.add_argument("--models", required=True)
    a = ap.parse_args()
    ingot = a.ingot
    mlp = os.path.join(a.models, "mlp_symbolic_batch", "model.onnx")
    cnn = os.path.join(a.models, "cnn_small", "model.onnx")

    rc, out, err = run(ingot, "--help")
    check("--help lists subcommands", rc == 0 and "run" in out, out + err)
    rc, out, err = run(ingot, "--version")
    check("--version prints the version", rc == 0 and out.startswith("ingot "), out + err)

    rc, out, err = run(ingot, "run", cnn, "--backend", "cpu")
    check("run cnn on cpu prints the output summary", rc == 0 and "logits  f32[2,10]" in out and "mean" in out, out + err)

    rc, out, err = run(ingot, "run", mlp, "--shapes", "x:3x8")
    check("run with --shapes binds the symbolic batch", rc == 0 and "probs  f32[3,4]" in out, out + err)

    with tempfile.TemporaryDirectory() as tmp:
        x = np.random.default_rng(0).standard_normal((5, 8)).astype(np.float32)
        np.save(os.path.join(tmp, "x.npy"), x)
        rc, out, err = run(ingot, "run", mlp, "--load-inputs", f"x:{os.path.join(tmp, 'x.npy')}", "--save-outputs", tmp)
        ok = rc == 0 and os.path.exists(os.path.join(tmp, "probs.npy"))
        check("run with .npy inputs saves .npy outputs", ok, out + err)
        if ok:
            probs = np.load(os.path.join(tmp, "probs.npy"))
            # Check against a numpy evaluation of the same model (weights from the file).
            m = onnx.load(mlp)
            w = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
            h = np.maximum(x @ w["w1"] + w["b1"], 0) @ w["w2"] + w["b2"]
            e = np.exp(h - h.max(axis=-1, keepdims=True))
            want = e / e.sum(axis=-1, keepdims=True)
            check("saved outputs match numpy", probs.shape == (5, 4) and np.allclose(probs, want, rtol=1e-4, atol=1e-6),
                  f"max err {np.abs(probs - want).max() if probs.shape == want.shape else probs.shape}")

        # Build with a timing cache and fp16 (on the cpu backend: reduced storage, for accuracy
        # previews): progress lines, the precision summary, a cache file written and reused.
        cache = os.path.join(tmp, "timing.cache")
        eng = os.path.join(tmp, "cnn16.engine")
        rc, out, err = run(ingot, "build", cnn, "-o", eng, "--fp16", "--timing-cache", cache)
        check("build --fp16 --timing-cache", rc == 0 and "choosing tactics:" in err and "ETA" in err
              and "reduced precision" in out and os.path.exists(cache), out + err)
        first = open(cache).readline().strip() if os.path.exists(cache) else ""
        check("timing cache file has the ingot header", first == "ingot-timing-cache 1", first)
        rc, out, err = run(ingot, "build", cnn, "-o", eng, "--fp16", "--timing-cache", cache)
        check("second build reuses the cache", rc == 0 and "timing-cache hits" in out, out + err)
        rc, out, err = run(ingot, "compare", cnn, "--engine", eng, "--atol", "2e-2", "--rtol", "2e-2")
        check("fp16 cpu engine within fp16 tolerance of the reference", rc == 0 and "PASS" in out, out + err)
        # --reduced-io: the engine takes and gives fp16 (no Casts at its edges), and runs.
        eng_io = os.path.join(tmp, "mlp16io.engine")
        rc, out, err = run(ingot, "build", mlp, "-o", eng_io, "--fp16", "--reduced-io", "--shapes", "x:2x8")
        rc2, out2, err2 = run(ingot, "inspect", eng_io)
        check("build --fp16 --reduced-io: f16 input and output, no Cast step", rc == 0 and rc2 == 0
              and "x  f16[2,8]" in out2 and "probs  f16[2,4]" in out2 and " Cast " not in out2, out + err + out2 + err2)
        rc, out, err = run(ingot, "run", eng_io)
        check("run a --reduced-io engine on random fp16 inputs", rc == 0 and "probs  f16[2,4]" in out, out + err)

        # trtexec's habits: open dims no shape flag names are built for 1, with a one-line note; folder
        # options make their folder.
        auto_eng = os.path.join(tmp, "auto1.engine")
        rc, out, err = run(ingot, "build", mlp, "-o", auto_eng)
        rc2, out2, err2 = run(ingot, "inspect", auto_eng)
        notes = [l for l in err.splitlines() if l.startswith("note: input 'x' has open dims")]
        check("build without shape flags: open dims built for 1, said in one line",
              rc == 0 and len(notes) == 1 and "x:1x8" in notes[0] and "x  f32[1,8]" in out2, out + err + out2 + err2)
        rc, out, err = run(ingot, "build", mlp, "-o", auto_eng, "--shapes", "x:3x8")
        check("with --shapes there is no such note", rc == 0 and "has open dims" not in err, out + err)
        deep = os.path.join(tmp, "made", "by", "run")
        rc, out, err = run(ingot, "run", mlp, "--shapes", "x:2x8", "--save-outputs", deep)
        check("run --save-outputs makes a missing folder", rc == 0 and os.path.exists(os.path.join(deep, "probs.npy")),
              out + err)
        # --check-finite: Sqrt of a negative row gives NaN at the first step; the next step (Relu)
        # carries it, the last (Add of a finite constant) too. The report names step 0 first and the
        # rows (1 and 3 of 4), and the run fails; with finite inputs it passes and says so.
        g = onnx.helper.make_graph(
            [onnx.helper.make_node("Sqrt", ["x"], ["s"], name="root"),
             onnx.helper.make_node("Relu", ["s"], ["r"], name="relu"),
             onnx.helper.make_node("Add", ["r", "c"], ["y"], name="add")],
            "nan_rows", [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [4, 3])],
            [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [4, 3])],
            [numpy_helper.from_array(np.full([3], 0.5, np.float32), "c")])
        nan_model = os.path.join(tmp, "nan_rows.onnx")
        onnx.save(onnx.helper.make_model(g, opset_imports=[onnx.helper.make_opsetid("", 17)]), nan_model)
        xs = np.array([[1, 4, 9], [-1, 2, 3], [0.5, 0.25, 1], [2, -8, -2]], np.float32)
        np.save(os.path.join(tmp, "nan_x.npy"), xs)
        rc, out, err = run(ingot, "run", nan_model, "--load-inputs", f"x:{os.path.join(tmp, 'nan_x.npy')}",
                           "--check-finite", "--opt-level", "0")
        steps = [l for l in out.splitlines() if l.startswith("  step ")]
        check("run --check-finite fails on a NaN output, naming its rows",
              rc == 1 and "output y: 3 NaN, 0 Inf of 12 in rows 1, 3 (2 of 4)" in out and "NaN or Inf" in err, out + err)
        check("run --check-finite names the first step that makes NaN, then the ones carrying it",
              "the first at step 0" in out and len(steps) >= 1 and steps[0].startswith("  step 0  Sqrt 'root'")
              and "3 NaN, 0 Inf of 12; rows 1, 3 (2 of 4)" in steps[0], out)
        # The first bad step's inputs with their largest finite |x|: an fp32 square of 5e20 overflows.
        g = onnx.helper.make_graph(
            [onnx.helper.make_node("Mul", ["x", "big"], ["s"], name="scale"),
             onnx.helper.make_node("Mul", ["s", "s"], ["y"], name="square")],
            "overflow", [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 2])],
            [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 2])],
            [numpy_helper.from_array(np.array(1e20, np.float32), "big")])
        ovf_model = os.path.join(tmp, "overflow.onnx")
        onnx.save(onnx.helper.make_model(g, opset_imports=[onnx.helper.make_opsetid("", 17)]), ovf_model)
        np.save(os.path.join(tmp, "ovf_x.npy"), np.array([[1e-3, 5], [0.5, 2e-3]], np.float32))
        rc, out, err = run(ingot, "run", ovf_model, "--load-inputs", f"x:{os.path.join(tmp, 'ovf_x.npy')}",
                           "--check-finite", "--opt-level", "0")
        check("run --check-finite gives the largest finite |x| of the first bad step's inputs",
              rc == 1 and "the first at step 1" in out and "0 NaN, 2 Inf of 4; rows 0-1 (2 of 2)" in out
              and "inputs of step 1 (largest finite |x|): s 5e+20" in out, out + err)
        # The same in fp16, read from the bits where the listener's buffer lies: 300^2 overflows to
        # Inf, Sqrt(-1) (step 0 of a second model) gives a NaN.
        g = onnx.helper.make_graph(
            [onnx.helper.make_node("Mul", ["x", "big"], ["s"], name="scale"),
             onnx.helper.make_node("Mul", ["s", "s"], ["y"], name="square")],
            "overflow16", [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT16, [2, 2])],
            [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT16, [2, 2])],
            [numpy_helper.from_array(np.array(300, np.float16), "big")])
        ovf16 = os.path.join(tmp, "overflow16.onnx")
        onnx.save(onnx.helper.make_model(g, opset_imports=[onnx.helper.make_opsetid("", 17)]), ovf16)
        np.save(os.path.join(tmp, "ovf16_x.npy"), np.array([[1, 0.01], [0.5, 0.001]], np.float16))
        rc, out, err = run(ingot, "run", ovf16, "--load-inputs", f"x:{os.path.join(tmp, 'ovf16_x.npy')}",
                           "--check-finite", "--opt-level", "0")
        check("run --check-finite reads fp16 tensors: an Inf and the largest finite |x| before it",
              rc == 1 and "output y: 0 NaN, 1 Inf of 4 in rows 0 (1 of 2)" in out and "the first at step 1" in out
              and "inputs of step 1 (largest finite |x|): s 300" in out, out + err)
        g = onnx.helper.make_graph([onnx.helper.make_node("Sqrt", ["x"], ["y"], name="root")], "nan16",
                                   [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT16, [3, 2])],
                                   [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT16, [3, 2])])
        nan16 = os.path.join(tmp, "nan16.onnx")
        onnx.save(onnx.helper.make_model(g, opset_imports=[onnx.helper.make_opsetid("", 17)]), nan16)
        np.save(os.path.join(tmp, "nan16_x.npy"), np.array([[4, 1], [2, 9], [-1, 16]], np.float16))
        rc, out, err = run(ingot, "run", nan16, "--load-inputs", f"x:{os.path.join(tmp, 'nan16_x.npy')}",
                           "--check-finite", "--opt-level", "0")
        check("run --check-finite finds an fp16 NaN and its row",
              rc == 1 and "output y: 1 NaN, 0 Inf of 6 in rows 2 (1 of 3)" in out, out + err)
        np.save(os.path.join(tmp, "ok_x.npy"), np.abs(xs))
        rc, out, err = run(ingot, "run", nan_model, "--load-inputs", f"x:{os.path.join(tmp, 'ok_x.npy')}",
                           "--check-finite")
        check("run --check-finite passes finite outputs and says every step was finite",
              rc == 0 and "outputs are finite" in out and "tensors of" in out and "are finite" in out, out + err)
        irdir = os.path.join(tmp, "made", "ir")
        rc, out, err = run(ingot, "build", mlp, "-o", auto_eng, "--shapes", "x:2x8", "--dump-ir", irdir)
        check("build --dump-ir makes a missing folder", rc == 0 and os.path.exists(os.path.join(irdir, "00_input.ir")),
              out + err)

        # --no-host-fallback is accepted; a CPU engine has no host-fallback steps to refuse, and the
        # summary's host-fallback line belongs to GPU backends only (tests/cli/test_cuda_cli.py).
        rc, out, err = run(ingot, "build", cnn, "-o", os.path.join(tmp, "nofb.engine"), "--no-host-fallback")
        check("build --no-host-fallback on the cpu backend", rc == 0 and "host fallback" not in out, out + err)
        rc, out, err = run(ingot, "build", "--help")
        check("build --help lists --no-host-fallback", "--no-host-fallback" in out + err, out + err)

        # Two optimization profiles in one engine; ingot run picks one with --profile-index.
        two = os.path.join(tmp, "two_profiles.engine")
        rc, out, err = run(ingot, "build", mlp, "-o", two, "--min-shapes", "x:1x8", "--opt-shapes", "x:2x8",
                           "--max-shapes", "x:4x8", "--profile", "--min-shapes", "x:16x8", "--opt-shapes", "x:32x8",
                           "--max-shapes", "x:64x8")
        check("build with two profiles", rc == 0, out + err)
        rc, out, err = run(ingot, "inspect", two)
        check("inspect lists both profiles", rc == 0 and "2 profiles" in out and "min [16,8]" in out, out + err)
        rc, out, err = run(ingot, "run", two, "--profile-index", "1")
        check("run in profile 1 at its opt shape", rc == 0 and "probs  f32[32,4]" in out, out + err)

        # An engine written by another ingot version: same bytes but the version string (and a
        # checksum that matches, so the version check itself must refuse it).
        good = os.path.join(tmp, "mlp.engine")
        rc, out, err = run(ingot, "build", mlp, "-o", good, "--shapes", "x:2x8")
        other_version = os.path.join(tmp, "other_version.engine")
        rc_v, version_out, _ = run(ingot, "--version")
        ver = version_out.split()[1].encode()  # "ingot X.Y.Z (commit ...)"
        data = bytearray(open(good, "rb").read()) if os.path.exists(good) else bytearray()
        at = data.find(struct.pack("<I", len(ver)) + ver)
        if at >= 0:
            fake = (b"9" * len(ver))
            data[at + 4:at + 4 + len(ver)] = fake
            struct.pack_into("<Q", data, 48, engine_checksum(bytes(data)))
            open(other_version, "wb").write(bytes(data))
        check("engine of another version written for the test", at >= 0 and rc == 0, out + err)

        junk = os.path.join(tmp, "junk.onnx")
        open(junk, "wb").write(os.urandom(300))
        trunc = os.path.join(tmp, "trunc.onnx")
        open(trunc, "wb").write(open(cnn, "rb").read()[:500])
        unknown = os.path.join(tmp, "unknown.onnx")
        m = onnx.load(mlp)
        m.graph.node[2].op_type = "NotAnOp"
        m.graph.node[2].name = "the_relu"
        open(unknown, "wb").write(m.SerializeToString())
        bad_cases = [
            ("unknown subcommand", ["frobnicate"], "unknown command"),
            ("unknown flag", ["run", mlp, "--bogus"], "unknown option '--bogus'"),
            ("malformed shape", ["run", mlp, "--shapes", "x:1x3xfoo"], "malformed dims"),
            ("shape against a fixed dim", ["run", mlp, "--shapes", "x:2x9"], "fixed to 8"),
            ("missing file", ["run", os.path.join(tmp, "nope.onnx")], "cannot open"),
            ("random bytes", ["run", junk], "not a valid ONNX model"),
            ("truncated model", ["run", trunc], "invalid model"),
            ("unknown op", ["run", unknown], "NotAnOp 'the_relu'"),
            ("unknown backend", ["run", mlp, "--backend", "tpu"], "backend 'tpu'"),
            ("no model", ["run"], "no model given"),
            ("shape outside the selected profile", ["run", os.path.join(tmp, "two_profiles.engine"),
                                                    "--profile-index", "1", "--shapes", "x:8x8"],
             "outside optimization profile 1: allowed 16..64"),
            ("profile index past the engine's", ["run", os.path.join(tmp, "two_profiles.engine"),
                                                 "--profile-index", "2"], "profile 2 does not exist"),
            ("--profile with no shapes before it", ["build", mlp, "-o", os.path.join(tmp, "x.engine"), "--profile"],
             "no shapes came before it"),
            ("engine from another ingot version", ["run", os.path.join(tmp, "other_version.engine")],
             "rebuild the engine with this ingot"),
            ("bad layer precision", ["build", mlp, "-o", os.path.join(tmp, "x.engine"), "--layer-precisions", "fc1:fp4"],
             "expects LAYER:fp32|fp16|bf16|int8|fp8"),
            ("--reduced-io without a reduced precision", ["build", mlp, "-o", os.path.join(tmp, "x.engine"),
                                                          "--shapes", "x:2x8", "--reduced-io"], "need --fp16 or --bf16"),
            ("bad tactic timing", ["build", mlp, "-o", os.path.join(tmp, "x.engine"), "--tactic-timing", "wall"],
             "--tactic-timing must be stream or device, got 'wall'"),
            ("layer precision naming no layer", ["build", mlp, "-o", os.path.join(tmp, "x.engine"), "--shapes",
                                                 "x:2x8", "--layer-precisions", "no_such_layer:fp32"],
             "'no_such_layer', which is no layer"),
        ]
        for name, args, expect in bad_cases:
            rc, out, err = run(ingot, *args)
            lines = [l for l in err.strip().splitlines() if l]
            check(f"error: {name}", rc != 0 and rc < 128 and len(lines) == 1 and expect in err,
                  f"rc={rc} stderr={err!r}")

    return summary()


if __name__ == "__main__":
    sys.exit(main())
