#!/usr/bin/env bash
# The whole check, as CI runs it: set-up, peers, lint, types, then the test suite
# (pytest, 2 workers). Arguments go to pytest.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
./scripts/setup.sh dev local
./scripts/peers.sh
.venv/bin/ruff check .
./scripts/typecheck.sh
exec .venv/bin/python -m pytest -n 2 -p no:cacheprovider "$@"
