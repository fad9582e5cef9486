#!/usr/bin/env bash
# Copyright ingot authors. Apache-2.0.
# Copies the shared libraries a binary built here needs beyond glibc, libstdc++ and CUDA (gRPC,
# abseil, protobuf, cpp-httplib, prometheus-cpp, OpenSSL, ...) into a folder that the device tool
# can carry, for running ingot-serve on the GPU machine, which has none of them:
#   bash bench/collect_libs.sh build-cuda/tools/ingot-serve build-cuda/devlibs
#   (carry build-cuda/tools/ingot-serve, build-cuda/tools/ingot, build-cuda/devlibs; there:
#    export LD_LIBRARY_PATH=$PWD/build-cuda/devlibs:$LD_LIBRARY_PATH)
set -euo pipefail
bin=$1
dest=$2
mkdir -p "$dest"
ldd "$bin" | awk '/=>/ {print $3}' |
  grep -vE '/(libc|libm|libpthread|libdl|librt|libstdc\+\+|libgcc_s|ld-linux[^/]*|libcuda|libcublas[^/]*|libcudnn[^/]*|libnvrtc[^/]*|libcudart)\.so' |
  while read -r lib; do cp -L "$lib" "$dest/"; done
echo "$(ls "$dest" | wc -l) libraries, $(du -sh "$dest" | cut -f1) in $dest"
