#!/usr/bin/env bash
# Creates .venv with exactly the versions uv.lock names (`uv sync --locked`), mvp-tui installed
# into it (editable), with the extras named as arguments (e.g. `local`, `dev`).
#   --keep     keep what is installed beyond those extras (scripts/run.sh: a developer's dev
#              tools stay); without it the venv is made exactly the lock's extras.
#   --relock   refresh uv.lock: the newest versions within pyproject.toml's ranges.
# Idempotent: a second run checks the venv against the lock in well under a second.
#
# `--locked` fails when pyproject.toml and uv.lock disagree, so a range changed without a new
# lock is caught here and in CI. uv (scripts/uv.sh: pinned, checked by sha256) checks every
# package against the lock's sha256, the llama-cpp-python sdist included.
#
# The `local` extra builds llama.cpp (llama-cpp-python[server]) from source: about 3.5 to 6
# minutes on 2 cores the first time; uv keeps the wheel in its cache (~/.cache/uv), so later
# installs take seconds (scripts/uv.sh sets the CMAKE_ARGS of a portable build).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
python=${PYTHON:-python3}
uv=./scripts/uv.sh
if [ "${1:-}" = "--relock" ]; then
  exec "$uv" lock --upgrade --python "$python"
fi
inexact=()
if [ "${1:-}" = "--keep" ]; then inexact=(--inexact); shift; fi
extras=()
for extra in "$@"; do extras+=(--extra "$extra"); done
if [ -d .venv ] && [ ! -x .venv/bin/python ]; then rm -rf .venv; fi
case " $* " in
  *" local "*) [ -d .venv ] || echo "setup: installing from uv.lock (a first llama.cpp build takes 3-6 min)…" >&2 ;;
esac
"$uv" --cached-first sync --locked --quiet --python "$python" "${inexact[@]}" "${extras[@]}"
