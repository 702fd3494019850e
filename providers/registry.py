"""The one registry of providers: every list of providers is derived from the kinds here.

A provider package declares itself with one `ProviderKind` (`providers/<name>/kind.py`); the
built-in ones are imported below, one line each, and anything else (a test's fifth provider,
a plug-in) calls `register(kind)` before it is used. The lists the rest of the app reads
(`PROVIDERS`, `RENTED`, `BOARD`, the config's sections) are live views over the registry, so
a kind registered after start-up appears in all of them, the config's key table included.

Base layer (ARCHITECTURE.md "Layers"): kinds and sections only, no client; the config
imports this.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, overload

if TYPE_CHECKING:
    from mvp_tui.config.spec import Section
    from mvp_tui.providers.kind import ProviderKind

_KINDS: dict[str, ProviderKind] = {}  # filled at the end of this module, then by register()
_generation = [0]  # bumped by every change, for the tables derived from the kinds


def register(kind: ProviderKind) -> None:
    """Add `kind` (or replace the one of its name): every derived list shows it at once."""
    _KINDS[kind.name] = kind
    _generation[0] += 1


def unregister(name: str) -> None:
    """Remove the kind named `name` (a test's own, when it is done)."""
    if _KINDS.pop(name, None) is not None:
        _generation[0] += 1


def generation() -> int:
    """A number that changes whenever the registry does (tables cache on it)."""
    return _generation[0]


def kinds() -> tuple[ProviderKind, ...]:
    return tuple(_KINDS.values())


def find(name: str) -> ProviderKind | None:
    """The kind named `name`, or None (a record of a provider this version does not know)."""
    return _KINDS.get(name)


def kind(name: str) -> ProviderKind:
    """The kind named `name`; a KeyError naming the known ones otherwise."""
    found = _KINDS.get(name)
    if found is None:
        raise KeyError(f"no provider {name!r}; known: {', '.join(_KINDS)}")
    return found


def title(name: str) -> str:
    """A provider's name as its users write it (an unknown one as it is)."""
    found = _KINDS.get(name)
    return found.title if found is not None else name


def spans_hosts(name: str) -> bool:
    """Whether an offer of `name` is a GPU type placed on any of several hosts (RunPod),
    rather than one host; asked per offer (10,000 a refresh), so one lookup."""
    found = _KINDS.get(name)
    return found is not None and found.offer_spans_hosts


def sections() -> tuple[type[Section], ...]:
    """The providers' own `[section]`s, in the registry's order."""
    return tuple(k.section for k in _KINDS.values() if k.section is not None)


class _Names(Sequence[str]):
    """The names of the kinds that `keep` holds, in `order`, read afresh at every use."""

    def __init__(
        self,
        keep: Callable[[ProviderKind], bool],
        order: Callable[[tuple[ProviderKind, ...]], list[ProviderKind]] = list,
    ) -> None:
        self._keep = keep
        self._order = order

    def _names(self) -> tuple[str, ...]:
        return tuple(k.name for k in self._order(kinds()) if self._keep(k))

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...
    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        return self._names()[index]

    def __len__(self) -> int:
        return len(self._names())

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __contains__(self, name: object) -> bool:
        return name in self._names()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence):
            return tuple(self) == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._names())

    def __repr__(self) -> str:
        return repr(self._names())


def _marketplaces_first(found: tuple[ProviderKind, ...]) -> list[ProviderKind]:
    return sorted(found, key=lambda k: k.on_this_machine)


PROVIDERS: Sequence[str] = _Names(lambda k: True)  # every `[provider] kind`
RENTED: Sequence[str] = _Names(lambda k: k.rented)  # rent by the hour (`down --all` asks them)
# The offer board's, and `check --live`'s: the marketplaces first, as their notes read.
BOARD: Sequence[str] = _Names(lambda k: k.board, _marketplaces_first)


# The registry lines: one per built-in provider package, in the order `[provider] kind` lists
# them (machines here first, then the marketplaces). Last in this module: a kind's section
# loads the config, whose `[provider] kind` reads PROVIDERS above, so the views exist first.
from mvp_tui.providers.docker.kind import KIND as DOCKER  # noqa: E402
from mvp_tui.providers.local.kind import KIND as LOCAL  # noqa: E402
from mvp_tui.providers.runpod.kind import KIND as RUNPOD  # noqa: E402
from mvp_tui.providers.vastai.kind import KIND as VASTAI  # noqa: E402

for _built_in in (LOCAL, DOCKER, VASTAI, RUNPOD):
    register(_built_in)
