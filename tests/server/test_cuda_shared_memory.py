#!/usr/bin/env python3
# Copyright ingot authors. Apache-2.0.
"""Triton's CUDA shared-memory extension end to end (GPU machine only): this process allocates
device memory with the CUDA runtime (ctypes, no extra packages), writes x there, takes cudaIpc
handles of the input and output buffers and registers them with `ingot serve` over HTTP and over
gRPC (tritonclient); infer requests name the regions instead of carrying data; probs is read back
from device memory and must equal onnxruntime. Skips (exit 0, saying why) without a GPU.
Usage: test_cuda_shared_memory.py --ingot build/tools/ingot --models build/test-models"""
import argparse
import base64
import ctypes
import glob
import json
import os
import sys
import tempfile

import numpy as np
import onnxruntime as ort

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_harness import Client, Server, add_model, check, summary  # noqa: E402


def load_cudart():
    names = ["libcudart.so", "/usr/local/cuda/lib64/libcudart.so"]
    names += sorted(glob.glob("/usr/local/cuda/lib64/libcudart.so.*"))
    names += sorted(glob.glob("/opt/torch/.venv/lib/python3*/site-packages/nvidia/cuda_runtime/lib/libcudart.so*"))
    for n in names:
        try:
            return ctypes.CDLL(n)
        except OSError:
            continue
    return None


class Cuda:
    def __init__(self, lib):
        self.lib = lib

    def ok(self, err, what):
        if err != 0:
            raise RuntimeError(f"{what}: CUDA error {err}")

    def malloc(self, n):
        p = ctypes.c_void_p()
        self.ok(self.lib.cudaMalloc(ctypes.byref(p), ctypes.c_size_t(n)), "cudaMalloc")
        return p

    def h2d(self, dst, a):
        self.ok(self.lib.cudaMemcpy(dst, a.ctypes.data_as(ctypes.c_void_p), ctypes.c_size_t(a.nbytes), 1), "H2D")

    def d2h(self, src, a):
        self.ok(self.lib.cudaMemcpy(a.ctypes.data_as(ctypes.c_void_p), src, ctypes.c_size_t(a.nbytes), 2), "D2H")

    def ipc_handle(self, p):
        h = (ctypes.c_byte * 64)()
        self.ok(self.lib.cudaIpcGetMemHandle(ctypes.byref(h), p), "cudaIpcGetMemHandle")
        return bytes(h)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ingot", required=True)
    ap.add_argument("--models", required=True)
    args = ap.parse_args()
    lib = load_cudart()
    count = ctypes.c_int(0)
    if lib is None or lib.cudaGetDeviceCount(ctypes.byref(count)) != 0 or count.value == 0:
        print("skip: no CUDA runtime or device here (the CUDA shared-memory extension needs a GPU)")
        return 0
    cuda = Cuda(lib)
    mlp = os.path.join(args.models, "mlp_symbolic_batch", "model.onnx")
    sess = ort.InferenceSession(mlp, providers=["CPUExecutionProvider"])
    repo = tempfile.mkdtemp(prefix="ingot-cudashm-")
    io = ('max_batch_size: 4\ninput [ { name: "x" data_type: TYPE_FP32 dims: [ 8 ] } ]\n'
          'output [ { name: "probs" data_type: TYPE_FP32 dims: [ 4 ] } ]\n')
    add_model(repo, "mlp", mlp, io)  # a cpu instance: the region's bytes are copied to the host
    # A cuda instance (a CUDA graph per prepared batch size): the region's bytes are copied device
    # to device into its input buffer, with a padded batch (3 rows run as the prepared 4).
    add_model(repo, "mlp_gpu", mlp, io + 'instance_group [ { kind: KIND_GPU count: 1 } ]\n')
    server = Server(args.ingot, repo, "--access-log", "off")
    c = Client(server.port)
    x = np.random.default_rng(3).standard_normal((3, 8)).astype(np.float32)
    want = sess.run(None, {"x": x})[0]
    d_in, d_out = cuda.malloc(x.nbytes), cuda.malloc(want.nbytes)
    cuda.h2d(d_in, x)
    reg = lambda name, p, n: c.request(  # noqa: E731
        "POST", f"/v2/cudasharedmemory/region/{name}/register",
        json.dumps({"raw_handle": {"b64": base64.b64encode(cuda.ipc_handle(p)).decode()}, "device_id": 0,
                    "byte_size": n}).encode())
    s1, s2 = reg("in", d_in, x.nbytes)[0], reg("out", d_out, want.nbytes)[0]
    check("HTTP: register two CUDA regions from cudaIpc handles", s1 == 200 and s2 == 200, (s1, s2))
    status, _, raw = c.request("GET", "/v2/cudasharedmemory/status")
    regions = json.loads(raw) if status == 200 else []
    check("HTTP: status lists both with device and size",
          sorted((r["name"], r["device_id"], r["byte_size"]) for r in regions) ==
          [("in", 0, x.nbytes), ("out", 0, want.nbytes)], regions)
    body = {"inputs": [{"name": "x", "shape": [3, 8], "datatype": "FP32",
                        "parameters": {"shared_memory_region": "in", "shared_memory_byte_size": x.nbytes}}],
            "outputs": [{"name": "probs", "parameters": {"shared_memory_region": "out",
                                                           "shared_memory_byte_size": want.nbytes}}]}
    status, _, raw = c.request("POST", "/v2/models/mlp/infer", json.dumps(body).encode())
    got = np.zeros_like(want)
    cuda.d2h(d_out, got)
    check("HTTP: infer reads x from device memory and writes probs there, equal to onnxruntime",
          status == 200 and np.allclose(got, want, rtol=1e-5, atol=1e-6), (status, raw[:300], got))
    for attempt in range(3):  # each a fresh output, so a stale one cannot pass
        cuda.h2d(d_out, np.full_like(want, np.nan))
        status, _, raw = c.request("POST", "/v2/models/mlp_gpu/infer", json.dumps(body).encode())
        got = np.zeros_like(want)
        cuda.d2h(d_out, got)
        check(f"HTTP: a cuda instance reads x device to device, equal to onnxruntime (request {attempt + 1})",
              status == 200 and np.allclose(got, want, rtol=1e-4, atol=1e-5), (status, raw[:300], got))
    try:
        try:
            import tritonclient.grpc as tg
        except RuntimeError as e:  # tritonclient's own word when one of its grpc needs is missing
            raise ImportError(str(e).split(". ")[0]) from e
        gc = tg.InferenceServerClient(f"127.0.0.1:{server.grpc_port}")
        gc.unregister_cuda_shared_memory("out")
        d_out2 = cuda.malloc(want.nbytes)
        # tritonclient takes the handle base64-encoded (as its cudashm.get_raw_handle returns it)
        gc.register_cuda_shared_memory("out2", base64.b64encode(cuda.ipc_handle(d_out2)), 0, want.nbytes)
        i = tg.InferInput("x", [3, 8], "FP32")
        i.set_shared_memory("in", x.nbytes)
        o = tg.InferRequestedOutput("probs")
        o.set_shared_memory("out2", want.nbytes)
        gc.infer("mlp", [i], outputs=[o])
        got2 = np.zeros_like(want)
        cuda.d2h(d_out2, got2)
        check("gRPC: the same through tritonclient's CUDA shared-memory calls",
              np.allclose(got2, want, rtol=1e-5, atol=1e-6) and
              sorted(gc.get_cuda_shared_memory_status().regions) == ["in", "out2"], got2)
        gc.unregister_cuda_shared_memory()
        check("gRPC: unregister every CUDA region", len(gc.get_cuda_shared_memory_status().regions) == 0)
    except ImportError as e:
        print(f"skip the gRPC half: tritonclient[grpc] is not installed ({e})")
    check("the server stops with exit 0", server.stop() == 0)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
