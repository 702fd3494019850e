"""How patient and how careful the SSH session is; every figure comes from config."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from mvp_tui.config.schema import BY_DOTTED

if TYPE_CHECKING:
    from mvp_tui.config import Config


@dataclass(frozen=True, slots=True)
class SshSettings:
    """Timing and limits of one node session. Seconds unless named otherwise.

    `from_config` takes [ssh] (and the node key, [vastai]/[runpod] ssh_identity); the other figures
    are fixed here."""

    backoff_initial: float = 1.0
    backoff_factor: float = 2.0
    backoff_cap: float = 30.0
    ready_timeout: float = 900.0  # from the first attempt to the agent reporting ready
    # From the first attempt to a first working connection: a host whose sshd never answers
    # in this time is given up (the boot budget; None: only ready_timeout bounds it).
    reach_timeout: float | None = None
    reconnect_timeout: float = 300.0  # after ready: from a drop to a working connection again
    connect_timeout: float = 20.0  # one TCP connect + handshake + login
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
    identity_path: Path | None = None  # the nodes' private key; None = ~/.ssh/id_ed25519
    # The user's OpenSSH client config ([ssh] config_file); None: none is read.
    config_file: Path | None = None
    # The setting identity_path comes from, as its errors name it (the provider's own key).
    identity_key: str = "[vastai] ssh_identity (env MVP_VASTAI_SSH_IDENTITY)"

    @classmethod
    def from_config(cls, config: Config) -> SshSettings:
        """[ssh] as the config has it (a 0 back-off is refused when the config loads)."""
        ssh, node = config.settings.ssh, config.settings.runpod or config.settings.vastai
        key = BY_DOTTED[
            "runpod.ssh_identity" if config.provider == "runpod" else "vastai.ssh_identity"
        ]
        return cls(
            backoff_initial=ssh.retry_initial_secs,
            backoff_cap=ssh.retry_max_secs,
            ready_timeout=ssh.ready_timeout_secs,
            connect_timeout=ssh.connect_timeout_secs,
            identity_path=node.ssh_identity if node else None,
            config_file=ssh.config_file,
            identity_key=f"{key.label} (env {key.env[0]})",
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
