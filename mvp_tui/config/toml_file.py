"""Reading the TOML layer (with the line of every key, for errors) and writing single keys
back with tomlkit so the user's comments and layout survive."""

from __future__ import annotations

import difflib
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import tomlkit
import tomlkit.exceptions

from mvp_tui.config.schema import BY_DOTTED, SECTIONS, UI_KEYS_SECTION
from mvp_tui.config.values import ConfigError, Source

_TABLE = re.compile(r"^\s*\[\s*([A-Za-z0-9_.\-\" ]+?)\s*\]\s*(?:#.*)?$")
_KEY = re.compile(r"^\s*\"?([A-Za-z0-9_\-]+)\"?\s*=")


@dataclass(frozen=True, slots=True)
class TomlLayer:
    path: Path
    values: dict[str, object]  # "section.key" -> raw TOML value (plain Python)
    lines: dict[str, int]  # "section.key" -> 1-based line
    ui_keys: dict[str, str]

    def where(self, dotted: str) -> str:
        line = self.lines.get(dotted)
        return f"{self.path}:{line}" if line else str(self.path)


def _key_lines(text: str) -> dict[str, int]:
    lines: dict[str, int] = {}
    table = ""
    for number, line in enumerate(text.splitlines(), start=1):
        if m := _TABLE.match(line):
            table = m.group(1).replace('"', "").replace(" ", "")
            lines.setdefault(table, number)
        elif (m := _KEY.match(line)) and table:
            lines.setdefault(f"{table}.{m.group(1)}", number)
    return lines


def _hint(word: str, options: list[str]) -> str:
    close = difflib.get_close_matches(word, options, n=1, cutoff=0.6)
    return f"; did you mean {close[0]}?" if close else f"; known: {', '.join(sorted(options))}"


def read_toml_layer(path: Path, binding_ids: set[str]) -> TomlLayer:
    """Parse the file; unknown sections and keys are errors with a "did you mean" hint."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"config file {path} cannot be read: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"config file {path} is not UTF-8 text") from None
    try:
        document = tomlkit.parse(text).unwrap()
    except tomlkit.exceptions.ParseError as exc:
        raise ConfigError(
            f"config file {path}:{exc.line}:{exc.col} is not valid TOML: {exc}; "
            "fix the syntax (see config.example.toml)"
        ) from None
    lines = _key_lines(text)
    values: dict[str, object] = {}
    ui_keys: dict[str, str] = {}
    for section, table in document.items():
        where = f"{path}:{lines.get(section, 0) or '?'}"
        if section not in SECTIONS:
            raise ConfigError(
                f"unknown section [{section}] in {where}{_hint(section, list(SECTIONS))}"
            )
        if not isinstance(table, Mapping):
            raise ConfigError(
                f"[{section}] in {where} must be a table, e.g. [{section}] on its own line"
            )
        for key, value in table.items():
            dotted = f"{section}.{key}"
            if section == "ui" and key == "keys":
                ui_keys = _ui_keys(value, path, lines, binding_ids)
                continue
            if dotted not in BY_DOTTED:
                known = [s.name for s in BY_DOTTED.values() if s.section == section]
                raise ConfigError(
                    f"unknown key [{section}] {key} in {path}:{lines.get(dotted, '?')}"
                    f"{_hint(key, known)}"
                )
            values[dotted] = value
    return TomlLayer(path=path, values=values, lines=lines, ui_keys=ui_keys)


def _ui_keys(
    table: object, path: Path, lines: dict[str, int], binding_ids: set[str]
) -> dict[str, str]:
    if not isinstance(table, Mapping):
        raise ConfigError(f'[{UI_KEYS_SECTION}] in {path} must be a table of binding id = "key"')
    result: dict[str, str] = {}
    for binding_id, keys in table.items():
        where = f"{path}:{lines.get(f'{UI_KEYS_SECTION}.{binding_id}', '?')}"
        if binding_id not in binding_ids:
            raise ConfigError(
                f"unknown binding id [{UI_KEYS_SECTION}] {binding_id} in {where}"
                f"{_hint(str(binding_id), sorted(binding_ids))}"
            )
        if not isinstance(keys, str) or not keys.strip():
            raise ConfigError(
                f"[{UI_KEYS_SECTION}] {binding_id} = {keys!r} in {where} is not valid: "
                'expected key names, e.g. "ctrl+f" or "f3,ctrl+f"'
            )
        result[str(binding_id)] = keys.strip()
    return result


TomlValue = str | int | float | bool


def write_key(path: Path, section: str, key: str, value: TomlValue) -> None:
    """Set one key in the user's file, keeping every comment; atomic (temp file + rename)."""
    write_keys(path, section, {key: value})


def write_keys(path: Path, section: str, keys: Mapping[str, TomlValue | None]) -> None:
    """Set (None: remove) keys of one section in the user's file at once, keeping every
    comment; atomic (temp file + rename)."""
    document = (
        tomlkit.parse(path.read_text(encoding="utf-8")) if path.exists() else tomlkit.document()
    )
    table = document.get(section)
    if table is None:
        table = tomlkit.table()
        document[section] = table
    for key, value in keys.items():
        if value is not None:
            table[key] = value
        elif key in table:
            del table[key]
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(tomlkit.dumps(document))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# Keys whose env or flag value beats a file's model at the next start.
_MODEL_OVERRIDES = ("model.gguf_repo", "model.gguf_file", "model.gguf_local_path")


def save_hub_model(path: Path, repo: str, file: str, sources: Mapping[str, Source]) -> str:
    """`[model] gguf_repo` and `gguf_file` in the user's file (made when missing), and the
    `gguf_revision` that named a revision of the model before removed; what was done, in
    words, with any env var or flag (in `sources`) that still wins over the file."""
    write_keys(path, "model", {"gguf_repo": repo, "gguf_file": file, "gguf_revision": None})
    said = f"saved as [model] gguf_repo and gguf_file in {path}"
    louder = [str(sources[k]) for k in _MODEL_OVERRIDES
              if k in sources and sources[k].layer in ("env", "flag")]
    if louder:
        said += f" ({', '.join(louder)} still wins over the file at the next start)"
    return said
