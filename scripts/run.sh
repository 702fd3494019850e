#!/usr/bin/env bash
# Sets up everything the dashboard needs (including the local model engine) and opens it.
# With no arguments on a machine that is offline and holds no model yet, it opens the offline
# rehearsal instead (`mvp-tui rehearse`): the default model could not be downloaded.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
"$here/scripts/setup.sh" --keep local
if [ $# -eq 0 ] && [ -z "${MVP_GGUF_LOCAL_PATH:-}" ]; then
  cached=$(find "${MVP_MODEL_CACHE_DIR:-$HOME/.cache/mvp-node}" -name '*.gguf' -print -quit 2>/dev/null || true)
  if [ -z "$cached" ] && ! "$here/.venv/bin/python" - <<'PY' 2>/dev/null; then
import socket
socket.create_connection(("huggingface.co", 443), timeout=3).close()
PY
    echo "run.sh: offline and no model downloaded yet: opening the rehearsal (mvp-tui rehearse)." >&2
    echo "run.sh: run './scripts/run.sh --provider local' to open the dashboard anyway." >&2
    exec "$here/.venv/bin/mvp-tui" rehearse
  fi
fi
exec "$here/.venv/bin/mvp-tui" "$@"
