#!/usr/bin/env bash
# Copyright ingot authors. Apache-2.0.
# Narrows down an fp16 CUDA engine whose outputs are wrong, in one device call. For one ONNX model
# and its inputs it builds engines as the census does and with one thing changed each (first
# tactic only, channels-first or channels-last convs, cuDNN conv epilogues limited to Relu), and
# compares each against the fp32 reference interpreter per layer (ingot compare --all-layers names
# the first step out of tolerance); then runs the census engine under compute-sanitizer's memcheck
# and initcheck (out-of-bounds writes, reads of memory nothing wrote). Full logs in OUTDIR; one
# line per variant on stdout.
#   bash bench/probe_wrong.sh INGOT MODEL.onnx name:in.npy[,..] OUTDIR [variant ...]
# PROBE_BASE='--backend cuda --fp16 ...' replaces the census's build flags every variant starts from.
# variants: census opt1 nchw nhwc relu sanitize graph layouts (default: all but layouts); an OUTDIR/NAME.engine already
# there is used as it is (e.g. the census's own engine as census.engine). graph: the census engine's
# outputs run once without a CUDA graph and 20 times back to back from one (NaN counts and ranges
# of each), for wrong outputs that only a replayed graph shows (RegNetY b64, session 16).
set -uo pipefail
ingot=$1 model=$2 load=$3 out=$4
shift 4
variants=${*:-census opt1 nchw nhwc relu sanitize graph}
mkdir -p "$out"
tol=(--atol 0.05 --rtol 0.05)
# PROBE_BASE: the build flags every variant starts from (default: the census's).
read -r -a base <<< "${PROBE_BASE:---backend cuda --fp16 --tactic-timing device}"

probe() {  # probe NAME [env ...] -- build flags
  local name=$1; shift
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  local eng="$out/$name.engine" t0=$SECONDS
  if [ -f "$eng" ]; then echo "$name: using the engine already there" >> "$out/$name.build.log"
  elif ! env "${envs[@]}" "$ingot" build "$model" -o "$eng" "${base[@]}" "$@" > "$out/$name.build.log" 2>&1; then
    echo "$name: build failed: $(tail -1 "$out/$name.build.log")"; return
  fi
  env "${envs[@]}" "$ingot" compare "$model" --engine "$eng" --load-inputs "$load" "${tol[@]}" --all-layers \
    > "$out/$name.compare.log" 2>&1
  local first verdict cos
  verdict=$(grep -E '^(PASS|FAIL)' "$out/$name.compare.log" | tail -1)
  cos=$(grep -oE 'cosine [-0-9.na]+' "$out/$name.compare.log" | head -3 | tr '\n' ' ')
  first=$(grep -iE 'first layer out of tolerance' "$out/$name.compare.log" | head -1)
  echo "$name ($((SECONDS - t0)) s): ${verdict:-no verdict} | $cos| ${first:-no failing step named}"
}

for v in $variants; do
  case $v in
    census) probe census -- ;;
    opt1) probe opt1 -- --opt-level 1 ;;
    nchw) probe nchw -- --conv-layout nchw ;;
    nhwc) probe nhwc -- --conv-layout nhwc ;;
    relu) probe relu INGOT_CUDNN_CONV_ACTIVATIONS=relu -- ;;
    sanitize)
      cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
      [ -f "$out/census.engine" ] || "$ingot" build "$model" -o "$out/census.engine" "${base[@]}" > /dev/null 2>&1
      for tool in memcheck initcheck; do
        timeout 240 "$cs" --tool "$tool" --print-limit 20 "$ingot" run "$out/census.engine" --load-inputs "$load" \
          --warmup 0 --warmup-ms 0 --iterations 1 --duration 0 > "$out/sanitize_$tool.log" 2>&1
        echo "compute-sanitizer $tool: rc $? $(grep -E 'ERROR SUMMARY' "$out/sanitize_$tool.log" | tail -1)"
        grep -m3 -A4 -E '^========= (Invalid|Uninitialized|Program hit)' "$out/sanitize_$tool.log" | head -16
      done ;;
    graph)
      [ -f "$out/census.engine" ] || "$ingot" build "$model" -o "$out/census.engine" "${base[@]}" > /dev/null 2>&1
      for how in "--iterations 1 --warmup 0" "--iterations 20 --warmup 2 --cuda-graph --no-data-transfers --back-to-back 20"; do
        # shellcheck disable=SC2086
        echo "run $how: $(timeout 120 "$ingot" run "$out/census.engine" --load-inputs "$load" $how 2>&1 | grep -E '^  \S+ +(f|bf)[0-9]+\[' | head -3 | tr -s ' ' | tr '\n' ';')"
      done ;;
    layouts)
      # Quick, no reference: channels-first and channels-last builds, each run once on the input
      # (output summaries with their NaN counts), for a wrong output that one layout's tactics give.
      for lay in nchw nhwc; do
        [ -f "$out/run_$lay.engine" ] || "$ingot" build "$model" -o "$out/run_$lay.engine" "${base[@]}" --conv-layout "$lay" \
          > "$out/run_$lay.build.log" 2>&1 || { echo "$lay: build failed: $(tail -1 "$out/run_$lay.build.log")"; continue; }
        echo "$lay run once: $(timeout 120 "$ingot" run "$out/run_$lay.engine" --load-inputs "$load" --iterations 1 --warmup 0 2>&1 | grep -E '^  \S+ +(f|bf)[0-9]+\[' | head -3 | tr -s ' ' | tr '\n' ';')"
      done ;;
    *) echo "unknown variant $v" ;;
  esac
done
