"""Shared pieces of the `ingot serve` end-to-end tests: a model repository in a temporary folder,
a server process on free loopback ports, a small KServe v2 HTTP client written from the protocol
(JSON and binary tensors, on http.client, one keep-alive connection per thread) and check()."""
import atexit
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time

import numpy as np

failures = []
checks = [0]


def check(name, cond, detail=""):
    checks[0] += 1
    print(("ok   " if cond else "FAIL ") + name + ("" if cond else f"\n     {str(detail)[:2000]}"), flush=True)
    if not cond:
        failures.append(name)
    return cond


def summary():
    print(f"{checks[0] - len(failures)} passed, {len(failures)} failed")
    return 1 if failures else 0


def add_model(repo, name, onnx_path, config_text, version=1):
    d = os.path.join(repo, name, str(version))
    os.makedirs(d, exist_ok=True)
    shutil.copy(onnx_path, os.path.join(d, "model.onnx"))
    with open(os.path.join(repo, name, "config.pbtxt"), "w") as f:
        f.write(config_text)


class Server:
    """`ingot serve` on free ports (port 0), its stderr collected; stop() sends SIGTERM."""

    def __init__(self, ingot, repo, *extra, startup_timeout=120):
        self.log_path = tempfile.mktemp(prefix="ingot-serve-", suffix=".log")
        self.log = open(self.log_path, "w+")
        self.proc = subprocess.Popen([ingot, "serve", "--model-repository", repo, "--http-port", "0",
                                      "--grpc-port", "0", "--metrics-port", "0", *extra],
                                     stdout=self.log, stderr=self.log)
        atexit.register(self._kill)  # a test that dies half-way leaves no server behind
        deadline = time.time() + startup_timeout
        self.port = self.metrics_port = self.grpc_port = None
        while time.time() < deadline:
            text = open(self.log_path).read()
            m = re.search(r"HTTP on [\d.]+:(\d+)(.*)", text)
            if m:
                self.port = int(m.group(1))
                g = re.search(r"gRPC on [\d.]+:(\d+)", m.group(2))
                self.grpc_port = int(g.group(1)) if g else None
                g = re.search(r"metrics on [\d.]+:(\d+)", m.group(2))
                self.metrics_port = int(g.group(1)) if g else None
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise RuntimeError("ingot serve did not start:\n" + open(self.log_path).read())

    def _kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def output(self):
        return open(self.log_path).read()

    def stop(self, timeout=60):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return None

    def metrics(self):
        c = http.client.HTTPConnection("127.0.0.1", self.metrics_port, timeout=30)
        c.request("GET", "/metrics")
        text = c.getresponse().read().decode()
        values = {}
        for line in text.splitlines():
            m = re.match(r'(\w+)\{model="([^"]+)",version="([^"]+)"\} ([-\d.e+]+)', line)
            if m:
                values[(m.group(1), m.group(2))] = float(m.group(4))
        return values, text


class Client:
    """One keep-alive connection (use one per thread)."""

    def __init__(self, port, timeout=60):
        self.port, self.timeout = port, timeout
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)

    def request(self, method, path, body=None, headers=None):
        """Returns (status, headers dict, body bytes); reconnects once if the server closed the connection."""
        for attempt in range(2):
            try:
                self.conn.request(method, path, body=body, headers=headers or {})
                r = self.conn.getresponse()
                return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self.conn.close()
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
                if attempt:
                    raise

    def infer(self, model, inputs, binary=False, outputs=None, binary_outputs=False, version=None):
        """inputs: {name: np.ndarray}. Returns (status, {name: array} or error message)."""
        req = {"inputs": []}
        blobs = []
        for name, a in inputs.items():
            t = {"name": name, "shape": list(a.shape), "datatype": NP_TO_V2[a.dtype.str[1:]]}
            if binary:
                raw = np.ascontiguousarray(a).tobytes()
                t["parameters"] = {"binary_data_size": len(raw)}
                blobs.append(raw)
            else:
                t["data"] = a.flatten().tolist()
            req["inputs"].append(t)
        if outputs:
            req["outputs"] = [{"name": o, "parameters": {"binary_data": binary_outputs}} for o in outputs]
        head = json.dumps(req).encode()
        headers = {"Content-Type": "application/json"}
        if blobs:
            headers = {"Inference-Header-Content-Length": str(len(head)), "Content-Type": "application/octet-stream"}
        path = f"/v2/models/{model}" + (f"/versions/{version}" if version else "") + "/infer"
        status, rh, body = self.request("POST", path, head + b"".join(blobs), headers)
        return status, decode_response(status, rh, body)


NP_TO_V2 = {"f4": "FP32", "f8": "FP64", "i4": "INT32", "i8": "INT64", "u1": "UINT8", "b1": "BOOL", "f2": "FP16"}
V2_TO_NP = {"FP32": np.float32, "FP64": np.float64, "INT32": np.int32, "INT64": np.int64, "UINT8": np.uint8,
            "BOOL": np.bool_, "FP16": np.float16}


def decode_response(status, headers, body):
    if status != 200:
        try:
            return json.loads(body)["error"]
        except Exception:  # noqa: BLE001 - the test reports what came back
            return body[:200]
    n = int(headers.get("inference-header-content-length", len(body)))
    doc = json.loads(body[:n])
    out, offset = {}, n
    for o in doc["outputs"]:
        dt = V2_TO_NP[o["datatype"]]
        size = o.get("parameters", {}).get("binary_data_size")
        if size is not None:
            out[o["name"]] = np.frombuffer(body[offset:offset + size], dtype=dt).reshape(o["shape"])
            offset += size
        else:
            out[o["name"]] = np.array(o["data"], dtype=dt).reshape(o["shape"])
    return out


def run_concurrently(n_threads, fn):
    """Runs fn(thread_index) on n threads at once; returns their results in order."""
    results = [None] * n_threads
    errors = []
    barrier = threading.Barrier(n_threads)

    def body(i):
        try:
            barrier.wait()
            results[i] = fn(i)
        except Exception as e:  # noqa: BLE001 - reported by the caller
            errors.append(repr(e))

    threads = [threading.Thread(target=body, args=(i,)) for i in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError("; ".join(errors[:5]))
    return results
