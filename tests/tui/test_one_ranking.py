"""One ranking over three surfaces: the dashboard's board, `up --headless` (the offers it
creates on, in order) and `mvp-tui offers` order the same Vast offers (the fake, over real
HTTP) the same way, with a host that failed recently and offers the model cannot fit; and
one column table, which `mvp-tui offers` prints as the board shows it.

Six offers of a 30 GB model (33 GB a node): three 48 GB cards at 0.20 (its machine just
failed), 0.30 (twice: ids 999 and 1000, a tie) and 0.40, and two 24 GB cards, the cheapest
of all, at 0.10 and 0.25. The one order: by $/h (ties by row key), the failed host after
them, the unfit last, cheapest first: 1000, 999, the 0.40, the failed 0.20, the unfit 0.10,
the unfit 0.25.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mvp_tui.commands import offers as offers_command
from mvp_tui.config import ConfigPaths, load_config
from mvp_tui.engine.events import OffersListed
from mvp_tui.engine.model_fit import ModelNeed
from mvp_tui.engine.outlook import outlook_for
from mvp_tui.lease.host_journal import HostJournal, HostMemory, HostOutcome
from mvp_tui.widgets.offers import OffersPane
from mvp_tui.widgets.offers_model import COLUMNS, OffersModel, offer_key
from tests.e2e.test_host_memory import created_ask_ids
from tests.fakes.vastai_server import FakeVast, Fault
from tests.tui.fit_data import GIB, header_gguf
from tests.tui.test_dashboard_run import KEY, dashboard, is_, vast_env
from tests.widgets.data import offer, wait_until

BIG, SMALL = 49140, 24564  # MiB: a 48 GB card fits the model, a 24 GB one does not


def _offers(fake: FakeVast) -> dict[str, int]:
    return {
        "failed": fake.add_offer(id=2001, dph_total=0.20, gpu_ram=BIG, machine_id=7001),
        "tie_a": fake.add_offer(id=999, dph_total=0.30, gpu_ram=BIG, machine_id=7002),
        "tie_b": fake.add_offer(id=1000, dph_total=0.30, gpu_ram=BIG, machine_id=7003),
        "dear": fake.add_offer(id=2002, dph_total=0.40, gpu_ram=BIG, machine_id=7004),
        "unfit_cheap": fake.add_offer(id=2003, dph_total=0.10, gpu_ram=SMALL, machine_id=7005),
        "unfit": fake.add_offer(id=2004, dph_total=0.25, gpu_ram=SMALL, machine_id=7006),
    }


def _remember_failure(state: Path, machine_id: int, offer_id: int) -> None:
    """The journal line an earlier run wrote when this machine failed at ssh."""
    HostJournal(state).append(HostOutcome(
        at=time.time() - 600, run_id="r-earlier", provider="vastai", host=str(machine_id),
        offer_id=str(offer_id), gpu_name="RTX 4090", stage="ssh", ok=False,
        reason="SSH refused after 12 tries", stage_secs={"create": 1.0}, cost_usd=0.01,
    ))


async def test_the_board_headless_and_offers_order_the_same_offers_the_same_way(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = header_gguf(tmp_path / "big.gguf", size=30 * GIB)
    with FakeVast(api_key=KEY) as fake:
        ids = _offers(fake)
        _remember_failure(tmp_path / "state", 7001, ids["failed"])
        env = {**vast_env(fake, tmp_path), "MVP_GGUF_LOCAL_PATH": str(model),
               "MVP_MAX_CONTEXT": "4096", "MVP_STATE_DIR": str(tmp_path / "state"),
               "MVP_PROMPT_OPENAI_PORT": "0"}
        expected = [str(ids[k]) for k in
                    ("tie_b", "tie_a", "dear", "failed", "unfit_cheap", "unfit")]

        # The board: the real dashboard, its search, the journal and the model's size read.
        app, seen = dashboard(env, tmp_path)
        async with app.run_test(size=(160, 48)) as pilot:
            await seen.first(is_(OffersListed))
            pane = app.query_one(OffersPane)
            await wait_until(pilot, lambda: pane.model.unfit_count >= 2, 20)
            board = [k.split(":", 1)[1] for k in pane.model.view() if k.startswith("vastai:")]
            assert pane.model.row(f"vastai:{ids['failed']}").failed

        # `mvp-tui offers --json`, in this process (on a thread: it runs its own loop).
        config = load_config(env=env, paths=ConfigPaths(default=tmp_path / "none.toml"))
        args = argparse.Namespace(json=True, limit=64)
        assert await asyncio.to_thread(offers_command.run, config, args) == 0
        listed = [str(o["offer_id"]) for o in json.loads(capsys.readouterr().out)]

        # `up --headless`: every create refused as sold (404), so the walk tries them all.
        fake.script("create", *(Fault(status=404) for _ in ids))
        base = {k: v for k, v in os.environ.items() if not k.startswith(("MVP_", "VAST"))}
        up = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "mvp_tui", "up", "--headless", "--yes", "--until", "leased",
             "--max-offers", "9"],
            capture_output=True, text=True, env={**base, **env, "HOME": str(tmp_path)},
            timeout=120,
        )
        assert up.returncode != 0, up.stderr  # nothing could be leased
        walked = [str(i) for i in created_ask_ids(fake)]

    assert board == expected
    assert listed == expected
    assert walked == expected


def test_offers_prints_the_boards_columns_with_the_boards_cells() -> None:
    """`mvp-tui offers` reads the board's column table: its headers (the board's, but the
    pick, between the id and the memory note) and, offer by offer, the board's cells (an
    all-in bid price, a stock hint, a fit, a speed and a wait)."""
    cards = [
        dataclasses.replace(offer("1", 0.30, down=1500.0), bid_per_hour=0.30, stock="High",
                            mem_bw_gbps=1008.0),
        dataclasses.replace(offer("2", 0.25, "RTX A6000", vram_mib=49140), pull_usd=0.05),
    ]
    need = ModelNeed(model_bytes=30 * 10**9, kv_bytes=10**9, context=4096)
    outlook = outlook_for(need, image="img", image_gb=3.6, has_image=lambda o, i: False)
    model = OffersModel()
    model.set_offers(cards)
    model.set_outlook(outlook)
    assert ("id", *(c.value for c in COLUMNS[1:]), "memory") == offers_command.HEADERS
    for card in cards:
        printed = offers_command._row(card, HostMemory(), outlook)
        assert printed[1:-1] == model.row(offer_key(card)).cells[1:]
    assert "0.300 bid" in offers_command._row(cards[0], HostMemory(), outlook)
