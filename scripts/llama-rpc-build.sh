#!/usr/bin/env bash
# Builds llama.cpp's `ggml-rpc-server` and `llama-server` (the multi-node engine, issue 15) from
# the llama.cpp source vendored in the pinned llama-cpp-python sdist, once, and caches them
# outside the repo under ~/.cache/mvp-tui/llama.cpp-<version>/bin/. A second run is a no-op.
# Runs niced: the build takes ~7 min of both cores on a 2-core machine.
# Usage: scripts/llama-rpc-build.sh [--print-dir]
set -euo pipefail
version=0.3.36
cache="${MVP_LLAMA_CACHE:-$HOME/.cache/mvp-tui}/llama.cpp-$version"
bin="$cache/bin"
if [ "${1:-}" = "--print-dir" ]; then echo "$bin"; exit 0; fi
if [ -x "$bin/ggml-rpc-server" ] && [ -x "$bin/llama-server" ]; then
  echo "llama-rpc-build: cached in $bin"
  exit 0
fi
if ! command -v cmake >/dev/null || ! command -v g++ >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q cmake g++ make >/dev/null
  fi
fi
for tool in cmake g++; do
  command -v "$tool" >/dev/null || { echo "llama-rpc-build: $tool missing; install it (apt-get install cmake g++)" >&2; exit 1; }
done
python="${PYTHON:-python3}"
work=$(mktemp -d "${TMPDIR:-/tmp}/llama-rpc-build.XXXXXX")
trap 'rm -rf "$work"' EXIT
"$python" -m pip download --quiet --no-deps --no-binary :all: --dest "$work" "llama-cpp-python==$version"
tar -xzf "$work"/llama_cpp_python-"$version".tar.gz -C "$work"
src="$work/llama_cpp_python-$version/vendor/llama.cpp"
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
nice -n 19 cmake -S "$src" -B "$work/build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DGGML_RPC=ON -DLLAMA_BUILD_SERVER=ON -DGGML_NATIVE=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF >/dev/null
nice -n 19 cmake --build "$work/build" --target ggml-rpc-server llama-server -j "${JOBS:-2}"
# Install atomically: a half-copied cache must never look complete.
mkdir -p "$cache"
staging=$(mktemp -d "$cache/bin.XXXXXX")
cp "$work/build/bin/ggml-rpc-server" "$work/build/bin/llama-server" "$staging/"
rm -rf "$bin"
mv "$staging" "$bin"
echo "llama-rpc-build: built into $bin"
