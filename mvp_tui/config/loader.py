"""Building the effective configuration from its four layers, later wins:
built-in defaults → TOML file → environment → CLI flags.

Provider-specific keys are parsed and validated only for the provider that will run, so a
stray bad `MVP_VASTAI_*` variable never stops a local run (the seed's rule).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import platformdirs

from mvp_tui.config.guards import (
    check_hub_paths,
    check_key_urls,
    check_multinode_rpc,
    check_owner_tag,
    config_file_warnings,
    read_key_files,
)
from mvp_tui.config.model_source import ModelSource, model_source
from mvp_tui.config.schema import (
    BY_DOTTED,
    KEYS,
    PROFILE_PROVIDER,
    RENTED_IMAGE,
    RENTED_IMAGE_CUDA_MIN,
    KeySpec,
    Settings,
    build_settings,
)
from mvp_tui.config.sections.limits import BILLING_MAX_HOURS
from mvp_tui.config.spec import ALL
from mvp_tui.config.toml_file import TomlLayer, read_toml_layer
from mvp_tui.config.values import (
    LAYER_RANK,
    ConfigError,
    Source,
    expand_path,
    parse_value,
)
from mvp_tui.keymap import BINDING_IDS
from mvp_tui.node_protocol import is_loopback_name
from mvp_tui.providers import registry

if TYPE_CHECKING:
    from mvp_tui.providers.kind import ProviderKind

APP_NAME = "mvp-tui"
CONFIG_ENV = "MVP_CONFIG"


@dataclass(frozen=True, slots=True)
class ConfigPaths:
    """Where the TOML layer comes from: `--config`, else `MVP_CONFIG`, else the user's file."""

    explicit: Path | None = None
    explicit_source: str = ""
    default: Path = field(
        default_factory=lambda: platformdirs.user_config_path(APP_NAME) / "config.toml"
    )

    @classmethod
    def resolve(cls, flag: str | None, env: Mapping[str, str]) -> ConfigPaths:
        if flag:
            return cls(explicit=expand_path(flag), explicit_source="flag --config")
        if env.get(CONFIG_ENV):
            return cls(explicit=expand_path(env[CONFIG_ENV]), explicit_source=f"env {CONFIG_ENV}")
        return cls()


@dataclass(frozen=True, slots=True)
class Config:
    """The effective configuration: typed values by dotted key, with each value's source."""

    values: dict[str, object]
    sources: dict[str, Source]
    ui_keys: dict[str, str]
    file: Path | None
    unused: dict[str, Source]  # keys set for a provider that is not selected
    # One line per key that is accepted but has no effect here (the seed's keys not built).
    warnings: tuple[str, ...] = ()
    # One line per trust risk the user chose and may not know of (a key in argv, a key
    # readable by others): printed as warnings, never naming the secret.
    cautions: tuple[str, ...] = ()
    # The same layers loaded again with another provider selected (for `down --all`, whose
    # recorded leases may belong to any provider).
    reload_for: Callable[[str], Config] | None = field(default=None, repr=False, compare=False)
    # The typed settings every reader outside this package uses, built from `values`.
    settings: Settings = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "settings", build_settings(self.values))

    @property
    def model_source(self) -> ModelSource:
        """Which model the node serves, a local file or the hub's, and which layer said so."""
        return model_source(self.values, self.sources)

    def with_local_model(self, path: Path, why: str) -> Config:
        """This configuration serving the local file `path` whatever the layers say (a
        rehearsal's model): the hub keys back to their defaults, all from `why`."""
        values, sources = dict(self.values), dict(self.sources)
        for name in ("gguf_repo", "gguf_file", "gguf_revision"):
            values[f"model.{name}"] = BY_DOTTED[f"model.{name}"].default
            sources[f"model.{name}"] = Source("default", why)
        values["model.gguf_local_path"] = path
        sources["model.gguf_local_path"] = Source("default", why)
        return dataclasses.replace(self, values=values, sources=sources)

    def with_hub_model(self, repo: str, file: str, why: str) -> Config:
        """This configuration serving hub `repo`'s `file` (the model picker's choice): no
        local path, the repo's default revision, all from `why`."""
        values, sources = dict(self.values), dict(self.sources)
        for name, value in (("gguf_repo", repo), ("gguf_file", file),
                            ("gguf_revision", None), ("gguf_local_path", None)):
            values[f"model.{name}"] = value
            sources[f"model.{name}"] = Source("default", why)
        if sources.get("model.id", Source("default")).layer == "default":
            # A served name the user never set follows the model (the OpenAI `model`).
            values["model.id"] = served_name(file)
            sources["model.id"] = Source("default", why)
        return dataclasses.replace(self, values=values, sources=sources)

    def for_provider(self, kind: str) -> Config:
        """This configuration with `kind` as the provider: the same file, env and flags, so
        its keys (the API key above all) come from where they would for `up`."""
        if kind == self.provider:
            return self
        if self.reload_for is None:
            raise ConfigError(f"cannot configure provider {kind!r} from here")
        return self.reload_for(kind)

    def __getitem__(self, dotted: str) -> object:
        """A loaded value by its dotted key, for tests and this package; the code reads
        `settings` (typed), never a key by its name."""
        return self.values[dotted]

    def node_image(self) -> tuple[str, Source]:
        """The node's image and where it came from. Unset on a rented provider: llama.cpp's
        public CUDA image (`RENTED_IMAGE`). As in the orchestrator seed's layered config,
        `[vastai] image` wins
        over `[image] node` from the same layer or a lower one (the file's over the file's),
        and an image given by env or flag wins over a file's: the later layer wins."""
        image = self.settings.image.node
        source = self.sources["image.node"]
        own_key = self.kind.image_key  # the provider's own image key ([vastai] image)
        own = self.values.get(own_key) if own_key else None
        if isinstance(own, str):
            own_source = self.sources[own_key]
            if LAYER_RANK[own_source.layer] >= LAYER_RANK[source.layer]:
                return own, own_source
        if self.rented and source.layer == "default":
            # The seed's default image is in no registry a rented host can pull.
            return RENTED_IMAGE, Source("default", "for rented nodes")
        return image, source

    def cuda_floor(self) -> str | None:
        """The node image's CUDA floor as major.minor, or None for no floor: `[image] cuda_min`
        when set ("0": none), else the pinned default image's (`RENTED_IMAGE_CUDA_MIN`)."""
        return _cuda_floor(self.settings.image.cuda_min, self.sources.get("image.cuda_min"))

    @property
    def confirm_lease(self) -> bool:
        """Whether renting must be confirmed: the provider's own key (`[vastai] confirm_lease`;
        the dashboard asks, headless needs --yes); always for the other billing providers."""
        key = self.kind.confirm_key
        if key and key in self.values:
            return bool(self.values[key])
        return True

    @property
    def provider(self) -> str:
        return self.settings.provider.kind or PROFILE_PROVIDER["local"]

    @property
    def kind(self) -> ProviderKind:
        """What the selected provider declares of itself (providers/<name>/kind.py)."""
        return registry.kind(self.provider)

    @property
    def rented(self) -> bool:
        """The provider rents a machine by the hour (Vast.ai, RunPod)."""
        return self.kind.rented

    @property
    def max_hours(self) -> float | None:
        """The run's deadline in hours, as the node's switch is armed with it: `[limits]
        max_hours`, or BILLING_MAX_HOURS on a rented provider when unset (every seed pod had
        a deadline); None: no deadline (0, or unset on this machine)."""
        hours = self.settings.limits.max_hours
        if hours is None and self.rented:
            hours = BILLING_MAX_HOURS
        return hours or None

    @property
    def profile(self) -> str:
        return self.settings.runtime.profile

    @property
    def state_dir(self) -> Path:
        return self.settings.state.dir or platformdirs.user_state_path(APP_NAME)

    def secret_values(self) -> list[str]:
        """Every secret's value, for the run's Redactor."""
        return [
            value
            for spec in KEYS
            if spec.secret and isinstance(value := self.values.get(spec.dotted), str)
        ]


def flag_dest(spec: KeySpec) -> str:
    return spec.dotted.replace(".", "__")


def _env_value(spec: KeySpec, env: Mapping[str, str]) -> tuple[str, Source] | None:
    for name in spec.env:
        value = env.get(name)
        if value is not None and value.strip() != "":
            return value, Source("env", name)
    return None


def _raw(
    spec: KeySpec,
    flags: Mapping[str, tuple[str, str]],
    env: Mapping[str, str],
    toml: TomlLayer | None,
) -> tuple[object, Source]:
    if (flagged := flags.get(flag_dest(spec))) is not None:
        return flagged[0], Source("flag", flagged[1])
    if (from_env := _env_value(spec, env)) is not None:
        return from_env
    if toml is not None and spec.dotted in toml.values:
        return toml.values[spec.dotted], Source("file", toml.where(spec.dotted))
    return spec.default, Source("default")


def load_config(
    *,
    flags: Mapping[str, tuple[str, str]] | None = None,
    env: Mapping[str, str] | None = None,
    paths: ConfigPaths | None = None,
) -> Config:
    """The effective configuration, or a `ConfigError` naming key, value, source and fix.

    `flags` maps a key's flag destination to (raw value, the flag as typed).
    """
    flags = flags or {}
    env = env if env is not None else {}
    paths = paths or ConfigPaths()
    toml = _read_file(paths)

    values: dict[str, object] = {}
    sources: dict[str, Source] = {}

    def take(spec: KeySpec) -> None:
        raw, source = _raw(spec, flags, env, toml)
        values[spec.dotted] = parse_value(spec, raw, source)
        sources[spec.dotted] = source

    by_dotted = {spec.dotted: spec for spec in KEYS}
    take(by_dotted["runtime.profile"])
    take(by_dotted["provider.kind"])
    if values["provider.kind"] is None:
        values["provider.kind"] = PROFILE_PROVIDER[str(values["runtime.profile"])]
        sources["provider.kind"] = Source("default", f"profile {values['runtime.profile']}")
    provider = str(values["provider.kind"])

    in_scope = [s for s in KEYS if s.scope in (ALL, provider)]
    unused: dict[str, Source] = {}
    for spec in KEYS:
        if spec not in in_scope and (source := _raw(spec, flags, env, toml)[1]).layer != "default":
            unused[spec.dotted] = source
    # Rules that make another provider's keys meaningless come before any of them is parsed.
    _check_cross_key_rules(provider, unused)
    for spec in in_scope:
        if spec.dotted not in values:
            take(spec)
    _check_rpc_bind(values, sources)
    cuda_min = values.get("image.cuda_min")
    _cuda_floor(cuda_min if isinstance(cuda_min, str) else None, sources.get("image.cuda_min"))
    check_multinode_rpc(provider, values, sources)
    cautions = read_key_files(values, sources)
    check_key_urls(values, sources, env)
    check_hub_paths(values, sources)
    check_owner_tag(values, sources)
    cautions += config_file_warnings(toml, [spec.dotted for spec in KEYS if spec.secret])

    def reload_for(kind: str) -> Config:
        dest = flag_dest(by_dotted["provider.kind"])
        chosen = {**flags, dest: (kind, "run record's provider")}
        return load_config(flags=chosen, env=env, paths=paths)

    return Config(
        values=values,
        sources=sources,
        ui_keys=dict(toml.ui_keys) if toml else {},
        file=toml.path if toml else None,
        unused=unused,
        warnings=_inert_warnings(values, sources),
        cautions=tuple(cautions),
        reload_for=reload_for,
    )


def _read_file(paths: ConfigPaths) -> TomlLayer | None:
    if paths.explicit is not None:
        if not paths.explicit.is_file():
            raise ConfigError(
                f"config file {paths.explicit} (from {paths.explicit_source}) does not exist; "
                "fix the path, or copy config.example.toml there"
            )
        return read_toml_layer(paths.explicit, set(BINDING_IDS))
    if paths.default.is_file():
        return read_toml_layer(paths.default, set(BINDING_IDS))
    return None


def _check_cross_key_rules(provider: str, unused: Mapping[str, Source]) -> None:
    # A host path means nothing on a rented machine: say so instead of silently ignoring it.
    cached = unused.get("docker.cached_model_host_path")
    if cached is not None:
        raise ConfigError(
            f"[docker] cached_model_host_path from {cached} is a host-local cache path and "
            f"requires provider=docker (provider is {provider}); unset it or use --provider docker"
        )


def _inert_warnings(values: Mapping[str, object], sources: Mapping[str, Source]) -> tuple[str, ...]:
    """One line per seed key set to something other than its default that is accepted but
    not built here: the key, value, source, and why it has no effect."""
    lines = []
    for spec in KEYS:
        if not spec.inert or spec.dotted not in values:
            continue
        value, source = values[spec.dotted], sources[spec.dotted]
        if source.layer == "default" or value == spec.default:
            continue
        shown = str(value).lower() if isinstance(value, bool) else repr(value)
        if isinstance(value, Path):
            shown = repr(str(value))
        lines.append(
            f"{spec.label} = {shown} from {source} is accepted and has no effect here: {spec.inert}"
        )
    return tuple(lines)


def _cuda_floor(value: str | None, source: Source | None) -> str | None:
    """`[image] cuda_min` as major.minor; unset: the pinned default image's floor; "0": none."""
    if value is None:
        return RENTED_IMAGE_CUDA_MIN
    text = value.strip()
    if text in ("0", "0.0"):
        return None
    if not re.fullmatch(r"\d{1,3}\.\d{1,3}", text):
        raise ConfigError(
            f"[image] cuda_min = {value!r} from {source} is not a CUDA version: set it as "
            f"major.minor, e.g. 12.4 (0 = no floor; unset = {RENTED_IMAGE_CUDA_MIN}, the "
            "default image's)"
        )
    return text


def _check_rpc_bind(values: Mapping[str, object], sources: Mapping[str, Source]) -> None:
    """The prompt RPC's token travels in clear text: a non-loopback address needs the user's
    explicit acknowledgement, else exit 2 with the fix."""
    addr = str(values["prompt.rpc_addr"])
    if is_loopback_name(addr.rpartition(":")[0]) or values.get("prompt.rpc_allow_remote"):
        return
    raise ConfigError(
        f"[prompt] rpc_addr = {addr!r} from {sources['prompt.rpc_addr']} is not a loopback "
        "address, and the prompt RPC has no authentication of the network (its token "
        "travels in clear text): anyone who can watch that network can take the token and "
        "prompt (and spend) your node. Use a loopback address such as 127.0.0.1:19777 (reach "
        "it from elsewhere through an SSH tunnel), or acknowledge with "
        "--rpc-bind-unauthenticated (env MVP_PROMPT_RPC_ALLOW_REMOTE=true, or "
        "[prompt] rpc_allow_remote = true)"
    )


def served_name(file: str) -> str:
    """The model name a hub file is served as: its file name without the directory, the
    `.gguf` suffix or a split's part number, lower case (`Llama-3.1-8B-Q4_K_M.gguf` →
    `llama-3.1-8b-q4_k_m`)."""
    stem = file.rsplit("/", 1)[-1].removesuffix(".gguf")
    return re.sub(r"-\d{5}-of-\d{5}$", "", stem).lower() or "model"
