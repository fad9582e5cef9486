#!/usr/bin/env bash
# Copyright ingot authors. Apache-2.0.
# The benchmark harness (bench/harness.py) on the GPU machine in one call: ResNet-50 and
# BERT-base exported, built into ingot fp16 engines, timed with and without CUDA graphs against
# PyTorch eager / CUDA graph / torch.compile, outputs checked against PyTorch fp32. Results:
# $OUT/bench/{bench.json,bench.md,logs/,*_profile.json,*_timing.svg}; the table is printed last.
#   carry: build-cuda/tools/ingot  (built here with -DINGOT_CUDA=ON, CMAKE_CUDA_ARCHITECTURES=90a)
#   usage: bash bench/bench.sh [harness flags, e.g. --max-minutes 9 --max-autotune --models resnet50]
set -uo pipefail
OUT=${OUT:-/tmp/ingot-out}
B=${B:-build-cuda}
mkdir -p "$OUT/bench"
# The binaries were built against cuDNN 9.19, which the GPU machine has in PyTorch's wheel.
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$OUT/bench/gpu.txt" 2>&1
python3 bench/harness.py --ingot "$B/tools/ingot" --out "$OUT/bench" "$@" 2>&1 | tee "$OUT/bench/harness.out" | tail -12
exit "${PIPESTATUS[0]}"
