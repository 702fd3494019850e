"""What a `check --live` run proved of the facts no fake can: each fact is one line of
`FACTS`, a name and a judge that reads the run's records (its engine events and the agent's
records, as JSON) and says ✓ proven, ✗ failed or – not proven (the run could not show it),
with what showed it or why not.

A new fact is one more line here: a judge is a plain function of the records."""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from mvp_tui.node_protocol import is_gpu_buffer, offload_report
from mvp_tui.providers import registry
from mvp_tui.providers.runpod.kind import KIND as RUNPOD
from mvp_tui.providers.vastai.kind import KIND as VASTAI

Record = dict[str, Any]

RENTED = registry.RENTED
# The record `check --live` adds when Vast answered 410 on a v0 single-instance route
# (`routes`: "read", "delete"), so the v1 fallback is what served.
V1_FALLBACK = "vast_v1_fallback"


class Mark(enum.Enum):
    PROVEN = "proven"
    FAILED = "failed"
    NOT_PROVEN = "not proven"


MARKS = {Mark.PROVEN: "✓", Mark.FAILED: "✗", Mark.NOT_PROVEN: "–"}


@dataclass(frozen=True, slots=True)
class Seen:
    """A run's records, as the judges read them."""

    provider: str
    records: Sequence[Record]

    def events(self, kind: str) -> list[Record]:
        return [r for r in self.records if r.get("event") == kind]

    def named(self, word: str) -> list[Record]:
        """Records whose event or record type names `word` (the agent's records have a
        `type`, the engine's events an `event`)."""
        return [r for r in self.records
                if word in str(r.get("event", "")) or word in str(r.get("type", ""))]

    @property
    def rented(self) -> bool:
        return self.provider in RENTED

    @property
    def leased(self) -> bool:
        return bool(self.events("lease_running"))

    @property
    def ready(self) -> bool:
        return bool(self.events("node_ready"))

    def abandoned(self, *words: str) -> list[Record]:
        """Attempts abandoned whose kind or reason names one of `words`."""
        return [r for r in self.events("attempt_abandoned")
                if any(w in f"{r.get('failure_kind')} {r.get('reason')}".lower() for w in words)]


Verdict = tuple[Mark, str]
Judge = Callable[[Seen], Verdict]


def _not(why: str) -> Verdict:
    return Mark.NOT_PROVEN, why


def start_command(seen: Seen) -> Verdict:
    """The node booted through the provider's start route (the create's start command)."""
    if not seen.rented:
        return _not("a local node is a child process: no provider start command")
    guards = [r.get("status") for r in seen.events("node_boot_guard")]
    if "armed" in guards or "off" in guards:
        return Mark.PROVEN, "the start command ran: it armed the boot guard the agent stood down"
    if "failed" in guards:
        return Mark.FAILED, "the start command's boot guard failed (see the boot guard step)"
    if seen.abandoned("entrypoint", "start command", "boot marker"):
        return Mark.FAILED, "the image's own entrypoint ran instead of the start command"
    if seen.leased and not seen.ready:
        return Mark.FAILED, "the lease ran but the node never came up through its start"
    if seen.ready:
        return _not("the node came up, but no boot guard showed that the start command ran")
    return _not("no lease ran")


def pod_key_delete(seen: Seen) -> Verdict:
    """The instance's (pod's) own key may delete it: the node-side delete."""
    if not seen.rented:
        return _not("a local node needs no key to end itself")
    switch = seen.events("node_watchdog")
    if any(r.get("status") == "destroyed" for r in switch):
        return Mark.PROVEN, "the node's switch deleted its own lease with the instance key"
    if any(r.get("status") == "failed" for r in switch):
        return Mark.FAILED, "the node's switch could not act with the instance key"
    ready = [r for r in switch if r.get("status") == "ready"]
    if any(r.get("destroy_proven") is True for r in ready):
        return Mark.PROVEN, "the instance key's write right was proven (a documented no-op change)"
    if ready:
        return _not("the instance key reads its instance; a delete was not tried (the run "
                    "tore down with the account key)")
    return _not("no node switch reported")


def secrets_route(seen: Seen) -> Verdict:
    """RunPod's secrets route: the attempt's secret created, then deleted."""
    if seen.provider != RUNPOD.name:  # a check of RunPod's own route
        return _not(f"{seen.provider} takes no secret")
    if seen.events("secret_left_over"):
        return Mark.FAILED, "a secret could not be deleted (see the secret step)"
    stored, deleted = seen.events("secret_stored"), seen.events("secret_deleted")
    if stored and len(deleted) >= len(stored):
        return Mark.PROVEN, f"{len(stored)} secret(s) created and deleted"
    if stored:
        return Mark.FAILED, "a secret was created and not deleted"
    return _not("no secret was created")


def vast_routes(seen: Seen) -> Verdict:
    """Which of Vast's single-instance routes answered (v0, or v1 after a 410)."""
    if seen.provider != VASTAI.name:  # a check of Vast's own routes
        return _not(f"{seen.provider} has no v0/v1 routes")
    fallbacks = seen.events(V1_FALLBACK)
    deleted = [r for r in seen.events("lease_deleted") if r.get("deleted_by") != "node"]
    if not seen.leased:
        return _not("no instance was read")
    if seen.events("lease_delete_unconfirmed"):
        return Mark.FAILED, "the single-instance delete was not confirmed"
    retired = sorted({str(r) for f in fallbacks for r in f.get("routes", ())})
    route = f"v1 (after a 410 on the v0 {' and '.join(retired)})" if fallbacks else "v0"
    if deleted:
        return Mark.PROVEN, f"the {route} single-instance read and delete answered"
    return Mark.PROVEN, f"the {route} single-instance read answered (no delete of ours ran)"


def cuda_floor(seen: Seen) -> Verdict:
    """The host accepted the image: its driver meets the image's CUDA floor."""
    if not seen.rented:
        return _not("a local node runs no image")
    if seen.abandoned("cuda", "driver"):
        return Mark.FAILED, "a host refused the image (its CUDA driver)"
    if seen.ready:
        return Mark.PROVEN, "the host ran the image to a serving engine"
    return _not("no node came up")


def offload(seen: Seen) -> Verdict:
    """The model's layers on the GPU, as the agent read them from the engine's log (its
    `EngineOffload` record: mvp_tui/node_protocol.py)."""
    reports = [r for r in map(offload_report, seen.records) if r is not None]
    if seen.abandoned("offload") or any(not r.ok and not r.allowed for r in reports):
        return Mark.FAILED, "fewer layers were offloaded than asked, or none to a GPU"
    if not reports:
        return _not("no offload record came from the agent")
    last = reports[-1]
    if not any(is_gpu_buffer(name) for name, _ in last.buffers_mib):
        return _not(f"the engine ran on no GPU ({last.summary()})")
    if not last.ok:
        return Mark.FAILED, f"a partial offload, allowed by [model] allow_partial_offload " \
            f"({last.summary()})"
    return Mark.PROVEN, f"the engine's log: {last.summary()}"


# The facts, in the order printed: (name, judge).
FACTS: tuple[tuple[str, Judge], ...] = (
    ("start command", start_command),
    ("pod key delete", pod_key_delete),
    ("secrets route", secrets_route),
    ("vast v0/v1", vast_routes),
    ("image CUDA floor", cuda_floor),
    ("GPU offload", offload),
)


@dataclass(frozen=True, slots=True)
class Fact:
    name: str
    mark: Mark
    detail: str

    def as_json(self) -> dict[str, str]:
        return {"fact": self.name, "status": self.mark.value, "detail": self.detail}

    def line(self, width: int) -> str:
        return f"{MARKS[self.mark]} {self.name.ljust(width)}  {self.mark.value}: {self.detail}"


def judge(seen: Seen) -> list[Fact]:
    return [Fact(name, *read(seen)) for name, read in FACTS]
