# Copyright ingot authors. Apache-2.0.
# Sourced by a device call's part script (bench/*_part.sh) after `set -uo pipefail`, with the part's
# folder name prefix: `. bench/part_env.sh quant "$1"`. Sets name and t (/tmp/PREFIX_NAME, emptied),
# unpacks the carried build/devpack.tar.xz (unless SKIP_UNPACK=1), puts PyTorch's cuDNN 9.19 (the one
# the binaries were built against) first on the library path, and B=build/dev.
name=$2
t=/tmp/$1_$name
rm -rf "$t"; mkdir -p "$t"
[ "${SKIP_UNPACK:-0}" = 1 ] || tar xJf build/devpack.tar.xz -C build
export LD_LIBRARY_PATH=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:${LD_LIBRARY_PATH:-}
export PYTHONUNBUFFERED=1
B=build/dev
