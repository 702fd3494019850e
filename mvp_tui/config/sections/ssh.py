"""[ssh]: how patient the SSH bootstrap is."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from mvp_tui.config.spec import Section, key


@dataclass(frozen=True)
class SshSection(Section):
    """[ssh]: back-off and timeouts of the SSH bootstrap."""

    NAME: ClassVar[str] = "ssh"

    retry_initial_secs: float = key(
        1.0, "first SSH retry back-off in seconds (doubles each try)",
        env="MVP_SSH_RETRY_INITIAL_SECS", flag="--ssh-retry-initial-secs", above=0,
    )
    retry_max_secs: float = key(
        30.0, "SSH retry back-off cap in seconds", env="MVP_SSH_RETRY_MAX_SECS",
        flag="--ssh-retry-max-secs", above=0,
    )
    ready_timeout_secs: float = key(
        600.0, "give up bootstrapping (and destroy the lease) when the node is not ready by then",
        env="MVP_SSH_READY_TIMEOUT_SECS", flag="--ssh-ready-timeout-secs", minimum=1,
    )
    connect_timeout_secs: float = key(
        15.0, "one SSH connect attempt's timeout", env="MVP_SSH_CONNECT_TIMEOUT_SECS",
        flag="--ssh-connect-timeout-secs", minimum=1,
    )
