"""Host keys trusted on first connect, per lease, and required ever after.

The first key a lease's node presents is pinned through `HostKeyPins`; every later connection
to that lease (reconnects, port forwards, re-attach after a restart) must present the same key.
The run records implement `HostKeyPins` through an adapter; `MemoryPins` and `FilePins` serve
tests and standalone use.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import asyncssh

from mvp_tui.ssh.errors import HostKeyChanged


class HostKeyPins(Protocol):
    """Where pinned host keys live, keyed by lease (e.g. "vastai:7002")."""

    def get(self, lease_key: str) -> str | None:
        """The pinned key in OpenSSH form (`<alg> <base64>`), or None before first connect."""
        ...

    def pin(self, lease_key: str, key_openssh: str) -> None:
        """Record the key seen first; must be durable before it returns."""
        ...

    def pending(self, lease_key: str) -> str | None:
        """The key a rotation installed on the node and has not yet seen answer, or None."""
        ...

    def propose(self, lease_key: str, key_openssh: str | None) -> None:
        """Note (None: forget) the key a rotation is about to install; durable on return, so
        a crash before the rotation is confirmed leaves both keys known."""
        ...

    def settle(self, lease_key: str, key_openssh: str) -> None:
        """The pending key answered: pin it and forget the pending one, in one write."""
        ...


class MemoryPins:
    """Pins held in a dict: for tests and one-process runs."""

    def __init__(self) -> None:
        self._pins: dict[str, str] = {}
        self._pending: dict[str, str] = {}

    def get(self, lease_key: str) -> str | None:
        return self._pins.get(lease_key)

    def pin(self, lease_key: str, key_openssh: str) -> None:
        self._pins[lease_key] = key_openssh

    def pending(self, lease_key: str) -> str | None:
        return self._pending.get(lease_key)

    def propose(self, lease_key: str, key_openssh: str | None) -> None:
        if key_openssh is None:
            self._pending.pop(lease_key, None)
        else:
            self._pending[lease_key] = key_openssh

    def settle(self, lease_key: str, key_openssh: str) -> None:
        self._pins[lease_key] = key_openssh
        self._pending.pop(lease_key, None)


_PENDING = "pending:"  # FilePins: a rotation's key beside the pin, under this prefix


class FilePins:
    """Pins in one JSON file ({lease_key: key}), replaced atomically on every pin."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def get(self, lease_key: str) -> str | None:
        return self._load().get(lease_key)

    def pin(self, lease_key: str, key_openssh: str) -> None:
        pins = self._load()
        pins[lease_key] = key_openssh
        self._write(pins)

    def pending(self, lease_key: str) -> str | None:
        return self._load().get(_PENDING + lease_key)

    def propose(self, lease_key: str, key_openssh: str | None) -> None:
        pins = self._load()
        pins.pop(_PENDING + lease_key, None)
        if key_openssh is not None:
            pins[_PENDING + lease_key] = key_openssh
        self._write(pins)

    def settle(self, lease_key: str, key_openssh: str) -> None:
        pins = self._load()
        pins[lease_key] = key_openssh
        pins.pop(_PENDING + lease_key, None)
        self._write(pins)

    def _write(self, pins: dict[str, str]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".pins-", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(pins, out, indent=1, sort_keys=True)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def _load(self) -> dict[str, str]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        if not isinstance(data, dict):
            raise ValueError(f"host key pins file {self.path} is not a JSON object")
        return {str(k): str(v) for k, v in data.items()}


def openssh_public(key: asyncssh.SSHKey) -> str:
    """`<algorithm> <base64>` of a public key, without a comment."""
    return " ".join(key.export_public_key("openssh").decode("ascii").split()[:2])


def fingerprint_of(key_openssh: str) -> str:
    """SHA256 fingerprint of an OpenSSH public key line."""
    return asyncssh.import_public_key(key_openssh).get_fingerprint("sha256")


@dataclass(slots=True)
class PinCheck:
    """What one handshake saw: the key and whether it was pinned now or matched a pin."""

    lease_key: str
    seen: str | None = None
    pinned_now: bool = False
    mismatch: HostKeyChanged | None = None
    # The pin was made before create and no connection has shown it yet: another key is the
    # node's own, before its start command installed ours — "not yet", never trusted.
    awaiting: bool = False
    not_yet: str | None = None  # what the node showed instead, while awaiting
    settled_now: bool = False  # a rotation's pending key answered and is pinned now


class PinningClient(asyncssh.SSHClient):
    """asyncssh client that trusts the lease's pinned key only, pinning the first one seen.

    Used with `known_hosts=([], [], [])`: asyncssh then asks `validate_host_public_key` about
    every key, so trust is decided here and host key checking is never switched off.
    """

    def __init__(self, pins: HostKeyPins, check: PinCheck) -> None:
        self._pins = pins
        self._check = check

    def validate_host_public_key(
        self, host: str, addr: str, port: int, key: asyncssh.SSHKey
    ) -> bool:
        seen = openssh_public(key)
        self._check.seen = seen
        pinned = self._pins.get(self._check.lease_key)
        if pinned is None:
            self._pins.pin(self._check.lease_key, seen)
            self._check.pinned_now = True
            return True
        if _same_key(pinned, seen):
            return True
        pending = self._pins.pending(self._check.lease_key)
        if pending is not None and _same_key(pending, seen):
            # Installed over a verified session by a rotation that was not confirmed yet
            # (the process stopped in between): the node had the key from us.
            self._pins.settle(self._check.lease_key, seen)
            self._check.settled_now = True
            return True
        if self._check.awaiting:
            self._check.not_yet = (
                f"the node presents host key {key.get_fingerprint('sha256')}, not yet the "
                f"pinned {fingerprint_of(pinned)}: nothing is sent to it"
            )
            return False
        self._check.mismatch = HostKeyChanged(
            self._check.lease_key, fingerprint_of(pinned), key.get_fingerprint("sha256")
        )
        return False


def _same_key(a: str, b: str) -> bool:
    return a.split()[:2] == b.split()[:2]
