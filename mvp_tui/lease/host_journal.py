"""Host memory: every attempt's outcome, journaled, so the next run tries a host that just
failed only after the others.

The journal is `<state dir>/hosts.jsonl`, one JSON object per line, appended and never
rewritten (mode 600). Each line is one attempt's `HostOutcome`: provider, host, the stage
reached, why it failed, seconds per stage, cost. Several runs may append at once: a line is
one `write` on an `O_APPEND` descriptor, so lines never interleave; a reader skips (and
counts) a line it cannot read instead of failing.

The engine's side, per attempt (create → running → ssh → agent → model → engine → serving):

    journal = HostJournal(config.state_dir, redact=engine.redactor)
    journal.append(HostOutcome(at=now, run_id=run_id, provider=offer.provider,
                               host=host_key(offer, data_center=status.data_center),
                               offer_id=offer.offer_id, gpu_name=offer.gpu_name,
                               stage="ssh", ok=False, reason="SSH refused after 12 tries",
                               stage_secs={"create": 1.2, "running": 40.0, "ssh": 90.0},
                               cost_usd=0.03))

(from the engine's `AttemptAbandoned`: its stage, reason and stage_secs as they are, and
`blames_host = scope == "host"`; a serving attempt: `stage="serving", ok=True, reason=""`),
and before a walk, `memory = load_memory(config, now)`: the offers on a host that failed
within `[lease] avoid_failed_hosts_days` (`HostMemory.avoids`) are ranked after the others
(engine/offer_ranking.py, the board's order too). They stay pickable by hand.

What counts against a host (`HostOutcome.blames_host`): a failure at any stage after
"create" (a create that failed never reached a machine: an offer sold out says nothing of
its host), unless the engine marks it as not the host's fault (`blames_host=False`: a stop
by the user, a gated model, a bad key: what would fail on any host). A later success on the
same host clears it.

Host keys (`host_key`): Vast.ai, the machine id (a host owns several machines; one machine
failing says little of its siblings); RunPod, `<data center>/<GPU type id>`, where the pod
landed; local and Docker, this machine's hostname. A RunPod offer is a GPU type that may
land in any of its data centers, so it counts as on a failed host when one of them failed
for that type (`hosts_of`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec
import msgspec.structs

from mvp_tui.config import Config
from mvp_tui.node_protocol import OFFLOAD_ASKED, OffloadReport
from mvp_tui.providers.base import Offer
from mvp_tui.providers.registry import spans_hosts
from mvp_tui.untrusted import Redact, clean_line

if TYPE_CHECKING:  # learned.py reads this module's records
    from mvp_tui.lease.learned import Learned

JOURNAL_FILE = "hosts.jsonl"
VERSION = 1
SPEED_KIND = "speed"  # a served answer's measured speed; other lines are attempt outcomes
STAGES = ("create", "running", "ssh", "agent", "model", "engine", "serving")
SERVING = "serving"
DAY_S = 86400.0
# How long a host is taken to keep an image it ran (hosts prune their image caches).
WARM_IMAGE_DAYS = 2.0
ANY_DATA_CENTER = "*"  # a RunPod host whose data center is not known (the type anywhere)

REASON_CHARS = 600
SHORT_CHARS = 120
MAX_STAGES = 16
MAX_DEVICES = 16  # model buffers kept per attempt (one per GPU, plus the host's)
# Only the journal's tail is read: a journal that grew for years still loads in a moment,
# and months of attempts fit (a line is a few hundred bytes).
MAX_READ_BYTES = 8 * 1024 * 1024


class Offload(msgspec.Struct, frozen=True, kw_only=True):
    """What the engine's own load log said it put on the node's GPUs (the agent's
    `EngineOffload`): the layers offloaded of all, each device's model buffer (MiB), what
    was asked (`-ngl 999`: "all", `--fit on`: "fit"), and whether the node took it as
    proven (False: it failed the host, or `allow_partial_offload` let it serve)."""

    asked: str
    layers: int
    total: int
    buffers_mib: Mapping[str, float] = msgspec.field(default_factory=dict)
    proven: bool = True

    @classmethod
    def from_report(cls, report: OffloadReport) -> Offload:
        return cls(asked=report.asked, layers=report.layers, total=report.total,
                   buffers_mib=dict(report.buffers_mib), proven=report.ok)

    def summary(self) -> str:
        """`33/33 layers · CUDA0 1,455 MiB` (the Bootstrap pane's words)."""
        report = OffloadReport(self.layers, self.total, tuple(self.buffers_mib.items()),
                               self.asked)
        return report.summary() + ("" if self.proven else " (not proven)")


def _offload(offload: Offload | None, redact: Redact | None = None) -> Offload | None:
    """`offload` bounded and cleaned (written or read: the file may have been edited by
    hand): known `asked`, counts ≥ 0, at most MAX_DEVICES finite buffers under clean names."""
    if offload is None:
        return None
    return msgspec.structs.replace(
        offload,
        asked=offload.asked if offload.asked in OFFLOAD_ASKED else "?",
        layers=max(0, offload.layers),
        total=max(0, offload.total),
        buffers_mib={
            clean_line(name, 40, redact=redact): round(max(0.0, mib), 2)
            for name, mib in [b for b in offload.buffers_mib.items() if math.isfinite(b[1])][
                :MAX_DEVICES
            ]
        },
    )


class HostOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """One attempt's outcome on one host; the type is its journal line's schema."""

    v: int = VERSION
    at: float  # Unix seconds, when the attempt ended
    run_id: str
    provider: str
    host: str  # `host_key` of the offer where it ran
    offer_id: str
    gpu_name: str
    stage: str  # the stage reached (where it stopped): one of STAGES
    ok: bool  # True: it served
    reason: str  # "" when ok; cleaned, redacted text
    stage_secs: Mapping[str, float] = msgspec.field(default_factory=dict)
    cost_usd: float = 0.0
    # False: the failure is not the host's (a stop by the user, a gated model, a bad key);
    # journaled and listed, never held against the host.
    blames_host: bool = True
    image: str = ""  # the container image it ran: a host that pulled it has it cached
    model: str = ""  # the model it served (`model_key`): learned ~ready is per model
    # On a node with GPUs, what the engine's load log said it offloaded (None: no such
    # record; a CPU node, or the attempt ended before its engine loaded).
    offload: Offload | None = None

    @property
    def counts_against_host(self) -> bool:
        return not self.ok and self.blames_host and self.stage != "create"

    @property
    def seconds(self) -> float:
        return sum(self.stage_secs.values())


class SpeedSample(msgspec.Struct, frozen=True, kw_only=True, tag_field="kind", tag=SPEED_KIND):
    """One served answer's measured speed on one host (a `"kind": "speed"` line): the
    engine's own decode tok/s and time to first token (llama-server's `timings`, else the
    client's clock), what the board's `tok/s`, `$/Mtok` learn from.

    A `mvp-tui bench` level is the same line with `concurrency` N: `decode_tok_s` is then
    the aggregate output tok/s of N concurrent streams (what the GPU gives under that load,
    what $/Mtok is priced at), `ttft_ms` the median TTFT, `per_stream_tok_s` the median
    stream's rate, `ttft_p95_ms` and `errors` as measured. An answer's line is level 1."""

    v: int = VERSION
    at: float
    run_id: str
    provider: str
    host: str
    gpu_name: str
    model: str  # `model_key` of what was served
    decode_tok_s: float
    ttft_ms: float
    tokens: int = 0
    context: int = 0  # the run's context (0: the engine's default)
    concurrency: int = 1  # concurrent streams measured (1: one answer, or bench level 1)
    per_stream_tok_s: float = 0.0  # bench: the median stream's rate (0: not measured)
    ttft_p95_ms: float = 0.0  # bench: TTFT p95 (0: not measured)
    errors: int = 0  # bench: requests that failed at that level


class _Head(msgspec.Struct):
    """What a line is, read before its fields: its format version and kind."""

    v: Any = None
    kind: Any = None


_read_head = msgspec.json.Decoder(_Head).decode
_read_outcome = msgspec.json.Decoder(HostOutcome).decode
_read_speed = msgspec.json.Decoder(SpeedSample).decode
# A text field's limit (the others: SHORT_CHARS), on the way in and out.
_TEXT_CHARS = {"run_id": 64, "provider": 32, "stage": 32, "reason": REASON_CHARS}
_Line = TypeVar("_Line", HostOutcome, SpeedSample)


def _cleaned(line: _Line, redact: Redact | None = None) -> _Line:
    """`line` with every text field cleaned (and redacted): written or read (the file may
    have been edited by hand), a text is one safe line."""
    texts = {
        name: clean_line(value, _TEXT_CHARS.get(name, SHORT_CHARS), redact=redact)
        for name in line.__struct_fields__
        if isinstance(value := getattr(line, name), str)
    }
    return msgspec.structs.replace(line, **texts)


def _stages(stage_secs: Mapping[str, float], redact: Redact | None = None) -> dict[str, float]:
    """At most MAX_STAGES finite, non-negative stage times under cleaned names."""
    return {
        clean_line(name, 32, redact=redact): round(max(0.0, secs), 3)
        for name, secs in list(stage_secs.items())[:MAX_STAGES]
        if math.isfinite(secs)
    }


def _finite(value: float, digits: int = 3) -> float:
    return round(max(0.0, value), digits) if math.isfinite(value) else 0.0


def model_key(name: str) -> str:
    """What the learned figures are keyed by: the GGUF file's base name, lower-cased."""
    return clean_line(name.replace("\\", "/").rsplit("/", 1)[-1], SHORT_CHARS).strip().lower()


def config_model_key(config: Config) -> str:
    """`model_key` of the model `config` serves (a local file's name, else the hub file's)."""
    source = config.model_source
    return model_key(source.local_path.name if source.local_path is not None else source.file)


def host_key(offer: Offer, *, data_center: str = "") -> str:
    """Which host `offer` runs on, as the journal names it.

    Vast.ai: its machine id (its host id, else the offer id, when the answer had none).
    RunPod: `<data center>/<GPU type id>`; `data_center` is where the pod landed
    (`LeaseStatus.data_center`); without it, the offer's only data center, else
    `*/<type>`. Local and Docker: this machine's hostname.
    """
    if spans_hosts(offer.provider):
        gpu_type = _runpod_gpu_type(offer)
        where = data_center.strip()
        if not where:
            where = offer.data_centers[0] if len(offer.data_centers) == 1 else ANY_DATA_CENTER
        return f"{where}/{gpu_type}"
    if offer.machine_id:
        return offer.machine_id
    if offer.host_id:
        return offer.host_id
    return f"offer {offer.offer_id}"


def hosts_of(offer: Offer) -> tuple[str, ...]:
    """Every host key `offer` may run on: one, except a RunPod type (each data center it is
    listed in, and the type anywhere)."""
    if not spans_hosts(offer.provider):
        return (host_key(offer),)
    gpu_type = _runpod_gpu_type(offer)
    return (*(f"{dc}/{gpu_type}" for dc in offer.data_centers), f"{ANY_DATA_CENTER}/{gpu_type}")


def _runpod_gpu_type(offer: Offer) -> str:
    # A RunPod offer id is `<cloud>:<GPU type id>` (providers/runpod/catalog.offer_id).
    _cloud, sep, gpu_type = offer.offer_id.partition(":")
    return gpu_type if sep and gpu_type else offer.offer_id


def failure_of(offer: Offer, failed: Mapping[str, HostOutcome]) -> HostOutcome | None:
    """The newest recent failure on a host `offer` may run on, or None."""
    found = [failed[h] for h in hosts_of(offer) if h in failed]
    return max(found, key=lambda o: o.at) if found else None


class HostJournal:
    """The attempts journal under a state directory."""

    def __init__(self, state_dir: Path | str, *, redact: Redact | None = None) -> None:
        self.path = Path(state_dir) / JOURNAL_FILE
        self._redact = redact
        self.corrupt = 0  # lines the last `read` skipped
        self.speeds: list[SpeedSample] = []  # the speed lines the last `read` found

    def exists(self) -> bool:
        return self.path.is_file()

    def append(self, outcome: HostOutcome) -> None:
        """Add one line; earlier lines are never touched. Raises OSError when the state
        directory cannot take it (the caller decides whether a run goes on without it)."""
        line = msgspec.structs.replace(
            outcome,
            at=round(outcome.at, 3),
            stage_secs=_stages(outcome.stage_secs, self._redact),
            cost_usd=_finite(outcome.cost_usd, 6),
            offload=_offload(outcome.offload, self._redact),
        )
        self._append_line(msgspec.json.encode(_cleaned(line, self._redact)))

    def append_speed(self, sample: SpeedSample) -> None:
        """Add one answer's measured speed (a `"kind": "speed"` line); OSError as `append`."""
        line = msgspec.structs.replace(
            sample,
            at=round(sample.at, 3),
            decode_tok_s=_finite(sample.decode_tok_s),
            ttft_ms=_finite(sample.ttft_ms),
            tokens=max(0, sample.tokens),
            context=max(0, sample.context),
            concurrency=max(1, sample.concurrency),
            per_stream_tok_s=_finite(sample.per_stream_tok_s),
            ttft_p95_ms=_finite(sample.ttft_p95_ms),
            errors=max(0, sample.errors),
        )
        self._append_line(msgspec.json.encode(_cleaned(line, self._redact)))

    def _append_line(self, record: bytes) -> None:
        data = record + b"\n"
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            os.fchmod(fd, 0o600)  # a journal made wider by hand goes back to owner-only
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                # An earlier write was torn (a full disk): start a fresh line, so this one is
                # never glued to that half and lost with it.
                data = b"\n" + data
            written = os.write(fd, data)  # one write: concurrent appenders never interleave
            if written != len(data):
                raise OSError(f"short write to {self.path}: {written} of {len(data)} bytes")
            os.fsync(fd)
        finally:
            os.close(fd)

    def read(self) -> list[HostOutcome]:
        """Every readable line's outcome, in file order; a missing journal reads as none.

        Speed lines go to `speeds`; lines that are neither are skipped and counted in
        `corrupt`."""
        self.corrupt = 0
        self.speeds = []
        try:
            with self.path.open("rb") as handle:
                size = os.fstat(handle.fileno()).st_size
                start = max(0, size - MAX_READ_BYTES)
                handle.seek(start)
                raw = handle.read()
        except FileNotFoundError:
            return []
        lines = raw.split(b"\n")
        if start:
            lines = lines[1:]  # the first line read from the middle is a piece of one
        out: list[HostOutcome] = []
        for line in lines:
            if not line.strip():
                continue
            outcome = _from_json(line)
            if isinstance(outcome, SpeedSample):
                self.speeds.append(outcome)
            elif outcome is None:
                self.corrupt += 1
            else:
                out.append(outcome)
        return out

    def failed_hosts(self, provider: str, now: float, days: float) -> dict[str, HostOutcome]:
        """Host → its newest failure within the last `days` on `provider`, unless a later
        attempt on that host served. `days` <= 0: none (the memory is off)."""
        return failed_hosts(self.read(), provider, now, days)


def failed_hosts(
    outcomes: Iterable[HostOutcome], provider: str, now: float, days: float
) -> dict[str, HostOutcome]:
    """`HostJournal.failed_hosts` over outcomes already read."""
    if not days > 0:
        return {}
    newest: dict[str, HostOutcome] = {}
    # In time order (concurrent runs may append out of order): a success clears what
    # failed before it, a failure after a success counts again.
    for outcome in sorted((o for o in outcomes if o.provider == provider), key=lambda o: o.at):
        if outcome.ok:
            newest.pop(outcome.host, None)
        elif outcome.counts_against_host:
            newest[outcome.host] = outcome
    cutoff = now - days * DAY_S
    return {host: o for host, o in newest.items() if o.at >= cutoff}


@dataclass(frozen=True, slots=True)
class HostMemory:
    """Recent failures of every provider, as the board and a walk's order need them."""

    failed: Mapping[str, Mapping[str, HostOutcome]] = field(
        default_factory=lambda: MappingProxyType({})
    )  # provider -> host -> newest failure
    days: float = 0.0
    # provider -> host -> images it ran within WARM_IMAGE_DAYS (its pull is likely cached)
    images: Mapping[str, Mapping[str, frozenset[str]]] = field(
        default_factory=lambda: MappingProxyType({})
    )
    # This user's measured decode speeds and times to ready (lease/learned.py); None: none.
    learned: Learned | None = None

    def failure(self, offer: Offer) -> HostOutcome | None:
        """Why `offer`'s host is avoided (its newest recent failure), or None."""
        failed = self.failed.get(offer.provider)
        if not failed:  # the common case, asked of 10,000 offers a refresh
            return None
        if not spans_hosts(offer.provider):  # one host: no tuple of candidates
            return failed.get(host_key(offer))
        return failure_of(offer, failed)

    def avoids(self, offer: Offer) -> bool:
        """Whether `offer`'s host failed recently: ranked after the others (the one ranking,
        engine/offer_ranking.py), still pickable by hand."""
        return self.failure(offer) is not None


    def has_image(self, offer: Offer, image: str) -> bool:
        """Whether `offer`'s host recently ran `image` (so its pull is probably cached)."""
        hosts = self.images.get(offer.provider)
        if not hosts:
            return False
        if not spans_hosts(offer.provider):  # one host: no tuple of candidates (10,000 offers)
            return image in hosts.get(host_key(offer), ())
        return any(image in hosts.get(host, ()) for host in hosts_of(offer))


def memory_from(outcomes: Sequence[HostOutcome], now: float, days: float,
                speeds: Sequence[SpeedSample] = ()) -> HostMemory:
    from mvp_tui.lease.learned import learn

    providers = {o.provider for o in outcomes}
    failed = {p: failed_hosts(outcomes, p, now, days) for p in sorted(providers)}
    failed = {p: hosts for p, hosts in failed.items() if hosts} if days > 0 else {}
    return HostMemory(failed, days, images_by_host(outcomes, now),
                      learn(outcomes, speeds, now))


def images_by_host(
    outcomes: Iterable[HostOutcome], now: float, days: float = WARM_IMAGE_DAYS
) -> dict[str, dict[str, frozenset[str]]]:
    """provider -> host -> the images an attempt ran there within `days`: an attempt that got
    past "running" had its container started, so the host pulled the image."""
    found: dict[str, dict[str, set[str]]] = {}
    pulled = set(STAGES[STAGES.index("ssh") :])
    for o in outcomes:
        if o.image and o.stage in pulled and now - o.at <= days * DAY_S:
            found.setdefault(o.provider, {}).setdefault(o.host, set()).add(o.image)
    return {p: {h: frozenset(i) for h, i in hosts.items()} for p, hosts in found.items()}


def load_memory(config: Config, now: float) -> HostMemory:
    """The recent failures under the configured state dir (`[lease]
    avoid_failed_hosts_days`; 0 turns the memory off). An unreadable journal is no memory:
    it only orders offers, it never stops a run."""
    days = max(0.0, config.settings.lease.avoid_failed_hosts_days)
    journal = HostJournal(config.state_dir)
    try:
        outcomes = journal.read()
    except OSError:
        return HostMemory(days=days)
    return memory_from(outcomes, now, days, journal.speeds)


def describe(outcome: HostOutcome, now: float) -> str:
    """`failed 2 h ago at ssh: SSH refused (run r-7f3a)`: a badge's full text."""
    age = max(0.0, now - outcome.at)
    when = (
        f"{age / DAY_S:.0f} d" if age >= DAY_S
        else f"{age / 3600:.0f} h" if age >= 3600
        else f"{age / 60:.0f} min"
    )
    reason = f": {outcome.reason}" if outcome.reason else ""
    return f"failed {when} ago at {outcome.stage}{reason} (run {outcome.run_id})"


def _from_json(line: bytes) -> HostOutcome | SpeedSample | None:
    """One journal line as an outcome or a speed sample; None when it is neither (texts
    cleaned again: the file may have been edited by hand)."""
    try:
        head = _read_head(line)
        if head.v != VERSION:
            return None
        if head.kind == SPEED_KIND:
            speed = _read_speed(line)
            return _cleaned(msgspec.structs.replace(
                speed, decode_tok_s=max(0.0, speed.decode_tok_s), ttft_ms=max(0.0, speed.ttft_ms),
                concurrency=max(1, speed.concurrency),
            ))
        outcome = _read_outcome(line)
    except (msgspec.MsgspecError, RecursionError):  # not JSON, not UTF-8, or not a line's shape
        return None
    return _cleaned(msgspec.structs.replace(
        outcome, stage_secs=_stages(outcome.stage_secs), offload=_offload(outcome.offload)
    ))
