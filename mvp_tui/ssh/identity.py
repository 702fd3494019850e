"""The SSH identity nodes are reached with: a private key file, or a key held by ssh-agent.

The private key never leaves this object in text: its repr hides it and no error quotes it.
An encrypted key is never prompted for; it is used through an ssh-agent holding the same key
(found by its public half, which is read from the key file's clear header or its `.pub`).
"""

from __future__ import annotations

import base64
import enum
import os
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import asyncssh

from mvp_tui.ssh.errors import IdentityError
from mvp_tui.ssh.public_key import DEFAULT_IDENTITY, openssh_public_blob, take_string

# The key the errors name when the caller does not say: the running provider's own key is
# passed in (`SshSettings.identity_key`), so a RunPod run names `[runpod] ssh_identity`.
CONFIG_KEY = "[vastai] ssh_identity (env MVP_VASTAI_SSH_IDENTITY)"


class IdentitySource(enum.Enum):
    """Where signatures come from."""

    FILE = "file"  # an unencrypted private key file, held in memory
    AGENT = "agent"  # ssh-agent, for an encrypted (or absent) private key file


@dataclass(frozen=True, slots=True)
class SshIdentity:
    """A usable SSH identity: its public half in OpenSSH form and its SHA256 fingerprint."""

    path: Path
    source: IdentitySource
    public_openssh: str
    fingerprint: str
    agent_path: str | None = None
    config_key: str = field(default=CONFIG_KEY, compare=False)  # the setting errors name
    _key: asyncssh.SSHKey | None = field(default=None, repr=False, compare=False)

    @asynccontextmanager
    async def client_keys(self) -> AsyncIterator[Sequence[asyncssh.SSHKeyPair | asyncssh.SSHKey]]:
        """The keys to offer for one connection; an agent stays open only for the login."""
        if self._key is not None:
            yield [self._key]
            return
        agent = await _open_agent(self.agent_path, self.path)
        try:
            match = await _agent_key(agent, self.public_openssh)
            if match is None:
                raise _not_in_agent(self.path, self.fingerprint, self.agent_path, self.config_key)
            yield [match]
        finally:
            agent.close()
            await agent.wait_closed()


async def load_identity(
    path: str | Path | None,
    *,
    agent_path: str | None = None,
    use_env_agent: bool = True,
    config_key: str = CONFIG_KEY,
) -> SshIdentity:
    """Load the key at `path` (default ~/.ssh/id_ed25519, `~` expanded).

    An unencrypted key is used directly. An encrypted key (or a missing private file next
    to a `.pub`) is used through the ssh-agent at `agent_path` (default: SSH_AUTH_SOCK when
    `use_env_agent`), which must hold the same key; otherwise the key is refused clearly.
    Every error names `config_key`, the setting the path came from.
    """
    key_path = _key_path(path)
    if agent_path is None and use_env_agent:
        agent_path = os.environ.get("SSH_AUTH_SOCK") or None
    data = _read_key_file(key_path, config_key)
    if data is not None:
        key = _import_unencrypted(data, key_path, config_key)
        if key is not None:
            return _file_identity(key_path, key)
    public = _public_half(key_path, data, config_key)
    return await _agent_identity(
        key_path, public, agent_path, encrypted=data is not None, config_key=config_key
    )


def _key_path(path: str | Path | None) -> Path:
    return Path(path if path is not None else DEFAULT_IDENTITY).expanduser()


def _read_key_file(path: Path, config_key: str) -> bytes | None:
    """The key file's bytes; None when it is absent but its `.pub` exists (agent-only key)."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        if _pub_path(path).is_file():
            return None
        raise IdentityError(
            f"SSH identity {path} does not exist (set by {config_key})",
            fix=f"create one with `ssh-keygen -t ed25519 -f {path}` or point {config_key} "
            "at an existing private key",
        ) from None
    except IsADirectoryError:
        raise IdentityError(
            f"SSH identity {path} is a directory, not a key file (set by {config_key})",
            fix=f"point {config_key} at a private key file such as ~/.ssh/id_ed25519",
        ) from None
    except OSError as error:
        raise IdentityError(
            f"SSH identity {path} cannot be read: {error.strerror or error} (set by {config_key})",
            fix=f"make it readable by this user (chmod 600 {path}) or set {config_key}",
        ) from None


def _import_unencrypted(data: bytes, path: Path, config_key: str) -> asyncssh.SSHKey | None:
    """The key when it is not encrypted; None when it needs a passphrase."""
    try:
        return asyncssh.import_private_key(data)
    except asyncssh.KeyImportError as error:
        if "passphrase" in str(error).lower():
            return None
        raise IdentityError(
            f"SSH identity {path} is not a private key asyncssh can read ({error}) "
            f"(set by {config_key})",
            fix=f"point {config_key} at an OpenSSH private key, e.g. one made with "
            "`ssh-keygen -t ed25519`",
        ) from None


def _file_identity(path: Path, key: asyncssh.SSHKey) -> SshIdentity:
    return SshIdentity(
        path=path,
        source=IdentitySource.FILE,
        public_openssh=_openssh_text(key),
        fingerprint=key.get_fingerprint("sha256"),
        _key=key,
    )


def _openssh_text(key: asyncssh.SSHKey) -> str:
    """`<algorithm> <base64>` without the comment (it may carry a user or host name)."""
    fields = key.export_public_key("openssh").decode("ascii").split()
    return " ".join(fields[:2])


def _pub_path(path: Path) -> Path:
    return path.with_name(path.name + ".pub")


def _public_half(path: Path, data: bytes | None, config_key: str) -> asyncssh.SSHKey:
    """The public key of an encrypted key: from the file's clear header, else its `.pub`."""
    if data is not None:
        blob = openssh_public_blob(data)
        if blob is not None:
            algorithm = _first_string(blob)
            text = f"{algorithm.decode('ascii')} {base64.b64encode(blob).decode('ascii')}"
            return asyncssh.import_public_key(text)
    pub = _pub_path(path)
    try:
        return asyncssh.read_public_key(str(pub))
    except (OSError, asyncssh.KeyImportError):
        raise IdentityError(
            f"SSH identity {path} is encrypted and its public key cannot be found "
            f"(no readable {pub}) (set by {config_key})",
            fix=f"write it with `ssh-keygen -y -f {path} > {pub}`, or use a key without a "
            "passphrase",
        ) from None


def _first_string(blob: bytes) -> bytes:
    return take_string(blob)[0]


async def _agent_identity(
    path: Path,
    public: asyncssh.SSHKey,
    agent_path: str | None,
    *,
    encrypted: bool,
    config_key: str,
) -> SshIdentity:
    """An identity whose signatures come from the agent, checked to hold the key now."""
    fingerprint = public.get_fingerprint("sha256")
    what = "is encrypted" if encrypted else "has only its public key on disk"
    if not agent_path:
        raise IdentityError(
            f"SSH identity {path} ({fingerprint}) {what} and no ssh-agent is available "
            "(SSH_AUTH_SOCK is unset); mvp-tui never prompts for a passphrase",
            fix=f"start ssh-agent and `ssh-add {path}`, or set {config_key} to a key "
            "without a passphrase",
        )
    agent = await _open_agent(agent_path, path)
    try:
        match = await _agent_key(agent, _openssh_text(public))
    finally:
        agent.close()
        await agent.wait_closed()
    if match is None:
        raise _not_in_agent(path, fingerprint, agent_path, config_key)
    return SshIdentity(
        path=path,
        source=IdentitySource.AGENT,
        public_openssh=_openssh_text(public),
        fingerprint=fingerprint,
        agent_path=agent_path,
        config_key=config_key,
    )


async def _open_agent(agent_path: str | None, path: Path) -> asyncssh.SSHAgentClient:
    try:
        return await asyncssh.connect_agent(agent_path)
    except (OSError, asyncssh.Error) as error:
        raise IdentityError(
            f"ssh-agent at {agent_path} cannot be reached ({error}) for SSH identity {path}",
            fix="start ssh-agent (`eval $(ssh-agent)`) and `ssh-add` the key, or fix SSH_AUTH_SOCK",
        ) from None


async def _agent_key(
    agent: asyncssh.SSHAgentClient, public_openssh: str
) -> asyncssh.SSHKeyPair | None:
    """The agent's key pair whose public half is `public_openssh`, if it holds one."""
    wanted = asyncssh.import_public_key(public_openssh).public_data
    try:
        keys = await agent.get_keys()
    except (OSError, asyncssh.Error, ValueError):
        return None
    for pair in keys:
        if pair.public_data == wanted:
            return pair
    return None


def _not_in_agent(
    path: Path, fingerprint: str, agent_path: str | None, config_key: str
) -> IdentityError:
    return IdentityError(
        f"SSH identity {path} ({fingerprint}) needs a passphrase and the ssh-agent at "
        f"{agent_path} does not hold it; mvp-tui never prompts for a passphrase",
        fix=f"run `ssh-add {path}` in this agent, or set {config_key} to a key without a "
        "passphrase",
    )
