"""config.example.toml, derived from the key table: every key with its meaning, accepted
forms, env names and flag. `python -m mvp_tui.config.example > config.example.toml` writes
it; a test checks the file is what this derives."""

from __future__ import annotations

import json
import textwrap

from mvp_tui.config.schema import KEYS, UI_KEYS_SECTION, KeySpec, Kind

HEADER = """\
# mvp-tui configuration: every key, with its environment variable and CLI flag.
# Layers, later wins: built-in defaults < this file < environment < flags.
# Location: --config PATH, else $MVP_CONFIG, else the user config dir's config.toml
# (Linux: ~/.config/mvp-tui/config.toml). `mvp-tui config` prints the effective values.
# Keys of a provider ([vastai], [runpod], [docker]) are read only when that provider runs.
# Commented-out lines show the built-in default. A key left out has its default; text keys
# that have one cannot be set empty, and an empty optional text key counts as unset.
# Generated from the key declarations (mvp_tui/config/sections/, providers/*/section.py):
# edit those, not this.
"""

UI_KEYS = """\
# Remap any binding by its id (see `?` in the dashboard), e.g.:
# search-offers = "f5"
# quit = "ctrl+q"
"""


def toml_value(value: object) -> str:
    """A value as TOML writes it (the example's lines, the reference's defaults)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    if isinstance(value, (int, float)):
        return repr(value)
    return json.dumps(str(value), ensure_ascii=False)


def flag_forms(spec: KeySpec) -> list[str]:
    """The key's flag as typed: a yes/no key also has its `--no-` form."""
    if not spec.flag:
        return []
    if spec.kind is Kind.BOOL:
        return [spec.flag, "--no-" + spec.flag.removeprefix("--")]
    return [spec.flag]


def _block(spec: KeySpec) -> list[str]:
    text = f"{spec.doc}; {spec.accepted()}" + (f". {spec.note}" if spec.note else "")
    lines = textwrap.wrap(text, 97, break_on_hyphens=False, break_long_words=False)
    where = []
    if spec.env:
        where.append("env: " + ", ".join(spec.env))
    if spec.flag:
        where.append("flag: " + " / ".join(flag_forms(spec)))
    shown = spec.example if spec.example is not None else spec.default
    out = [f"# {line}" for line in lines]
    if where:
        out.append("#   " + "   ".join(where))
    out.append(f"# {spec.name} = {toml_value(shown)}")
    return out


def render_example() -> str:
    lines = [HEADER.rstrip("\n")]
    section = ""
    for spec in KEYS:
        if spec.section != section:
            section = spec.section
            lines += ["", f"[{section}]"]
        lines += _block(spec)
    lines += ["", f"[{UI_KEYS_SECTION}]", UI_KEYS.rstrip("\n")]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(render_example(), end="")
