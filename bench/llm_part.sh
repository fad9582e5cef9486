#!/usr/bin/env bash
# Copyright ingot authors. Apache-2.0.
# One device call for issue 22's GPU decoder: its GPU tests (kernels and the decoder against the CPU
# decoder), then decode throughput on random weights of a real model's shapes (default
# bench/llm/llama-3.2-1b.json, bf16) side by side with Hugging Face transformers' generate (static
# cache; eager, then as generate compiles it itself) in the same call: batch 1 and batch BN (default 64), IN prompt
# tokens (default 128) and OUT_LEN generated (default 128), greedy, no stop. Prints a table with
# tok/s, ratios and batch 1's share of the bandwidth limit (bytes of weights read per token /
# the GPU's peak: H100 3.35 TB/s, H200 4.3 TB/s as issue 22 states it).
#   here:  bash bench/pack.sh build dev        (carry build/devpack.tar.xz)
#   there: [CONFIG=bench/llm/llama-3.2-1b.json] [BN=64] [IN=128] [OUT_LEN=128] [HF=1] [COMPILE=1] [SERVE=0] [GEN=1] [TESTS=1] [VS_HF=0] [KV=4096] [QUANT=fp8|int4] [GEMV=0..8] [I4GEMM=N] [EXTRA='--decode-partition 512'] [PROFILE=1] [ALSO_ENV=INGOT_PDL=0] [ALSO_ARGS='--gemv-prologue;--gemv-k-split 2'] bash bench/llm_part.sh NAME
# (Llama-3.1-8B shapes at 256 concurrent: CONFIG=bench/llm/llama-3.1-8b.json BN=256 KV=6144)
# (GEMV=0: cuBLASLt for every step, the small-T GEMV off; the default is 8 tokens)
# (I4GEMM=N: int4 steps past the GEMV of up to N tokens run the W4A16 GEMM; default 0: they dequantize for cuBLASLt)
# (all of it may pass 600 s with a cold torch.compile: HF=0 or COMPILE=0 for a shorter call)
# Leaves $OUT/NAME.tgz (logs) and prints the summary last.
set -uo pipefail
. bench/part_env.sh llm "$1"
cfg=${CONFIG:-bench/llm/llama-3.2-1b.json}
bn=${BN:-64}
in=${IN:-128}
out=${OUT_LEN:-128}  # not OUT: the device sets OUT to its output folder
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$t/gpu.txt"
if [ "${GEN:-1}" = 1 ]; then  # GEN=0: only the serving run
  if [ "${TESTS:-1}" = 1 ]; then  # TESTS=0: the timings only (the tests ran earlier in the call)
    timeout 300 $B/tests/ingot_gpu_tests --gtest_filter='*Llm*' > "$t/gpu_tests.log" 2>&1
    echo "GPU tests (*Llm*): rc $? $(grep -E '^\[  (PASSED|FAILED)' "$t/gpu_tests.log" | tr '\n' ' ')"
    grep -E "gpu decoder \]|FAILED  \]" "$t/gpu_tests.log" | head -20
  fi
  for b in 1 "$bn"; do
    timeout 240 $B/tools/ingot generate "$cfg" --load-format dummy --backend cuda --dtype bf16 --num-prompts "$b" \
      --input-len "$in" --max-tokens "$out" --kv-blocks "${KV:-4096}" ${QUANT:+--quantization $QUANT} \
      ${GEMV:+--gemv-max-tokens $GEMV} ${I4GEMM:+--int4-gemm-max-tokens $I4GEMM} ${EXTRA:-} ${PROFILE:+--profile-decode} > "$t/ingot_b$b.log" 2>&1
    echo "ingot b$b: rc $? $(grep -E 'throughput|time ' "$t/ingot_b$b.log" | tr -s ' ' | tr '\n' ' ')"
    [ -n "${PROFILE:-}" ] && sed -n '/^decode step/,$p' "$t/ingot_b$b.log"
    if [ -n "${ALSO_ENV:-}${ALSO_ARGS:-}" ]; then  # the same run under other settings (ALSO_ENV=INGOT_PDL=0, ALSO_ARGS=--gemv-prologue)
      IFS=';' read -r -a alts <<< "${ALSO_ARGS:- }"  # ALSO_ARGS='--gemv-prologue;--gemv-k-split 2': one run each
      for i in "${!alts[@]}"; do
        alt=${alts[$i]}
        env ${ALSO_ENV:-} timeout 240 $B/tools/ingot generate "$cfg" --load-format dummy --backend cuda --dtype bf16 \
          --num-prompts "$b" --input-len "$in" --max-tokens "$out" --kv-blocks "${KV:-4096}" ${QUANT:+--quantization $QUANT} \
          ${GEMV:+--gemv-max-tokens $GEMV} $alt > "$t/ingot_b${b}_alt$i.log" 2>&1
        echo "ingot b$b with ${ALSO_ENV:-}$alt: rc $? $(grep -E 'throughput|time ' "$t/ingot_b${b}_alt$i.log" | tr -s ' ' | tr '\n' ' ')"
      done
    fi
  done
fi
if [ "${HF:-1}" = 1 ]; then
  # transformers' generate with a static cache compiles the decode step itself (torch.compile,
  # CUDA graphs): that is "hf compile"; disable_compile=True gives "hf eager" (COMPILE=0: eager only).
  timeout 420 python3 - "$cfg" "$bn" "$in" "$out" "${COMPILE:-1}" > "$t/hf.log" 2>&1 <<'PY'
import json, sys, time, torch, transformers
cfg_path, bn, n_in, n_out, compile_too = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5] == "1"
print("transformers", transformers.__version__, "torch", torch.__version__, flush=True)
cfg = transformers.LlamaConfig(**json.load(open(cfg_path)))
torch.manual_seed(0)
with torch.device("cuda"):
    m = transformers.LlamaForCausalLM(cfg).to(torch.bfloat16).eval()
m.generation_config.cache_implementation = "static"
m.generation_config.pad_token_id = 0
def run(b, label, **extra):
    ids = torch.randint(0, 1000, (b, n_in), device="cuda")
    kw = dict(max_new_tokens=n_out, min_new_tokens=n_out, do_sample=False, **extra)
    with torch.no_grad():
        m.generate(ids, **kw)  # warm-up (and compilation)
        torch.cuda.synchronize(); t0 = time.perf_counter()
        m.generate(ids, **kw)
        torch.cuda.synchronize(); dt = time.perf_counter() - t0
    print(f"hf {label} b{b}: {b * n_out / dt:.1f} output tok/s ({dt:.3f} s)", flush=True)
for b in (1, bn):
    run(b, "eager", disable_compile=True)
if compile_too:
    for b in (1, bn):
        run(b, "compile")
PY
  echo "hf: rc $?"; grep -E "^hf |^transformers" "$t/hf.log"; grep -E "Error|error" "$t/hf.log" | tail -3
fi
# VS_HF=1: issue 22's correctness check (bench/llm/vs_transformers.py): ingot against transformers on
# the same random weights, a 4-layer Llama-style config (64 prompts x 128 tokens, fp32 greedy and
# fp16/bf16 logits) and CONFIG's size (16 prompts, bf16/fp16 logits; fp32 on 2 prompts x 8 tokens).
if [ "${VS_HF:-0}" = 1 ]; then
  timeout 400 python3 bench/llm/vs_transformers.py --ingot $B/tools/ingot --config bench/llm/llama-tiny-4l.json \
    --out "$t/vs_tiny" > "$t/vs_tiny.log" 2>&1
  echo "vs transformers (llama-tiny-4l): rc $?"; sed -n '/^fp32 greedy/,$p' "$t/vs_tiny.log" | head -24
  timeout 400 python3 bench/llm/vs_transformers.py --ingot $B/tools/ingot --config "$cfg" --prompts 16 --tokens 32 \
    --fp32-prompts 2 --fp32-tokens 8 --out "$t/vs_cfg" > "$t/vs_cfg.log" 2>&1
  echo "vs transformers ($cfg): rc $?"; sed -n '/^fp32 greedy/,$p' "$t/vs_cfg.log" | head -24
  rm -rf "$t"/vs_*/model "$t"/vs_*/*.npy
fi
# SERVE=1: issue 22's serving figure: `ingot serve` on a random-weight Hugging Face folder of the same
# shapes (bench/llm/make_dummy_folder.py), SERVE_N requests of SERVE_IN / SERVE_OUT tokens (default
# 128 x 1000 / 1000) at concurrency SERVE_C (64), streamed (bench/serve_llm_bench.py: TTFT, TPOT,
# ITL p50/p99, output tok/s).
if [ "${SERVE:-0}" = 1 ]; then
  export LD_LIBRARY_PATH="$B/devlibs:$LD_LIBRARY_PATH"  # ingot-serve: prometheus-cpp, httplib, ...
  python3 bench/llm/make_dummy_folder.py "$cfg" "$t/folder" > "$t/folder.log" 2>&1 || tail -3 "$t/folder.log"
  timeout 400 python3 bench/serve_llm_bench.py --gguf "$t/folder" --ingot $B/tools/ingot --model dummy \
    --serve-flags "--backend cuda --dtype bf16 --kv-blocks 8192 --max-num-seqs ${SERVE_C:-64} --max-num-batched-tokens 2048" \
    --num-prompts "${SERVE_N:-128}" --concurrency "${SERVE_C:-64}" --input-len "${SERVE_IN:-1000}" \
    --output-len "${SERVE_OUT:-1000}" --vocab-high 10000 --out "$t/serve.json" > "$t/serve.log" 2>&1
  echo "serve: rc $?"; tail -8 "$t/serve.log"
  rm -rf "$t/folder"
fi
python3 - "$t" "$cfg" "$bn" <<'PY'
import json, re, sys, glob
t, cfg_path, bn = sys.argv[1], sys.argv[2], int(sys.argv[3])
c = json.load(open(cfg_path))
d, ff, L, V = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"], c["vocab_size"]
hd = c.get("head_dim", d // c["num_attention_heads"]); nq, nkv = c["num_attention_heads"] * hd, c["num_key_value_heads"] * hd
params = L * (d * nq + 2 * d * nkv + nq * d + 3 * d * ff) + V * d * (1 if c.get("tie_word_embeddings") else 2)
gpu = open(f"{t}/gpu.txt").read()
peak = 4.3e12 if "H200" in gpu else 3.35e12  # issue 22 states the H200 limit at 4.3 TB/s; H100 SXM 3.35
limit = peak / (2 * params)  # tok/s at batch 1 if every weight byte is read once per token
def tps(path, pat):
    try:
        m = re.search(pat, open(path).read())
        return float(m.group(1)) if m else None
    except OSError:
        return None
hf = open(f"{t}/hf.log").read() if glob.glob(f"{t}/hf.log") else ""
print(f"\n{params / 1e9:.2f}B parameters (bf16: {2 * params / 1e9:.2f} GB per token at batch 1); bandwidth limit {limit:.0f} tok/s at {peak / 1e12:.2f} TB/s")
print(f"{'batch':>6} {'ingot tok/s':>12} {'hf eager':>10} {'hf compile':>11} {'x eager':>8} {'x compile':>10} {'% of limit':>11}")
for b in (1, bn):
    ig = tps(f"{t}/ingot_b{b}.log", r"throughput\s+([\d.]+) output")
    he = (lambda m: float(m.group(1)) if m else None)(re.search(rf"hf eager b{b}: ([\d.]+)", hf))
    hc = (lambda m: float(m.group(1)) if m else None)(re.search(rf"hf compile b{b}: ([\d.]+)", hf))
    f = lambda x: f"{x:.1f}" if x else "-"
    r = lambda a, z: f"{a / z:.2f}" if a and z else "-"
    pct = f"{100 * ig / limit:.0f}%" if (ig and b == 1) else "-"
    print(f"{b:>6} {f(ig):>12} {f(he):>10} {f(hc):>11} {r(ig, he):>8} {r(ig, hc):>10} {pct:>11}")
PY
tar czf "$OUT/$name.tgz" -C /tmp "llm_$name"
