#!/usr/bin/env bash
# Copyright ingot authors. Apache-2.0.
# On the GPU machine: ResNet-50 (torchvision, random weights, legacy exporter) built into fp16
# engines with channels-last and channels-first convolutions, each timed with CUDA graphs at
# batch 1; prints the GPU compute medians and the five slowest steps of each. One question per
# run: does the NHWC region pay, and where does the time go.
#   carry: build-cuda/tools/ingot
set -uo pipefail
B=${B:-build-cuda}
OUT=${OUT:-/tmp/ingot-out}
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:${LD_LIBRARY_PATH:-}
w=$(mktemp -d)
python3 - "$w/resnet50.onnx" <<'PY'
import sys, torch, torchvision
m = torchvision.models.resnet50().eval()
torch.onnx.export(m, torch.randn(1, 3, 224, 224), sys.argv[1], opset_version=18, dynamo=False,
                  input_names=["input"], output_names=["logits"])
PY
for layout in nhwc nchw; do
  "$B/tools/ingot" build "$w/resnet50.onnx" -o "$w/r_$layout.engine" --backend cuda --fp16 --conv-layout $layout \
    --timing-cache "$w/cache" > "$w/build_$layout.log" 2>&1 || { echo "build $layout failed"; tail -5 "$w/build_$layout.log"; }
  "$B/tools/ingot" run "$w/r_$layout.engine" --cuda-graph --no-data-transfers --iterations 200 > "$w/run_$layout.log" 2>&1
  "$B/tools/ingot" run "$w/r_$layout.engine" --iterations 20 --dump-profile --onnx "$w/resnet50.onnx" > "$w/prof_$layout.log" 2>&1
  echo "== resnet50 b1 fp16 $layout: $(grep -m1 'build time' "$w/build_$layout.log")"
  grep -E "^GPU Compute Time|CUDA graph" "$w/run_$layout.log"
  awk '/^=== Profile/{p=1;next} p && $1 ~ /^[0-9]+$/ {print}' "$w/prof_$layout.log" | sort -k8 -g -r | head -5
done
cp "$w"/*.log "$OUT/" 2>/dev/null
