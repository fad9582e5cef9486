#!/usr/bin/env bash
# Copyright ingot authors. Apache-2.0.
# One device call for issue 20's GPU slice: the quantized-GEMM GPU tests, then BERT-base s128
# (transformers, random weights, legacy exporter, opset 18) built as fp16, fp16 + FP8 and
# fp16 + INT8 engines at batch 1 and at QUANT_BATCH (default 64), each timed with CUDA graphs in
# the same call, with the per-layer profile of the quantized engines and each engine's output
# against the fp16 engine's on the same inputs (cosine).
#   here:  bash bench/pack.sh build dev        (carry build/devpack.tar.xz)
#   there: [GTEST_FILTER_GPU=...] [QUANT_BATCH=64] [QUANT_MODES="fp16 fp8 int8" (empty: none)] [RESNET_CAL=1] bash bench/quant_part.sh NAME
# Leaves $OUT/NAME.tgz (logs, profiles, the summary); prints the summary table last.
set -uo pipefail
. bench/part_env.sh quant "$1"
bn=${QUANT_BATCH:-64}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$t/gpu.txt"
filter=${GTEST_FILTER_GPU:-'CudaQuantGemmTest.*:CudaQuantTest.*:CudaCalibration*'}
for i in 0 1; do
  GTEST_TOTAL_SHARDS=2 GTEST_SHARD_INDEX=$i $B/tests/ingot_gpu_tests --gtest_filter="$filter" > "$t/gpu_tests_$i.log" 2>&1 &
done
# The model and the calibration batches while the tests run (a [2, 128] and a [1, 128] batch: the
# scales only need to be plausible, random weights say nothing about INT8 accuracy).
python3 - "$t" > "$t/export.log" 2>&1 <<'PY'
import os, sys, numpy as np, torch, transformers
t = sys.argv[1]
torch.manual_seed(0)
sys.path.insert(0, "bench")
from harness import bert_base_last_hidden_state
bert = bert_base_last_hidden_state()
ids = torch.randint(0, 30522, (1, 128))
with torch.no_grad():
    torch.onnx.export(bert, (ids, torch.ones(1, 128, dtype=torch.int64)), f"{t}/bert.onnx", opset_version=18,
                      dynamo=False, input_names=["input_ids", "attention_mask"], output_names=["y"],
                      dynamic_axes={"input_ids": {0: "b"}, "attention_mask": {0: "b"}}, do_constant_folding=True)
rng = np.random.default_rng(1)
for i, (b, s) in enumerate([(2, 128), (1, 128)]):
    d = f"{t}/cal/{i}"
    os.makedirs(d)
    np.save(f"{d}/input_ids.npy", rng.integers(0, 30522, (b, s)).astype(np.int64))
    np.save(f"{d}/attention_mask.npy", np.ones((b, s), np.int64))
for b in (1, int(os.environ.get("QUANT_BATCH", "64"))):
    np.save(f"{t}/ids_{b}.npy", rng.integers(0, 30522, (b, 128)).astype(np.int64))
    np.save(f"{t}/mask_{b}.npy", np.ones((b, 128), np.int64))
print("exported")
PY
tail -1 "$t/export.log"
wait
grep -h "tests ran\|PASSED\|FAILED\|Skipped\|SKIPPED" "$t"/gpu_tests_*.log
grep -h -B2 -A12 "Failure$" "$t"/gpu_tests_*.log | head -60
# Modes fp8split / int8split: the same engines with fuse_norm_quantize off (each LayerNorm's
# 8-bit copy a QuantizeLinear step of its own again), the A/B of the fused norm.
for mode in ${QUANT_MODES-fp16 fp8 int8}; do  # QUANT_MODES= (empty): no BERT rows
  flags="--fp16"
  case "$mode" in
    fp8*) flags="--fp16 --fp8 --calibrator minmax --calibration-data $t/cal --calibration-cache $t/fp8.cache" ;;
    int8*) flags="--fp16 --int8 --calibrator minmax --calibration-data $t/cal --calibration-cache $t/int8.cache" ;;
  esac
  [ "${mode%split}" != "$mode" ] && flags="$flags --disable-pass fuse_norm_quantize"
  for b in 1 "$bn"; do
    e="$t/bert_${mode}_b$b.engine"
    /usr/bin/time -f "%e s wall" $B/tools/ingot build "$t/bert.onnx" -o "$e" --backend cuda $flags --tactic-timing device \
      --shapes "input_ids:${b}x128,attention_mask:${b}x128" > "$t/build_${mode}_b$b.log" 2>&1 ||
      { echo "build $mode b$b failed"; tail -5 "$t/build_${mode}_b$b.log"; continue; }
    ins="input_ids:$t/ids_$b.npy,attention_mask:$t/mask_$b.npy"
    $B/tools/ingot run "$e" --cuda-graph --no-data-transfers --iterations 300 --warmup-ms 300 \
      > "$t/run_${mode}_b$b.log" 2>&1
    $B/tools/ingot run "$e" --load-inputs "$ins" --save-outputs "$t/out_${mode}_b$b" > "$t/save_${mode}_b$b.log" 2>&1
    $B/tools/ingot run "$e" --iterations 20 --dump-profile --onnx "$t/bert.onnx" \
      --export-profile "$t/profile_${mode}_b$b.json" > "$t/prof_${mode}_b$b.log" 2>&1
    echo "== $mode b$b: build $(tail -1 "$t/build_${mode}_b$b.log")"
    grep -h -E "^(steps|precision|int8|fp8|quant|split)" "$t/build_${mode}_b$b.log" | head -6
    grep -E "^GPU Compute Time|^Latency" "$t/run_${mode}_b$b.log"
    awk '/^=== Profile/{p=1;next} p && $1 ~ /^[0-9]+$/ {print}' "$t/prof_${mode}_b$b.log" | sort -k8 -g -r | head -8
  done
done
# RESNET_CAL=1: issue 20's calibration bar (ResNet-50 on 512 images in <= 60 s, on the build's
# backend) and its int8 speed bar (batch 128 against ingot's own fp16): torchvision ResNet-50 with
# random weights, 16 batches of 32 random images (timing only: random data says nothing of accuracy).
if [ "${RESNET_CAL:-0}" = 1 ]; then
  python3 - "$t" > "$t/resnet_export.log" 2>&1 <<'PY'
import os, sys, numpy as np, torch, torchvision
t = sys.argv[1]
m = torchvision.models.resnet50().eval()
torch.onnx.export(m, torch.randn(1, 3, 224, 224), f"{t}/resnet50.onnx", opset_version=17, dynamo=False,
                  input_names=["image"], output_names=["logits"], dynamic_axes={"image": {0: "b"}})
rng = np.random.default_rng(2)
os.makedirs(f"{t}/rcal")
for i in range(16):
    np.save(f"{t}/rcal/b{i:02d}.npy", rng.standard_normal((32, 3, 224, 224)).astype(np.float32))
print("exported")
PY
  tail -1 "$t/resnet_export.log"
  for mode in fp16 int8; do
    flags="--fp16"
    [ "$mode" = int8 ] && flags="--fp16 --int8 --calibration-data $t/rcal"
    e="$t/resnet_${mode}.engine"
    /usr/bin/time -f "%e s wall" $B/tools/ingot build "$t/resnet50.onnx" -o "$e" --backend cuda $flags \
      --tactic-timing device --shapes image:128x3x224x224 > "$t/rbuild_$mode.log" 2>&1 ||
      { echo "resnet build $mode failed"; tail -5 "$t/rbuild_$mode.log"; continue; }
    echo "== resnet50 $mode b128: build $(tail -1 "$t/rbuild_$mode.log")"
    grep -h -E "calibration  |layers quantized" "$t/rbuild_$mode.log"
    $B/tools/ingot run "$e" --cuda-graph --no-data-transfers --iterations 200 --warmup-ms 300 > "$t/rrun_$mode.log" 2>&1
    grep -E "^GPU Compute Time|^Throughput" "$t/rrun_$mode.log"
    # Where the time goes, per step (the int8 engine's QuantConv / QuantizeLinear split beside fp16's convs).
    $B/tools/ingot run "$e" --iterations 20 --dump-profile --onnx "$t/resnet50.onnx" \
      --export-profile "$t/rprofile_$mode.json" > "$t/rprof_$mode.log" 2>&1
    python3 -c "import json,collections,sys; d=collections.Counter(); n=collections.Counter()
for l in json.load(open(sys.argv[1]))['layers']: d[(l['op'],l['tactic'])]+=l['medianMs']; n[(l['op'],l['tactic'])]+=1
print('  profile:', '; '.join(f'{k[0]} {k[1]} x{n[k]} {v*1000:.0f} us' for k,v in d.most_common(5)))" "$t/rprofile_$mode.json"
  done
fi
python3 - "$t" "$bn" <<'PY' | tee "$t/summary.txt"
import json, os, re, sys, numpy as np
t, bn = sys.argv[1], sys.argv[2]
def med(mode, b):
    try:
        s = open(f"{t}/run_{mode}_b{b}.log").read()
    except OSError:
        return None
    m = re.search(r"GPU Compute Time: min = [\d.]+ ms, max = [\d.]+ ms, mean = [\d.]+ ms, median = ([\d.]+) ms", s)
    return float(m.group(1)) if m else None
def out(mode, b):
    p = f"{t}/out_{mode}_b{b}/y.npy"
    return np.load(p).astype(np.float64).ravel() if os.path.exists(p) else None
print(f"{'engine':9} {'b1 ms':>8} {'x fp16':>7} {'b' + bn + ' ms':>9} {'x fp16':>7} {'seq/s':>9} {'cos b1':>9} {'cos bN':>9}")
for mode in ("fp16", "fp8", "fp8split", "int8", "int8split"):
    if med(mode, "1") is None and med(mode, bn) is None:
        continue
    row = [f"{mode:9}"]
    for b in ("1", bn):
        m, base = med(mode, b), med("fp16", b)
        row += [f"{m:8.4f}" if m else "       -", f"{base / m:6.2f}x" if m and base else "     -"]
    m = med(mode, bn)
    row.append(f"{int(bn) / m * 1000:9.0f}" if m else "        -")
    for b in ("1", bn):
        a, r = out(mode, b), out("fp16", b)
        row.append(f"{a @ r / np.linalg.norm(a) / np.linalg.norm(r):9.6f}" if a is not None and r is not None else "        -")
    print(" ".join(row))
# Where each engine's time goes by role (eager profile, us summed over BERT's 12 layers): the four
# GEMMs by their ONNX names, every other step by its op.
def role(l):
    n = l["name"]
    if l["op"] not in ("ingot::QuantGemm", "ingot::FusedGemm", "MatMul", "Gemm"):
        return l["op"].replace("ingot::", "")
    for key, r in (("intermediate", "ffn1"), ("attention/output", "attn-out"), ("/output/", "ffn2"),
                   ("attention/self", "qkv")):
        if key in n:
            return r
    return "other gemm"
for b in ("1", bn):
    for mode in ("fp16", "fp8", "fp8split", "int8", "int8split"):
        f = f"{t}/profile_{mode}_b{b}.json"
        if not os.path.exists(f):
            continue
        agg = {}
        for l in json.load(open(f))["layers"]:
            agg[role(l)] = agg.get(role(l), 0.0) + l["medianMs"] * 1000
        top = sorted(agg.items(), key=lambda kv: -kv[1])[:8]
        print(f"b{b} {mode:9} eager {sum(agg.values()):7.1f} us: " + ", ".join(f"{k} {v:.1f}" for k, v in top))
PY
rm -rf "$t"/*.engine "$t"/*.onnx "$t"/out_* "$t"/*.npy "$t"/cal "$t"/rcal
tar czf "$OUT/$name.tgz" -C /tmp "quant_$name"
