#!/usr/bin/env bash
# Builds llama.cpp's `ggml-rpc-server` and `llama-server` (the multi-node engine, issue 15) from
# the llama.cpp source vendored in the pinned llama-cpp-python sdist, once, and caches them
# outside the repo under ~/.cache/mvp-tui/llama.cpp-<version>/bin/. A second run is a no-op.
# The sdist is checked against the sha256 that uv.lock names for it before it is unpacked.
# Runs niced: the build takes ~7 min of both cores on a 2-core machine.
# Usage: scripts/llama-rpc-build.sh [--print-dir]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
version=0.3.36
cache="${MVP_LLAMA_CACHE:-$HOME/.cache/mvp-tui}/llama.cpp-$version"
bin="$cache/bin"
if [ "${1:-}" = "--print-dir" ]; then echo "$bin"; exit 0; fi
# One build at a time per cache: a second caller (another checkout's peers.sh) waits for the
# first one's result instead of building the same binaries beside it.
mkdir -p "$(dirname "$cache")"
exec 9>"$cache.lock"
flock 9
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
want=$("$python" - "$here/uv.lock" "$version" <<'PY'
import sys, tomllib
lock = tomllib.load(open(sys.argv[1], "rb"))
(pkg,) = [p for p in lock["package"] if p["name"] == "llama-cpp-python" and p["version"] == sys.argv[2]]
print(pkg["sdist"]["hash"].removeprefix("sha256:"))
PY
)
"$python" -m pip download --quiet --no-deps --no-binary :all: --dest "$work" "llama-cpp-python==$version"
sdist="$work/llama_cpp_python-$version.tar.gz"
got=$(sha256sum "$sdist" | cut -d' ' -f1)
if [ "$got" != "$want" ]; then
  echo "llama-rpc-build: $sdist has sha256 $got, uv.lock names $want: refusing to build it" >&2
  exit 1
fi
tar -xzf "$sdist" -C "$work"
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
