"""An SSH identity's public half read without asyncssh (standard library only): from its
`.pub` file or an OpenSSH private key file's clear header, and its SHA256 fingerprint.

The run's own records name the identity's fingerprint when the run is described, before
any SSH library is loaded (the seed's `config` phase carries `ssh_public_fingerprint`).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import struct
from pathlib import Path

from mvp_tui.providers.vastai.section import VastaiSection

# The nodes' key when none is named: [vastai] ssh_identity's declared default (and
# [runpod]'s, the same; tests/foundation/test_settings_from_sections.py holds both).
DEFAULT_IDENTITY = str(VastaiSection.ssh_identity)
_OPENSSH_LABEL = "OPENSSH PRIVATE KEY"  # the PEM label of an OpenSSH key file
_OPENSSH_BEGIN = f"-----BEGIN {_OPENSSH_LABEL}-----"
_OPENSSH_END = f"-----END {_OPENSSH_LABEL}-----"
_OPENSSH_MAGIC = b"openssh-key-v1\x00"


def take_string(data: bytes) -> tuple[bytes, bytes]:
    """One SSH wire-format string (uint32 length, bytes) and what follows it."""
    (length,) = struct.unpack(">I", data[:4])
    if len(data) < 4 + length:
        raise ValueError("truncated key file")
    return data[4 : 4 + length], data[4 + length :]


def openssh_public_blob(data: bytes) -> bytes | None:
    """The first public key of an `openssh-key-v1` file, which is stored unencrypted."""
    text = data.decode("ascii", "replace")
    if _OPENSSH_BEGIN not in text or _OPENSSH_END not in text:
        return None
    body = text.split(_OPENSSH_BEGIN, 1)[1].split(_OPENSSH_END, 1)[0]
    try:
        raw = base64.b64decode("".join(body.split()))
        if not raw.startswith(_OPENSSH_MAGIC):
            return None
        rest = raw[len(_OPENSSH_MAGIC) :]
        for _ in range(3):  # cipher name, KDF name, KDF options
            _, rest = take_string(rest)
        (count,) = struct.unpack(">I", rest[:4])
        if count < 1:
            return None
        blob, _ = take_string(rest[4:])
        return blob
    except (ValueError, struct.error):
        return None


def fingerprint(blob: bytes) -> str:
    """`SHA256:<base64, unpadded>`, as `ssh-keygen -l` and asyncssh write it."""
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


def public_fingerprint(identity: Path | None) -> str | None:
    """The SHA256 fingerprint of the identity at `identity` (default ~/.ssh/id_ed25519): its
    `.pub`, else the private key file's clear header; None when neither can be read (loading
    the identity later says why)."""
    path = Path(identity if identity is not None else DEFAULT_IDENTITY).expanduser()
    pub = path.with_name(path.name + ".pub")
    try:
        fields = pub.read_text("ascii").split()
        if len(fields) >= 2:
            return fingerprint(base64.b64decode(fields[1], validate=True))
    except (OSError, UnicodeDecodeError, binascii.Error, ValueError):
        pass
    try:
        blob = openssh_public_blob(path.read_bytes())
    except OSError:
        return None
    return fingerprint(blob) if blob is not None else None
