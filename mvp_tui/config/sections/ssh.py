"""[ssh]: how patient the SSH bootstrap is."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
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
    config_file: Path = key(
        "~/.ssh/config",
        (
            "OpenSSH client config read for each node's host, as the seed's ssh read it "
            "(ProxyJump, ProxyCommand, Hostname, BindAddress, ciphers); /dev/null reads none. "
            "The node's user, port, key, host-key pin and agent stay mvp-tui's"
        ),
        env="MVP_SSH_CONFIG_FILE", flag="--ssh-config-file",
    )
    debug: bool = key(
        False,
        (
            "write the SSH client's debug log (asyncssh, as the seed's ssh -v) to "
            "ssh-debug.log in the run's directory, secrets redacted, mode 600"
        ),
        env="MVP_SSH_DEBUG", flag="--ssh-debug",
    )
