"""The offers a run walks across attempts: which are left, and when to stop walking.

The lease walk (`lease/walk.py`) gives one running lease from the offers it is handed; an
attempt then takes it to a serving engine. When the host fails, the walk goes on with the
offers after the ones already tried, until one serves, `[lease] max_attempts` hosts failed,
the same failure came from `[lease] same_failure_limit` hosts in a row, or none is left.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

from mvp_tui.config import Config
from mvp_tui.config.sections.lease import LeaseSection
from mvp_tui.engine.failures import AttemptFailure, RepeatGuard
from mvp_tui.lease.records import AttemptRecord
from mvp_tui.providers.base import Offer


@dataclass(frozen=True, slots=True)
class AttemptSettings:
    """[lease] as the walk across hosts takes it; the defaults are the keys' declared ones."""

    # field -> the key it is copied from (tests/foundation/test_settings_from_sections.py)
    KEYS: ClassVar[Mapping[str, str]] = {
        "max_attempts": "lease.max_attempts",
        "same_failure_limit": "lease.same_failure_limit",
    }

    max_attempts: int = LeaseSection.max_attempts  # hosts brought up (and failed) at most
    same_failure_limit: int = LeaseSection.same_failure_limit
    replace_lost: bool = LeaseSection.on_node_loss == "replace"  # [lease] on_node_loss

    @classmethod
    def from_config(cls, config: Config) -> AttemptSettings:
        return cls(
            max_attempts=config.settings.lease.max_attempts,
            same_failure_limit=config.settings.lease.same_failure_limit,
            replace_lost=config.settings.lease.on_node_loss == "replace",
        )


class AttemptWalk:
    """The offers left to try and the hosts that failed so far."""

    def __init__(self, offers: Sequence[Offer], settings: AttemptSettings) -> None:
        self.settings = settings
        self.remaining = list({(o.provider, o.offer_id): o for o in offers}.values())
        self.failures: list[AttemptFailure] = []
        self._repeat = RepeatGuard(settings.same_failure_limit)

    def leased(self, attempts: Sequence[AttemptRecord]) -> None:
        """The lease walk tried these offers (the last one gave the lease): none is tried
        again by a later attempt."""
        tried = {a.offer_id for a in attempts}
        self.remaining = [o for o in self.remaining if o.offer_id not in tried]

    def failed(self, failure: AttemptFailure) -> tuple[str, str] | None:
        """One more host failed; (reason, fix) when the walk must stop, else None."""
        self.failures.append(failure)
        hosts = len(self.failures)
        if self._repeat.note(failure):
            return (
                f"the same failure ({failure.kind}) on {self._repeat.count} hosts in a row, "
                f"so it is not the hosts: {failure.reason}",
                failure.fix
                or "read the last host's channels; raise [lease] same_failure_limit to try more",
            )
        if hosts >= self.settings.max_attempts:
            return (
                f"{hosts} hosts failed ([lease] max_attempts = {self.settings.max_attempts}); "
                f"the last: {failure.reason}",
                "raise [lease] max_attempts (--max-attempts), or pick other offers",
            )
        if not self.remaining:
            return (
                f"every offer picked failed ({hosts} host(s)); the last: {failure.reason}",
                "pick more offers (the board's Enter walks the next ones; headless: "
                "--max-offers), or loosen the offer filters",
            )
        return None

    def exhausted(self, walk_reason: str) -> str:
        """The lease walk found no lease: say also what the failed hosts were."""
        if not self.failures:
            return walk_reason
        kinds = ", ".join(f.kind for f in self.failures)
        return f"{walk_reason} (after {len(self.failures)} failed host(s): {kinds})"
