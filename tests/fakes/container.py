"""An instance's container start, played on this machine: the start script a fake recorded
from the create (Vast `onstart`, RunPod `cmd`) run by /bin/sh with the container's env, in
a process group of its own so the boot guard it backgrounds is stopped with it.

Waits are bounded polls on the guard's files or its process group, never bare sleeps."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from mvp_tui.node_protocol import (
    BOOT_GUARD_DIR_ENV,
    BOOT_GUARD_STAND_DOWN_FILE,
    BOOT_GUARD_VERDICT_FILE,
)

POLL_S = 0.05


def wait_until(condition: Callable[[], bool], within: float, what: str) -> None:
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not within {within:g} s"
        time.sleep(POLL_S)


class Container:
    """`argv` (default: `/bin/sh -c script`) started with `env` plus this machine's PATH
    (or `path`) and the guard's directory under `guard_dir`."""

    def __init__(
        self,
        env: Mapping[str, str],
        guard_dir: Path,
        *,
        script: str | None = None,
        argv: Sequence[str] | None = None,
        path: str | None = None,
    ) -> None:
        assert (script is None) != (argv is None)
        self.argv = list(argv) if argv is not None else ["/bin/sh", "-c", script or ""]
        self.env = {**env, "PATH": path or os.environ["PATH"], BOOT_GUARD_DIR_ENV: str(guard_dir)}
        self.dir = guard_dir
        self.started_at: float | None = None
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Container:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        self.started_at = time.monotonic()
        self.proc = subprocess.Popen(
            self.argv, env=self.env, start_new_session=True,
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )

    def stop(self) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    # -- what the guard left on the "node"
    def verdict(self, within: float = 10.0) -> str:
        path = self.dir / BOOT_GUARD_VERDICT_FILE
        wait_until(path.exists, within, "the boot guard's verdict")
        return path.read_text().strip()

    def log(self) -> str:
        path = self.dir / "log"
        return path.read_text() if path.exists() else ""

    def wait_log(self, text: str, within: float, count: int = 1) -> None:
        wait_until(lambda: self.log().count(text) >= count, within, f"guard log {text!r}")

    def running(self) -> bool:
        """Whether any live process of the container's group (the guard) is left; zombies
        do not count (nothing here may reap an orphaned guard)."""
        assert self.proc is not None
        self.proc.poll()  # reap the shell that started the guard
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2 :].split()
            if int(fields[2]) == self.proc.pid and fields[0] != "Z":
                return True
        return False

    def wait_ended(self, within: float) -> None:
        wait_until(lambda: not self.running(), within, "the boot guard's end")

    def stand_down(self) -> None:
        """What the agent does when it starts (tests of the guard alone)."""
        (self.dir / BOOT_GUARD_STAND_DOWN_FILE).write_text("test\n")
