#!/usr/bin/env bash
# Copyright ingot authors. Apache-2.0.
# Packs the stripped binaries a GPU run needs (ingot, ingot-serve, the GPU tests, the conformance runner, the
# server tests and their shared libraries) from a CUDA build folder into build/<name>/, for the
# device tool to carry as one archive:
#   bash bench/pack.sh build dev [devmain ...]   -> build/devpack.tar.xz holding build/dev, ...
#   there: tar xJf build/devpack.tar.xz -C build; B=build/dev bash bench/device.sh
# With several names, the first is packed from the build folder now and the others must have been
# packed before (bench/pack.sh --keep build devmain packs one without making the archive).
# PACK_ARCHIVE names the archive (default devpack). PACK_PARTS (default "ingot serve gpu
# conformance server") picks what goes in; PACK_PYTHON=1 adds libingot installed (<name>/prefix: the static library, headers, CMake package) for building the
# Python extension on the GPU machine, whose Python (3.12) is not ours (bench/python_part.sh).
set -euo pipefail
parts=" ${PACK_PARTS:-ingot serve gpu conformance server} "
keep=0
if [ "${1:-}" = --keep ]; then keep=1; shift; fi
src=$1; shift
name=$1; shift
d=build/$name
rm -rf "$d"; mkdir -p "$d/tests/server" "$d/tools"
has() { [[ "$parts" == *" $1 "* ]]; }
if has ingot; then strip -o "$d/tools/ingot" "$src/tools/ingot"; fi
if has serve; then strip -o "$d/tools/ingot-serve" "$src/tools/ingot-serve"; fi  # `ingot serve` runs it from the same folder
if has gpu; then strip -o "$d/tests/ingot_gpu_tests" "$src/tests/ingot_gpu_tests"; fi
if has conformance; then strip -o "$d/tests/conformance_runner" "$src/tests/conformance_runner"; fi
if has server; then
  strip -o "$d/tests/server/ingot_server_tests" "$src/tests/server/ingot_server_tests"
  bash bench/collect_libs.sh "$src/tests/server/ingot_server_tests" "$d/devlibs" > /dev/null
fi
if has serve; then bash bench/collect_libs.sh "$src/tools/ingot-serve" "$d/devlibs" > /dev/null; fi
if [ "${PACK_PYTHON:-0}" = 1 ]; then
  cmake --install "$src" --prefix "$d/prefix" > /dev/null
  strip --strip-debug "$d/prefix/lib/libingot.a"
  rm -rf "$d/prefix/bin"
  bash bench/collect_libs.sh "$src/tools/ingot" "$d/devlibs" > /dev/null  # protobuf-lite, pcre2
fi
[ "$keep" = 1 ] && exit 0
archive=build/${PACK_ARCHIVE:-devpack}.tar.xz
tar cJf "$archive" -C build "$name" "$@"
ls -la "$archive"
# The device tool carries at most 64 MiB per call, the working tree (~8 MB) included.
size=$(stat -c %s "$archive")
if [ "$size" -gt $((54 * 1024 * 1024)) ]; then
  echo "pack.sh: $archive is $((size / 1024 / 1024)) MiB; with the tree it may pass the device tool's 64 MiB." \
       "For the census and the LLM runs PACK_PARTS=\"ingot gpu\" is enough (~22 MB)." >&2
fi
