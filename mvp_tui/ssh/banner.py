"""Telling a broken local client from a slow node: the banner probe and the local strikes.

When a handshake fails on our side, a raw TCP read shows whether the node's sshd is there
(it sends `SSH-2.0-…` first). A banner with our side failing twice in a row means no other
node would do better: the problem is local. No banner means the node is still coming up.
"""

from __future__ import annotations

import asyncio
import contextlib

BANNER_PREFIX = b"SSH-"
_MAX_BANNER_LINE = 256


async def ssh_banner(host: str, port: int, within: float) -> bool:
    """Whether `host:port` sends a first line starting with `SSH-` within `within` seconds.

    Any failure (refused, silent, something else answering) reads as no banner.
    """
    writer: asyncio.StreamWriter | None = None
    try:
        async with asyncio.timeout(within):
            reader, writer = await asyncio.open_connection(host, port)
            line = await reader.readuntil(b"\n")
    except asyncio.LimitOverrunError:
        return False
    except asyncio.IncompleteReadError as partial:
        line = partial.partial
    except (OSError, TimeoutError):
        return False
    finally:
        if writer is not None:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
    return line[:_MAX_BANNER_LINE].startswith(BANNER_PREFIX)


def strikes_after(strikes: int, *, banner: bool, local_failure: bool) -> int:
    """Handshakes in a row blamed on this machine: one more when the node sent its banner
    and our side failed; back to 0 on any other outcome (no banner yet, a drop, a refusal)."""
    return strikes + 1 if banner and local_failure else 0
