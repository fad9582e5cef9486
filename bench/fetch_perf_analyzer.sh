#!/usr/bin/env bash
# Copyright ingot authors. Apache-2.0.
# Downloads Triton's perf_analyzer wheel (PyPI perf-analyzer 2.60, manylinux_2_38: it runs on the
# GPU machine's glibc 2.39, not on our Debian 12 machines) into build/perf_analyzer.whl, for the
# device tool to carry; bench/perf_analyzer_bench.py --wheel unpacks it there.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_38_x86_64 perf-analyzer==2.60.0 -d "$tmp"
mkdir -p build
mv "$tmp"/perf_analyzer-*.whl build/perf_analyzer.whl
ls -la build/perf_analyzer.whl
