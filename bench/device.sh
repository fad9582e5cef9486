#!/usr/bin/env bash
# One call on the GPU machine: GPU tests, the ONNX node suite and the test models through CUDA
# engines. Expects binaries built here with the CUDA toolkit (build-cuda/, carried by the device
# tool) and writes full logs to $OUT; prints a short table last.
#   carry: build-cuda/tests/ingot_gpu_tests build-cuda/tests/conformance_runner build-cuda/tools/ingot
set -uo pipefail
OUT=${OUT:-/tmp/ingot-out}
mkdir -p "$OUT"
B=${B:-build-cuda}
# The binaries were built against cuDNN 9.19, which the GPU machine has in PyTorch's wheel.
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
work=$(mktemp -d)
[ "${INGOT_SKIP_NODE_SUITE:-0}" = 1 ] || python3 tests/conformance/generate_node_data.py -o "$work/suite" > "$OUT/generate.log" 2>&1
python3 tests/models/make_models.py -o "$work/models" >> "$OUT/generate.log" 2>&1
python3 tests/models/make_optimizer_models.py -o "$work/optmodels" >> "$OUT/generate.log" 2>&1

# The GPU tests in parallel shards (most of their time is host work: NVRTC, cuDNN plan building),
# one log; gpu_rc is the first failing shard's status.
shards=${INGOT_GPU_TEST_SHARDS:-4}
pids=()
for ((i = 0; i < shards; ++i)); do
  GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i "$B/tests/ingot_gpu_tests" > "$OUT/gpu_tests.$i.log" 2>&1 &
  pids+=($!)
done
gpu_rc=0
for p in "${pids[@]}"; do wait "$p" || { rc=$?; [ "$gpu_rc" = 0 ] && gpu_rc=$rc; }; done
for ((i = 0; i < shards; ++i)); do cat "$OUT/gpu_tests.$i.log"; rm -f "$OUT/gpu_tests.$i.log"; done > "$OUT/gpu_tests.log"
if [ "${INGOT_SKIP_NODE_SUITE:-0}" = 1 ]; then
  echo "node suite skipped (INGOT_SKIP_NODE_SUITE=1)" > "$OUT/conformance_cuda.log"
else
  "$B/tests/conformance_runner" --dir "$work/suite/node" --mode engine-optimized --backend cuda --in-process -v \
    > "$OUT/conformance_cuda.log" 2>&1
  # The same suite through fp16 CUDA engines (expected failures: tests/conformance/expectations_reduced_precision.tsv).
  "$B/tests/conformance_runner" --dir "$work/suite/node" --mode engine-optimized --backend cuda --fp16 --in-process \
    > "$OUT/conformance_cuda_fp16.log" 2>&1
fi
"$B/tests/conformance_runner" --dir "$work/models" --mode engine-optimized --backend cuda --in-process -v > "$OUT/models_cuda.log" 2>&1
# The optimizer models (ResNet/MobileNetV3/EfficientNet/DenseNet blocks, BERT encoders) must run
# without a single host-fallback step (issue 18).
"$B/tests/conformance_runner" --dir "$work/optmodels" --mode engine-optimized --backend cuda --no-host-fallback --in-process -v >> "$OUT/models_cuda.log" 2>&1
# fp16 engines (reduced precision, channels-last convs) of the same models: cosine >= 0.9999.
"$B/tests/conformance_runner" --dir "$work/models" --mode engine-optimized --backend cuda --fp16 --in-process -v > "$OUT/models_cuda_fp16.log" 2>&1
"$B/tests/conformance_runner" --dir "$work/optmodels" --mode engine-optimized --backend cuda --fp16 --no-host-fallback --in-process -v >> "$OUT/models_cuda_fp16.log" 2>&1

python3 tests/cli/test_cuda_cli.py --ingot "$B/tools/ingot" --models "$work/models" > "$OUT/cli_cuda.log" 2>&1
python3 tests/cli/test_cuda_profile.py --ingot "$B/tools/ingot" --models "$work/models" > "$OUT/cli_cuda_profile.log" 2>&1
# Triton's CUDA shared-memory extension end to end (cudaIpc handles from this Python process).
LD_LIBRARY_PATH="$B/devlibs:$LD_LIBRARY_PATH" python3 tests/server/test_cuda_shared_memory.py --ingot "$B/tools/ingot" \
  --models "$work/models" > "$OUT/cuda_shm.log" 2>&1
echo "== summary =="
echo "cli on cuda engines: $(tail -1 "$OUT/cli_cuda.log")"
echo "cli --cuda-graph and roofline on cuda engines: $(tail -1 "$OUT/cli_cuda_profile.log")"
echo "CUDA shared memory through ingot serve: $(tail -1 "$OUT/cuda_shm.log")"
echo "gpu tests: $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/gpu_tests.log" | tr '\n' ' ') (rc $gpu_rc)"
grep -E '^\[  FAILED  \] [A-Za-z]' "$OUT/gpu_tests.log" | head -20
echo "node suite through CUDA engines:"; grep -E "pass [0-9]+ +fail" "$OUT/conformance_cuda.log"
echo "node suite through fp16 CUDA engines:"; grep -E "pass [0-9]+ +fail" "$OUT/conformance_cuda_fp16.log" 2>/dev/null
grep -E "^FAIL " "$OUT/conformance_cuda.log" | head -25
echo "models through CUDA engines:"; grep -E "^(PASS|FAIL|UNSUPPORTED) " "$OUT/models_cuda.log"
echo "models through fp16 CUDA engines:"; grep -E "^(PASS|FAIL|UNSUPPORTED) " "$OUT/models_cuda_fp16.log"
# `ingot serve` against `ingot run` on ResNet-50 fp16 (issue 8's figure), when asked: INGOT_SERVE_BENCH=1.
if [ "${INGOT_SERVE_BENCH:-0}" = 1 ]; then
  echo "== serve benchmark =="
  python3 bench/serve_bench.py --ingot "$B/tools/ingot" --export resnet50 --backend cuda --fp16 --max-batch 128 \
    --request-batch 16 --clients 8 --threads 4 --warmup 20 --duration 15 --out "$OUT/serve" 2>&1 | tail -4
fi
# Triton's perf_analyzer against ingot serve (issue 19 item 3), when asked: INGOT_PERF_ANALYZER=1 with
# build/perf_analyzer.whl carried (bash bench/fetch_perf_analyzer.sh) [INGOT_PA_CONFIGS=g16s,h16s,...].
if [ "${INGOT_PERF_ANALYZER:-0}" = 1 ]; then
  echo "== perf_analyzer =="
  LD_LIBRARY_PATH="$B/devlibs:$LD_LIBRARY_PATH" python3 bench/perf_analyzer_bench.py --ingot "$B/tools/ingot" \
    --wheel build/perf_analyzer.whl --out "$OUT/pa" --max-minutes "${INGOT_PA_MINUTES:-7}" \
    ${INGOT_PA_CONFIGS:+--configs "$INGOT_PA_CONFIGS"} > "$OUT/pa.log" 2>&1
  sed -n '/^ingot run --streams/,$p' "$OUT/pa.log"
  grep -q '^== perf_analyzer table ==$' "$OUT/pa.log" || tail -20 "$OUT/pa.log"
fi
# The benchmark against PyTorch (bench/harness.py), when asked: INGOT_BENCH=1 [INGOT_BENCH_MINUTES=N].
if [ "${INGOT_BENCH:-0}" = 1 ]; then
  echo "== benchmark =="
  bash bench/bench.sh --max-minutes "${INGOT_BENCH_MINUTES:-6}"
fi
# The model census of issue 18 (bench/census.py: 27 architectures, ingot vs torch.compile), when asked:
# INGOT_CENSUS=1 [INGOT_CENSUS_MINUTES=N] [INGOT_CENSUS_ARGS="--family cnn --legacy-too"]. The whole census
# takes about an hour: run it in parts and merge their census.json files (python3 bench/census.py --merge).
if [ "${INGOT_CENSUS:-0}" = 1 ]; then
  echo "== model census =="
  mkdir -p "$OUT/census"
  # shellcheck disable=SC2086  # INGOT_CENSUS_ARGS is a list of flags
  python3 bench/census.py --ingot "$B/tools/ingot" --out "$OUT/census" --max-minutes "${INGOT_CENSUS_MINUTES:-8}" \
    ${INGOT_CENSUS_ARGS:-} > "$OUT/census/census.out" 2>&1
  census_rc=$?
  sed -n '/^== census table ==$/,$p' "$OUT/census/census.out"
  grep -q '^== census table ==$' "$OUT/census/census.out" || tail -20 "$OUT/census/census.out"
  echo "census rc $census_rc (full log: census/census.out, census/logs/)"
fi
