"""`mvp-tui bench`'s measure-and-keep, shared by the command and the dashboard's palette: the
run's endpoint driven at each level (`prompt/load.py`), the figures priced at the lease's $/h
and kept in the host journal under the GPU model and host the run's serving attempt
journaled (one speed line per level, with its concurrency), and the table both show.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mvp_tui.engine.decode_speed import USD_PER_MTOK_FACTOR
from mvp_tui.lease.endpoint_record import EndpointRecord
from mvp_tui.lease.host_journal import HostJournal, HostOutcome, SpeedSample
from mvp_tui.lease.records import RecordError, RecordStore
from mvp_tui.prompt.client import PromptClient
from mvp_tui.prompt.load import LevelResult, Progress, http_for, run_level
from mvp_tui.secrets import Redactor

DEFAULT_MAX_TOKENS = 128


@dataclass(frozen=True, slots=True)
class Served:
    """Where the run serves, as its serving attempt was journaled, and its $/h."""

    provider: str
    host: str
    gpu_name: str
    model: str  # `model_key`
    price_per_hour: float | None


def usd_per_mtok(result: LevelResult, price_per_hour: float | None) -> float | None:
    """$ per million output tokens at `price_per_hour` under the level's load."""
    if price_per_hour is None or price_per_hour < 0 or result.aggregate_tok_s <= 0:
        return None
    return USD_PER_MTOK_FACTOR * price_per_hour / result.aggregate_tok_s


def level_json(result: LevelResult, price_per_hour: float | None) -> dict[str, object]:
    mtok = usd_per_mtok(result, price_per_hour)
    return {**result.as_json(), "usd_per_mtok": round(mtok, 4) if mtok is not None else None}


def served_by(outcomes: list[HostOutcome], run_id: str) -> HostOutcome | None:
    """The run's newest attempt that served, or None."""
    ok = [o for o in outcomes if o.run_id == run_id and o.ok]
    return max(ok, key=lambda o: o.at) if ok else None


def lease_price(store: RecordStore, run_id: str, offer_id: str) -> float | None:
    """The $/h of the run's lease of `offer_id` (the newest), or None when not on record."""
    try:
        record = store.load(run_id)
    except (RecordError, OSError):
        return None
    leases = [x for x in record.leases if x.offer_id == offer_id]
    return leases[-1].price_per_hour if leases else None


def served_on(state_dir: Path, run_id: str) -> Served | str:
    """Where run `run_id` serves (its journaled serving attempt, its lease's $/h), or why it
    is not known. OSError: the journal cannot be read."""
    journal = HostJournal(state_dir)
    outcome = served_by(journal.read(), run_id)
    if outcome is None:
        return (f"run {run_id} has no serving attempt in the host journal ({journal.path}): "
                "its GPU and host are not known, so its figures could not be kept; bench a "
                "run this install started")
    return Served(outcome.provider, outcome.host, outcome.gpu_name, outcome.model,
                  lease_price(RecordStore(state_dir), run_id, outcome.offer_id))


async def measure(endpoint: EndpointRecord, levels: list[int], duration_s: float, *,
                  answer_tokens: int = DEFAULT_MAX_TOKENS,
                  progress: Callable[[Progress], None] = lambda p: None,
                  level_done: Callable[[LevelResult], None] = lambda r: None,
                  ) -> list[LevelResult]:
    """Each level in turn against the run's endpoint, with the run's key."""
    key = endpoint.api_key if endpoint.auth == "key" else None
    results: list[LevelResult] = []
    async with http_for(max(levels)) as http:
        client = PromptClient(endpoint.openai_base_url, endpoint.model, http=http, api_key=key,
                              redactor=Redactor())
        for n in levels:
            result = await run_level(client, n, duration_s, max_tokens=answer_tokens,
                                     progress=progress)
            level_done(result)
            results.append(result)
    return results


def keep(state_dir: Path, run_id: str, served: Served, results: list[LevelResult],
         now: float) -> list[LevelResult]:
    """Journal each level that got tokens (one speed line each); those kept. OSError: the
    journal cannot take them."""
    kept = [r for r in results if r.tokens > 0]
    journal = HostJournal(state_dir)
    for result in kept:
        journal.append_speed(sample_of(result, run_id, served, now))
    return kept


def render_table(results: list[LevelResult], price: float | None) -> str:
    head = ("streams", "agg tok/s", "stream tok/s", "TTFT p50", "TTFT p95", "requests",
            "errors", "$/Mtok")
    rows = [head]
    for r in results:
        mtok = usd_per_mtok(r, price)
        rows.append((
            str(r.concurrency), f"{r.aggregate_tok_s:,.1f}", f"{r.per_stream_tok_s:,.1f}",
            _ms(r.ttft_p50_ms), _ms(r.ttft_p95_ms), str(r.requests), str(r.errors),
            "?" if mtok is None else (f"{mtok:.2f}" if mtok < 100 else f"{mtok:,.0f}"),
        ))
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    return "".join("  ".join(cell.rjust(w) for cell, w in zip(row, widths, strict=True)) + "\n"
                   for row in rows)


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f} ms"


def sample_of(result: LevelResult, run_id: str, served: Served, now: float) -> SpeedSample:
    return SpeedSample(
        at=now, run_id=run_id, provider=served.provider, host=served.host,
        gpu_name=served.gpu_name, model=served.model, decode_tok_s=result.aggregate_tok_s,
        ttft_ms=result.ttft_p50_ms or 0.0, tokens=result.tokens,
        concurrency=result.concurrency, per_stream_tok_s=result.per_stream_tok_s,
        ttft_p95_ms=result.ttft_p95_ms or 0.0, errors=result.errors,
    )
