"""`mvp-tui bench` (issue 40 item 3) against a local run served by the project's own native
llama-server: levels 1 and 4 measured through the run's OpenAI endpoint, the table printed,
each level kept in the host journal under the run's GPU model and host, and the board's
`$/Mtok` for that GPU model then the measured figure (no `~`) at `[prompt] concurrency`."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from mvp_tui.engine.model_fit import ModelNeed
from mvp_tui.engine.outlook import outlook_for
from mvp_tui.lease.host_journal import HostJournal, load_memory
from mvp_tui.widgets.offers_model import Column, OffersModel
from tests.e2e.headless import HeadlessRun, event
from tests.peers import require_llama_rpc
from tests.widgets.data import offer

DURATION_S = "4"


async def bench(run: HeadlessRun, *args: str,
                env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`mvp-tui bench ARGS` in another process, while the run's own output is read (a run
    whose stdout pipe filled would stall its endpoint)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("MVP_", "VAST"))}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "mvp_tui", "bench", *args, env={**clean, **env},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    drain = asyncio.create_task(run.until(lambda r: False, within=600))
    try:
        out, err = await asyncio.wait_for(proc.communicate(), 120)
    finally:
        drain.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await drain
    assert proc.returncode is not None
    return subprocess.CompletedProcess(args, proc.returncode, out.decode(), err.decode())


def mtok_cell(model: OffersModel, row: str) -> str:
    return model.row(row).cells[list(Column).index(Column.PER_MTOK)]


async def test_bench_measures_a_local_native_run_at_1_and_4_streams(
    tiny_gguf: Path, tmp_path: Path
) -> None:
    bin_dir = require_llama_rpc()  # the project's own llama-server build
    state = tmp_path / "state"
    # llama-server splits its context among its slots (4 by default): the tiny model's own
    # 256 would leave each of 4 streams 64 tokens, under a prompt and its answer.
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
           "MVP_GGUF_LOCAL_PATH": str(tiny_gguf), "MVP_MAX_CONTEXT": "1024"}
    async with HeadlessRun(["--yes", "--rpc-bind", "127.0.0.1:0"], state, env=env) as run:
        ready = await run.until(event("endpoint_ready"), within=120)
        cli_env = {**env, "MVP_STATE_DIR": str(state)}
        shown = await bench(run, "--concurrency", "1,4", "--duration", DURATION_S,
                            "--answer-tokens", "48", env=cli_env)
        as_json = await bench(run, ready["run_id"], "--concurrency", "1,4", "--duration", "2",
                              "--answer-tokens", "48", "--json", env=cli_env)
        run.signal(signal.SIGTERM)
        code = await run.finish(within=60)
    assert code == 0, run.stderr
    assert shown.returncode == 0, shown.stderr
    assert "llama-server" in " ".join(json.dumps(r) for r in run.records), "not the native engine"
    lines = shown.stdout.splitlines()
    assert lines[0].startswith(f"run {ready['run_id']} · tiny.gguf on ")
    assert lines[1].split() == ["streams", "agg", "tok/s", "stream", "tok/s", "TTFT", "p50",
                                "TTFT", "p95", "requests", "errors", "$/Mtok"]
    one, four = (line.split() for line in lines[2:4])
    assert one[0] == "1" and four[0] == "4"
    agg_1, agg_4 = float(one[1].replace(",", "")), float(four[1].replace(",", ""))
    assert agg_1 > 0 and agg_4 > 0
    assert one[-2] == "0" and four[-2] == "0"  # no errors
    assert one[-1] == four[-1] == "0.00"  # this machine is a $0 lease
    assert "bench   4 stream(s) done:" in shown.stderr  # the progress on stderr
    print(shown.stdout + f"aggregate tok/s: 1 stream {agg_1:.1f}, 4 streams {agg_4:.1f} "
          f"(x{agg_4 / agg_1:.2f}), load {os.getloadavg()[0]:.2f}")

    assert as_json.returncode == 0, as_json.stderr
    report = json.loads(as_json.stdout)
    assert report["journaled"] is True and report["price_per_hour"] == 0.0
    assert [lv["concurrency"] for lv in report["levels"]] == [1, 4]
    for level in report["levels"]:
        assert level["tokens"] > 0 and level["errors"] == 0
        assert level["ttft_p50_ms"] <= level["ttft_p95_ms"]

    # The journal: each level a speed line under the run's GPU model and host.
    journal = HostJournal(state)
    (served,) = [o for o in journal.read() if o.run_id == ready["run_id"] and o.ok]
    benched = [s for s in journal.speeds if s.run_id == ready["run_id"] and s.errors == 0
               and s.per_stream_tok_s > 0]
    assert sorted(s.concurrency for s in benched) == [1, 1, 4, 4]
    assert {(s.gpu_name, s.host, s.model) for s in benched} == {
        (served.gpu_name, served.host, "tiny.gguf")}
    first_four = next(s for s in benched if s.concurrency == 4)
    assert first_four.decode_tok_s == round(agg_4, 3) or abs(first_four.decode_tok_s - agg_4) < 0.1

    # The board, for an offer of that GPU model at a price: `~` before, measured after.
    card = dataclasses.replace(offer("9", 0.50, served.gpu_name), mem_bw_gbps=100.0)
    need = ModelNeed(model_bytes=1_500_000, kv_bytes=0, context=512)  # the tiny model's size

    def board(memory_dir: Path, concurrency: int) -> OffersModel:
        from mvp_tui.config import ConfigPaths, load_config

        config = load_config(env={"HOME": str(tmp_path), "MVP_STATE_DIR": str(memory_dir)},
                             paths=ConfigPaths(default=tmp_path / "none.toml"))
        memory = load_memory(config, time.time())
        model = OffersModel()
        model.set_offers([card])
        model.set_outlook(outlook_for(need, image="i", image_gb=1, has_image=lambda o, i: False,
                                      learned=memory.learned, model="tiny.gguf",
                                      concurrency=concurrency))
        return model

    before = mtok_cell(board(tmp_path / "empty", 4), "vastai:9")
    after = mtok_cell(board(state, 4), "vastai:9")
    assert before.startswith("~")
    median_4 = sorted(s.decode_tok_s for s in benched if s.concurrency == 4)
    expected = 277.78 * 0.50 / ((median_4[0] + median_4[1]) / 2)
    assert not after.startswith("~") and abs(float(after.replace(",", "")) - expected) <= max(
        0.01, expected * 0.01)
