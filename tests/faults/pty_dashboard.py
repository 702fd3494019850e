"""The real `mvp-tui` dashboard in a pseudo-terminal, as a person's terminal would run it:
keys go in as bytes, the screen comes out as bytes, and closing the terminal is closing the
pty's master (the kernel then hangs the session up: SIGHUP)."""

from __future__ import annotations

import fcntl
import os
import re
import struct
import subprocess
import sys
import termios
import threading
import time

# Escape sequences (colours, cursor moves) between the characters a screen shows.
ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]|\x1b[=>]")


class PtyDashboard:
    def __init__(
        self,
        env: dict[str, str],
        cols: int = 140,
        rows: int = 40,
        argv: tuple[str, ...] = ("-m", "mvp_tui"),  # what the interpreter runs
        wrapper: tuple[str, ...] = (),  # a command that execs the interpreter (unshare -n …)
    ) -> None:
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        # The size is the pty's: COLUMNS/LINES inherited from the parent would override it
        # (shutil.get_terminal_size reads them first). An xdist worker has them set to 80x24:
        # pytest imports readline in the controller, GNU readline exports them at init, and
        # execnet's workers inherit that environment.
        base = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("MVP_", "VAST")) and k not in ("COLUMNS", "LINES")
        }

        def controlling_tty() -> None:
            os.setsid()
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        self.proc = subprocess.Popen(
            [*wrapper, sys.executable, *argv],
            stdin=slave, stdout=slave, stderr=slave,
            env={**base, "TERM": "xterm-256color", **env},
            preexec_fn=controlling_tty,
        )
        os.close(slave)
        self.master: int | None = master
        self._out = bytearray()
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while self.master is not None:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:
                break
            if not chunk:
                break
            with self._changed:
                self._out += chunk
                self._changed.notify_all()

    @property
    def output(self) -> bytes:
        with self._changed:
            return bytes(self._out)

    def wait_for(
        self, text: str, within: float = 30.0, since: int = 0, *, plain: bool = False
    ) -> None:
        """Until `text` has been written to the terminal (the app draws text in runs), at or
        after byte `since` of the output (`len(output)` before a key: what it drew).
        `plain`: in the output without its escape sequences (text drawn in several colours,
        such as the footer's key and its description)."""
        needle = text.encode()
        deadline = time.monotonic() + within

        def drawn() -> bool:
            out = ANSI.sub(b"", self._out[since:]) if plain else self._out
            return out.find(needle, 0 if plain else since) >= 0

        with self._changed:
            while not drawn():
                left = deadline - time.monotonic()
                assert left > 0, f"{text!r} never appeared on the terminal"
                self._changed.wait(left)

    def resize(self, cols: int, rows: int) -> None:
        """The terminal window is resized (the kernel tells the app with SIGWINCH)."""
        assert self.master is not None
        fcntl.ioctl(self.master, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))

    def press(self, keys: bytes) -> None:
        assert self.master is not None
        os.write(self.master, keys)

    def close_terminal(self) -> None:
        """The terminal window goes away."""
        master, self.master = self.master, None
        if master is not None:
            os.close(master)

    def wait(self, within: float = 90.0) -> int:
        return self.proc.wait(within)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.close_terminal()
