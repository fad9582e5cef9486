#!/usr/bin/env python3
# Copyright ingot authors. Apache-2.0.
"""The deployment recipes of deploy/ (issue 19 item 6), offline:
  - deploy/k8s/*.yaml validate strictly against Kubernetes' own schemas (kubernetes-validate, PyPI);
    a copy with a misspelt field must fail, so the validator is known to look;
  - deploy/kserve/*.yaml: KServe's resources have no schema there, so the Kubernetes parts inside
    them (the ServingRuntime's containers, the predictor's resources) are validated as a Pod, and
    the InferenceService must name the runtime, one of its model formats and one of its protocols;
  - works as written: `ingot serve` started with the Deployment's own container args (ports
    and the repository path swapped for free ones and a test repository) answers the manifest's
    startup, readiness and liveness probe paths with 200, and its /metrics (the scrape annotation's
    port and path) has both counters the autoscaler's adapter rule divides;
  - the Dockerfiles start the server with the Deployment's flags and copy files that exist.
Usage: test_deploy.py --ingot build/tools/ingot --models build/test-models"""
import argparse
import copy
import glob
import os
import re
import sys
import tempfile
import urllib.request

import kubernetes_validate
import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "server"))
from server_harness import Server, add_model, check, summary  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
K8S_VERSION = "1.37.0"


def docs(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def validate(resource):
    """None when valid, else the validator's message."""
    try:
        kubernetes_validate.validate(resource, K8S_VERSION, strict=True)
        return None
    except kubernetes_validate.ValidationError as e:
        return str(e)


def as_pod(name, containers):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {"containers": containers}}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ingot", required=True)
    ap.add_argument("--models", required=True)
    args = ap.parse_args()

    # ---- Kubernetes manifests against Kubernetes' schemas ---------------------------------------
    k8s_files = sorted(glob.glob(os.path.join(ROOT, "deploy", "k8s", "*.yaml")))
    check("deploy/k8s has manifests", len(k8s_files) >= 1, k8s_files)
    resources = [(f, d) for f in k8s_files for d in docs(f)]
    kinds = {d["kind"] for _, d in resources}
    check("the manifests hold a Deployment, Service, HPA, PVC and the adapter rule ConfigMap",
          {"Deployment", "Service", "HorizontalPodAutoscaler", "PersistentVolumeClaim", "ConfigMap"} <= kinds, kinds)
    for f, d in resources:
        err = validate(d)
        check(f"{os.path.relpath(f, ROOT)}: {d['kind']}/{d['metadata']['name']} is valid (strict)", err is None, err)
    deployment = next(d for _, d in resources if d["kind"] == "Deployment")
    broken = copy.deepcopy(deployment)
    broken["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPorts"] = 1
    check("the validator rejects a misspelt field (it is looking)", validate(broken) is not None)

    # ---- KServe: the Kubernetes parts, and the references between the two resources ------------
    kserve = [d for f in sorted(glob.glob(os.path.join(ROOT, "deploy", "kserve", "*.yaml"))) for d in docs(f)]
    runtimes = [d for d in kserve if d["kind"] == "ServingRuntime" and d["apiVersion"] == "serving.kserve.io/v1alpha1"]
    services = [d for d in kserve if d["kind"] == "InferenceService" and d["apiVersion"] == "serving.kserve.io/v1beta1"]
    check("deploy/kserve has a ServingRuntime and an InferenceService", len(runtimes) == 1 and len(services) >= 1)
    if runtimes and services:
        rt = runtimes[0]
        err = validate(as_pod("runtime", rt["spec"]["containers"]))
        check("ServingRuntime containers are valid Kubernetes containers (strict)", err is None, err)
        check("ServingRuntime speaks the v2 protocol over REST and gRPC",
              set(rt["spec"]["protocolVersions"]) == {"v2", "grpc-v2"}, rt["spec"]["protocolVersions"])
        formats = {m["name"] for m in rt["spec"]["supportedModelFormats"]}
        for isvc in services:
            model = isvc["spec"]["predictor"]["model"]
            check(f"InferenceService {isvc['metadata']['name']} names the runtime, a format and a protocol it has",
                  model["runtime"] == rt["metadata"]["name"] and model["modelFormat"]["name"] in formats and
                  model["protocolVersion"] in rt["spec"]["protocolVersions"], model)
            err = validate(as_pod("predictor", [{"name": "c", "image": "x", "resources": model["resources"]}]))
            check(f"InferenceService {isvc['metadata']['name']}: resources are valid", err is None, err)

    # ---- works as written: the Deployment's args, probes and scrape target -----------------------
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    pod_annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    flags = container["args"]
    repo = tempfile.mkdtemp(prefix="ingot-deploy-")
    add_model(repo, "mlp", os.path.join(args.models, "mlp_symbolic_batch", "model.onnx"), "max_batch_size: 8\n")
    # The harness passes the repository and free ports itself; the other flags are the manifest's,
    # the bind address made loopback.
    owned = {"--model-repository", "--http-port", "--grpc-port", "--metrics-port"}
    rest = []
    for flag, value in zip(flags[::2], flags[1::2]):
        if flag in owned:
            continue
        rest += [flag, "127.0.0.1" if flag == "--address" else value]
    server = Server(args.ingot, repo, *rest)
    port_of = {p["name"]: p["containerPort"] for p in container["ports"]}
    check("the manifest's ports are the server flags' ports",
          str(port_of["http"]) == flags[flags.index("--http-port") + 1] and
          str(port_of["metrics"]) == flags[flags.index("--metrics-port") + 1] ==
          pod_annotations["prometheus.io/port"], (port_of, flags, pod_annotations))
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        path = container[probe]["httpGet"]["path"]
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}{path}", timeout=30) as r:
            check(f"{probe} {path} answers 200 on the running server", r.status == 200, r.status)
    with urllib.request.urlopen(f"http://127.0.0.1:{server.metrics_port}{pod_annotations['prometheus.io/path']}",
                                timeout=30) as r:
        text = r.read().decode()
    adapter = next(d for _, d in resources if d["kind"] == "ConfigMap")
    rule_metrics = set(re.findall(r"\b(nv_[a-z_]+)\{", adapter["data"]["config.yaml"]))
    check("the autoscaler's adapter rule reads counters the server exports",
          len(rule_metrics) >= 2 and all(re.search(rf"^# TYPE {m} counter", text, re.M) for m in rule_metrics),
          (rule_metrics, [m for m in rule_metrics if m not in text]))
    check("the server stops on SIGTERM with exit 0", server.stop() == 0)

    # ---- Dockerfiles -----------------------------------------------------------------------------
    for df in sorted(glob.glob(os.path.join(ROOT, "deploy", "docker", "Dockerfile.*"))):
        text = open(df).read()
        cmd = re.search(r'^CMD \[(.*?)\]\s*$', text, re.M | re.S)
        cmd_args = re.findall(r'"([^"]*)"', cmd.group(1)) if cmd else []
        check(f"{os.path.basename(df)}: starts `ingot serve` with the Deployment's flags (repository aside)",
              'ENTRYPOINT ["ingot", "serve"]' in text and
              [a for a in cmd_args if a != "/models"] == [a for a in flags if a != "/models"], (cmd_args, flags))
        used = set(re.findall(r"\b((?:scripts|bench)/[\w./-]+|requirements\.txt)", text))
        check(f"{os.path.basename(df)}: every repository file it uses exists",
              used and all(os.path.exists(os.path.join(ROOT, u)) for u in used), used)
    return summary()


if __name__ == "__main__":
    sys.exit(main())
