"""How patient and how careful the SSH session is: the [ssh] keys' figures come from config
(their defaults are the keys' declared defaults, not copies); the rest are fixed here."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from mvp_tui.config.schema import BY_DOTTED
from mvp_tui.config.sections.ssh import SshSection

if TYPE_CHECKING:
    from mvp_tui.config import Config


def _key_label(dotted: str) -> str:
    """A key as errors name it: `[vastai] ssh_identity (env MVP_VASTAI_SSH_IDENTITY)`."""
    spec = BY_DOTTED[dotted]
    return f"{spec.label} (env {spec.env[0]})"


@dataclass(frozen=True, slots=True)
class SshSettings:
    """Timing and limits of one node session. Seconds unless named otherwise.

    `from_config` takes [ssh] (and the node key, [vastai]/[runpod] ssh_identity); a field
    copied from a key (`KEYS`) defaults to that key's declared default
    (tests/foundation/test_settings_from_sections.py holds it); the other figures are fixed
    here."""

    # field -> the key it is copied from
    KEYS: ClassVar[Mapping[str, str]] = {
        "backoff_initial": "ssh.retry_initial_secs",
        "backoff_cap": "ssh.retry_max_secs",
        "ready_timeout": "ssh.ready_timeout_secs",
        "connect_timeout": "ssh.connect_timeout_secs",
    }

    backoff_initial: float = SshSection.retry_initial_secs
    backoff_factor: float = 2.0
    backoff_cap: float = SshSection.retry_max_secs
    # From the first attempt to the agent reporting ready.
    ready_timeout: float = SshSection.ready_timeout_secs
    # From the first attempt to a first working connection: a host whose sshd never answers
    # in this time is given up (the boot budget; None: only ready_timeout bounds it).
    reach_timeout: float | None = None
    reconnect_timeout: float = 300.0  # after ready: from a drop to a working connection again
    connect_timeout: float = SshSection.connect_timeout_secs  # one TCP connect + login
    banner_timeout: float = 5.0  # the raw banner probe after a failed handshake
    # While sshd is not up yet, its banner is probed this often and the login follows the
    # first answer: the back-off is for failed logins, not for waiting on a port.
    port_probe_interval: float = 1.0
    local_strikes: int = 2  # banner seen but our side failed this many times in a row: stop
    auth_attempts: int = 3  # logins refused this many times in a row: stop
    keepalive_interval: float = 15.0  # SSH keepalives, so a silent dead link is noticed
    keepalive_count_max: int = 3
    launch_timeout: float = 30.0  # the node agent writes its pid within this
    poll_interval: float = 0.02  # how often the node-side reader looks for new log bytes
    shutdown_grace: float = 10.0  # after `shutdown`, before SIGTERM (and as long again: SIGKILL)
    max_line_bytes: int = 65536  # a longer line is delivered in pieces of this size
    # The nodes' private key ([vastai]/[runpod] ssh_identity); None: that key's default.
    identity_path: Path | None = None
    # The user's OpenSSH client config ([ssh] config_file); None: none is read (a session
    # made without a config, as tests and benches make one, reads none; a run's is set).
    config_file: Path | None = None
    # The setting identity_path comes from, as its errors name it (the provider's own key).
    identity_key: str = _key_label("vastai.ssh_identity")

    @classmethod
    def from_config(cls, config: Config) -> SshSettings:
        """[ssh] as the config has it (a 0 back-off is refused when the config loads)."""
        dotted = config.kind.ssh_identity_key  # the provider's own key, if it has one
        identity = config.values.get(dotted) if dotted else None
        return cls.from_section(
            config.settings.ssh,
            identity_path=identity if isinstance(identity, Path) else None,
            identity_key=_key_label(dotted) if dotted else None,
        )

    @classmethod
    def from_section(
        cls,
        ssh: SshSection,
        *,
        identity_path: Path | None = None,
        identity_key: str | None = None,
    ) -> SshSettings:
        """[ssh] as loaded (`config.settings.ssh`), and the node key of the running provider."""
        return cls(
            backoff_initial=ssh.retry_initial_secs,
            backoff_cap=ssh.retry_max_secs,
            ready_timeout=ssh.ready_timeout_secs,
            connect_timeout=ssh.connect_timeout_secs,
            identity_path=identity_path,
            config_file=ssh.config_file,
            identity_key=identity_key or _key_label("vastai.ssh_identity"),
        )

    def __post_init__(self) -> None:
        for name in (
            "backoff_initial",
            "backoff_cap",
            "ready_timeout",
            "reconnect_timeout",
            "connect_timeout",
            "banner_timeout",
            "port_probe_interval",
            "launch_timeout",
            "poll_interval",
            "shutdown_grace",
        ):
            if getattr(self, name) <= 0:
                raise ValueError(f"ssh setting {name} must be > 0, got {getattr(self, name)}")
        if self.backoff_factor < 1:
            raise ValueError(f"ssh setting backoff_factor must be >= 1, got {self.backoff_factor}")
        for name in ("local_strikes", "auth_attempts", "keepalive_count_max", "max_line_bytes"):
            if getattr(self, name) < 1:
                raise ValueError(f"ssh setting {name} must be >= 1, got {getattr(self, name)}")
