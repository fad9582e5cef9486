#!/usr/bin/env bash
# Copyright ingot authors. Apache-2.0.
# One device call for the Python API (issue 21) on the GPU machine, from packed binaries:
#   PACK_ARCHIVE=pypack PACK_PARTS="ingot gpu" PACK_PYTHON=1 bash bench/pack.sh build py      (here)
#   (cd build/pywhl && pip download --no-deps --only-binary=:all: --python-version 3.12 ... nanobind==3.1.0
#    pytest==9.2.0 pluggy iniconfig packaging pygments)                                       (here)
#   carry: build/pypack.tar.xz build/pywhl
#   [GTEST_FILTER_GPU='CudaEngine.*'] bash bench/python_part.sh NAME                          (there)
# The GPU machine's Python is 3.12 (ours is 3.11), so the _ingot extension is built there, with
# nanobind, against the packed libingot (its CMake package, patched to the packed protobuf-lite and
# pcre2 and the machine's cuDNN 9.19). Then: the GPU tests of the filter; tests/python under pytest
# (CUDA engines on torch tensors: the TensorRT-style scripts, ingot.compile); bench/python_overhead.py
# (ResNet-50 fp16 b1: the Python API's cost per call against `ingot run --cuda-graph`). Everything
# lands in $OUT/NAME.tgz; the overhead table prints last.
set -uo pipefail
name=$1
t=/tmp/py_$name
rm -rf "$t"; mkdir -p "$t"
tar xJf build/pypack.tar.xz -C build
P=$PWD/build/py
CUDNN=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib
export LD_LIBRARY_PATH=$CUDNN:$P/devlibs:${LD_LIBRARY_PATH:-}
export PYTHONUNBUFFERED=1
finish() {
  tar czf "$OUT/$name.tgz" --exclude='*.onnx' --exclude='*.engine' -C /tmp "py_$name"
  [ -f "$t/overhead.log" ] && sed -n '/^ResNet-50/,$p' "$t/overhead.log"
}
trap finish EXIT
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv > "$t/gpu.txt" 2>&1

# Pure-Python wheels (nanobind's sources and CMake files; pytest and its dependencies) unzipped.
python3 - "$t" <<'EOF'
import glob, sys, zipfile
for w in glob.glob("build/pywhl/*.whl"):
    zipfile.ZipFile(w).extractall("/tmp/pyx")
EOF
export PYTHONPATH=/tmp/pyx

$P/tests/ingot_gpu_tests --gtest_filter="${GTEST_FILTER_GPU:-CudaEngine.*}" > "$t/gpu_tests.log" 2>&1
echo "ingot_gpu_tests (${GTEST_FILTER_GPU:-CudaEngine.*}) rc $?: $(grep -E '^\[  (PASSED|FAILED) ' "$t/gpu_tests.log" | tr '\n' ' ')"
grep -E '^\[  FAILED  \]|Failure$' "$t/gpu_tests.log" | head -10

# The extension for this machine's Python.
pyinc=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
echo "python $(python3 -V 2>&1), headers $pyinc: $(ls "$pyinc/Python.h" 2>&1)"
cfg=$P/prefix/lib/cmake/ingot
sed -i '/find_dependency(Protobuf)/d' "$cfg/ingotConfig.cmake"
sed -i -e "s|protobuf::libprotobuf-lite|$P/devlibs/libprotobuf-lite.so.32|" \
  -e "s|/usr/lib/x86_64-linux-gnu/libpcre2-8.so|$P/devlibs/libpcre2-8.so.0|" \
  -e "s|/usr/local/cuda/lib/libcudnn.so|$CUDNN/libcudnn.so.9|" "$cfg/ingotTargets.cmake"
SECONDS=0
{ cmake -S python -B /tmp/pyb -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$P/prefix" \
    -DCUDAToolkit_ROOT=/usr/local/cuda -DPython_EXECUTABLE="$(command -v python3)" \
    -Dnanobind_DIR=/tmp/pyx/nanobind/cmake && ninja -C /tmp/pyb _ingot; } > "$t/ext_build.log" 2>&1
rc=$?
echo "extension build rc $rc in $SECONDS s"
if [ $rc != 0 ]; then tail -30 "$t/ext_build.log"; exit 1; fi
ninja -C /tmp/pyb -t commands _ingot | tail -1 > "$t/ext_link_command.txt"
echo "extension exports $(nm -D --defined-only /tmp/pyb/_ingot*.so | wc -l) symbols ($(nm -D --defined-only /tmp/pyb/_ingot*.so | grep -c '__once_proxy') __once_proxy)"
mkdir -p /tmp/pkg/ingot
cp python/ingot/*.py python/ingot/py.typed /tmp/pkg/ingot/
cp /tmp/pyb/_ingot*.so /tmp/pkg/ingot/
export PYTHONPATH=/tmp/pkg:/tmp/pyx
python3 -c "import ingot; print('import ingot', ingot.__version__, 'backend', ingot.default_backend())"

python3 -m pytest -q -rs -p no:cacheprovider tests/python --ingot "$P/tools/ingot" > "$t/pytest.log" 2>&1
echo "pytest tests/python rc $?: $(tail -1 "$t/pytest.log")"
grep -E "^(FAILED|ERROR|SKIPPED)" "$t/pytest.log" | head -20
grep -q "Fatal Python error" "$t/pytest.log" && grep -A25 "Fatal Python error" "$t/pytest.log" | grep -v "^Extension modules"

python3 bench/python_overhead.py --ingot "$P/tools/ingot" --work "$t/overhead" --out "$t" > "$t/overhead.log" 2>&1
echo "python_overhead rc $? after $SECONDS s"
grep -E "^(export|ingot build)" "$t/overhead.log"
grep -q "Fatal Python error" "$t/overhead.log" && grep -A25 "Fatal Python error" "$t/overhead.log" | grep -v "^Extension modules"
true
