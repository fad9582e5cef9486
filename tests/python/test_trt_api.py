# Copyright ingot authors. Apache-2.0.
"""`import ingot` as a TensorRT user writes Python: scripts in the shape of TensorRT's documented
Python API (Developer Guide: "The Python API" — build from ONNX with the parser, a builder
config, an optimization profile, serialize; deserialize, a context, set_input_shape,
set_tensor_address, execute_async_v3 / execute_v2; an IInt8EntropyCalibrator2 subclass), run
on this machine's backend (the CPU one without a GPU: tensor addresses are host memory) and
checked against onnxruntime; plus the errors TensorRT scripts look at (parser errors, a foreign
engine, a shape outside the profile), ingot.compile, and the version.

Usage (pytest; conftest.py gives the fixtures):
  PYTHONPATH=<build>/python python3 -m pytest tests/python --ingot <build>/tools/ingot
"""
import os
import subprocess

import numpy as np

from fmnist import MODEL, reference

HERE = os.path.dirname(os.path.abspath(__file__))


def tol(trt):
    """fp32 engines against onnxruntime: summation order on the CPU backend, also the GPU's
    kernels (cuDNN/cuBLASLt fp32, no TF32 unless asked) on a CUDA one."""
    return dict(rtol=1e-3, atol=1e-3) if trt.default_backend() == "cuda" else dict(rtol=1e-4, atol=1e-4)


def check(name, cond, detail=""):
    assert cond, f"{name}: {detail}"


class Memory:
    """Where a script's tensors live, as TensorRT samples allocate them: torch CUDA tensors on a
    machine with a GPU (engines are CUDA engines there; addresses are device pointers, work runs
    on torch's current stream), numpy arrays on the CPU backend (host addresses)."""

    def __init__(self, trt):
        self.cuda = trt.default_backend() == "cuda"
        if self.cuda:
            import torch
            self.torch = torch

    def from_numpy(self, a):
        return self.torch.from_numpy(np.ascontiguousarray(a)).cuda() if self.cuda else np.ascontiguousarray(a)

    def empty(self, shape, dtype):
        if self.cuda:
            return self.torch.empty(tuple(shape), dtype=getattr(self.torch, np.dtype(dtype).name), device="cuda")
        return np.empty(tuple(shape), dtype=dtype)

    def ptr(self, buf):
        return buf.data_ptr() if self.cuda else buf.ctypes.data

    def stream(self):
        return self.torch.cuda.current_stream().cuda_stream if self.cuda else 0

    def to_numpy(self, buf):
        if self.cuda:
            self.torch.cuda.synchronize()
            return buf.cpu().numpy()
        return buf


class Capture:
    """An ILogger subclass, as TensorRT users write them, that keeps what it is told."""

    def __init__(self, trt):
        class L(trt.ILogger):
            def __init__(s):
                trt.ILogger.__init__(s)
                s.messages = []

            def log(s, severity, msg):
                s.messages.append((severity, msg))
        self.logger = L()

    def errors(self):
        return [m for s, m in self.logger.messages if s <= 1]


# ---- a TensorRT-style script: everything below `import ingot as trt` is TensorRT's API ----------

def trt_style_build(trt, logger, onnx_path, fp16=False):
    builder = trt.Builder(logger)
    network = builder.create_network(1 << int(trt.NetworkDefinitionCreationFlag.EXPLICIT_BATCH))
    parser = trt.OnnxParser(network, logger)
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, 1 << 28)
    if fp16:
        config.set_flag(trt.BuilderFlag.FP16)
    with open(onnx_path, "rb") as model:
        if not parser.parse(model.read()):
            for error in range(parser.num_errors):
                print(parser.get_error(error))
            return None
    profile = builder.create_optimization_profile()
    profile.set_shape(network.get_input(0).name, (1, 1, 28, 28), (8, 1, 28, 28), (32, 1, 28, 28))
    config.add_optimization_profile(profile)
    return builder.build_serialized_network(network, config)


def trt_style_infer(trt, engine, x):
    mem = Memory(trt)
    context = engine.create_execution_context()
    buffers = {}
    for i in range(engine.num_io_tensors):
        name = engine.get_tensor_name(i)
        if engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT:
            context.set_input_shape(name, x.shape)
            buffers[name] = mem.from_numpy(x.astype(trt.nptype(engine.get_tensor_dtype(name))))
    for i in range(engine.num_io_tensors):
        name = engine.get_tensor_name(i)
        if engine.get_tensor_mode(name) == trt.TensorIOMode.OUTPUT:
            shape = tuple(context.get_tensor_shape(name))
            buffers[name] = mem.empty(shape, trt.nptype(engine.get_tensor_dtype(name)))
    for name, buf in buffers.items():
        context.set_tensor_address(name, mem.ptr(buf))
    ok = context.execute_async_v3(mem.stream())
    return ok, {name: mem.to_numpy(buf) for name, buf in buffers.items()}, context


def test_build_and_run(trt, work):
    cap = Capture(trt)
    serialized = trt_style_build(trt, cap.logger, MODEL)
    check("build_serialized_network returns the engine", serialized is not None and serialized.nbytes > 0,
          cap.errors())
    if serialized is None:
        return
    path = os.path.join(work, "cnn.engine")
    with open(path, "wb") as f:
        f.write(serialized)
    runtime = trt.Runtime(cap.logger)
    with open(path, "rb") as f:
        engine = runtime.deserialize_cuda_engine(f.read())
    check("deserialize_cuda_engine", engine is not None, cap.errors())
    names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
    check("I/O tensors by name and mode", names == ["image", "logits"]
          and engine.get_tensor_mode("image") == trt.TensorIOMode.INPUT
          and engine.get_tensor_mode("logits") == trt.TensorIOMode.OUTPUT
          and engine.get_tensor_dtype("image") == trt.float32, names)
    check("the open batch dim is -1", tuple(engine.get_tensor_shape("image")) == (-1, 1, 28, 28),
          engine.get_tensor_shape("image"))
    mn, opt, mx = engine.get_tensor_profile_shape("image", 0)
    check("profile shapes", (tuple(mn), tuple(opt), tuple(mx)) == ((1, 1, 28, 28), (8, 1, 28, 28), (32, 1, 28, 28)),
          (mn, opt, mx))
    rng = np.random.default_rng(3)
    for batch in (1, 5, 32):
        x = rng.standard_normal((batch, 1, 28, 28)).astype(np.float32)
        ok, buffers, context = trt_style_infer(trt, engine, x)
        want = reference(x)
        got = buffers["logits"]
        check(f"execute_async_v3 at batch {batch} matches onnxruntime",
              ok and got.shape == want.shape and np.allclose(got, want, **tol(trt)),
              f"ok {ok}, max diff {np.abs(got - want).max() if got.shape == want.shape else got.shape}")
    # execute_v2: one address per I/O tensor, in get_tensor_name order.
    mem = Memory(trt)
    x = rng.standard_normal((3, 1, 28, 28)).astype(np.float32)
    context = engine.create_execution_context()
    context.set_input_shape("image", x.shape)
    xd = mem.from_numpy(x)
    out = mem.empty(tuple(context.get_tensor_shape("logits")), np.float32)
    ok = context.execute_v2([mem.ptr(xd), mem.ptr(out)])
    out = mem.to_numpy(out)
    check("execute_v2 matches onnxruntime", ok and np.allclose(out, reference(x), **tol(trt)))
    # A shape outside the profile: False, and the logger says which input, dim and range.
    before = len(cap.errors())
    ok = context.set_input_shape("image", (64, 1, 28, 28))
    errs = cap.errors()[before:]
    check("a shape outside the profile is refused and named", not ok and errs and "image" in errs[-1]
          and "64" in errs[-1], errs)
    # An unknown tensor name.
    check("unknown tensor mode is NONE", engine.get_tensor_mode("nope") == trt.TensorIOMode.NONE)
    check("engine.serialize() round-trips", bytes(engine.serialize()) == bytes(serialized))


def test_fp16_dynamic_batch(trt):
    """The same script with BuilderFlag.FP16: layers in fp16 (engine I/O stays fp32), any batch
    of the profile, fp16's tolerance against onnxruntime's fp32."""
    cap = Capture(trt)
    serialized = trt_style_build(trt, cap.logger, MODEL, fp16=True)
    check("FP16 build_serialized_network", serialized is not None, cap.errors())
    engine = trt.Runtime(cap.logger).deserialize_cuda_engine(serialized)
    check("FP16 engine deserializes", engine is not None, cap.errors())
    precisions = {layer.get("precision") for layer in engine.layers}
    check("some layers run in fp16", "f16" in precisions, precisions)
    rng = np.random.default_rng(4)
    for batch in (1, 7, 32):
        x = rng.standard_normal((batch, 1, 28, 28)).astype(np.float32)
        ok, buffers, _ = trt_style_infer(trt, engine, x)
        got, want = buffers["logits"], reference(x)
        cos = float(np.dot(got.ravel(), want.ravel()) / (np.linalg.norm(got) * np.linalg.norm(want)))
        err = float(np.abs(got - want).max() / np.abs(want).max())
        check(f"FP16 engine at batch {batch}: cosine {cos:.6f}, max error {err:.2e} of the largest logit",
              ok and got.shape == want.shape and cos > 0.9995 and err < 1e-2)


def test_parser_errors(trt):
    import onnx
    from onnx import TensorProto, helper
    cap = Capture(trt)
    network = trt.Builder(cap.logger).create_network()
    parser = trt.OnnxParser(network, cap.logger)
    data = open(MODEL, "rb").read()
    ok = parser.parse(data[: len(data) // 3])
    check("a truncated model does not parse", not ok and parser.num_errors == 1, parser.num_errors)
    if parser.num_errors:
        e = parser.get_error(0)
        check("its error says what", e.desc() and e.code() in (trt.ErrorCode.MODEL_DESERIALIZE_FAILED,
                                                               trt.ErrorCode.INVALID_GRAPH), str(e))
    parser.clear_errors()
    node = helper.make_node("NoSuchOp", ["x"], ["y"], name="mystery")
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    ok = parser.parse(m.SerializeToString())
    check("an unknown op does not parse", not ok and parser.num_errors == 1)
    if parser.num_errors:
        e = parser.get_error(0)
        check("the error names the op and the node", "NoSuchOp" in e.desc() and e.node_name() == "mystery"
              and e.node_operator() == "NoSuchOp", f"{e.desc()!r} node {e.node_name()!r} op {e.node_operator()!r}")
    check("parse errors reach the logger", any("NoSuchOp" in m for m in cap.errors()), cap.errors())
    ok = parser.parse_from_file(os.path.join(HERE, "no-such-model.onnx"))
    check("a missing file does not parse", not ok and "no-such-model" in parser.get_error(parser.num_errors - 1).desc())
    builder = trt.Builder(cap.logger)
    check("an empty network does not build",
          builder.build_serialized_network(builder.create_network(), builder.create_builder_config()) is None)
    _ = onnx  # the onnx package builds the test model


def test_foreign_engine(trt):
    cap = Capture(trt)
    engine = trt.Runtime(cap.logger).deserialize_cuda_engine(b"not an engine at all" * 8)
    check("a foreign engine is refused with a logged reason", engine is None and cap.errors(), cap.errors())


class ArrayCalibrator:
    """A TensorRT IInt8EntropyCalibrator2 subclass as TensorRT's samples write one; `pointers`
    returns addresses (the samples' device pointers on a GPU; host memory on the CPU backend)
    instead of arrays."""

    @staticmethod
    def make(trt, batches, cache_file, pointers=False):
        mem = Memory(trt)

        class Calibrator(trt.IInt8EntropyCalibrator2):
            def __init__(self):
                trt.IInt8EntropyCalibrator2.__init__(self)
                self.batches = list(batches)
                self.calls = 0
                self.keep = None

            def get_batch_size(self):
                return self.batches[0].shape[0] if self.batches else 1

            def get_batch(self, names):
                self.calls += 1
                if not self.batches:
                    return None
                b = np.ascontiguousarray(self.batches.pop(0))
                if not pointers:
                    return [b]
                self.keep = mem.from_numpy(b)
                if mem.cuda:
                    mem.torch.cuda.synchronize()  # the copy is done before ingot reads the pointer
                return [int(mem.ptr(self.keep))]

            def read_calibration_cache(self):
                if os.path.exists(cache_file):
                    with open(cache_file, "rb") as f:
                        return f.read()
                return None

            def write_calibration_cache(self, cache):
                with open(cache_file, "wb") as f:
                    f.write(cache)
        return Calibrator()


def build_int8(trt, calibrator, logger):
    builder = trt.Builder(logger)
    network = builder.create_network()
    parser = trt.OnnxParser(network, logger)
    parser.parse_from_file(MODEL)
    config = builder.create_builder_config()
    config.set_flag(trt.BuilderFlag.INT8)
    config.int8_calibrator = calibrator
    profile = builder.create_optimization_profile()
    profile.set_shape("image", (16, 1, 28, 28), (16, 1, 28, 28), (16, 1, 28, 28))
    config.add_optimization_profile(profile)
    return builder.build_serialized_network(network, config)


def test_int8_calibrator(trt, work):
    rng = np.random.default_rng(5)
    batches = [np.abs(rng.standard_normal((16, 1, 28, 28))).astype(np.float32) for _ in range(4)]
    for pointers in (False, True):
        tag = "addresses" if pointers else "arrays"
        cache = os.path.join(work, f"calib-{tag}.cache")
        cap = Capture(trt)
        cal = ArrayCalibrator.make(trt, batches, cache, pointers)
        serialized = build_int8(trt, cal, cap.logger)
        check(f"INT8 build with a Python calibrator ({tag})", serialized is not None, cap.errors())
        check(f"every batch was asked for ({tag})", cal.calls == 5, cal.calls)
        text = open(cache).read() if os.path.exists(cache) else ""
        lines = text.splitlines()
        check(f"the calibration cache is written in TensorRT's text form ({tag})",
              len(lines) > 2 and lines[0].startswith("INGOT-1-") and all(": " in ln for ln in lines[1:]),
              text[:200])
        if serialized is None:
            continue
        engine = trt.Runtime(cap.logger).deserialize_cuda_engine(serialized)
        x = batches[0]
        ok, buffers, _ = trt_style_infer(trt, engine, x)
        want = reference(x)
        agree = float(np.mean(buffers["logits"].argmax(1) == want.argmax(1)))
        cos = float(np.dot(buffers["logits"].ravel(), want.ravel()) /
                    (np.linalg.norm(buffers["logits"]) * np.linalg.norm(want)))
        check(f"the INT8 engine stays close to fp32 ({tag}): cosine {cos:.4f}, top-1 agreement {agree:.2f}",
              ok and cos > 0.98, cos)
    # A second build reads the cache and asks for no batch.
    cap = Capture(trt)
    cal = ArrayCalibrator.make(trt, batches, os.path.join(work, "calib-arrays.cache"))
    serialized = build_int8(trt, cal, cap.logger)
    check("a rebuild with the cache asks for no batch", serialized is not None and cal.calls == 0, cal.calls)


def test_compile(trt):
    mem = Memory(trt)
    run = trt.compile(MODEL, shapes={"image": ((1, 1, 28, 28), (4, 1, 28, 28), (8, 1, 28, 28))})
    x = np.random.default_rng(9).standard_normal((6, 1, 28, 28)).astype(np.float32)
    (got,) = run(mem.from_numpy(x))
    kind = "torch CUDA tensors" if mem.cuda else "numpy arrays"
    check(f"ingot.compile runs {kind}", np.allclose(mem.to_numpy(got), reference(x), **tol(trt)))
    (got2,) = run(image=mem.from_numpy(x[:2]))
    check("ingot.compile takes inputs by name and other batch sizes", tuple(got2.shape) == (2, 10))
    try:
        run(mem.from_numpy(np.ones((9, 1, 28, 28), np.float32)))
        check("ingot.compile refuses a batch outside the profile", False)
    except trt.Error as e:
        check("ingot.compile refuses a batch outside the profile", "9" in str(e) or "profile" in str(e), str(e))


def test_version(trt, ingot_bin):
    out = subprocess.run([ingot_bin, "--version"], capture_output=True, text=True).stdout
    check("ingot.__version__ matches `ingot --version`", out.split()[1] == trt.__version__, (out, trt.__version__))


def test_module_exports_only_its_entry_point(trt):
    """The extension exports PyInit and nanobind's own weak symbols, nothing from the static
    archives linked into it (libingot, libstdc++ where a toolchain links it statically): an
    exported copy of libstdc++'s std::call_once state interposed on the shared libstdc++ that
    cuDNN uses, and cudnnCreate jumped to a null pointer (GPU machine, 2026-12-05)."""
    import shutil
    import pytest
    if not shutil.which("nm"):
        pytest.skip("no nm (binutils) on this machine")
    out = subprocess.run(["nm", "-D", "--defined-only", trt._ingot.__file__], capture_output=True, text=True).stdout
    names = [ln.split()[-1] for ln in out.splitlines() if ln.strip()]
    # (Weak instantiations of std templates from the module's own source stay visible, as in any
    # C++ library; libstdc++'s own definitions, libingot's and protobuf's must not.)
    leaked = [n for n in names if n.startswith(("__once_proxy", "_ZSt11__once_call", "_ZSt15__once_callable",
                                                "_ZNSt6locale", "_ZN5ingot", "_ZNK5ingot", "_ZN6google"))]
    check("PyInit__ingot is exported", "PyInit__ingot" in names, names[:20])
    check("no libstdc++ internals, ingot or protobuf symbol is exported", not leaked, leaked[:20])
