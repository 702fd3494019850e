"""`mvp-tui bench`'s pieces that need no engine: its levels, percentiles, the table's
$/Mtok at the lease's price, a level against an endpoint that refuses, and the command's
refusals (each naming the value and the fix)."""

from __future__ import annotations

import argparse
import socket
from pathlib import Path

import pytest

from mvp_tui.commands import bench as bench_command
from mvp_tui.config import ConfigPaths, load_config
from mvp_tui.engine import load_bench
from mvp_tui.engine.decode_speed import USD_PER_MTOK_FACTOR
from mvp_tui.prompt.client import PromptClient
from mvp_tui.prompt.load import (
    MAX_FAULTS_IN_A_ROW,
    LevelResult,
    Progress,
    http_for,
    parse_levels,
    percentile,
    run_level,
)


def test_levels_parse_in_order_without_repeats_and_refuse_what_is_not_a_count() -> None:
    assert parse_levels("1,4,8") == [1, 4, 8]
    assert parse_levels(" 4, 1 ,4") == [4, 1]
    for bad in ("", "0", "1,x", "-2", "300", "1.5"):
        with pytest.raises(ValueError, match=r"not a number of streams|no level"):
            parse_levels(bad)


def test_percentiles_interpolate_between_ranks() -> None:
    assert percentile([], 0.5) is None
    assert percentile([7.0], 0.95) == 7.0
    assert percentile([40.0, 10.0, 30.0, 20.0], 0.5) == 25.0
    values = [float(v) for v in range(1, 101)]  # 1..100
    assert percentile(values, 0.95) == pytest.approx(95.05)


def test_the_table_prices_each_level_at_the_leases_rate() -> None:
    one = LevelResult(concurrency=1, requests=10, errors=0, tokens=1000, wall_s=10.0,
                      aggregate_tok_s=100.0, per_stream_tok_s=104.0, ttft_p50_ms=30.0,
                      ttft_p95_ms=55.0)
    four = LevelResult(concurrency=4, requests=30, errors=1, tokens=2500, wall_s=10.0,
                       aggregate_tok_s=250.0, per_stream_tok_s=66.0, ttft_p50_ms=80.0,
                       ttft_p95_ms=210.0)
    lines = load_bench.render_table([one, four], 0.90).splitlines()
    assert lines[1].split() == ["1", "100.0", "104.0", "30", "ms", "55", "ms", "10", "0",
                                f"{USD_PER_MTOK_FACTOR * 0.90 / 100:.2f}"]
    assert lines[2].split()[-1] == f"{USD_PER_MTOK_FACTOR * 0.90 / 250:.2f}"  # 1.00
    assert lines[2].split()[-2] == "1"
    assert load_bench.render_table([one], None).splitlines()[1].split()[-1] == "?"
    assert load_bench.level_json(four, 0.90)["usd_per_mtok"] == pytest.approx(1.0)


async def test_a_level_against_a_refusing_endpoint_ends_with_its_errors() -> None:
    with socket.socket() as probe:  # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    seen: list[Progress] = []
    async with http_for(2) as http:
        client = PromptClient(f"http://127.0.0.1:{port}", "m", http=http)
        result = await run_level(client, 2, 30.0, max_tokens=8, progress=seen.append)
    assert result.errors == result.requests == 2 * MAX_FAULTS_IN_A_ROW  # each stream stops
    assert result.wall_s < 30.0 and result.tokens == 0 and result.aggregate_tok_s == 0.0
    assert result.ttft_p50_ms is None and "cannot connect" in result.first_error
    assert seen and seen[-1].requests == result.requests


def _args(**values: object) -> argparse.Namespace:
    base: dict[str, object] = {"run": None, "concurrency": "1,4", "duration": 5.0,
                               "answer_tokens": 32, "json": False}
    return argparse.Namespace(**{**base, **values})


def test_the_command_refuses_bad_levels_and_a_run_that_does_not_serve(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = load_config(env={"HOME": str(tmp_path), "MVP_STATE_DIR": str(tmp_path / "s")},
                         paths=ConfigPaths(default=tmp_path / "none.toml"))
    assert bench_command.run(config, _args(concurrency="1,zero")) == 2
    err = capsys.readouterr().err
    assert "--concurrency '1,zero'" in err and "fix: give levels such as 1,4,8" in err
    assert bench_command.run(config, _args(duration=0.0)) == 2
    assert "--duration 0" in capsys.readouterr().err
    assert bench_command.run(config, _args()) == 2
    assert "no run serves now" in capsys.readouterr().err
    assert bench_command.run(config, _args(run="r-nope")) == 2
    assert "run r-nope has no endpoint record" in capsys.readouterr().err
