#!/usr/bin/env python3
# Copyright ingot authors. Apache-2.0.
"""Where does ResNet-50's fp16 error against fp32 come from? (PyTorch only, on the GPU machine.)

The harness's ResNet-50 (random weights, BatchNorm calibrated on random images) loses cosine
0.9997 against fp32 in ingot's fp16 engine and 0.9996 in PyTorch's own fp16 model, under issue
5/7's 0.9999. This probe runs the same model (bench/harness.py's make_model) in variants that
each keep one source of fp16 error and prints their cosine against fp32, so the remedy can be
chosen on evidence (which layers must stay fp32, or whether the model itself amplifies any
perturbation):
  - fp16 everywhere (torch .half());
  - fp32 compute on fp16-rounded inputs only, and on fp16-rounded weights only;
  - fp16 with the stem (conv1/bn1) in fp32, with the classifier (fc) in fp32, with layer4 + fc in
    fp32, with the stem + fc in fp32;
  - an fp32 run on inputs perturbed by relative noise 1e-4 (the model's own sensitivity).

  python3 bench/precision_probe.py [--batch 8] [--seeds 3]
"""
import argparse
import copy
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402  (the model the benchmark times, built the same way)


class Mixed:
    """Runs a torchvision ResNet with the named top-level children in fp32, the rest in fp16."""

    def __init__(self, model, fp32_children):
        import torch
        self.m = copy.deepcopy(model)
        self.fp32 = set(fp32_children)
        for name, child in self.m.named_children():
            if name in self.fp32:
                child.float()
            else:
                child.half()
        self.torch = torch

    def __call__(self, x):
        import torch
        h = x
        for name in ["conv1", "bn1", "relu", "maxpool", "layer1", "layer2", "layer3", "layer4", "avgpool"]:
            child = getattr(self.m, name)
            h = child(h.float() if name in self.fp32 else h.half())
        h = torch.flatten(h, 1)
        return self.m.fc(h.float() if "fc" in self.fp32 else h.half()).float()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seeds", type=int, default=3)
    a = ap.parse_args()
    import torch
    args = harness.parser().parse_args(["--out", os.environ.get("OUT", "/tmp/probe-out")])
    h = harness.Harness(args)
    fp32, _ = h.make_model("resnet50")
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    fp32 = fp32.float().eval()
    w16 = copy.deepcopy(fp32)
    with torch.no_grad():
        for p in w16.parameters():
            p.copy_(p.half().float())
    variants = {
        "fp16 everywhere": Mixed(fp32, []),
        "fp32, inputs rounded to fp16": lambda x: fp32(x.half().float()),
        "fp32, weights rounded to fp16": lambda x: w16(x),
        "fp16, stem (conv1, bn1) fp32": Mixed(fp32, ["conv1", "bn1"]),
        "fp16, fc fp32": Mixed(fp32, ["fc"]),
        "fp16, layer4 + fc fp32": Mixed(fp32, ["layer4", "avgpool", "fc"]),
        "fp16, stem + fc fp32": Mixed(fp32, ["conv1", "bn1", "fc"]),
        "fp32, inputs x (1 + 1e-4 noise)": lambda x: fp32(x * (1 + 1e-4 * torch.randn_like(x))),
    }
    cos = {k: [] for k in variants}
    with torch.no_grad():
        for seed in range(a.seeds):
            x = h.make_inputs("resnet50", a.batch, seed)[0].cuda()
            want = fp32(x).double()
            for k, f in variants.items():
                got = f(x).double()
                for i in range(a.batch):  # per image, as the harness compares one query's output
                    cos[k].append(torch.nn.functional.cosine_similarity(got[i], want[i], dim=0).item())
    print(f"ResNet-50 (harness model), batch {a.batch}, {a.seeds} seeds: cosine vs fp32 per image")
    print(f"{'variant':40s} {'min':>9s} {'median':>9s}")
    for k, v in cos.items():
        v = sorted(v)
        print(f"{k:40s} {v[0]:9.6f} {v[len(v) // 2]:9.6f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
