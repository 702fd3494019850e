#!/usr/bin/env bash
# Create .venv-vastai holding the official `vastai` CLI, pinned, for the contract test
# (tests/vastai/test_contract_cli.py). It lives apart from .venv because vastai 1.9.1 pins
# cryptography==49, which would downgrade the project's own. Idempotent: an existing venv
# with the pinned version is left alone. Prints how long it took.
set -euo pipefail
VASTAI_VERSION="1.9.1"
here=$(cd "$(dirname "$0")/.." && pwd)
venv="${VASTAI_VENV:-$here/.venv-vastai}"
python="${PYTHON:-python3}"
start=$EPOCHREALTIME

if [ -x "$venv/bin/vastai" ] \
    && [ "$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("vastai"))' 2>/dev/null)" = "$VASTAI_VERSION" ]; then
    echo "vastai-cli-venv: $venv already has vastai $VASTAI_VERSION"
    exit 0
fi

rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "vastai==$VASTAI_VERSION"
VASTAI_NO_UPDATE_CHECK=1 "$venv/bin/vastai" --help >/dev/null

awk -v s="$start" -v e="$EPOCHREALTIME" -v v="$venv" -v n="$VASTAI_VERSION" \
    'BEGIN { printf "vastai-cli-venv: created %s with vastai %s in %.1f s\n", v, n, e - s }'
