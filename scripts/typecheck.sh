#!/usr/bin/env bash
# mypy --strict on the package as it installs: providers/, widgets/ and themes/ live at the
# top of the repo but are the subpackages mvp_tui.providers/.widgets/.themes, a mapping mypy
# cannot read from pyproject.toml. A tree of symlinks gives it the installed layout.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
tree="$here/build/typecheck"
rm -rf "$tree" && mkdir -p "$tree"
ln -s "$here/mvp_tui" "$tree/mvp_tui_src"
mkdir "$tree/mvp_tui"
for entry in "$here"/mvp_tui/*; do ln -s "$entry" "$tree/mvp_tui/$(basename "$entry")"; done
for sub in providers widgets themes; do ln -s "$here/$sub" "$tree/mvp_tui/$sub"; done
rm "$tree/mvp_tui_src"
cd "$tree"
exec "${MYPY:-$here/.venv/bin/mypy}" --strict --cache-dir "$here/.mypy_cache" -p mvp_tui "$@"
