#!/usr/bin/env bash
# Copyright ingot authors. Apache-2.0.
# One device call's part of the model census (bench/census.py), from packed binaries:
#   bash bench/pack.sh build dev                     (here; carry build/devpack.tar.xz)
#   LIMIT_S=590 [GPU_TESTS=1] [PROFILE_MODELS=m1,m2] [JOBS=9] [PLAN_EXTRA_S=60] [CENSUS_FLAGS=--keep-work] bash bench/census_part.sh NAME MODEL,MODEL,...   (there)
# WORK (default /tmp/cw) is the models' work folder; SKIP_UNPACK=1 when the pack is unpacked already
# (bench/census_multi.sh runs one part per GPU side by side).
# Unpacks build/devpack.tar.xz, keeps the models that fit LIMIT_S (census.py --plan-s), prepares
# them in parallel (exports, references, warm torch.compile caches) while the GPU tests run in 4 shards (GPU_TESTS=1), then times the models
# in the given order until LIMIT_S seconds after the start (census.py skips a model that would not
# fit; CENSUS_FLAGS go to census.py: --keep-work leaves every engine, ONNX file and input in
# /tmp/cw for a probe later in the same call, e.g. bench/probe_wrong.sh), and leaves everything in
# $OUT/NAME.tgz (census.json, census.md, logs, GPU test logs): one file, so the device tool's limit
# on returned files never drops a log. Prints the table last.
set -uo pipefail
name=$1
models=$2
limit=${LIMIT_S:-590}
jobs=${JOBS:-9}
t=/tmp/census_$name
rm -rf "$t"; mkdir -p "$t"
[ "${SKIP_UNPACK:-0}" = 1 ] || tar xJf build/devpack.tar.xz -C build
work=${WORK:-/tmp/cw}
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:${LD_LIBRARY_PATH:-}
export PYTHONUNBUFFERED=1
B=build/dev
# Only the models this call fits are prepared (census.py --plan-s: the preparation lasts as long as
# its slowest model, then the timed runs add up); the rest are printed (plan.log) and
# left for another call.
# PLAN_EXTRA_S: plan for that many seconds more (models prepared here and not reached are kept in
# /tmp/cw for the next call on the same machine; census.py still skips what would not fit).
planned=$(python3 bench/census.py --plan-s "$((limit - 15 + ${PLAN_EXTRA_S:-0}))" --work "$work" --models "$models" 2> "$t/plan.log")
[ -n "$planned" ] || planned=$models
cat "$t/plan.log"
models=$planned
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv > "$t/gpu.txt" 2>&1
python3 bench/census.py --ingot $B/tools/ingot --out "$t/prep" --work "$work" --prepare-jobs "$jobs" --prepare-only \
  --models "$models" > "$t/prep.log" 2>&1 &
prep=$!
if [ "${GTEST_FILTER_GPU:-}" != "" ] || [ "${GPU_TESTS:-0}" = 1 ]; then
  for i in 0 1 2 3; do
    GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$i $B/tests/ingot_gpu_tests ${GTEST_FILTER_GPU:+--gtest_filter=$GTEST_FILTER_GPU} \
      > "$t/gpu_tests_$i.log" 2>&1 &
  done
fi
wait
echo "prepared in $SECONDS s"
grep -h "tests ran\|PASSED\|FAILED" "$t"/gpu_tests_*.log 2>/dev/null
# PROFILE_MODELS (a subset of the models, timed first, or 'all'): with census.py --profile, the per-layer
# profile of each timed run too, and torch.profiler's kernel table of the torch.compile side (--torch-profile),
# into census_profiled/; the rest without them (into census/).
run_census() {  # out-dir models [flags]
  local out=$1 list=$2; shift 2
  [ -z "$list" ] && return 0
  local left=$((limit - SECONDS - 20))
  local minutes
  minutes=$(python3 -c "print(round($left / 60, 2))")
  timeout "$left" python3 bench/census.py --ingot $B/tools/ingot --work "$work" --out "$t/$out" --max-minutes "$minutes" \
    --models "$list" "$@" ${CENSUS_FLAGS:-} >> "$t/census.log" 2>&1
  echo "census $out rc $? after $SECONDS s"
}
[ "${PROFILE_MODELS:-}" = all ] && PROFILE_MODELS=$models
rest=$(python3 -c "import sys; p=set(sys.argv[2].split(',')) - {''}; print(','.join(m for m in sys.argv[1].split(',') if m not in p))" \
  "$models" "${PROFILE_MODELS:-}")
run_census census_profiled "${PROFILE_MODELS:-}" --profile --torch-profile
run_census census "$rest"
tar czf "$OUT/$name.tgz" -C /tmp "census_$name"
grep -h "s (estimated\|would not fit" "$t/census.log"
sed -n '/^== census table ==$/,$p' "$t/census.log" | head -60
grep -q '^== census table ==$' "$t/census.log" || tail -25 "$t/census.log"
