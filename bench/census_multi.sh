#!/usr/bin/env bash
# Copyright ingot authors. Apache-2.0.
# The whole census in one device call on a machine of several GPUs (the nvidia-*-x4 / -x8 kinds):
# the models are dealt out by their measured cost (census.py's PREPARED_S / PREP_WALL_S) to one
# bench/census_part.sh per GPU (CUDA_VISIBLE_DEVICES, its own work folder and name), which run side
# by side; each model's ingot and torch.compile rows are measured on the same GPU, one after the
# other, as in a one-GPU call. Then census.py --merge makes one table of all parts.
#   here:  bash bench/pack.sh build dev           (carry build/devpack.tar.xz)
#   there: [GPUS=8] [LIMIT_S=560] [MODELS=m1,m2,...] [GPU_TESTS=1] bash bench/census_multi.sh NAME
# GPU_TESTS=1 runs the GPU test suite on the last GPU before its models. Leaves $OUT/NAME.tgz (every
# part's folder and the merged table) and prints the merged table.
set -uo pipefail
name=$1
gpus=${GPUS:-$(nvidia-smi -L | wc -l)}
tar xJf build/devpack.tar.xz -C build
models=${MODELS:-$(python3 bench/census.py --list 2>/dev/null | awk 'NR > 1 && $1 !~ /^[0-9]+$/ && NF >= 5 {print $1}' | paste -sd, -)}
# Deal the models out: the most expensive first, each to the GPU with the least work so far.
parts=$(python3 - "$models" "$gpus" <<'PY'
import importlib.util, sys
args = sys.argv[1:]
spec = importlib.util.spec_from_file_location("census", "bench/census.py")
c = importlib.util.module_from_spec(spec)
sys.argv = ["census.py"]
spec.loader.exec_module(c)
models = [m for m in args[0].split(",") if m]
n = int(args[1])
load = [0.0] * n
out = [[] for _ in range(n)]
for m in sorted(models, key=lambda m: -(c.PREPARED_S.get(m, 60) * 1.15 + c.PREP_WALL_S.get(m, 90) / 4)):
    i = min(range(n), key=lambda k: load[k])
    out[i].append(m)
    load[i] += c.PREPARED_S.get(m, 60) * 1.15 + c.PREP_WALL_S.get(m, 90) / 4
print("\n".join(",".join(p) for p in out))
PY
)
t=/tmp/census_multi_$name
rm -rf "$t"; mkdir -p "$t"
i=0
pids=()
while IFS= read -r part; do
  [ -n "$part" ] || { i=$((i + 1)); continue; }
  tests=0
  [ "${GPU_TESTS:-0}" = 1 ] && [ "$i" = $((gpus - 1)) ] && tests=1
  echo "GPU $i: $part"
  (CUDA_VISIBLE_DEVICES=$i SKIP_UNPACK=1 WORK=/tmp/cw_$i GPU_TESTS=$tests JOBS=${JOBS:-4} OUT=$t \
     bash bench/census_part.sh "${name}_gpu$i" "$part" > "$t/part_$i.log" 2>&1) &
  pids+=($!)
  i=$((i + 1))
done <<< "$parts"
for p in "${pids[@]}"; do wait "$p"; done
for f in "$t"/*.tgz; do tar xzf "$f" -C "$t"; done
python3 bench/census.py --merge "$t"/census_*/census*/census.json --out "$t/merged" > "$t/merged.log" 2>&1
grep -h "tests ran\|PASSED\|FAILED" "$t"/census_*/gpu_tests_*.log 2>/dev/null
tar czf "$OUT/$name.tgz" -C /tmp "census_multi_$name"
cat "$t/merged.log" | tail -45
