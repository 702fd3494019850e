#!/usr/bin/env bash
# Runs the pinned uv with the arguments given, installing it first if needed: once, checked by
# sha256 (scripts/uv-requirements.txt), in a cache outside the repo keyed by its version.
# uv never downloads an interpreter here: venvs are made with the Pythons this machine has.
#
#   scripts/uv.sh --cached-first ARGS   try `uv ARGS --offline` first, then online: for
#   installs of exactly what uv.lock names (its sha256s make a cached file as good as a fresh
#   one). Some registries answer every revalidation of a file as modified, and uv then builds
#   llama.cpp again (4+ min) for each new venv; from its cache the same install takes 0.4 s.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
uv_version=0.13.9  # and in scripts/uv-requirements.txt
uv_home="${MVP_UV_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/mvp-tui/uv-$uv_version}"
if [ ! -x "$uv_home/bin/uv" ]; then
  rm -rf "$uv_home"
  "${PYTHON:-python3}" -m venv "$uv_home"
  # pip's own notes (this machine's extra wheel folders) are shown only if it fails.
  if ! log=$("$uv_home/bin/python" -m pip install -q --disable-pip-version-check \
      --require-hashes -r "$here/scripts/uv-requirements.txt" 2>&1); then
    echo "$log" >&2; rm -rf "$uv_home"; exit 1
  fi
fi
export UV_PYTHON_DOWNLOADS=never UV_NO_PROGRESS=1
# Whatever uv builds llama.cpp for (set-up, deps-latest, the wheel check): a portable build (no
# -march=native) without the multimodal parts, tests and tools the server does not need.
export CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF}"
if [ "${1:-}" = "--cached-first" ]; then
  shift
  if "$uv_home/bin/uv" "$@" --offline 2>/dev/null; then exit 0; fi
fi
exec "$uv_home/bin/uv" "$@"
