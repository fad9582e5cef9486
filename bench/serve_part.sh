#!/usr/bin/env bash
# Copyright ingot authors. Apache-2.0.
# One device call of issue 19's serving measurements, from packed binaries:
#   bash bench/pack.sh build dev; bash bench/fetch_perf_analyzer.sh      (here)
#   (cd build/whl && pip download --no-deps tritonclient==2.73.0 python-rapidjson==1.25 ...)   (here: the gRPC
#   half of the shm test; tritonclient.grpc imports rapidjson, which the GPU machine lacks)
#   carry: build/devpack.tar.xz build/perf_analyzer.whl build/whl
#   [GTEST_FILTER_GPU='CudaEngine.*'] [PA_CONFIGS=g16s,h16s,...] [PA_MINUTES=8] [PA_MEASUREMENT_MS=2500] [PA_ARGS="--queue-delay-us 0"] bash bench/serve_part.sh NAME   (there)
# Unpacks build/devpack.tar.xz, runs Triton's CUDA shared-memory test through `ingot serve`
# (tests/server/test_cuda_shared_memory.py, HTTP and tritonclient.grpc), then perf_analyzer against
# `ingot serve` with ResNet-50 fp16 (bench/perf_analyzer_bench.py: its configurations, then `ingot
# run --streams 2` on the served engine), and leaves everything in $OUT/NAME.tgz (one file: the
# device tool brings back at most 8). Prints the table last.
set -uo pipefail
name=$1
t=/tmp/serve_$name
rm -rf "$t"; mkdir -p "$t"
tar xJf build/devpack.tar.xz -C build
B=build/dev
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:$PWD/$B/devlibs:${LD_LIBRARY_PATH:-}
export PYTHONUNBUFFERED=1
if ls build/whl/*.whl > /dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site build/whl/*.whl \
    && export PYTHONPATH=/tmp/site
fi
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv > "$t/gpu.txt" 2>&1
# GTEST_FILTER_GPU: GPU tests first (ingot_gpu_tests with that filter, and the server tests' CUDA cases).
if [ -n "${GTEST_FILTER_GPU:-}" ]; then
  $B/tests/ingot_gpu_tests --gtest_filter="$GTEST_FILTER_GPU" > "$t/gpu_tests.log" 2>&1
  echo "ingot_gpu_tests ($GTEST_FILTER_GPU) rc $?: $(grep -E '^\[  (PASSED|FAILED) ' "$t/gpu_tests.log" | tr '\n' ' ')"
  grep -E '^\[  FAILED  \]|Failure$' "$t/gpu_tests.log" | head -10
  $B/tests/server/ingot_server_tests --gtest_filter='Cuda*' > "$t/server_cuda_tests.log" 2>&1
  echo "ingot_server_tests (Cuda*) rc $?: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$t/server_cuda_tests.log" | tr '\n' ' ')"
  grep -E '^\[  FAILED  \]|Failure$' "$t/server_cuda_tests.log" | head -10
fi
python3 tests/models/make_models.py -o "$t/models" > "$t/models.log" 2>&1
python3 tests/server/test_cuda_shared_memory.py --ingot $B/tools/ingot --models "$t/models" > "$t/cuda_shm.log" 2>&1
echo "CUDA shared memory through ingot serve (rc $?): $(tail -1 "$t/cuda_shm.log")"
grep -E "^(FAIL|skip)" "$t/cuda_shm.log" | head -10
python3 bench/perf_analyzer_bench.py --ingot $B/tools/ingot --wheel build/perf_analyzer.whl --out "$t/pa" \
  --max-minutes "${PA_MINUTES:-8}" --measurement-ms "${PA_MEASUREMENT_MS:-2500}" \
  ${PA_CONFIGS:+--configs "$PA_CONFIGS"} ${PA_ARGS:-} > "$t/pa.log" 2>&1
echo "perf_analyzer_bench rc $? after $SECONDS s"
tar czf "$OUT/$name.tgz" -C /tmp "serve_$name"
grep -E "^(export|server up|[a-z0-9]+: )" "$t/pa.log" | head -30
sed -n '/^max_queue_delay_microseconds/,$p' "$t/pa.log"
grep -q '^== perf_analyzer table ==$' "$t/pa.log" || tail -30 "$t/pa.log"
