#!/usr/bin/env bash
# The whole check, as CI runs it: set-up from uv.lock, peers, lint, types, the docs site, then
# the test suite (pytest, 3 workers: most tests wait on subprocesses and sockets, so a third
# worker uses 2 cores better: 554 s against 768 s with 2 here; work stealing keeps the last
# minute from waiting on one worker's queue: 564 s against 636 s in two runs of the same tree).
# The whole check (no arguments) first runs the tests that need no engine build on Python 3.12
# and 3.13 (scripts/other-pythons.sh, ~75 s); the wheel installed as a CLI app is a test of the
# suite (tests/foundation/test_installed_wheel.py). Arguments go to pytest.
#
# MVP_TEST_VENV names another venv to test with, set up by the caller (scripts/deps-latest.sh:
# the newest versions pyproject's ranges allow); the locked set-up is then skipped.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
venv=${MVP_TEST_VENV:-.venv}
if [ -z "${MVP_TEST_VENV:-}" ]; then
  ./scripts/setup.sh dev local docs
fi
export MVP_TEST_VENV=$venv
./scripts/peers.sh
# A private dockerd for this session only (scripts/dockerd.sh: no bridge, no iptables); the
# Docker tests get its socket as MVP_TEST_DOCKER_HOST. Stopped however this script ends.
MVP_TEST_DOCKERD_DIR=""
trap '[ -z "$MVP_TEST_DOCKERD_DIR" ] || ./scripts/dockerd.sh stop "$MVP_TEST_DOCKERD_DIR"' EXIT
eval "$(./scripts/dockerd.sh start)"
"$venv/bin/ruff" check .
MYPY="$here/$venv/bin/mypy" ./scripts/typecheck.sh
# The docs site (mkdocs.yml): a broken link or anchor, or a page outside the nav, fails here.
NO_MKDOCS_2_WARNING=1 "$venv/bin/mkdocs" build --quiet --strict --site-dir build/site
if [ $# -eq 0 ] && [ "$venv" = .venv ]; then  # the whole check, not one test picked by hand
  ./scripts/other-pythons.sh
fi
"$venv/bin/python" -m pytest -n 3 --dist worksteal -p no:cacheprovider "$@"
