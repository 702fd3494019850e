"""The dashboard's terminal going away (a closed window, ssh dropped, tmux killed).

A hang-up brings SIGHUP and, from the kernel, SIGCONT. Textual's Linux driver answers SIGCONT
by entering application mode again (a new output thread), and its output thread dies on the
first write to the dead terminal (EIO), leaving its bounded queue to fill: the app's next
writes then block forever, after the teardown, so the process never exits (seen with a lease
destroyed and the dashboard still alive an hour later). So, once the terminal is gone:
output goes to /dev/null, SIGCONT no longer restarts anything, and a write whose output
thread is dead is dropped instead of queued.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys

from textual.drivers.linux_driver import LinuxDriver


class HangupSafeDriver(LinuxDriver):
    """Textual's Linux driver, except that output to a terminal that is gone is dropped, and
    only a SIGCONT that ends our own suspension (ctrl+z, then fg) re-enters application mode:
    a hang-up's SIGCONT may come before the app's own SIGHUP handler has run."""

    _suspended = False

    def _sigtstp_application(self, *args: object) -> None:
        self._suspended = True
        super()._sigtstp_application(*args)

    def _sigcont_application(self, *args: object) -> None:
        if not self._suspended:
            return  # not resuming from our suspension: a hang-up, or a stray signal
        self._suspended = False
        super()._sigcont_application(*args)

    def write(self, data: str) -> None:
        thread = self._writer_thread
        if thread is not None and thread.ident is not None and not thread.is_alive():
            return  # its output thread died on the dead terminal: nothing can be shown
        super().write(data)


def terminal_gone() -> None:
    """After SIGHUP: the screen's output goes nowhere, quietly, and SIGCONT is left alone."""
    signal.signal(signal.SIGCONT, signal.SIG_DFL)
    try:
        null = os.open(os.devnull, os.O_WRONLY)
    except OSError:
        return
    try:
        for stream in (sys.__stdout__, sys.__stderr__):
            if stream is not None:
                # A stream closed already takes nothing more: nothing to redirect.
                with contextlib.suppress(OSError, ValueError):
                    os.dup2(null, stream.fileno())
    finally:
        os.close(null)
