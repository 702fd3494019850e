"""Every Python process the test suite starts reaches loopback only (tests/conftest.py puts
this folder first on PYTHONPATH, so each child imports it at start-up, and imports it into
the test process itself).

A name that is not local is not even looked up: the lookup would go to this machine's
resolver, which is off loopback. A connection to an address that is not loopback is refused
before any packet leaves. Both fail as the network being down would (`gaierror`,
`ConnectionRefusedError`), so the code under test takes its ordinary error path, and the
message says why. A process started with `-I` or `-S` (the node agent's zipapp) skips it:
those reach only what their test hands them, on loopback.
"""

from __future__ import annotations

import ipaddress
import socket
from typing import Any

WHY = "the test suite reaches loopback only (tests/loopback_only)"
_LOCAL_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"}


def _local_name(host: Any) -> str | None:
    """`host` as a name the real resolver may take without leaving loopback, or None."""
    name = host.decode("ascii", "replace") if isinstance(host, bytes) else str(host)
    bare = name.strip("[]").split("%", 1)[0].lower().rstrip(".")
    if bare in _LOCAL_NAMES:
        return name
    if bare.endswith(".localhost"):  # RFC 6761: loopback, never asked of a resolver here
        return "localhost"
    try:
        address = ipaddress.ip_address(bare)
    except ValueError:
        return None
    return name if (address.is_loopback or address.is_unspecified) else None


_getaddrinfo = socket.getaddrinfo
_gethostbyname = socket.gethostbyname
_connect = socket.socket.connect
_connect_ex = socket.socket.connect_ex


def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
    if host is None:  # the local wildcard, for a server's bind
        return _getaddrinfo(host, *args, **kwargs)
    local = _local_name(host)
    if local is None:
        raise socket.gaierror(socket.EAI_NONAME, f"{host!r} not looked up: {WHY}")
    return _getaddrinfo(local, *args, **kwargs)


def gethostbyname(host: str) -> str:
    local = _local_name(host)
    if local is None:
        raise socket.gaierror(socket.EAI_NONAME, f"{host!r} not looked up: {WHY}")
    return _gethostbyname(local)


def _check(sock: socket.socket, address: Any) -> None:
    inet = sock.family in (socket.AF_INET, socket.AF_INET6) and isinstance(address, tuple)
    if inet and _local_name(address[0]) is None:
        raise ConnectionRefusedError(f"connect to {address[0]} refused: {WHY}")


def connect(self: socket.socket, address: Any) -> None:
    _check(self, address)
    _connect(self, address)


def connect_ex(self: socket.socket, address: Any) -> int:
    _check(self, address)
    return _connect_ex(self, address)


socket.getaddrinfo = getaddrinfo
socket.gethostbyname = gethostbyname
socket.socket.connect = connect  # type: ignore[method-assign]
socket.socket.connect_ex = connect_ex  # type: ignore[method-assign]
