#!/usr/bin/env bash
# Sets up everything the dashboard needs (including the local model engine) and opens it.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
"$here/scripts/setup.sh" local
exec "$here/.venv/bin/mvp-tui" "$@"
