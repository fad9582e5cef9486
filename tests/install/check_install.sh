#!/usr/bin/env bash
# Installs the build into a temporary prefix, builds a consumer with find_package(ingot) and
# runs it on a model.
set -euo pipefail
build=$1; src=$2; model=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
cmake -S "$src/tests/install/consumer" -B "$tmp/consumer" -G Ninja -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/consumer" >/dev/null
"$tmp/consumer/consumer" "$model"
test -x "$tmp/prefix/bin/ingot"
echo "install: find_package(ingot) consumer built and ran"
