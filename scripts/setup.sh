#!/usr/bin/env bash
# Creates .venv and installs mvp-tui into it (editable), with the extras named as arguments
# (e.g. `local`, `dev`). Idempotent: a second run only installs what changed.
#
# The `local` extra builds llama.cpp (llama-cpp-python[server]) from source: about 3.5 to 6
# minutes on 2 cores the first time; pip keeps the wheel in its cache, so later installs take
# seconds. CMAKE_ARGS below make a portable build (no -march=native) without the multimodal
# parts the server does not need.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
python=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$python" -m venv .venv
fi
extras=$(IFS=,; echo "$*")
spec="."
[ -n "$extras" ] && spec=".[$extras]"
export CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF}"
stamp=.venv/.mvp-installed
want="$(sha256sum pyproject.toml | cut -c1-16) $spec"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  case "$spec" in *local*) echo "setup: installing $spec (a first llama.cpp build takes 3-6 min)…" >&2 ;; esac
  .venv/bin/python -m pip install -q --disable-pip-version-check -e "$spec"
  echo "$want" > "$stamp"
fi
