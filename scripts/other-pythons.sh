#!/usr/bin/env bash
# The tests that need no engine build, on each other Python mvp-tui supports (3.12, 3.13),
# with the versions uv.lock names for that Python: a venv per version (.venv-3.12, …) holding
# the `dev` and `docs` extras, found through pyenv, PATH or MVP_PYTHON_<MAJOR>_<MINOR>. A missing
# interpreter skips on a laptop and fails under CI (CI=true). Arguments go to pytest.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
# What runs on each: the command line, the config, the packaging and the records — the code a
# newer Python is most likely to break — without the engine, SSH or Docker peers.
tests=(tests/foundation tests/lease tests/datastream)
status=0
for version in 3.12 3.13; do
  var="MVP_PYTHON_${version/./_}"
  python=${!var:-}
  if [ -z "$python" ]; then
    python=$(ls -d "$HOME"/.pyenv/versions/"$version".*/bin/python3 2>/dev/null | sort -V | tail -1 || true)
  fi
  if [ -z "$python" ]; then python=$(command -v "python$version" || true); fi
  if [ -z "$python" ]; then
    echo "other-pythons: no Python $version (pyenv install $version, or set $var)" >&2
    case "${CI:-}" in 1|true|yes) status=1 ;; esac
    continue
  fi
  venv=".venv-$version"
  UV_PROJECT_ENVIRONMENT="$venv" ./scripts/uv.sh --cached-first sync --locked --quiet --python "$python" --extra dev --extra docs
  echo "other-pythons: $("$venv/bin/python" --version) in $venv" >&2
  MVP_TEST_LEAVE_OUT=engine "$venv/bin/python" -m pytest -q -n 2 -p no:cacheprovider "${tests[@]}" "$@" || status=1
done
exit $status
