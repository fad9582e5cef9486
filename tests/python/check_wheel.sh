#!/usr/bin/env bash
# The Python package as users get it: installs the build into a temporary prefix, builds the
# wheel with scikit-build-core against it (python/pyproject.toml), installs the wheel into a
# temporary target and imports it there: `ingot.__version__` must match `ingot --version`.
set -euo pipefail
build=$1; src=$2; py=${3:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
"$py" -m pip wheel -q --no-build-isolation --no-deps "$src/python" -w "$tmp/wheel" \
  -C cmake.define.CMAKE_PREFIX_PATH="$tmp/prefix" -C build-dir="$tmp/skbuild" >"$tmp/wheel.log" 2>&1 ||
  { tail -40 "$tmp/wheel.log"; exit 1; }
whl=$(ls "$tmp"/wheel/ingot-*.whl)
"$py" -m pip install -q --no-deps --target "$tmp/site" "$whl"
got=$(cd "$tmp" && PYTHONPATH="$tmp/site" "$py" -c "import ingot; print(ingot.__version__)")
want=$("$build/tools/ingot" --version | awk '{print $2}')
[ "$got" = "$want" ] || { echo "wheel: ingot.__version__ $got, ingot --version $want"; exit 1; }
echo "wheel: $(basename "$whl") builds, installs and imports (version $got)"
