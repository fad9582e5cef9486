#!/usr/bin/env bash
# Runs every CPU test: unit tests, the ONNX node conformance suite (on the interpreter and
# through engines), whole models against onnxruntime, the CLI end to end, the install /
# find_package check, and 60 s each of fuzzing the ONNX importer, the engine loader, the
# server's infer-request parser and its gRPC request conversion, the GGUF and safetensors
# readers, the tokenizer.json reader and the chat-template interpreter.
# GPU tests (ctest label "gpu") skip themselves without a GPU.
# Usage: scripts/test.sh        (expects scripts/setup.sh to have built ./build)
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZ_SECONDS=${FUZZ_SECONDS:-60}

cmake --build build -j "$(nproc)"

# The importer fuzz target: its own clang build with ASan + libFuzzer coverage.
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
  -DCMAKE_CXX_COMPILER=clang++ -DINGOT_FUZZ=ON -DINGOT_CUDA=OFF -DINGOT_BUILD_TESTS=OFF -DINGOT_BUILD_TOOLS=OFF \
  -DPython3_EXECUTABLE="$(command -v python3)" >/dev/null
cmake --build build-fuzz -j "$(nproc)" --target fuzz_onnx_importer fuzz_engine_loader fuzz_infer_request fuzz_grpc_request fuzz_gguf fuzz_safetensors fuzz_tokenizer fuzz_jinja

# run_fuzzer TARGET CORPUS MAX_LEN LOG WHAT: FUZZ_SECONDS of libFuzzer on TARGET; a crash or memory
# error fails the run (the input is saved under build-fuzz/), UBSan reports are counted.
export UBSAN_OPTIONS=halt_on_error=0:print_stacktrace=1
run_fuzzer() {
  local target=$1 corpus=$2 max_len=$3 log=$4 what=$5
  if ! "build-fuzz/tests/fuzz/$target" "$corpus" -max_total_time="$FUZZ_SECONDS" -max_len="$max_len" \
    -rss_limit_mb=4096 -timeout=10 -print_final_stats=1 -artifact_prefix=build-fuzz/ > "$log" 2>&1; then
    tail -n 60 "$log"
    echo "fuzz: the $what fuzzer found a crash or memory error (input saved under build-fuzz/)"
    exit 1
  fi
  tail -n 6 "$log"
  echo "fuzz: $what, no crash or memory error in ${FUZZ_SECONDS}s; undefined-behaviour reports: $(grep -c 'runtime error' "$log")"
  grep -m 5 'runtime error' "$log" || true
}

# Fuzzing: seed corpus = the ONNX node conformance models.
python3 tests/conformance/generate_node_data.py -o build-fuzz/onnx-node-tests >/dev/null
corpus=build-fuzz/corpus
rm -rf "$corpus" && mkdir -p "$corpus"
i=0
for m in build-fuzz/onnx-node-tests/node/*/model.onnx tests/fuzz/regressions/importer_*; do
  cp "$m" "$corpus/seed_$i.onnx"; i=$((i + 1))
done
echo "fuzz: $i seed models, ${FUZZ_SECONDS}s"
run_fuzzer fuzz_onnx_importer "$corpus" 65536 build-fuzz/importer.log "importer"

# The engine loader: seeds are small engines written by the unit tests.
ecorpus=build-fuzz/engine-corpus
rm -rf "$ecorpus" && mkdir -p "$ecorpus"
INGOT_ENGINE_SEEDS_DIR="$ecorpus" build/tests/ingot_unit_tests --gtest_filter=EngineFormat.WriteFuzzSeeds >/dev/null
echo "fuzz: engine loader, $(ls "$ecorpus" | wc -l) seed engines, ${FUZZ_SECONDS}s"
run_fuzzer fuzz_engine_loader "$ecorpus" 262144 build-fuzz/engine.log "engine loader"

# The KServe v2 request parser of `ingot serve`: seeds are small JSON and binary-tensor requests.
rcorpus=build-fuzz/request-corpus
rm -rf "$rcorpus" && mkdir -p "$rcorpus"
python3 - "$rcorpus" <<'PY'
import json, os, struct, sys
d = sys.argv[1]
seeds = {
    "json": {"id": "a", "inputs": [{"name": "x", "shape": [2, 3], "datatype": "FP32", "data": [[1, 2, 3], [4, 5, 6]]},
                                   {"name": "k", "shape": [2, 2], "datatype": "INT64", "data": [1, -2, 3, 4]}],
             "outputs": [{"name": "y", "parameters": {"binary_data": True}}]},
    "types": {"inputs": [{"name": "b", "shape": [3], "datatype": "BOOL", "data": [True, False, True]},
                         {"name": "u", "shape": [1], "datatype": "UINT8", "data": [255]}],
              "parameters": {"binary_data_output": True, "timeout": 100}},
}
for name, doc in seeds.items():
    open(os.path.join(d, name), "wb").write(json.dumps(doc).encode())
head = json.dumps({"inputs": [{"name": "x", "shape": [1, 2], "datatype": "FP32",
                               "parameters": {"binary_data_size": 8}}]}).encode()
# First byte >= 0x80: the next two bytes are Inference-Header-Content-Length (see the target).
open(os.path.join(d, "binary"), "wb").write(b"\x80" + struct.pack("<H", len(head)) + head + b"abcdefgh")
PY
cp tests/fuzz/regressions/request_* "$rcorpus/" 2>/dev/null || true
echo "fuzz: infer request parser, $(ls "$rcorpus" | wc -l) seeds, ${FUZZ_SECONDS}s"
run_fuzzer fuzz_infer_request "$rcorpus" 16384 build-fuzz/request.log "infer request parser"

# The gRPC endpoint's request conversion: seeds are serialized ModelInferRequests (raw, typed and
# shared-memory inputs), written with tritonclient's generated messages.
gcorpus=build-fuzz/grpc-corpus
rm -rf "$gcorpus" && mkdir -p "$gcorpus"
python3 - "$gcorpus" <<'PY'
import os, struct, sys
from tritonclient.grpc import service_pb2 as pb
d = sys.argv[1]
raw = pb.ModelInferRequest(model_name="m", id="raw")
raw.inputs.add(name="x", datatype="FP32", shape=[1, 2])
raw.inputs.add(name="k", datatype="INT64", shape=[1, 2])
raw.raw_input_contents.extend([struct.pack("<2f", 1, 2), struct.pack("<2q", 3, -4)])
raw.outputs.add(name="y")
typed = pb.ModelInferRequest(model_name="m")
t = typed.inputs.add(name="x", datatype="FP32", shape=[2, 1])
t.contents.fp32_contents.extend([0.5, -1.5])
b = typed.inputs.add(name="b", datatype="BOOL", shape=[2])
b.contents.bool_contents.extend([True, False])
typed.parameters["timeout"].int64_param = 100
shm = pb.ModelInferRequest(model_name="m")
s = shm.inputs.add(name="x", datatype="FP16", shape=[1, 4])
s.parameters["shared_memory_region"].string_param = "r"
s.parameters["shared_memory_byte_size"].int64_param = 8
s.parameters["shared_memory_offset"].int64_param = 16
k = shm.inputs.add(name="k", datatype="INT64", shape=[1, 2])
shm.raw_input_contents.append(struct.pack("<2q", 1, 2))
o = shm.outputs.add(name="y")
o.parameters["shared_memory_region"].string_param = "r"
o.parameters["shared_memory_byte_size"].uint64_param = 64
for name, m in {"raw": raw, "typed": typed, "shm": shm}.items():
    open(os.path.join(d, name), "wb").write(m.SerializeToString())
PY
echo "fuzz: grpc request conversion, $(ls "$gcorpus" | wc -l) seeds, ${FUZZ_SECONDS}s"
run_fuzzer fuzz_grpc_request "$gcorpus" 16384 build-fuzz/grpc.log "grpc request conversion"

# The GGUF reader: seeds are small GGUF files written by llama.cpp's gguf package.
gguf_corpus=build-fuzz/gguf-corpus
rm -rf "$gguf_corpus" build-fuzz/gguf-cases && mkdir -p "$gguf_corpus"
python3 tests/llm/make_gguf_cases.py -o build-fuzz/gguf-cases >/dev/null
cp build-fuzz/gguf-cases/cases.gguf "$gguf_corpus/seed_cases.gguf"
head -c 4096 build-fuzz/gguf-cases/cases.gguf > "$gguf_corpus/seed_head.gguf"
echo "fuzz: GGUF reader, $(ls "$gguf_corpus" | wc -l) seeds, ${FUZZ_SECONDS}s"
run_fuzzer fuzz_gguf "$gguf_corpus" 65536 build-fuzz/gguf.log "GGUF reader"

# The safetensors reader: seeds are Hugging Face safetensors files written by its own package.
st_corpus=build-fuzz/safetensors-corpus
rm -rf "$st_corpus" && mkdir -p "$st_corpus"
cp build-fuzz/gguf-cases/st_single/model.safetensors "$st_corpus/seed_single.safetensors"
cp build-fuzz/gguf-cases/st_sharded/model-00001-of-00002.safetensors "$st_corpus/seed_shard.safetensors"
echo "fuzz: safetensors reader, $(ls "$st_corpus" | wc -l) seeds, ${FUZZ_SECONDS}s"
run_fuzzer fuzz_safetensors "$st_corpus" 65536 build-fuzz/safetensors.log "safetensors reader"

# The tokenizer.json reader: seeds are two small hand-written tokenizer.json files and the
# regressions.
tok_corpus=build-fuzz/tokenizer-corpus
rm -rf "$tok_corpus" && mkdir -p "$tok_corpus"
printf '%s' '{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "\u0120": 3, "\u0120ab": 4, "1": 5},
 "merges": ["a b", ["\u0120", "ab"]]}, "added_tokens": [{"id": 6, "content": "<s>"}, {"id": 7, "content": "</s>"}],
 "normalizer": null, "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true}}' \
  > "$tok_corpus/seed_bytelevel.json"
printf '%s' '{"model": {"type": "BPE", "ignore_merges": true, "vocab": {"a": 0, "b": 1, "ab": 2, "1": 3, "2": 4},
 "merges": ["a b"]}, "added_tokens": [{"id": 5, "content": "<s>"}], "pre_tokenizer": {"type": "Sequence",
 "pretokenizers": [{"type": "Digits", "individual_digits": true}, {"type": "Split", "pattern": {"Regex":
 "\\p{L}+|\\p{N}{1,3}|\\s+"}, "behavior": "Isolated", "invert": false}, {"type": "ByteLevel", "use_regex": false}]}}' \
  > "$tok_corpus/seed_sequence.json"
cp tests/fuzz/regressions/tokenizer_* "$tok_corpus/"  # inputs that once crashed it
echo "fuzz: tokenizer.json reader, $(ls "$tok_corpus" | wc -l) seeds, ${FUZZ_SECONDS}s"
run_fuzzer fuzz_tokenizer "$tok_corpus" 16384 build-fuzz/tokenizer.log "tokenizer.json reader"

# The chat-template interpreter: seeds are the real models' templates the jinja2 cross-check renders.
jinja_corpus=build-fuzz/jinja-corpus
rm -rf "$jinja_corpus" && mkdir -p "$jinja_corpus"
python3 - "$jinja_corpus" <<'PY'
import os, sys
sys.path.insert(0, "tests/llm")
from test_chat_templates import TEMPLATES
for name, text in TEMPLATES.items():
    open(os.path.join(sys.argv[1], f"seed_{name}.jinja"), "w").write(text)
PY
echo "fuzz: chat-template interpreter, $(ls "$jinja_corpus" | wc -l) seeds, ${FUZZ_SECONDS}s"
run_fuzzer fuzz_jinja "$jinja_corpus" 16384 build-fuzz/jinja.log "chat-template interpreter"

ctest --test-dir build --output-on-failure -j "$(nproc)"
