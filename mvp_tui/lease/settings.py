"""How the lease walk and teardown wait, what they create, and the limits they keep."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from mvp_tui.config import Config, ConfigError
from mvp_tui.config.sections.lease import LeaseSection
from mvp_tui.config.sections.limits import LimitsSection
from mvp_tui.config.sections.runtime import RuntimeSection
from mvp_tui.install_tag import check_owner_tag, install_tag
from mvp_tui.labels import check_prefix
from mvp_tui.providers.runpod.section import RunpodSection
from mvp_tui.providers.vastai.boot import OnstartTooLong, vast_onstart
from mvp_tui.providers.vastai.section import VastaiSection

Sleep = Callable[[float], Awaitable[None]]

LOCAL_POLL_S = 0.5  # a local node answers at once: look often
LOCAL_DISK_GB = 20  # what a local lease reports; it rents no disk
DELETE_POLL_MAX_S = 2.0  # a delete is looked for at least this often (the provider's poll)
DESTROY_BACKOFF_GROWTH = 16  # a refused destroy's back-off doubles up to 16x its first


@dataclass(frozen=True, slots=True, kw_only=True)
class WalkSettings:
    """Timing (seconds), limits and the create request's contents.

    A run takes them from its config (`from_config`). A field copied from a key (`KEYS`)
    defaults to the key's declared default, and those computed from keys default to what a
    RunPod run's default config gives (the seed's walk timings; [lease]'s defaults in
    mvp_tui/config/sections/lease.py), as tests/foundation/test_settings_from_sections.py
    holds. Tests pass milliseconds; every wait goes through `sleep`, so nothing sleeps longer
    than it is told.
    """

    # field -> the key it is copied from
    KEYS: ClassVar[Mapping[str, str]] = {
        "reconcile_waits_s": "lease.reconcile_waits_secs",
        "ready_timeout_s": "lease.ready_timeout_secs",
        "delete_timeout_s": "lease.delete_timeout_secs",
        "destroy_backoff_s": "lease.destroy_backoff_secs",
        "max_price_per_hour": "limits.max_price_per_hour",
        "label_prefix": "lease.label_prefix",
        "owner_tag": "lease.owner_tag",
        "node_id": "runtime.node_id",
    }

    reconcile_waits_s: tuple[float, ...] = LeaseSection.reconcile_waits_secs
    # The provider's poll ([vastai]/[runpod] poll_interval_secs; a local node: LOCAL_POLL_S).
    poll_interval_s: float = RunpodSection.poll_interval_secs
    ready_timeout_s: float = LeaseSection.ready_timeout_secs
    delete_timeout_s: float = LeaseSection.delete_timeout_secs
    delete_poll_s: float = min(DELETE_POLL_MAX_S, RunpodSection.poll_interval_secs)
    destroy_attempts: int = 6  # destroy calls answered FAILED before giving up
    # The first back-off after a FAILED destroy; doubles, up to the max.
    destroy_backoff_s: float = LeaseSection.destroy_backoff_secs
    destroy_backoff_max_s: float = LeaseSection.destroy_backoff_secs * DESTROY_BACKOFF_GROWTH
    max_price_per_hour: float | None = LimitsSection.max_price_per_hour
    max_ambiguous_per_offer: int = 2
    # Reads of an instance that fail in a row (the provider's API answers 5xx, or nothing)
    # before the attempt ends with the API's last error instead of waiting out its budget
    # (seed 003 `Wait::Failed`). Each read already carries the client's own retries.
    read_failure_limit: int = 5
    # Once the container runs, its log is read for whether the start command ran (RunPod:
    # the image's own entrypoint may run instead, which never gets SSH): every
    # `start_check_every_s` within `start_check_s` of it (the first read that long after
    # it: what the entrypoint prints comes at once), then every `start_check_s` (an image
    # still pulling prints later), until the log shows the start command or SSH answers.
    start_check_s: float = 60.0
    start_check_every_s: float = 15.0
    label_prefix: str = LeaseSection.label_prefix
    # [lease] owner_tag; None = the tag kept in the state dir (`lease/identity.py`)
    owner_tag: str | None = LeaseSection.owner_tag
    node_id: int = RuntimeSection.node_id
    image: str = ""  # a run's is always its config's (`from_config`); "" in tests
    disk_gb: int = LOCAL_DISK_GB  # [vastai] disk_gb on Vast.ai
    env: Mapping[str, str] = field(default_factory=dict)
    onstart: str | None = None
    ssh_public_key: str | None = None
    sleep: Sleep = asyncio.sleep
    # The ready wait's clock: tests pair it with `sleep` to run the wait on fake time.
    monotonic: Callable[[], float] = time.monotonic

    def __post_init__(self) -> None:
        check_prefix(self.label_prefix)
        if self.owner_tag:
            check_owner_tag(self.owner_tag)
        positive = {
            "poll_interval_s": self.poll_interval_s,
            "ready_timeout_s": self.ready_timeout_s,
            "delete_timeout_s": self.delete_timeout_s,
            "delete_poll_s": self.delete_poll_s,
        }
        for name, value in positive.items():
            if not value > 0:
                raise ValueError(f"lease setting {name} must be > 0 seconds, got {value!r}")
        if any(w < 0 for w in self.reconcile_waits_s) or not self.reconcile_waits_s:
            raise ValueError(
                "lease setting reconcile_waits_s needs at least one wait >= 0 seconds, "
                f"got {self.reconcile_waits_s!r}"
            )
        if self.destroy_attempts < 1:
            raise ValueError(
                f"lease setting destroy_attempts must be >= 1, got {self.destroy_attempts}"
            )
        if self.destroy_backoff_s < 0 or self.destroy_backoff_max_s < self.destroy_backoff_s:
            raise ValueError(
                "lease settings destroy_backoff_s must be >= 0 and <= destroy_backoff_max_s"
            )
        if self.max_ambiguous_per_offer < 1:
            raise ValueError(
                "lease setting max_ambiguous_per_offer must be >= 1, "
                f"got {self.max_ambiguous_per_offer}"
            )
        if self.max_price_per_hour is not None and not self.max_price_per_hour > 0:
            raise ValueError(
                f"max_price_per_hour must be > 0 USD/h (or unset), got {self.max_price_per_hour!r}"
            )
        if self.node_id < 0:
            raise ValueError(f"lease setting node_id must be >= 0, got {self.node_id}")
        if self.disk_gb < 1:
            raise ValueError(f"disk_gb must be >= 1 GB, got {self.disk_gb}")

    def install_tag(self, state_dir: Path | str) -> str:
        """The tag this install's labels carry: [lease] owner_tag, else the one kept in
        `state_dir` (made there on first use)."""
        return install_tag(state_dir, self.owner_tag or "")

    @classmethod
    def from_config(
        cls,
        config: Config,
        *,
        env: Mapping[str, str] | None = None,
        ssh_public_key: str | None = None,
    ) -> WalkSettings:
        """[lease], the price cap of [limits] and what a create asks for ([image], the
        provider's keys). A 0 price cap is unset (no cap) and an empty or 0 figure that means
        nothing is refused when the config loads, so nothing here falls back to a default."""
        lease, vast = config.settings.lease, config.settings.of(VastaiSection)
        image = config.node_image()[0]
        poll_key = config.kind.poll_key  # the provider's own poll interval, if it has one
        polled = config.values.get(poll_key) if poll_key else None
        poll = float(polled) if isinstance(polled, (int, float)) else LOCAL_POLL_S
        prefix = lease.label_prefix
        try:
            check_prefix(prefix)
        except ValueError as exc:
            why = str(exc).split("is not usable: ", 1)[-1]
            raise ConfigError(
                f"[lease] label_prefix = {prefix!r} from {config.sources['lease.label_prefix']} "
                f"is not valid: {why}"
            ) from None
        if lease.owner_tag:
            try:
                check_owner_tag(lease.owner_tag)
            except ValueError as exc:
                raise ConfigError(
                    f"[lease] owner_tag = {lease.owner_tag!r} from "
                    f"{config.sources['lease.owner_tag']} is not valid: "
                    + str(exc).split("is not usable: ", 1)[-1]
                ) from None
        onstart = vast.onstart if vast else None
        if vast:  # the boot guard shares Vast's onstart cap: refused before anything is rented
            try:
                vast_onstart(onstart)
            except OnstartTooLong as exc:
                source = config.sources.get("vastai.onstart", "the config")
                raise ConfigError(f"{exc} (set in {source})") from None
        backoff = lease.destroy_backoff_secs
        return cls(
            reconcile_waits_s=lease.reconcile_waits_secs,
            poll_interval_s=poll,
            ready_timeout_s=lease.ready_timeout_secs,
            delete_timeout_s=lease.delete_timeout_secs,
            delete_poll_s=min(DELETE_POLL_MAX_S, poll),
            destroy_backoff_s=backoff,
            destroy_backoff_max_s=backoff * DESTROY_BACKOFF_GROWTH,
            max_price_per_hour=config.settings.limits.max_price_per_hour,
            label_prefix=prefix,
            owner_tag=lease.owner_tag,
            node_id=config.settings.runtime.node_id,
            image=image,
            disk_gb=vast.disk_gb if vast else LOCAL_DISK_GB,
            env=dict(env or {}),
            onstart=onstart,
            ssh_public_key=ssh_public_key,
        )

    def destroy_backoff(self, failures: int) -> float:
        """The wait after the `failures`-th FAILED destroy (1-based): doubling, capped."""
        return float(min(self.destroy_backoff_s * 2 ** (failures - 1), self.destroy_backoff_max_s))
