"""Turning raw values from any layer into typed ones, with errors that name key, value,
source and the accepted forms."""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from mvp_tui.config.spec import KeySpec, Kind
from mvp_tui.errors import UserError
from mvp_tui.run_ids import check_run_id

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}
U64_MAX = 2**64 - 1


@dataclass(frozen=True, slots=True)
class Source:
    """Where a value came from: a layer and the exact place in it."""

    layer: str  # "default" | "file" | "env" | "flag"
    where: str = ""  # "path:line", "MVP_X", "--x"

    def __str__(self) -> str:
        if self.layer == "default":
            return f"built-in default ({self.where})" if self.where else "built-in default"
        if self.layer == "file":
            return f"file {self.where}"
        if self.layer == "env":
            return f"env {self.where}"
        return f"flag {self.where}"


# Later layers win: a value's rank says which of two sources overrides the other.
LAYER_RANK = {"default": 0, "file": 1, "env": 2, "flag": 3}


class ConfigError(UserError):
    """A configuration problem, stated in one line with its fix (key, value, source)."""

    def __init__(self, message: str, *, fix: str = "") -> None:
        super().__init__(message, fix=fix)


def value_error(spec: KeySpec, raw: object, source: Source, why: str = "") -> ConfigError:
    shown = "<redacted>" if spec.secret else repr(raw)
    reason = f" ({why})" if why else ""
    return ConfigError(
        f"{spec.label} = {shown} from {source} is not valid{reason}: expected {spec.accepted()}"
    )


def expand_path(text: str) -> Path:
    """`~/x` → home/x; the rest literal (a `~` inside a path stays as it is)."""
    if text == "~" or text.startswith("~/"):
        return Path(os.path.expanduser(text))
    return Path(text)


def parse_value(spec: KeySpec, raw: object, source: Source) -> object:
    """Parse one raw value (a TOML value or a string from env/flags) for `spec`.

    What a 0, an empty list or empty text means is decided here, as the key's documentation
    says, so every reader sees the same: a 0 of a `zero_is_unset` key is None (unset, no
    limit); a 0 where none is meaningful (`minimum` > 0, `above`) and too short a list are
    errors naming key, value and source; empty text is an error for a key with a default and
    None (unset) for an optional one. Text is trimmed, whichever layer it came from.
    """
    if raw is None:
        return None
    value = _parse(spec, raw, source)
    if spec.zero_is_unset and value == 0 and not isinstance(value, bool):
        return None
    return value


def _parse(spec: KeySpec, raw: object, source: Source) -> object:
    kind = spec.kind
    if kind is Kind.BOOL:
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, str) and raw.strip().lower() in _TRUE | _FALSE:
            return raw.strip().lower() in _TRUE
        raise value_error(spec, raw, source)
    if kind is Kind.RUN_ID:
        return _run_id(spec, raw, source)
    if kind is Kind.INT:
        if isinstance(raw, bool):
            raise value_error(spec, raw, source)
        if isinstance(raw, int):
            value: float = raw
        else:
            try:
                value = int(str(raw).strip())
            except ValueError:
                raise value_error(spec, raw, source) from None
        return int(_bounded(spec, value, raw, source))
    if kind is Kind.FLOAT:
        if isinstance(raw, bool):
            raise value_error(spec, raw, source)
        try:
            number = float(raw) if isinstance(raw, (int, float)) else float(str(raw).strip())
        except ValueError:
            raise value_error(spec, raw, source) from None
        if number != number or number in (float("inf"), float("-inf")):
            raise value_error(spec, raw, source)
        return _bounded(spec, number, raw, source)
    if kind is Kind.FLOAT_LIST:
        items = raw if isinstance(raw, list) else str(raw).split(",")
        numbers: list[float] = []
        for item in items:
            if isinstance(item, bool):
                raise value_error(spec, raw, source)
            try:
                number = float(item) if isinstance(item, (int, float)) else float(str(item).strip())
            except ValueError:
                raise value_error(spec, raw, source) from None
            numbers.append(_bounded(spec, number, raw, source))
        if len(numbers) < spec.min_items:
            raise value_error(spec, raw, source, "too few")
        return numbers
    if kind is Kind.LIST:
        if isinstance(raw, list) and all(isinstance(item, str) for item in raw):
            return [item.strip() for item in raw if item.strip()]
        if isinstance(raw, str):
            return [item.strip() for item in raw.split(",") if item.strip()]
        raise value_error(spec, raw, source)
    if not isinstance(raw, str):
        raise value_error(spec, raw, source, "not text")
    text = raw.strip()
    if kind is Kind.STR and not text:
        if spec.nonempty:
            raise value_error(spec, raw, source, "empty")
        return None
    if kind is Kind.CHOICE:
        for choice in spec.choices:
            if text.lower() == choice.lower():
                return choice
        raise value_error(spec, raw, source)
    if kind is Kind.PATH:
        if not text:
            raise value_error(spec, raw, source, "empty")
        if not text.isprintable():
            # A path with an escape or control character is a paste gone wrong or hostile
            # text; made as a folder it would land wherever the command ran.
            raise value_error(spec, raw, source, "a control character inside")
        return expand_path(text)
    if kind is Kind.ADDR:
        return _addr(spec, text, source)
    if spec.secret and any(c.isspace() or not c.isprintable() for c in text):
        # A key with a space inside is two pasted together or a typo: say so at load, by key.
        raise value_error(spec, raw, source, "a space or control character inside")
    # Trimmed in every layer, as the seed trims env values: `MVP_VASTAI_SSH_USER=" root"`
    # or an image name with a trailing space never reaches a node or an API.
    return text


def _run_id(spec: KeySpec, raw: object, source: Source) -> str:
    """The seed's numeric run ids (a TOML integer or digits, 0..2^64-1) as their decimal
    text, or the app's own `r-…` ids; both make valid labels, records and node env."""
    if isinstance(raw, bool):
        raise value_error(spec, raw, source)
    text = str(raw).strip() if isinstance(raw, (int, str)) else None
    if text is None:
        raise value_error(spec, raw, source)
    if text.isascii() and text.isdigit():
        if int(text) > U64_MAX:
            raise value_error(spec, raw, source, "too large")
        return str(int(text))
    try:
        return check_run_id(text)
    except ValueError:
        raise value_error(spec, raw, source) from None


def _bounded(spec: KeySpec, value: float, raw: object, source: Source) -> float:
    if spec.minimum is not None and value < spec.minimum:
        raise value_error(spec, raw, source, "too small")
    if spec.above is not None and not value > spec.above:
        raise value_error(spec, raw, source, "too small")
    if spec.maximum is not None and value > spec.maximum:
        raise value_error(spec, raw, source, "too large")
    return value


def _addr(spec: KeySpec, text: str, source: Source) -> str:
    """HOST:PORT with an IP host (or localhost); whether a non-loopback one may be used is
    the loader's rule, which needs [prompt] rpc_allow_remote too."""
    host, sep, port_text = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise value_error(spec, text, source, "no port")
    if host != "localhost":
        try:
            ipaddress.ip_address(host)
        except ValueError:
            raise value_error(spec, text, source, "not an IP address") from None
    return text
