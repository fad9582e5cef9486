#!/usr/bin/env python3
# Copyright ingot authors. Apache-2.0.
"""Host-to-device copy bandwidth from pageable and from pinned memory (PyTorch, GPU machine).

One ResNet-50 batch of 128 fp32 images is 77 MiB: what that costs to copy decides how a server or
`ingot run` with copies should stage its inputs (see bench/RESULTS.md, session 5).

  python3 bench/h2d_bandwidth.py [--mib 77] [--repeats 20]
"""
import argparse
import time

import torch


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mib", type=int, default=77)
    ap.add_argument("--repeats", type=int, default=20)
    a = ap.parse_args()
    for pin in (False, True):
        x = torch.empty(a.mib << 20, dtype=torch.uint8, pin_memory=pin)
        x.fill_(1)
        y = torch.empty_like(x, device="cuda")
        for _ in range(3):
            y.copy_(x, non_blocking=True)
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(a.repeats):
            y.copy_(x, non_blocking=True)
        torch.cuda.synchronize()
        dt = (time.perf_counter() - t) / a.repeats
        print(f"H2D pinned={pin}: {x.numel() / dt / 1e9:.1f} GB/s ({dt * 1e3:.2f} ms per {a.mib} MiB)")


if __name__ == "__main__":
    main()
