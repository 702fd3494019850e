"""Whose is a listed instance: the one rule every sweep follows before it destroys anything.

Ours: an instance a run record here holds (by its provider id, or by the label of a create
whose answer never came), or one whose label carries this install's tag (a record lost or
never written). Anything else listed under the prefix is a stranger: another install's run,
a label from before tags that no record here holds, a name a person gave that merely looks
like ours, or one that does not parse at all. Strangers are reported with the command that
ends one (`mvp-tui down --instance PROVIDER:ID`, which shows it and asks), never destroyed by
a sweep.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from mvp_tui.labels import parse_label
from mvp_tui.lease.records import RunRecord
from mvp_tui.providers.base import LeaseStatus
from mvp_tui.untrusted import clean_line


class Whose(enum.Enum):
    RECORDED = "recorded"  # a run record here holds it
    TAGGED = "tagged"  # carries this install's tag; no record here holds it
    STRANGER = "stranger"  # named like an mvp-tui run, not made here: reported only


@dataclass(frozen=True, slots=True)
class Claim:
    """Whose one listed instance is: ours (of `run_id`) or a stranger's (`why`)."""

    whose: Whose
    run_id: str = ""
    why: str = ""


@dataclass(frozen=True, slots=True)
class Holdings:
    """What the run records here hold on one provider: ids, and labels of creates that were
    never answered (their instance, if any, is known only by its label)."""

    by_id: Mapping[str, str]  # provider id -> run id
    by_label: Mapping[str, str]  # label of an unanswered create -> run id

    @classmethod
    def of(cls, records: Iterable[RunRecord], provider: str) -> Holdings:
        by_id: dict[str, str] = {}
        by_label: dict[str, str] = {}
        for record in records:
            if record.provider != provider:
                continue
            for lease in record.leases:
                if lease.provider_id is not None:
                    by_id[lease.provider_id] = record.run_id
                elif lease.may_bill:
                    by_label[lease.label] = record.run_id
            for attempt in record.attempts:  # a create on record whose lease never was
                if record.lease_by_label(attempt.label) is None:
                    by_label[attempt.label] = record.run_id
        return cls(by_id, by_label)


def claim(status: LeaseStatus, prefix: str, tag: str, holdings: Holdings) -> Claim:
    """Whose `status` is, for an install tagged `tag` whose records are `holdings`."""
    run = holdings.by_id.get(status.provider_id)
    if run is not None:
        return Claim(Whose.RECORDED, run)
    parsed = parse_label(status.label, prefix)
    run = holdings.by_label.get(status.label or "")
    if run is not None and parsed is not None and parsed.run_id == run:
        return Claim(Whose.RECORDED, run)
    if parsed is None:
        return Claim(Whose.STRANGER, why="its name does not parse as an mvp-tui label")
    if tag and parsed.owner_tag == tag:
        return Claim(Whose.TAGGED, parsed.run_id)
    if parsed.owner_tag:
        return Claim(Whose.STRANGER, why=f"another install's tag ({parsed.owner_tag})")
    return Claim(Whose.STRANGER, why="an untagged (older) label that no record here holds")


@dataclass(frozen=True, slots=True)
class Stranger:
    """An instance named like an mvp-tui run that this install did not make: reported with
    the command that ends it, never destroyed by a sweep."""

    provider: str
    provider_id: str
    label: str
    state: str
    price_per_hour: float | None
    age_s: float | None
    why: str

    @classmethod
    def of(cls, provider: str, status: LeaseStatus, why: str, now: float) -> Stranger:
        started = status.started_at
        return cls(
            provider=provider,
            provider_id=status.provider_id,
            label=status.label or "",
            state=status.raw_state or status.state.value,
            price_per_hour=status.price_per_hour,
            age_s=max(0.0, now - started) if started else None,
            why=why,
        )

    @property
    def command(self) -> str:
        """What ends it, asking first (`mvp-tui down --instance PROVIDER:ID`)."""
        return f"mvp-tui down --instance {_clean(self.provider, 16)}:{_clean(self.provider_id, 64)}"

    def line(self) -> str:
        """One plain line: provider, id, label, state, $/h, age, why, and the command."""
        price = "$?/h" if self.price_per_hour is None else f"${self.price_per_hour:.3f}/h"
        return (
            f"{_clean(self.provider, 16)} {_clean(self.provider_id, 64)} "
            f"{_clean(self.label, 80)!r} · {_clean(self.state, 60)} · {price} · "
            f"age {_age(self.age_s)} · {_clean(self.why, 120)}; end it with `{self.command}`"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "provider": self.provider, "provider_id": self.provider_id, "label": self.label,
            "state": self.state, "price_per_hour": self.price_per_hour, "age_s": self.age_s,
            "why": self.why,
        }

    @classmethod
    def from_json(cls, data: Any) -> Stranger:
        price, age = data.get("price_per_hour"), data.get("age_s")
        return cls(
            str(data["provider"]), str(data["provider_id"]), str(data["label"]),
            str(data["state"]), None if price is None else float(price),
            None if age is None else float(age), str(data.get("why", "")),
        )


def strangers_lines(strangers: Iterable[Stranger]) -> list[str]:
    """The receipt's words for them: a count, then one line each."""
    found = list(strangers)
    if not found:
        return []
    n = len(found)
    head = (
        f"{n} {'instance' if n == 1 else 'instances'} named like mvp-tui runs "
        f"{'was' if n == 1 else 'were'} not made here: left alone, not counted as ours"
    )
    return [head, *(f"  {s.line()}" for s in found)]


def _clean(text: str, limit: int) -> str:
    return clean_line(text, limit).strip()


def _age(age_s: float | None) -> str:
    if age_s is None:
        return "?"
    minutes = int(age_s // 60)
    if minutes < 60:
        return f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h{minutes:02d}m"
    return f"{hours // 24}d{hours % 24}h"
