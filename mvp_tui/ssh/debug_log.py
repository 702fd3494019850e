"""The SSH client's debug log (`[ssh] debug`), as the seed's `ssh -v` gave one: asyncssh's own
debug lines for every connection of the run, written to `<run dir>/ssh-debug.log` (mode 600,
never through a symlink), each line redacted first. Off by default: a handshake failure on a
marketplace host otherwise leaves one outcome line to diagnose it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

DEBUG_LOG_FILE = "ssh-debug.log"
_DEBUG_LEVEL = 2  # asyncssh's full debug logging, without packet dumps (they carry data)
_LOGGER = "asyncssh"


class _Redacting(logging.Formatter):
    def __init__(self, redact: Callable[[str], str]) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")
        self._redact = redact

    def format(self, record: logging.LogRecord) -> str:
        return self._redact(super().format(record))


def start_debug_log(run_dir: Path, redact: Callable[[str], str]) -> Callable[[], None]:
    """Send asyncssh's debug log to the run's `ssh-debug.log` (appended, redacted); returns
    the function that stops it and puts the logger back as it was."""
    import asyncssh

    run_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = run_dir / DEBUG_LOG_FILE
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0)
    stream = os.fdopen(os.open(path, flags, 0o600), "a", encoding="utf-8")
    handler = logging.StreamHandler(stream)
    handler.setFormatter(_Redacting(redact))
    logger = logging.getLogger(_LOGGER)
    level, propagate = logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False  # never onto the screen or another handler of the app's
    asyncssh.set_debug_level(_DEBUG_LEVEL)

    def stop() -> None:
        logger.removeHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate
        handler.close()

    return stop
