"""Exit statuses of every `mvp-tui` command (documented in docs/commands.md and `--help`)."""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    OK = 0  # success
    RUN_FAILED = 1  # the run failed (and what it leased was torn down, confirmed)
    USAGE = 2  # bad usage or configuration; nothing was started
    MAY_BILL = 3  # a lease may still exist and bill: teardown was not confirmed
