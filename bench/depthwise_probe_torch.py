# Copyright ingot authors. Apache-2.0.
"""PyTorch's depthwise conv (cuDNN, channels_last fp16, bias + ReLU as torch.compile would leave
it: conv then an in-place relu) on bench/depthwise_probe.cu's layers, timed the same way: median
of 5 trials of 20 back-to-back calls between CUDA events, inference_mode.

  python3 bench/depthwise_probe_torch.py build/probe/depthwise_probe
"""
import subprocess
import sys

import torch
import torch.nn.functional as F


def main():
    probe = sys.argv[1]
    layers = [line.split() for line in subprocess.run([probe, "--list"], check=True, capture_output=True,
                                                       text=True).stdout.splitlines()]
    torch.backends.cudnn.benchmark = True
    print(f"{'model':16s} {'input NHWC':22s} {'k':>3s} {'s':>2s} {'conv us':>10s} {'conv+relu us':>13s} {'x bound':>8s}")
    with torch.inference_mode():
        for model, *dims in layers:
            n, h, w, c, k, s = map(int, dims)
            x = torch.randn(n, c, h, w, device="cuda", dtype=torch.half).to(memory_format=torch.channels_last)
            wt = torch.randn(c, 1, k, k, device="cuda", dtype=torch.half).to(memory_format=torch.channels_last)
            b = torch.randn(c, device="cuda", dtype=torch.half)
            res = []
            for relu in (False, True):
                def run():
                    y = F.conv2d(x, wt, b, stride=s, padding=k // 2, groups=c)
                    return y.relu_() if relu else y
                for _ in range(3):
                    run()
                trials = []
                for _ in range(5):
                    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    e0.record()
                    for _ in range(20):
                        y = run()
                    e1.record()
                    e1.synchronize()
                    trials.append(e0.elapsed_time(e1) * 1000 / 20)
                res.append(sorted(trials)[2])
            oh, ow = (h + 2 * (k // 2) - k) // s + 1, (w + 2 * (k // 2) - k) // s + 1
            bound = (n * h * w * c + n * oh * ow * c) * 2 / 4.0e12 * 1e6
            print(f"{model:16s} {f'{n}x{h}x{w}x{c}':22s} {k:3d} {s:2d} {res[0]:10.2f} {res[1]:13.2f} {res[0] / bound:8.1f}")


if __name__ == "__main__":
    main()
