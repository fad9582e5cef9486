#!/usr/bin/env bash
# Copyright ingot authors. Apache-2.0.
# Packs the stripped binaries a GPU run needs (ingot, ingot-serve, the GPU tests, the conformance runner, the
# server tests and their shared libraries) from a CUDA build folder into build/<name>/, for the
# device tool to carry as one archive:
#   bash bench/pack.sh build dev [devmain ...]   -> build/devpack.tar.xz holding build/dev, ...
#   there: tar xJf build/devpack.tar.xz -C build; B=build/dev bash bench/device.sh
# With several names, the first is packed from the build folder now and the others must have been
# packed before (bench/pack.sh --keep build devmain packs one without making the archive).
set -euo pipefail
keep=0
if [ "${1:-}" = --keep ]; then keep=1; shift; fi
src=$1; shift
name=$1; shift
d=build/$name
rm -rf "$d"; mkdir -p "$d/tests/server" "$d/tools"
strip -o "$d/tools/ingot" "$src/tools/ingot"
strip -o "$d/tools/ingot-serve" "$src/tools/ingot-serve"  # `ingot serve` runs it from the same folder
strip -o "$d/tests/ingot_gpu_tests" "$src/tests/ingot_gpu_tests"
strip -o "$d/tests/conformance_runner" "$src/tests/conformance_runner"
strip -o "$d/tests/server/ingot_server_tests" "$src/tests/server/ingot_server_tests"
bash bench/collect_libs.sh "$src/tests/server/ingot_server_tests" "$d/devlibs" > /dev/null
bash bench/collect_libs.sh "$src/tools/ingot-serve" "$d/devlibs" > /dev/null
[ "$keep" = 1 ] && exit 0
tar cJf build/devpack.tar.xz -C build "$name" "$@"
ls -la build/devpack.tar.xz
