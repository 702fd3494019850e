#!/usr/bin/env bash
# The whole check on the newest versions pyproject.toml's ranges allow today, not on the lock's:
# drift is found on purpose, before a relock (`scripts/setup.sh --relock`) or a user's own
# `pip install mvp-tui` meets it. Builds .venv-latest from the ranges alone, prints each
# package whose version differs from uv.lock, then runs scripts/test.sh in that venv.
# Arguments go to pytest.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
python=${PYTHON:-python3}
uv=./scripts/uv.sh
venv=.venv-latest
rm -rf "$venv"
"$uv" venv --quiet --python "$python" "$venv"
"$uv" pip install --quiet --python "$venv/bin/python" --resolution highest -e ".[dev,local,docs]"
echo "deps-latest: versions that differ from uv.lock:"
"$venv/bin/python" - <<'PY'
import importlib.metadata as md, re, tomllib
norm = lambda n: re.sub(r"[-_.]+", "-", n).lower()
locked = {}
for pkg in tomllib.load(open("uv.lock", "rb"))["package"]:
    locked.setdefault(norm(pkg["name"]), set()).add(pkg.get("version", ""))
for dist in sorted(md.distributions(), key=lambda d: norm(d.metadata["Name"])):
    name = norm(dist.metadata["Name"])
    if name != "mvp-tui" and dist.version not in locked.get(name, set()):
        print(f"  {name} {'/'.join(sorted(locked.get(name, {'(not locked)'})))} -> {dist.version}")
PY
MVP_TEST_VENV=$venv exec ./scripts/test.sh "$@"
