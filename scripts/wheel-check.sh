#!/usr/bin/env bash
# mvp-tui installed as CLI apps are installed (`pipx install`, `uv tool install`): the sdist
# and the wheel are built from this checkout, the wheel (with the `local` extra, at the versions
# uv.lock names) goes into a new venv outside the checkout, and from there, in an empty folder:
# `mvp-tui --version`, `mvp-tui check`, `mvp-tui config`, and a headless run of the local node
# serving the rehearsal's tiny model to "nothing bills". The node agent's zipapp is then checked to be
# built from the installed package, not from this checkout. Run by tests/foundation/
# test_installed_wheel.py; by hand: scripts/wheel-check.sh [WORKDIR].
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
uv="$here/scripts/uv.sh"
python=${PYTHON:-python3}
work=${1:-}
if [ -z "$work" ]; then
  work=$(mktemp -d "${TMPDIR:-/tmp}/mvp-wheel.XXXXXX")
  trap 'rm -rf "$work"' EXIT
fi
step() { echo "wheel-check: $*" >&2; }

step "building the sdist and the wheel"
"$uv" --cached-first build --quiet --out-dir "$work/dist" "$here"
sdist=$(ls "$work"/dist/mvp_tui-*.tar.gz)
wheel=$(ls "$work"/dist/mvp_tui-*-py3-none-any.whl)

step "installing $(basename "$wheel") into $work/app"
"$uv" venv --quiet --python "$python" "$work/app"
"$uv" --cached-first export --quiet --project "$here" --locked --no-emit-project --no-header --extra local \
  --format requirements-txt -o "$work/locked.txt"
"$uv" --cached-first pip install --quiet --python "$work/app/bin/python" --require-hashes -r "$work/locked.txt"
"$uv" pip install --quiet --python "$work/app/bin/python" --no-deps "$wheel"

# From an empty folder, with nothing of the checkout on any path.
mkdir -p "$work/cwd"
cd "$work/cwd"
export HOME="$work/home" XDG_CACHE_HOME="$work/home/.cache" XDG_CONFIG_HOME="$work/home/.config"
export MVP_STATE_DIR="$work/state" MVP_PROMPT_OPENAI_PORT=0
unset PYTHONPATH MVP_CONFIG
mkdir -p "$HOME"
app="$work/app/bin"
where=$("$app/python" -c 'import mvp_tui; print(mvp_tui.__file__)')
case "$where" in
  "$work/app/"*) ;;
  *) step "mvp_tui imports from $where, not from the installed wheel"; exit 1 ;;
esac
step "$("$app/mvp-tui" --version)"
# `mvp-tui check` with no provider key set (so none is read): the config, the local engine
# (the `local` extra is installed here) and the state dir must pass; the rest do not apply.
step "mvp-tui check, no provider key set"
env -u MVP_VASTAI_API_KEY -u VASTAI_API_KEY -u VAST_API_KEY -u MVP_VASTAI_API_KEY_FILE \
  -u VASTAI_API_KEY_FILE -u MVP_RUNPOD_API_KEY -u RUNPOD_API_KEY -u MVP_RUNPOD_API_KEY_FILE \
  -u RUNPOD_API_KEY_FILE -u MVP_NODE_PROVIDER -u MVP_PROVIDER \
  "$app/mvp-tui" check > "$work/check.txt" || { cat "$work/check.txt" >&2; exit 1; }
"$app/mvp-tui" config >/dev/null
"$app/python" -m mvp_tui.rehearsal.tiny_gguf "$work/tiny.gguf" >/dev/null

step "a headless run of the local node, to nothing bills"
"$app/mvp-tui" up --headless --yes --provider local --gguf-local-path "$work/tiny.gguf" \
  --rpc-bind 127.0.0.1:0 --prompt "hello" --max-tokens 4 --down-after > "$work/run.jsonl"
"$app/python" - "$work/run.jsonl" <<'PY'
import json, sys
events = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
names = [e.get("event") for e in events]
for wanted in ("node_ready", "prompt_done", "lease_deleted", "run_finished"):
    assert wanted in names, f"no {wanted} in the run's events: {names[-12:]}"
finished = [e for e in events if e.get("event") == "run_finished"]
assert finished[-1]["exit_code"] == 0, finished[-1]
PY
left=$("$app/mvp-tui" ls --json 2>/dev/null)
[ -z "$left" ] || { step "after the run, ls still lists: $left"; exit 1; }

step "the agent that ran is the installed package's build"
"$app/python" - <<'PY'
from mvp_tui import agent_bundle as bundle
members = bundle.agent_members()
assert str(bundle.PACKAGE_ROOT).startswith(__import__("sys").prefix), bundle.PACKAGE_ROOT
built = sorted(bundle.cache_dir().glob("*.pyz"))
assert built, f"no agent zipapp under {bundle.cache_dir()}"
assert any(bundle.holds_build(path, members) for path in built), built
print(f"wheel-check: agent {built[0].name} holds {len(members)} members of {bundle.PACKAGE_ROOT}",
      file=__import__("sys").stderr)
PY
step "ok: $(basename "$sdist"), $(basename "$wheel"), installed outside the checkout, nothing bills"
