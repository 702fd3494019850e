"""One check's outcome, as `mvp-tui check` prints it (a line, or a JSON object)."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class CheckStatus(enum.Enum):
    OK = "ok"
    FAILED = "failed"
    SKIPPED = "skipped"  # does not apply here (a provider with no key set)


@dataclass(frozen=True, slots=True)
class Check:
    """`name` is what was checked; `detail` what was found; `fix` what to do (for a skipped
    check: how to make it apply). `warnings` do not fail the check."""

    name: str
    status: CheckStatus
    detail: str
    fix: str = ""
    warnings: tuple[str, ...] = ()

    @classmethod
    def ok(cls, name: str, detail: str, *, warnings: tuple[str, ...] = ()) -> Check:
        return cls(name, CheckStatus.OK, detail, warnings=warnings)

    @classmethod
    def failed(cls, name: str, detail: str, fix: str) -> Check:
        return cls(name, CheckStatus.FAILED, detail, fix)

    @classmethod
    def skipped(cls, name: str, detail: str, fix: str = "") -> Check:
        return cls(name, CheckStatus.SKIPPED, detail, fix)
