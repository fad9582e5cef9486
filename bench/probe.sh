#!/usr/bin/env bash
# Copyright ingot authors. Apache-2.0.
# On the GPU machine: where does an fp16 engine's time go, kernel by kernel? Exports ResNet-50
# (torchvision) and BERT-base s128 (transformers, eager attention) at batch 1 with random weights
# (legacy exporter, opset 18), builds fp16 engines twice (empty, then warm timing cache: both
# build times), times them with CUDA graphs, prints the five slowest steps of each and, when
# Nsight Compute reads the counters, every kernel one query launches with its duration.
#   carry: build-cuda/tools/ingot
#   env: PROBE_MODELS="resnet50 bert" PROBE_LAYOUTS="auto" PROBE_NCU=1 PROBE_BUILD_FLAGS="--fp16"
set -uo pipefail
B=${B:-build-cuda}
OUT=${OUT:-/tmp/ingot-out}
mkdir -p "$OUT/probe"
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:${LD_LIBRARY_PATH:-}
w=$(mktemp -d)
for m in ${PROBE_MODELS:-resnet50 bert}; do
  python3 - "$m" "$w/$m.onnx" > "$w/export_$m.log" 2>&1 <<'PY' || { echo "export $m failed"; tail -3 "$w/export_$m.log"; continue; }
import sys, torch
name, path = sys.argv[1], sys.argv[2]
torch.manual_seed(0)
if name == "resnet50":
    import torchvision
    m = torchvision.models.resnet50().eval()
    args, names = (torch.randn(1, 3, 224, 224),), ["input"]
else:
    import transformers
    cfg = transformers.BertConfig()
    cfg._attn_implementation = "eager"  # explicit MatMul/Softmax: the pattern ingot fuses into Attention
    bert = transformers.BertModel(cfg, add_pooling_layer=False).eval()

    class Bert(torch.nn.Module):  # keyword arguments: forward's positional order changes between versions
        def __init__(self):
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask):
            return self.bert(input_ids=input_ids, attention_mask=attention_mask, return_dict=False)[0]

    m = Bert().eval()
    ids = torch.randint(0, 30522, (1, 128))
    args, names = (ids, torch.ones(1, 128, dtype=torch.int64)), ["input_ids", "attention_mask"]
with torch.no_grad():
    torch.onnx.export(m, args, path, opset_version=18, dynamo=False, input_names=names, do_constant_folding=True)
PY
  for layout in ${PROBE_LAYOUTS:-auto}; do
    e="$w/${m}_$layout.engine"
    for pass in cold warm; do
      /usr/bin/time -f "%e s wall" "$B/tools/ingot" build "$w/$m.onnx" -o "$e" --backend cuda ${PROBE_BUILD_FLAGS:---fp16} \
        --conv-layout "$layout" --timing-cache "$w/cache_$m" > "$OUT/probe/build_${m}_${layout}_$pass.log" 2>&1 ||
        { echo "build $m $layout $pass failed"; tail -5 "$OUT/probe/build_${m}_${layout}_$pass.log"; }
    done
    "$B/tools/ingot" run "$e" --cuda-graph --no-data-transfers --iterations 200 --warmup-ms 200 \
      > "$OUT/probe/run_${m}_$layout.log" 2>&1
    "$B/tools/ingot" run "$e" --iterations 20 --dump-profile --onnx "$w/$m.onnx" \
      --export-profile "$OUT/probe/profile_${m}_$layout.json" > "$OUT/probe/prof_${m}_$layout.log" 2>&1
    echo "== $m b1 ${PROBE_BUILD_FLAGS:---fp16} layout $layout: build cold $(tail -1 "$OUT/probe/build_${m}_${layout}_cold.log"), warm $(tail -1 "$OUT/probe/build_${m}_${layout}_warm.log")"
    grep -h -E "^(steps|layout|precision)" "$OUT/probe/build_${m}_${layout}_cold.log" | head -4
    grep -E "^GPU Compute Time|CUDA graph|^Latency" "$OUT/probe/run_${m}_$layout.log"
    awk '/^=== Profile/{p=1;next} p && $1 ~ /^[0-9]+$/ {print}' "$OUT/probe/prof_${m}_$layout.log" | sort -k8 -g -r | head -5
    if [ "${PROBE_NCU:-1}" = 1 ] && command -v ncu > /dev/null; then
      timeout 150 ncu --clock-control none --metrics gpu__time_duration.sum --csv --launch-skip 0 --launch-count 400 \
        "$B/tools/ingot" run "$e" --iterations 1 --warmup 0 > "$OUT/probe/ncu_${m}_$layout.csv" 2> "$OUT/probe/ncu_${m}_$layout.err"
      python3 - "$OUT/probe/ncu_${m}_$layout.csv" <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
if not rows:
    print("ncu: no rows"); sys.exit(0)
h = rows[0]; k = h.index("Kernel Name"); v = h.index("Metric Value"); u = h.index("Metric Unit")
per = collections.defaultdict(lambda: [0, 0.0])
for r in rows[1:]:
    try:
        t = float(r[v].replace(",", "")) * {"nsecond": 1e-3, "usecond": 1, "msecond": 1e3}.get(r[u], 1)
    except ValueError:
        continue
    per[r[k][:110]][0] += 1; per[r[k][:110]][1] += t
tot = sum(t for _, t in per.values())
print(f"ncu: {sum(n for n, _ in per.values())} kernels, {tot:.1f} us summed (one warm-less query, replayed each)")
for name, (n, t) in sorted(per.items(), key=lambda x: -x[1][1])[:25]:
    print(f"  {t:9.1f} us {n:4d}x  {name}")
PY
    fi
  done
done
