"""What a configuration key is (`KeySpec`), and `key()`, which declares one on the field of
its section's settings class: the field's name is the key's, its annotation the type, and
`key()` holds the default, meaning, env names, flag and bounds. The key table is derived from
those fields (mvp_tui/config/schema.py); nothing else declares a key."""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, ClassVar


class Kind(Enum):
    STR = "text"
    INT = "a whole number"
    FLOAT = "a number"
    BOOL = "1/0, true/false, yes/no, or on/off"
    PATH = "a file path (~/ expands to your home)"
    ADDR = "an address HOST:PORT, e.g. 127.0.0.1:19777 (loopback unless acknowledged)"
    CHOICE = "one of"
    LIST = "a list of names (TOML array, or comma-separated in env and flags)"
    FLOAT_LIST = "a list of numbers (TOML array, or comma-separated in env and flags)"
    RUN_ID = "a whole number (the seed's run ids) or 'r-' and 1-32 lowercase letters or digits"


# Which provider a key belongs to: its value is parsed only when that provider runs. A
# provider's section (providers/<name>/section.py) sets its own name; every run reads ALL's.
ALL = ""


@dataclass(frozen=True, slots=True)
class KeySpec:
    section: str
    name: str
    kind: Kind
    default: object
    doc: str
    env: tuple[str, ...] = ()
    flag: str | None = None
    secret: bool = False
    scope: str = ALL
    choices: Sequence[str] = ()
    minimum: float | None = None
    maximum: float | None = None
    above: float | None = None  # the value must be greater than this (a 0 has no meaning)
    min_items: int = 0  # a list needs at least this many items
    zero_is_unset: bool = False  # a 0 means the same as leaving the key unset (no limit)
    # Accepted for the seed's config files but not built here: a value other than the
    # default gets one warning line saying so, and why (never an error).
    inert: str = ""
    # config.example.toml: the value shown (else the default) and prose after the doc line.
    example: object = None
    note: str = ""

    @property
    def dotted(self) -> str:
        return f"{self.section}.{self.name}"

    @property
    def label(self) -> str:
        return f"[{self.section}] {self.name}"

    def accepted(self) -> str:
        """The accepted forms, as an error message states them."""
        if self.kind is Kind.CHOICE:
            return "one of " + ", ".join(self.choices)
        text: str = self.kind.value
        if self.nonempty:
            text = "non-empty " + text
        if self.minimum is not None and self.maximum is not None:
            text += f" from {_num(self.minimum)} to {_num(self.maximum)}"
        elif self.minimum is not None:
            text += f" ≥ {_num(self.minimum)}"
        elif self.above is not None:
            text += f" > {_num(self.above)}"
        if self.min_items:
            text += f", at least {self.min_items}"
        return text

    @property
    def nonempty(self) -> bool:
        """Text with a built-in default cannot be empty (leaving the key out gives the
        default); empty text for an optional key means unset."""
        return self.kind is Kind.STR and self.default is not None


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


_META = "mvp_tui.config.key"


@dataclass(frozen=True, slots=True)
class _Decl:
    """What `key()` holds beyond the field's name, type and default."""

    doc: str
    rest: dict[str, Any]


def key(
    default: Any,
    doc: str,
    *,
    env: str | tuple[str, ...] = (),
    flag: str | None = None,
    kind: Kind | None = None,
    secret: bool = False,
    choices: Sequence[str] = (),
    minimum: float | None = None,
    maximum: float | None = None,
    above: float | None = None,
    min_items: int = 0,
    zero_is_unset: bool = False,
    inert: str = "",
    example: object = None,
    note: str = "",
) -> Any:
    """One key, declared on its settings field: `max_tokens: int = key(64, "…", env=…)`.

    The kind follows from the annotation (`kind=` only for an address or a run id; `choices`
    make a choice). A path's default is written as text, as a user would (`~/` expands)."""
    rest: dict[str, Any] = {
        "env": (env,) if isinstance(env, str) else env,
        "flag": flag,
        "kind": kind,
        "secret": secret,
        "choices": choices,
        "minimum": minimum,
        "maximum": maximum,
        "above": above,
        "min_items": min_items,
        "zero_is_unset": zero_is_unset,
        "inert": inert,
        "example": example,
        "note": note,
    }
    return dataclasses.field(default=default, metadata={_META: _Decl(doc, rest)})


class Section:
    """A settings class for one `[section]`: its fields are its keys (see `key()`)."""

    NAME: ClassVar[str]
    SCOPE: ClassVar[str] = ALL  # a provider's name: its runs alone read the section


_KINDS: dict[object, Kind] = {
    str: Kind.STR,
    int: Kind.INT,
    float: Kind.FLOAT,
    bool: Kind.BOOL,
    Path: Kind.PATH,
    tuple[str, ...]: Kind.LIST,
    tuple[float, ...]: Kind.FLOAT_LIST,
}


def _kind_of(annotation: object) -> Kind:
    if isinstance(annotation, types.UnionType):
        (annotation,) = (arg for arg in typing.get_args(annotation) if arg is not type(None))
    return _KINDS[annotation]


def specs_of(section: type[Section]) -> tuple[KeySpec, ...]:
    """The key table's rows for one settings class, in the order its fields are declared."""
    hints = typing.get_type_hints(section)
    rows = []
    for item in dataclasses.fields(section):  # type: ignore[arg-type]
        decl: _Decl = item.metadata[_META]
        rest = dict(decl.rest)
        kind = rest.pop("kind") or (Kind.CHOICE if rest["choices"] else _kind_of(hints[item.name]))
        default = item.default
        if isinstance(default, tuple):  # the loader parses a list as TOML gives it
            default = list(default)
        rows.append(
            KeySpec(section.NAME, item.name, kind, default, decl.doc, scope=section.SCOPE, **rest)
        )
    return tuple(rows)


def section_from(section: type[Section], values: dict[str, object]) -> Any:
    """A settings object from loaded values (by dotted key): lists as tuples."""
    kwargs = {}
    for item in dataclasses.fields(section):  # type: ignore[arg-type]
        value = values[f"{section.NAME}.{item.name}"]
        kwargs[item.name] = tuple(value) if isinstance(value, list) else value
    return section(**kwargs)
