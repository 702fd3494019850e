"""The key table, derived from the settings classes' fields (mvp_tui/config/sections/): each
key is declared once, on its field (`spec.key()`). The loader, `mvp-tui config`, the CLI
flags and config.example.toml all read this table; `Settings` is what the code reads."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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
    PROVIDERS,
    RENTED_IMAGE,
    RENTED_IMAGE_CUDA_MIN,
    RENTED_PROVIDERS,
    WHOLE_MODEL,
)
from mvp_tui.config.sections.app import ObservabilitySection, OffersSection, StateSection, UiSection
from mvp_tui.config.sections.docker import DockerSection
from mvp_tui.config.sections.lease import LeaseSection
from mvp_tui.config.sections.limits import LimitsSection
from mvp_tui.config.sections.model import ModelSection
from mvp_tui.config.sections.prompt import PromptSection, RelaySection
from mvp_tui.config.sections.runpod import RunpodSection
from mvp_tui.config.sections.runtime import ImageSection, ProviderSection, RuntimeSection
from mvp_tui.config.sections.ssh import SshSection
from mvp_tui.config.sections.vastai import VastaiSection
from mvp_tui.config.spec import KeySpec, Kind, Scope, Section, section_from, specs_of

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
    "Scope",
    "Settings",
    "build_settings",
]

# In the order `mvp-tui config` and config.example.toml show them.
SECTION_CLASSES: tuple[type[Section], ...] = (
    RuntimeSection,
    ProviderSection,
    ImageSection,
    PromptSection,
    RelaySection,
    ModelSection,
    LeaseSection,
    SshSection,
    DockerSection,
    ObservabilitySection,
    VastaiSection,
    RunpodSection,
    LimitsSection,
    UiSection,
    OffersSection,
    StateSection,
)

_SECTION_KEYS = {cls: specs_of(cls) for cls in SECTION_CLASSES}
KEYS: tuple[KeySpec, ...] = tuple(spec for specs in _SECTION_KEYS.values() for spec in specs)

# [ui.keys] is a table of binding id -> key(s); its ids come from the app's bindings.
UI_KEYS_SECTION = "ui.keys"

BY_DOTTED: dict[str, KeySpec] = {spec.dotted: spec for spec in KEYS}
SECTIONS: tuple[str, ...] = tuple(cls.NAME for cls in SECTION_CLASSES)


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
    docker: DockerSection | None
    vastai: VastaiSection | None
    runpod: RunpodSection | None


def build_settings(values: dict[str, object]) -> Settings:
    """The typed settings from loaded values; a section whose keys were not read (another
    provider's) is None."""
    built: dict[str, Any] = {
        cls.NAME: section_from(cls, values)
        if all(spec.dotted in values for spec in specs)
        else None
        for cls, specs in _SECTION_KEYS.items()
    }
    return Settings(**built)
