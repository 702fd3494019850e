"""`mvp-tui offers`: the filtered offer list of the configured provider, in the board's first
order, the one `up --headless` tries it in (engine/offer_ranking.py: $/h all-in; offers on a
host that failed recently last, badged; then those the model cannot fit; then those never
rented), with the board's columns (engine/offer_columns.py)."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import sys
import time

from mvp_tui.config import Config
from mvp_tui.engine.model_fit import ModelNeed
from mvp_tui.engine.model_need import ModelNeedError, read_model_need
from mvp_tui.engine.offer_columns import COLUMNS
from mvp_tui.engine.offer_ranking import BEST_FIRST, outlook_of
from mvp_tui.engine.outlook import Outlook, no_outlook
from mvp_tui.engine.provider_factory import build_provider
from mvp_tui.engine.settings import ModelSettings, selection_policy
from mvp_tui.exit_codes import ExitCode
from mvp_tui.lease.host_journal import HostMemory, describe, host_key, load_memory
from mvp_tui.providers.base import Offer, ProviderError, VramNeedUser
from mvp_tui.untrusted import clean_line

# The board's columns an offer gives (not its pick column), between the offer's id and the
# host memory's note.
TABLE = tuple(c for c in COLUMNS if c.spec.has_cell)
HEADERS = ("id", *(c.value for c in TABLE), "memory")
FAILED_BADGE = "failed recently"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="one JSON array of offers")
    parser.add_argument("--limit", type=int, default=64, metavar="N", help="at most N offers")


def _row(o: Offer, memory: HostMemory, outlook: Outlook) -> tuple[str, ...]:
    seen = outlook(o)
    return (clean_line(o.offer_id, 24), *(c.spec.cell(o, seen) for c in TABLE), _note(o, memory))


def _note(o: Offer, memory: HostMemory) -> str:
    """The last column: why the offer is never rented (`Offer.refused`), else its host's
    recent failure badge."""
    if o.refused:
        return "never rented: " + clean_line(o.refused, 120)
    return FAILED_BADGE if memory.failure(o) is not None else ""


def render_table(
    offers: list[Offer], memory: HostMemory | None = None, outlook: Outlook = no_outlook
) -> str:
    memory = memory if memory is not None else HostMemory()
    rows = [HEADERS, *(_row(o, memory, outlook) for o in offers)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEADERS))]
    return (
        "\n".join(
            "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows
        )
        + "\n"
    )


async def _search(config: Config, limit: int, need: ModelNeed | None) -> list[Offer]:
    provider = build_provider(config)
    if need is not None and isinstance(provider, VramNeedUser) and provider.wants_vram_need:
        provider.use_vram_need(need.per_node_bytes)  # as `up` searches (engine/vram_floor.py)
    try:
        return await provider.search_offers(selection_policy(config, limit))
    finally:
        await provider.aclose()


def offer_json(
    offer: Offer, memory: HostMemory, now: float, outlook: Outlook = no_outlook
) -> dict[str, object]:
    """An offer as `--json` prints it: its fields, its host key and, when that host failed
    within `[lease] avoid_failed_hosts_days`, why (`recent_failure`; else null); whether the
    model fits (`fit`: fits/tight/no/unknown, `needs_gb` per node) and `ready`, the board's
    ~ready estimate in seconds and its parts (null without a bandwidth; `basis` "history"
    when it is the median of this user's own runs); `tok_per_s` and `usd_per_mtok`, the
    decode speed and $ per million tokens, `measured` true when they are this user's own
    median (else predicted from the GPU's bandwidth; null when that is unknown)."""
    failure = memory.failure(offer)
    return {
        **dataclasses.asdict(offer),
        "host": host_key(offer),
        "recent_failure": describe(failure, now) if failure is not None else None,
        **outlook(offer).as_json(),
    }


async def _need(config: Config) -> tuple[ModelNeed | None, str]:
    """The model's VRAM need (as the board reads it), or None and why not."""
    try:
        need = await read_model_need(ModelSettings.from_config(config),
                                     nodes=config.settings.runtime.nodes,
                                     environ=os.environ)
    except ModelNeedError as exc:
        return None, clean_line(str(exc), 600)
    return need, ""


def run(config: Config, args: argparse.Namespace) -> int:
    need, why = asyncio.run(_need(config))
    try:
        offers = asyncio.run(_search(config, max(1, args.limit), need))
    except ProviderError as exc:  # the provider cannot be asked: say why, no traceback
        print(f"mvp-tui: {clean_line(str(exc), 600)}", file=sys.stderr)
        return int(ExitCode.RUN_FAILED)
    now = time.time()
    memory = load_memory(config, now)
    outlook = outlook_of(config, need, memory)
    offers = BEST_FIRST.rank(offers, failed=memory.avoids, outlook=outlook)  # as headless walks
    if args.json:
        json.dump([offer_json(o, memory, now, outlook) for o in offers], sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render_table(offers, memory, outlook))
        print(f"the model {need.describe()}" if need else f"fit unknown: {why}", file=sys.stderr)
        avoided = sum(1 for o in offers if memory.failure(o) is not None)
        print(f"{len(offers)} offer(s) from {config.provider}", file=sys.stderr)
        if avoided:
            print(
                f"{avoided} on a host that failed within {memory.days:g} day(s): listed last "
                "(`mvp-tui hosts` says why)",
                file=sys.stderr,
            )
    return int(ExitCode.OK)
