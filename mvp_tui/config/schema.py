"""The key table, derived from the settings classes' fields (mvp_tui/config/sections/): each
key is declared once, on its field (`spec.key()`). The loader, `mvp-tui config`, the CLI
flags and config.example.toml all read this table; `Settings` is what the code reads."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, overload

from mvp_tui.config.defaults import (
    DEFAULT_HF_FILE,
    DEFAULT_HF_REPO,
    DEFAULT_IMAGE,
    DEFAULT_MODEL_ID,
    DEFAULT_RPC_ADDR,
    NO_IROH,
    NO_WEB_DASHBOARD,
    PROFILE_PROVIDER,
    PROFILES,
    RENTED_IMAGE,
    RENTED_IMAGE_CUDA_MIN,
    WHOLE_MODEL,
)
from mvp_tui.config.sections.app import ObservabilitySection, OffersSection, StateSection, UiSection
from mvp_tui.config.sections.lease import LeaseSection
from mvp_tui.config.sections.limits import LimitsSection
from mvp_tui.config.sections.model import ModelSection
from mvp_tui.config.sections.prompt import PromptSection, RelaySection
from mvp_tui.config.sections.runtime import ImageSection, ProviderSection, RuntimeSection
from mvp_tui.config.sections.ssh import SshSection
from mvp_tui.config.spec import ALL, KeySpec, Kind, Section, section_from, specs_of
from mvp_tui.providers import registry
from mvp_tui.providers.registry import PROVIDERS, RENTED

RENTED_PROVIDERS = RENTED

__all__ = [
    "BY_DOTTED",
    "DEFAULT_HF_FILE",
    "DEFAULT_HF_REPO",
    "DEFAULT_IMAGE",
    "DEFAULT_MODEL_ID",
    "DEFAULT_RPC_ADDR",
    "KEYS",
    "NO_IROH",
    "NO_WEB_DASHBOARD",
    "PROFILES",
    "PROFILE_PROVIDER",
    "PROVIDERS",
    "RENTED_IMAGE",
    "RENTED_IMAGE_CUDA_MIN",
    "RENTED_PROVIDERS",
    "SECTIONS",
    "SECTION_CLASSES",
    "UI_KEYS_SECTION",
    "WHOLE_MODEL",
    "KeySpec",
    "Kind",
    "Settings",
    "build_settings",
]

# In the order `mvp-tui config` and config.example.toml show them; the providers' own
# sections (providers/<name>/section.py, from the registry) after [observability].
_BEFORE: tuple[type[Section], ...] = (
    RuntimeSection,
    ProviderSection,
    ImageSection,
    PromptSection,
    RelaySection,
    ModelSection,
    LeaseSection,
    SshSection,
    ObservabilitySection,
)
_AFTER: tuple[type[Section], ...] = (LimitsSection, UiSection, OffersSection, StateSection)

# [ui.keys] is a table of binding id -> key(s); its ids come from the app's bindings.
UI_KEYS_SECTION = "ui.keys"

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class _Tables:
    generation: int
    classes: tuple[type[Section], ...]
    keys: dict[type[Section], tuple[KeySpec, ...]]
    flat: tuple[KeySpec, ...]
    by_dotted: dict[str, KeySpec]
    names: tuple[str, ...]


_cache: list[_Tables] = []


def _tables() -> _Tables:
    """The key table for the providers registered now (rebuilt when the registry changes)."""
    if _cache and _cache[0].generation == registry.generation():
        return _cache[0]
    classes = (*_BEFORE, *registry.sections(), *_AFTER)
    keys = {cls: specs_of(cls) for cls in classes}
    flat = tuple(spec for specs in keys.values() for spec in specs)
    tables = _Tables(
        registry.generation(), classes, keys, flat, {spec.dotted: spec for spec in flat},
        tuple(cls.NAME for cls in classes),
    )
    _cache[:] = [tables]
    return tables


class _Live(Sequence[T], Generic[T]):
    """A table read afresh from `_tables()` at every use (a provider registered later is in)."""

    def __init__(self, read: Callable[[_Tables], tuple[T, ...]]) -> None:
        self._read = read

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[T]: ...
    def __getitem__(self, index: int | slice) -> T | Sequence[T]:
        return self._read(_tables())[index]

    def __len__(self) -> int:
        return len(self._read(_tables()))

    def __iter__(self) -> Iterator[T]:
        return iter(self._read(_tables()))

    def __contains__(self, item: object) -> bool:
        return item in self._read(_tables())

    def __repr__(self) -> str:
        return repr(self._read(_tables()))


class _ByDotted(Mapping[str, KeySpec]):
    def __getitem__(self, dotted: str) -> KeySpec:
        return _tables().by_dotted[dotted]

    def __iter__(self) -> Iterator[str]:
        return iter(_tables().by_dotted)

    def __len__(self) -> int:
        return len(_tables().by_dotted)


SECTION_CLASSES: Sequence[type[Section]] = _Live(lambda t: t.classes)
KEYS: Sequence[KeySpec] = _Live(lambda t: t.flat)
BY_DOTTED: Mapping[str, KeySpec] = _ByDotted()
SECTIONS: Sequence[str] = _Live(lambda t: t.names)

S = TypeVar("S", bound=Section)


@dataclass(frozen=True, slots=True)
class Settings:
    """Every section's typed settings, read as `settings.prompt.stall_secs`. A provider's
    section is None unless that provider runs (its keys are not even parsed then)."""

    runtime: RuntimeSection
    provider: ProviderSection
    image: ImageSection
    prompt: PromptSection
    relay: RelaySection
    model: ModelSection
    lease: LeaseSection
    ssh: SshSection
    observability: ObservabilitySection
    limits: LimitsSection
    ui: UiSection
    offers: OffersSection
    state: StateSection
    # The providers' own sections, by name: only the running provider's is read.
    providers: Mapping[str, Section]

    def of(self, section: type[S]) -> S | None:
        """A provider's section (`settings.of(VastaiSection)`), None unless it runs."""
        found = self.providers.get(section.NAME)
        return found if isinstance(found, section) else None


def build_settings(values: dict[str, object]) -> Settings:
    """The typed settings from loaded values; a section whose keys were not read (another
    provider's) is None."""
    built: dict[str, Any] = {}
    providers: dict[str, Section] = {}
    for cls, specs in _tables().keys.items():
        if not all(spec.dotted in values for spec in specs):
            continue
        if cls.SCOPE == ALL:
            built[cls.NAME] = section_from(cls, values)
        else:
            providers[cls.NAME] = section_from(cls, values)
    return Settings(**built, providers=providers)
