#!/usr/bin/env python3
"""`ingot serve` speaks the KServe v2 protocol and refuses bad input clearly:
  - every bad request gets the right 4xx and a message naming the problem: malformed JSON, wrong
    datatype, wrong shape, unknown input, missing input, data length vs shape, binary size vs
    shape, batch above max_batch_size, unknown model, unknown version, oversized body (413);
  - health, server/model metadata, model readiness, statistics, repository index/load/unload;
  - a config.pbtxt with an unknown field stops the server at start-up (--exit-on-error, Triton's
    default); with --exit-on-error=false that model is UNAVAILABLE with a reason naming the
    field and the file, while the others are served;
  - Triton's own Python clients talk to it: tritonclient.http (metadata, config with numeric dims,
    JSON and binary infer, statistics, repository calls) and tritonclient.grpc (health, metadata,
    ModelConfig, completed from the engine when the config leaves out inputs/outputs, ModelInfer
    with raw and typed contents, error codes); skipped, saying so, when tritonclient is not installed.
Usage: test_server_protocol.py --ingot build/tools/ingot --models build/test-models"""
import argparse
import json
import subprocess
import os
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from server_harness import Client, Server, add_model, check, summary  # noqa: E402

ADD2_CONFIG = """
max_batch_size: 8
input [ { name: "a" data_type: TYPE_FP32 dims: [ 4 ] },
        { name: "b" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "sum" data_type: TYPE_FP32 dims: [ 4 ] } ]
dynamic_batching { max_queue_delay_microseconds: 100 }
"""


def make_add2(path):
    """a + b, both [batch, 4]: a model with two inputs (for the missing-input case)."""
    g = helper.make_graph([helper.make_node("Add", ["a", "b"], ["sum"])], "add2",
                          [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["n", 4]),
                           helper.make_tensor_value_info("b", TensorProto.FLOAT, ["n", 4])],
                          [helper.make_tensor_value_info("sum", TensorProto.FLOAT, ["n", 4])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ingot", required=True)
    ap.add_argument("--models", required=True)
    args = ap.parse_args()
    mlp = os.path.join(args.models, "mlp_symbolic_batch", "model.onnx")
    sess = ort.InferenceSession(mlp, providers=["CPUExecutionProvider"])
    repo = tempfile.mkdtemp(prefix="ingot-serve-proto-")
    add2 = os.path.join(repo, "add2.onnx")
    make_add2(add2)
    add_model(repo, "add2", add2, ADD2_CONFIG)
    mlp_config = ('max_batch_size: 4\ninput [ { name: "x" data_type: TYPE_FP32 dims: [ 8 ] } ]\n'
                  'output [ { name: "probs" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
                  'version_policy { all { } }\n')
    add_model(repo, "mlp", mlp, mlp_config, version=1)
    add_model(repo, "mlp", mlp, mlp_config, version=3)
    add_model(repo, "broken", mlp, 'max_batch_size: 4\nmax_batch_sise: 8\n')
    add_model(repo, "mlp_auto", mlp, 'max_batch_size: 4\n')  # inputs and outputs from the engine
    # fp16 inputs and outputs (ingot { fp16: true reduced_io: true }): the engine's, auto-completed.
    add_model(repo, "mlp_fp16io", mlp, 'max_batch_size: 4\ningot { fp16: true reduced_io: true }\n')
    # Prepared batch sizes: warmed at load, every batch padded up to 2 or 4 rows (issue 19).
    add_model(repo, "mlp_padded", mlp, 'max_batch_size: 4\ndynamic_batching { }\n'
              'parameters { key: "ingot.prepared_batch_sizes" value { string_value: "2,4" } }\n')
    # By default (Triton's --exit-on-error=true) a model that does not load stops the server at
    # start-up, naming the model and the field.
    proc = subprocess.run([args.ingot, "serve", "--model-repository", repo, "--http-port", "0", "--grpc-port", "0",
                           "--metrics-port", "-1", "--access-log", "off"], capture_output=True, text=True, timeout=300)
    check("a model that fails to load stops the server at start-up (--exit-on-error defaults to true)",
          proc.returncode == 1 and "model 'broken'" in proc.stderr and "max_batch_sise" in proc.stderr
          and "--exit-on-error false" in proc.stderr, proc.stderr[-2000:])
    server = Server(args.ingot, repo, "--max-request-bytes", str(1 << 20), "--access-log", "off",
                    "--exit-on-error=false")
    c = Client(server.port)

    # ---- a broken config ------------------------------------------------------------------------
    status, _, body = c.request("POST", "/v2/repository/index", b"{}")
    index = json.loads(body) if status == 200 else []
    broken = [e for e in index if e["name"] == "broken"]
    check("repository index lists every model",
          status == 200 and {e["name"] for e in index} == {"add2", "mlp", "mlp_auto", "mlp_padded", "mlp_fp16io", "broken"}, index)
    reason = broken[0].get("reason", "") if broken else ""
    check("an unknown config field leaves the model UNAVAILABLE, naming the field and the file",
          broken and broken[0]["state"] == "UNAVAILABLE" and "max_batch_sise" in reason and "config.pbtxt" in reason,
          broken)
    check("not ready while a model failed to load", c.request("GET", "/v2/health/ready")[0] == 503)
    check("unloading the broken model", c.request("POST", "/v2/repository/models/broken/unload", b"{}")[0] == 200)
    check("ready once every model left is loaded", c.request("GET", "/v2/health/ready")[0] == 200)

    # ---- health and metadata --------------------------------------------------------------------
    check("GET /v2/health/live is 200", c.request("GET", "/v2/health/live")[0] == 200)
    status, _, body = c.request("GET", "/v2")
    meta = json.loads(body)
    check("server metadata names the server and its extensions",
          status == 200 and meta["name"] == "ingot" and "binary_tensor_data" in meta["extensions"] and
          "system_shared_memory" in meta["extensions"], meta)
    status, _, body = c.request("GET", "/v2/models/mlp")
    meta = json.loads(body)
    check("model metadata: versions, inputs and outputs with the batch dim -1",
          status == 200 and meta["versions"] == ["1", "3"] and
          meta["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [-1, 8]}] and
          meta["outputs"] == [{"name": "probs", "datatype": "FP32", "shape": [-1, 4]}], meta)
    check("model ready", c.request("GET", "/v2/models/mlp/ready")[0] == 200)
    check("version ready", c.request("GET", "/v2/models/mlp/versions/1/ready")[0] == 200)
    check("an unknown version is not ready (404)", c.request("GET", "/v2/models/mlp/versions/2/ready")[0] == 404)

    # ---- infer, JSON and binary, with versions --------------------------------------------------
    x = np.random.default_rng(7).standard_normal((3, 8)).astype(np.float32)
    want = sess.run(None, {"x": x})[0]
    for binary in (False, True):
        for version in (None, "1", "3"):
            status, out = c.infer("mlp", {"x": x}, binary=binary, version=version, outputs=["probs"],
                                  binary_outputs=binary)
            check(f"infer {'binary' if binary else 'JSON'} version {version or 'latest'} equals onnxruntime",
                  status == 200 and np.allclose(out["probs"], want, rtol=1e-5, atol=1e-6), (status, out))
    a = np.arange(8, dtype=np.float32).reshape(2, 4)
    status, out = c.infer("add2", {"b": a * 3, "a": a})
    check("a two-input model, inputs in any order", status == 200 and np.array_equal(out["sum"], a * 4), out)

    # ---- system shared memory (Triton's extension): inputs and outputs in a registered region ----
    from multiprocessing import shared_memory
    shm = shared_memory.SharedMemory(create=True, size=4096 + x.nbytes + want.nbytes)
    try:
        key = "/" + shm.name
        region = np.ndarray((shm.size,), dtype=np.uint8, buffer=shm.buf)
        region[4096:4096 + x.nbytes] = np.frombuffer(x.tobytes(), dtype=np.uint8)
        reg = json.dumps({"key": key, "offset": 4096, "byte_size": x.nbytes + want.nbytes}).encode()
        check("shared memory: register a region",
              c.request("POST", "/v2/systemsharedmemory/region/io/register", reg)[0] == 200)
        status, _, body = c.request("GET", "/v2/systemsharedmemory/status")
        listed = json.loads(body) if status == 200 else []
        check("shared memory: status lists it", listed == [{"name": "io", "key": key, "offset": 4096,
                                                           "byte_size": x.nbytes + want.nbytes}], listed)
        req = {"inputs": [{"name": "x", "shape": list(x.shape), "datatype": "FP32",
                           "parameters": {"shared_memory_region": "io", "shared_memory_byte_size": x.nbytes}}],
               "outputs": [{"name": "probs", "parameters": {"shared_memory_region": "io", "shared_memory_offset": x.nbytes,
                                                           "shared_memory_byte_size": want.nbytes}}]}
        status, _, body = c.request("POST", "/v2/models/mlp/infer", json.dumps(req).encode())
        resp = json.loads(body) if status == 200 else {}
        got = np.frombuffer(bytes(region[4096 + x.nbytes:4096 + x.nbytes + want.nbytes]), dtype=np.float32)
        check("shared memory: infer reads x from the region and writes probs into it, equal to onnxruntime",
              status == 200 and "data" not in resp["outputs"][0] and
              "parameters" not in resp["outputs"][0] and  # as Triton: its C++ client reads them as binary
              np.allclose(got.reshape(want.shape), want, rtol=1e-5, atol=1e-6), (status, body[:300]))
        req["inputs"][0]["parameters"]["shared_memory_region"] = "nope"
        status, _, body = c.request("POST", "/v2/models/mlp/infer", json.dumps(req).encode())
        check("shared memory: an unknown region is 400, named", status == 400 and b"'nope'" in body, body)
        req["inputs"][0]["parameters"].update(shared_memory_region="io", shared_memory_offset=x.nbytes + 8)
        status, _, body = c.request("POST", "/v2/models/mlp/infer", json.dumps(req).encode())
        check("shared memory: a slice past the region is 400", status == 400 and b"exceeds" in body, body)
        bad_reg = json.dumps({"key": "/ingot_no_such_key", "byte_size": 8}).encode()
        status, _, body = c.request("POST", "/v2/systemsharedmemory/region/x/register", bad_reg)
        check("shared memory: registering a missing key is 400", status == 400 and b"cannot open" in body, body)
        check("shared memory: unregister",
              c.request("POST", "/v2/systemsharedmemory/region/io/unregister", b"")[0] == 200 and
              json.loads(c.request("GET", "/v2/systemsharedmemory/status")[2]) == [])
    finally:
        shm.close()
        shm.unlink()

    # ---- CUDA shared memory (Triton's extension): what a server without a usable handle says ------
    # (The end-to-end path, a real cudaIpc handle from another process, runs on the GPU machine:
    # tests/server/test_cuda_shared_memory.py.) Here: a 64-byte handle nothing can open, a handle
    # of the wrong size, bad base64; errors name the region, and nothing stays registered.
    import base64
    fake = base64.b64encode(bytes(range(64))).decode()
    status, _, raw = c.request("POST", "/v2/cudasharedmemory/region/gpu_in/register",
                               json.dumps({"raw_handle": {"b64": fake}, "device_id": 0, "byte_size": 1024}).encode())
    msg = json.loads(raw).get("error", "") if raw else ""
    check("CUDA shm: a handle that cannot be opened is refused (400), naming the region and why",
          status == 400 and "gpu_in" in msg and ("no CUDA device" in msg or "cannot open the cudaIpc handle" in msg
                                                 or "without CUDA" in msg), (status, msg))
    status, _, raw = c.request("POST", "/v2/cudasharedmemory/region/gpu_in/register",
                               json.dumps({"raw_handle": {"b64": base64.b64encode(b"short").decode()},
                                           "device_id": 0, "byte_size": 1024}).encode())
    msg = json.loads(raw).get("error", "") if raw else ""
    check("CUDA shm: a handle of the wrong size is refused, saying its size",
          status == 400 and ("raw_handle has 5 bytes" in msg or "without CUDA" in msg), (status, msg))
    status, _, raw = c.request("POST", "/v2/cudasharedmemory/region/gpu_in/register",
                               b'{"raw_handle": {"b64": "***"}, "device_id": 0, "byte_size": 8}')
    check("CUDA shm: bad base64 is refused", status == 400 and b"base64" in raw, (status, raw))
    status, _, raw = c.request("POST", "/v2/cudasharedmemory/region/gpu_in/register", b'{"device_id": 0}')
    check("CUDA shm: a body without raw_handle/byte_size is refused, saying what it needs",
          status == 400 and b"raw_handle" in raw, (status, raw))
    status, _, raw = c.request("GET", "/v2/cudasharedmemory/status")
    check("CUDA shm: status lists no region after the failures", status == 200 and json.loads(raw) == [], raw)
    status, _, raw = c.request("GET", "/v2/cudasharedmemory/region/gpu_in/status")
    check("CUDA shm: status of an unknown region is 400", status == 400 and b"gpu_in" in raw, (status, raw))
    status, _, raw = c.request("POST", "/v2/cudasharedmemory/region/gpu_in/unregister", b"{}")
    check("CUDA shm: unregistering an unknown region is 400", status == 400, (status, raw))

    # ---- bad input: the right code and a message naming the problem -----------------------------
    def post(model, body, headers=None):
        status, _, raw = c.request("POST", f"/v2/models/{model}/infer", body, headers)
        try:
            return status, json.loads(raw)["error"]
        except Exception:  # noqa: BLE001
            return status, raw

    def bad(name, status, message, want_status, *words):
        ok = status == want_status and all(w in message for w in words)
        check(f"bad input: {name} -> {want_status}", ok, (status, message))

    def body(name="x", shape=(1, 8), datatype="FP32", data=None, outputs=None, binary_size=None):
        """One-input request JSON; data defaults to 0.5 for every element."""
        t = {"name": name, "shape": list(shape), "datatype": datatype}
        if binary_size is not None:
            t["parameters"] = {"binary_data_size": binary_size}
        else:
            t["data"] = data if data is not None else [0.5] * int(np.prod(shape))
        doc = {"inputs": [t]}
        if outputs:
            doc["outputs"] = [{"name": o} for o in outputs]
        return json.dumps(doc).encode()

    def header(head):
        return {"Inference-Header-Content-Length": str(len(head))}

    bad("malformed JSON", *post("mlp", b'{"inputs": [{"name": "x",'), 400, "malformed JSON")
    bad("not an object", *post("mlp", b'[1, 2]'), 400, "JSON object")
    bad("wrong datatype", *post("mlp", body(datatype="INT32", data=[1] * 8)), 400, "'x'", "INT32", "FP32")
    bad("unknown datatype", *post("mlp", body(datatype="FP33")), 400, "FP33")
    bad("wrong shape", *post("mlp", body(shape=(1, 7))), 400, "'x'", "[1,7]")
    bad("batch above max_batch_size", *post("mlp", body(shape=(5, 8))), 400, "batch size 5", "max_batch_size")
    bad("unknown input", *post("mlp", body(name="y")), 400, "unknown input 'y'")
    bad("missing input", *post("add2", body(name="a", shape=(1, 4))), 400, "missing input 'b'")
    bad("data length vs shape", *post("mlp", body(shape=(2, 8), data=[0.5] * 8)), 400, "8 elements", "16")
    bad("a string in FP32 data", *post("mlp", body(data=["a"] * 8)), 400, "number")
    head = body(binary_size=16)
    bad("binary_data_size vs shape", *post("mlp", head + b"\0" * 16, header(head)), 400, "binary_data_size 16",
        "32 bytes")
    head = body(binary_size=32)
    bad("binary data shorter than declared", *post("mlp", head + b"\0" * 8, header(head)), 400, "runs past the body")
    bad("a header length past the body", *post("mlp", head, {"Inference-Header-Content-Length": "99999"}), 400,
        "exceeds the body")
    bad("an unknown output", *post("mlp", body(outputs=["nope"])), 400, "unknown output 'nope'")
    bad("unknown model", *post("nope", b"{}"), 404, "unknown model 'nope'")
    status, _, raw = c.request("POST", "/v2/models/mlp/versions/2/infer", b"{}")
    bad("unknown version", status, json.loads(raw)["error"], 404, "no ready version '2'")
    big = body() + b" " * (2 << 20)
    status, raw = post("mlp", big)
    bad("oversized body", status, str(raw), 413, "exceeds the limit", str(1 << 20))
    status, out = c.infer("mlp", {"x": x})
    check("still serving after the bad requests", status == 200, status)

    # ---- statistics ---------------------------------------------------------------------------
    status, _, body = c.request("GET", "/v2/models/mlp/versions/3/stats")
    st = json.loads(body)["model_stats"][0] if status == 200 else {}
    check("statistics: version 3 counted its successes and failures",
          st.get("version") == "3" and st["inference_stats"]["success"]["count"] >= 3 and
          st["inference_stats"]["fail"]["count"] >= 10, st)

    # ---- fp16 inputs and outputs ------------------------------------------------------------------
    status, _, body = c.request("GET", "/v2/models/mlp_fp16io")
    meta = json.loads(body) if status == 200 else {}
    check("ingot { reduced_io: true }: the model takes and gives FP16",
          meta.get("inputs") == [{"name": "x", "datatype": "FP16", "shape": [-1, 8]}] and
          meta.get("outputs", [{}])[0].get("datatype") == "FP16", meta)
    status, out = c.infer("mlp_fp16io", {"x": x.astype(np.float16)}, binary=True)
    check("an FP16 request is answered in FP16, close to onnxruntime's fp32",
          status == 200 and out["probs"].dtype == np.float16 and
          np.allclose(out["probs"].astype(np.float32), want, rtol=1e-2, atol=1e-2), (status, out))

    # ---- prepared batch sizes: padded batches, the requests' own rows back -----------------------
    for rows in (1, 3):
        status, out = c.infer("mlp_padded", {"x": x[:rows]})
        check(f"a padded batch of {rows} row(s) answers exactly its rows",
              status == 200 and out["probs"].shape == (rows, 4) and
              np.allclose(out["probs"], want[:rows], rtol=1e-5, atol=1e-6), (status, out))
    status, _, body = c.request("GET", "/v2/models/mlp_padded/stats")
    st = json.loads(body)["model_stats"][0] if status == 200 else {}
    sizes = sorted(b["batch_size"] for b in st.get("batch_stats", []))
    check("statistics: the engine ran only prepared sizes (2 and 4), inference_count counts real rows",
          sizes == [2, 4] and st.get("inference_count") == 4 and st.get("execution_count") == 2, st)

    # ---- repository: unload / load --------------------------------------------------------------
    check("unload mlp", c.request("POST", "/v2/repository/models/mlp/unload", b"{}")[0] == 200)
    status, msg = post("mlp", big[:200])
    check("an unloaded model answers 404", status == 404 and "mlp" in msg, (status, msg))
    check("load mlp again", c.request("POST", "/v2/repository/models/mlp/load", b"{}")[0] == 200)
    check("loading an unknown model is 404", c.request("POST", "/v2/repository/models/zzz/load", b"{}")[0] == 404)
    status, out = c.infer("mlp", {"x": x})
    check("served again after load", status == 200 and np.allclose(out["probs"], want, rtol=1e-5, atol=1e-6))

    # ---- Triton's client library --------------------------------------------------------------
    try:
        import tritonclient.http as th
    except ImportError as e:
        print(f"skip tritonclient checks: tritonclient[http] is not installed ({e}); pip install -r requirements.txt")
        th = None
    if th:
        tc = th.InferenceServerClient(f"127.0.0.1:{server.port}")
        check("tritonclient: live, ready, model ready",
              tc.is_server_live() and tc.is_server_ready() and tc.is_model_ready("mlp"))
        md = tc.get_model_metadata("mlp")
        check("tritonclient: model metadata", md["inputs"][0]["name"] == "x", md)
        cfg = tc.get_model_config("mlp")
        check("tritonclient: model config", cfg.get("max_batch_size") == 4, cfg)
        check("model config dims are JSON numbers, as Triton writes them",
              cfg.get("input", [{}])[0].get("dims") == [8], cfg)
        for binary in (False, True):
            i = th.InferInput("x", list(x.shape), "FP32")
            i.set_data_from_numpy(x, binary_data=binary)
            r = tc.infer("mlp", [i], outputs=[th.InferRequestedOutput("probs", binary_data=binary)])
            check(f"tritonclient: infer ({'binary' if binary else 'JSON'})",
                  np.allclose(r.as_numpy("probs"), want, rtol=1e-5, atol=1e-6))
        try:
            tc.infer("mlp", [th.InferInput("y", [1, 8], "FP32").set_data_from_numpy(x[:1])])
            check("tritonclient: a bad request raises with the server's message", False)
        except th.InferenceServerException as e:
            check("tritonclient: a bad request raises with the server's message", "unknown input 'y'" in str(e), e)
        stats = tc.get_inference_statistics("mlp")
        check("tritonclient: statistics", stats["model_stats"][0]["name"] == "mlp", stats)
        check("tritonclient: repository index", any(e["name"] == "add2" for e in tc.get_model_repository_index()))
        tc.unload_model("add2")
        check("tritonclient: unload", not tc.is_model_ready("add2"))
        tc.load_model("add2")
        check("tritonclient: load", tc.is_model_ready("add2"))

    # ---- gRPC, through Triton's gRPC client and its generated stubs -----------------------------
    try:
        import grpc
        import tritonclient.grpc as tg
        from tritonclient.grpc import service_pb2, service_pb2_grpc
    except ImportError as e:
        print(f"skip gRPC checks: tritonclient[grpc] is not installed ({e}); pip install -r requirements.txt")
        tg = None
    if tg and server.grpc_port is None:
        check("gRPC endpoint is up (ingot built with gRPC)", False, server.output()[-500:])
    elif tg:
        gc = tg.InferenceServerClient(f"127.0.0.1:{server.grpc_port}")
        check("gRPC: live, ready, model ready, unknown model not ready",
              gc.is_server_live() and gc.is_server_ready() and gc.is_model_ready("mlp") and
              not gc.is_model_ready("zzz"))
        sm = gc.get_server_metadata()
        check("gRPC: server metadata", sm.name == "ingot" and "system_shared_memory" in sm.extensions, sm)
        cfg = gc.get_model_config("mlp").config
        check("gRPC: ModelConfig (what perf_analyzer reads: batching, inputs, outputs)",
              cfg.name == "mlp" and cfg.max_batch_size == 4 and cfg.input[0].name == "x"
              and list(cfg.input[0].dims) == [8] and cfg.input[0].data_type == 11 and cfg.output[0].name == "probs", cfg)
        auto = gc.get_model_config("mlp_auto").config
        check("gRPC: a config without inputs/outputs is completed from the engine, as Triton auto-completes",
              auto.max_batch_size == 4 and [t.name for t in auto.input] == ["x"] and list(auto.input[0].dims) == [8]
              and [t.name for t in auto.output] == ["probs"] and auto.platform == "ingot_cpu", auto)
        try:
            gc.get_model_config("zzz")
            check("gRPC: ModelConfig of an unknown model is an error", False)
        except Exception as e:  # noqa: BLE001 - tritonclient wraps the gRPC status
            check("gRPC: ModelConfig of an unknown model is an error naming it", "zzz" in str(e), str(e))
        idx = gc.get_model_repository_index()
        check("gRPC: RepositoryIndex lists every model with its state",
              {(m.name, m.state) for m in idx.models} >= {("mlp", "READY"), ("add2", "READY")}, idx)
        check("gRPC: unload then load a model", gc.unload_model("add2") is None and not gc.is_model_ready("add2")
              and gc.load_model("add2") is None and gc.is_model_ready("add2"))
        try:
            gc.load_model("zzz")
            check("gRPC: loading an unknown model is an error", False)
        except Exception as e:  # noqa: BLE001
            check("gRPC: loading an unknown model is an error naming it", "zzz" in str(e), str(e))
        md = gc.get_model_metadata("mlp")
        check("gRPC: model metadata", md.platform == "ingot_cpu" and list(md.inputs[0].shape) == [-1, 8] and
              list(md.versions) == ["1", "3"], md)
        i = tg.InferInput("x", list(x.shape), "FP32")
        i.set_data_from_numpy(x)
        r = gc.infer("mlp", [i], model_version="1", outputs=[tg.InferRequestedOutput("probs")])
        check("gRPC: ModelInfer with raw_input_contents equals onnxruntime",
              np.allclose(r.as_numpy("probs"), want, rtol=1e-5, atol=1e-6), r.get_response())
        st = gc.get_inference_statistics("mlp", "1").model_stats
        check("gRPC: ModelStatistics counts the inference, with queue and compute times",
              len(st) == 1 and st[0].name == "mlp" and st[0].version == "1" and st[0].inference_count >= 1
              and st[0].inference_stats.success.count >= 1 and st[0].inference_stats.compute_infer.ns > 0
              and len(st[0].batch_stats) >= 1, st)
        every = gc.get_inference_statistics().model_stats
        check("gRPC: ModelStatistics without a name covers every ready version",
              {(m.name, m.version) for m in every} >= {("mlp", "1"), ("mlp", "3"), ("add2", "1")}, every)
        try:
            gc.infer("mlp", [tg.InferInput("y", [1, 8], "FP32").set_data_from_numpy(x[:1])])
            check("gRPC: a bad request fails with the server's message", False)
        except tg.InferenceServerException as e:
            check("gRPC: a bad request fails with the server's message",
                  "unknown input 'y'" in str(e) and "INVALID_ARGUMENT" in str(e.status()), (e, e.status()))
        try:
            gc.infer("zzz", [i])
            check("gRPC: an unknown model is NOT_FOUND", False)
        except tg.InferenceServerException as e:
            check("gRPC: an unknown model is NOT_FOUND", "NOT_FOUND" in str(e.status()), e.status())
        # Typed contents (fp32_contents) instead of raw bytes, through the generated stub.
        stub = service_pb2_grpc.GRPCInferenceServiceStub(grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}"))
        req = service_pb2.ModelInferRequest(model_name="mlp", id="typed")
        t = req.inputs.add(name="x", datatype="FP32", shape=list(x.shape))
        t.contents.fp32_contents.extend(x.flatten().tolist())
        resp = stub.ModelInfer(req)
        got = np.frombuffer(resp.raw_output_contents[0], dtype=np.float32).reshape(list(resp.outputs[0].shape))
        check("gRPC: ModelInfer with typed contents equals onnxruntime",
              resp.id == "typed" and np.allclose(got, want, rtol=1e-5, atol=1e-6), resp)
        t.contents.fp32_contents.append(1.0)
        try:
            stub.ModelInfer(req)
            check("gRPC: typed contents longer than the shape are refused", False)
        except grpc.RpcError as e:
            check("gRPC: typed contents longer than the shape are refused",
                  e.code() == grpc.StatusCode.INVALID_ARGUMENT and "needs 96" in e.details(), e.details())

        # ModelStreamInfer (bidirectional streaming), through tritonclient's stream API: many
        # requests in flight on one stream, each answered once with its id; a bad one answers with
        # the server's message and the stream goes on.
        import queue
        answers = queue.Queue()
        gc.start_stream(callback=lambda result, error: answers.put((result, error)))
        sent = {}
        for k in range(24):
            rows = 1 + k % 4
            xi = np.random.default_rng(100 + k).standard_normal((rows, 8)).astype(np.float32)
            ii = tg.InferInput("x", list(xi.shape), "FP32")
            ii.set_data_from_numpy(xi)
            gc.async_stream_infer("mlp", [ii], request_id=f"s{k}")
            sent[f"s{k}"] = sess.run(None, {"x": xi})[0]
        bad_in = tg.InferInput("y", [1, 8], "FP32")
        bad_in.set_data_from_numpy(x[:1])
        gc.async_stream_infer("mlp", [bad_in], request_id="bad")
        gc.stop_stream()  # waits for the server to finish the stream
        got_ok, got_err = {}, []
        while not answers.empty():
            result, error = answers.get()
            if error is None:
                got_ok[result.get_response().id] = result.as_numpy("probs")
            else:
                got_err.append(str(error))
        check("gRPC stream: every request answered once, with its id, equal to onnxruntime",
              set(got_ok) == set(sent) and all(np.allclose(got_ok[k], sent[k], rtol=1e-5, atol=1e-6) for k in sent),
              (sorted(got_ok), got_err))
        check("gRPC stream: a bad request answers with the server's message, the stream goes on",
              len(got_err) == 1 and "unknown input 'y'" in got_err[0], got_err)

        # System shared memory over gRPC, through tritonclient's own calls: x read from the region,
        # probs written into it; a second region (another client's) sees nothing of it.
        from multiprocessing import shared_memory
        gshm = shared_memory.SharedMemory(create=True, size=x.nbytes + want.nbytes)
        try:
            gregion = np.ndarray((gshm.size,), dtype=np.uint8, buffer=gshm.buf)
            gregion[:x.nbytes] = np.frombuffer(x.tobytes(), dtype=np.uint8)
            gregion[x.nbytes:] = 0
            gc.register_system_shared_memory("gio", "/" + gshm.name, gshm.size)
            st = gc.get_system_shared_memory_status()
            check("gRPC shared memory: register, status lists it",
                  "gio" in st.regions and st.regions["gio"].key == "/" + gshm.name and
                  st.regions["gio"].byte_size == gshm.size, st)
            i = tg.InferInput("x", list(x.shape), "FP32")
            i.set_shared_memory("gio", x.nbytes)
            o = tg.InferRequestedOutput("probs")
            o.set_shared_memory("gio", want.nbytes, offset=x.nbytes)
            r = gc.infer("mlp", [i], outputs=[o])
            got = np.frombuffer(bytes(gregion[x.nbytes:]), dtype=np.float32).reshape(want.shape)
            out_params = r.get_output("probs").parameters
            check("gRPC shared memory: infer reads x from the region and writes probs into it, equal to onnxruntime",
                  np.allclose(got, want, rtol=1e-5, atol=1e-6) and
                  out_params["shared_memory_region"].string_param == "gio", (got, r.get_response()))
            # A shared-memory input beside one sent in raw_input_contents.
            a2 = np.arange(8, dtype=np.float32).reshape(2, 4)
            gregion[:a2.nbytes] = np.frombuffer(a2.tobytes(), dtype=np.uint8)
            ia = tg.InferInput("a", [2, 4], "FP32")
            ia.set_shared_memory("gio", a2.nbytes)
            ib = tg.InferInput("b", [2, 4], "FP32")
            ib.set_data_from_numpy(a2 * 3)
            r = gc.infer("add2", [ib, ia])
            check("gRPC shared memory: mixed with raw_input_contents", np.array_equal(r.as_numpy("sum"), a2 * 4),
                  r.get_response())
            i.set_shared_memory("nope", x.nbytes)
            try:
                gc.infer("mlp", [i])
                check("gRPC shared memory: an unknown region is INVALID_ARGUMENT, named", False)
            except tg.InferenceServerException as e:
                check("gRPC shared memory: an unknown region is INVALID_ARGUMENT, named",
                      "'nope'" in str(e) and "INVALID_ARGUMENT" in str(e.status()), e)
            i.set_shared_memory("gio", x.nbytes, offset=want.nbytes + 8)
            try:
                gc.infer("mlp", [i])
                check("gRPC shared memory: a slice past the region is INVALID_ARGUMENT", False)
            except tg.InferenceServerException as e:
                check("gRPC shared memory: a slice past the region is INVALID_ARGUMENT", "exceeds" in str(e), e)
            i.set_shared_memory("gio", x.nbytes - 4)
            try:
                gc.infer("mlp", [i])
                check("gRPC shared memory: a byte size disagreeing with the shape is refused", False)
            except tg.InferenceServerException as e:
                check("gRPC shared memory: a byte size disagreeing with the shape is refused",
                      "does not match shape" in str(e), e)
            try:
                gc.register_system_shared_memory("gio", "/" + gshm.name, 8)
                check("gRPC shared memory: a name registered twice is refused", False)
            except tg.InferenceServerException as e:
                check("gRPC shared memory: a name registered twice is refused", "already registered" in str(e), e)
            gc.unregister_system_shared_memory("gio")
            check("gRPC shared memory: unregister", len(gc.get_system_shared_memory_status().regions) == 0)
            try:
                gc.register_cuda_shared_memory("gpu_in", bytes(range(64)), 0, 1024)
                check("gRPC CUDA shm: a handle that cannot be opened is refused", False)
            except tg.InferenceServerException as e:
                check("gRPC CUDA shm: a handle that cannot be opened is INVALID_ARGUMENT, naming the region",
                      "INVALID_ARGUMENT" in str(e.status()) and "gpu_in" in str(e), (e, e.status()))
            check("gRPC CUDA shm: status lists no region",
                  len(gc.get_cuda_shared_memory_status().regions) == 0)
        finally:
            gshm.close()
            gshm.unlink()

    rc = server.stop()
    check("SIGTERM: exit 0", rc == 0, (rc, server.output()[-2000:]))
    return summary()


if __name__ == "__main__":
    sys.exit(main())
