"""The user's OpenSSH client config (`[ssh] config_file`, default `~/.ssh/config`), read for
a node's host as the seed's `ssh` read it: a jump host (ProxyJump), a proxy command,
Hostname, BindAddress, algorithms. asyncssh applies the options it supports; what mvp-tui
sets itself (user, port, key, host-key pin, no agent, no pty) is never taken from it.

A node reached through a proxy cannot have its port probed directly, so the session skips
the banner probe there (`proxied`).
"""

from __future__ import annotations

import getpass
import os
from pathlib import Path


def config_paths(config_file: Path | None) -> list[str] | None:
    """The config file to hand asyncssh; None (read none) when it is unset or not a readable
    file (so `/dev/null` turns it off)."""
    if config_file is None or not config_file.is_file() or not os.access(config_file, os.R_OK):
        return None
    return [str(config_file)]


def proxied(config_file: Path | None, host: str, port: int, user: str) -> bool:
    """True when the config sends `host` through a jump host or a proxy command."""
    paths = config_paths(config_file)
    if paths is None:
        return False
    from asyncssh.config import SSHClientConfig

    try:
        config = SSHClientConfig.load(
            None, paths, False, False, False, getpass.getuser(), user, host, port
        )
    except Exception:  # a config asyncssh cannot parse fails the connect, with its reason
        return False
    return bool(config.get("ProxyJump") or config.get("ProxyCommand"))
