"""The host journal (lease/host_journal.py): lines appended and read back, corrupt lines
skipped, concurrent runs, owner-only, and which failures a host is remembered for."""

from __future__ import annotations

import dataclasses
import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from types import MappingProxyType

from mvp_tui.engine.offer_ranking import BEST_FIRST
from mvp_tui.lease.host_journal import (
    DAY_S,
    JOURNAL_FILE,
    STAGES,
    HostJournal,
    HostOutcome,
    describe,
    failure_of,
    host_key,
    hosts_of,
    memory_from,
)
from mvp_tui.providers.base import Offer

NOW = 1_780_000_000.0
ESC = "\x1b"


def outcome(
    host: str = "40001", *, at: float = NOW - 3600, ok: bool = False, **kw: object
) -> HostOutcome:
    values: dict[str, object] = {
        "at": at,
        "run_id": "r-7f3a",
        "provider": "vastai",
        "host": host,
        "offer_id": "1001",
        "gpu_name": "RTX 4090",
        "stage": "serving" if ok else "ssh",
        "ok": ok,
        "reason": "" if ok else "SSH refused after 12 tries",
        "stage_secs": {"create": 1.5, "running": 40.0, "ssh": 90.25},
        "cost_usd": 0.0312,
    }
    values.update(kw)
    return HostOutcome(**values)  # type: ignore[arg-type]


def offer(offer_id: str, provider: str = "vastai", **kw: object) -> Offer:
    base = Offer(provider, offer_id, "RTX 4090", 1, 24564, 0.35, 0.99, 800.0, 600.0, "US")
    return dataclasses.replace(base, **kw)  # type: ignore[arg-type]


def test_append_then_read_gives_the_outcomes_back_in_order(tmp_path: Path) -> None:
    journal = HostJournal(tmp_path / "state")  # the state dir is made when missing
    first, second = outcome("40001"), outcome("40002", ok=True, at=NOW - 60)
    journal.append(first)
    journal.append(second)
    read = journal.read()
    assert [o.host for o in read] == ["40001", "40002"]
    assert read[0].stage_secs == {"create": 1.5, "running": 40.0, "ssh": 90.25}
    assert read[0].reason == "SSH refused after 12 tries" and read[0].cost_usd == 0.0312
    assert read[1].ok and read[1].stage == "serving"
    assert journal.corrupt == 0
    lines = (tmp_path / "state" / JOURNAL_FILE).read_text().splitlines()
    assert len(lines) == 2 and json.loads(lines[0])["host"] == "40001"


def test_a_missing_journal_reads_as_none(tmp_path: Path) -> None:
    journal = HostJournal(tmp_path)
    assert journal.read() == [] and not journal.exists()
    assert journal.failed_hosts("vastai", NOW, 7) == {}


def test_the_file_is_owner_only_even_when_it_was_made_wider(tmp_path: Path) -> None:
    journal = HostJournal(tmp_path)
    journal.append(outcome())
    assert stat.S_IMODE(journal.path.stat().st_mode) == 0o600
    journal.path.chmod(0o644)
    journal.append(outcome())
    assert stat.S_IMODE(journal.path.stat().st_mode) == 0o600


def test_a_corrupt_line_is_skipped_and_counted_and_later_lines_still_read(
    tmp_path: Path,
) -> None:
    journal = HostJournal(tmp_path)
    journal.append(outcome("40001"))
    with journal.path.open("ab") as handle:
        handle.write(b"{not json\n")
        handle.write(b'{"v": 1, "host": 7}\n')  # JSON, not an outcome
        handle.write(b'["a list"]\n\xff\xfe\n')
        handle.write(b'{"v": 99, "at": 1}\n')  # a later format this version cannot read
        handle.write(b"[" * 100_000 + b"\n")  # nested past the parser's limit
    journal.append(outcome("40002"))
    assert [o.host for o in journal.read()] == ["40001", "40002"]
    assert journal.corrupt == 6


def test_a_torn_last_line_does_not_swallow_the_next_append(tmp_path: Path) -> None:
    journal = HostJournal(tmp_path)
    journal.append(outcome("40001"))
    with journal.path.open("ab") as handle:
        handle.write(b'{"v": 1, "at": 17800')  # a write cut short (a full disk)
    journal.append(outcome("40002"))
    assert [o.host for o in journal.read()] == ["40001", "40002"]
    assert journal.corrupt == 1


def test_earlier_lines_are_never_rewritten(tmp_path: Path) -> None:
    journal = HostJournal(tmp_path)
    journal.append(outcome("40001"))
    before = journal.path.read_bytes()
    journal.append(outcome("40002"))
    assert journal.path.read_bytes().startswith(before)


_WRITER = """
import sys
from mvp_tui.lease.host_journal import HostJournal, HostOutcome
journal = HostJournal(sys.argv[1])
for n in range(int(sys.argv[3])):
    journal.append(HostOutcome(
        at=1.0 + n, run_id=sys.argv[2], provider="vastai", host=f"{sys.argv[2]}-{n}",
        offer_id=str(n), gpu_name="RTX 4090", stage="ssh", ok=False,
        reason="x" * 500, stage_secs={"create": 1.0}, cost_usd=0.01))
"""


def test_concurrent_runs_appending_lose_and_tear_no_line(tmp_path: Path) -> None:
    writers, each = 4, 150
    procs = [
        subprocess.Popen([sys.executable, "-c", _WRITER, str(tmp_path), f"w{w}", str(each)])
        for w in range(writers)
    ]
    assert [p.wait(timeout=60) for p in procs] == [0] * writers
    journal = HostJournal(tmp_path)
    read = journal.read()
    assert journal.corrupt == 0
    assert len(read) == writers * each
    assert {o.host for o in read} == {f"w{w}-{n}" for w in range(writers) for n in range(each)}


def test_texts_are_cleaned_and_redacted_on_the_way_in(tmp_path: Path) -> None:
    journal = HostJournal(tmp_path, redact=lambda t: t.replace("hunter2", "[redacted]"))
    journal.append(outcome(reason=f"bad {ESC}[31mred{ESC}[0m key hunter2\nsecond line"))
    (read,) = journal.read()
    assert ESC not in read.reason and "\n" not in read.reason
    assert "hunter2" not in journal.path.read_text() and "[redacted]" in read.reason


def test_a_hand_edited_line_is_cleaned_on_the_way_out(tmp_path: Path) -> None:
    journal = HostJournal(tmp_path)
    journal.append(outcome())
    line = json.loads(journal.path.read_text())
    line["reason"] = f"{ESC}]52;c;cGF5bG9hZA==\x07evil [bold]markup[/bold]"
    journal.path.write_text(json.dumps(line) + "\n")
    (read,) = journal.read()
    assert ESC not in read.reason and "\x07" not in read.reason
    assert read.reason == "evil [bold]markup[/bold]"  # shown as text, never as markup


def test_failed_hosts_keeps_the_newest_failure_per_host_within_the_window(
    tmp_path: Path,
) -> None:
    journal = HostJournal(tmp_path)
    journal.append(outcome("40001", at=NOW - 2 * DAY_S, reason="older"))
    journal.append(outcome("40001", at=NOW - DAY_S, reason="newer"))
    journal.append(outcome("40002", at=NOW - 8 * DAY_S, reason="too old"))
    journal.append(outcome("77", at=NOW - 60, provider="runpod"))  # another provider
    failed = journal.failed_hosts("vastai", NOW, 7)
    assert set(failed) == {"40001"} and failed["40001"].reason == "newer"
    assert set(journal.failed_hosts("vastai", NOW, 9)) == {"40001", "40002"}
    assert journal.failed_hosts("vastai", NOW, 0) == {}  # 0 turns the memory off


def test_a_later_success_clears_a_failure_and_a_later_failure_counts_again(
    tmp_path: Path,
) -> None:
    journal = HostJournal(tmp_path)
    journal.append(outcome("40001", at=NOW - 300))
    journal.append(outcome("40001", at=NOW - 200, ok=True))
    journal.append(outcome("40002", at=NOW - 100, ok=True))
    journal.append(outcome("40002", at=NOW - 50))
    # Out of order in the file (two runs at once): time decides, not the line's place.
    journal.append(outcome("40003", at=NOW - 10, ok=True))
    journal.append(outcome("40003", at=NOW - 20))
    assert set(journal.failed_hosts("vastai", NOW, 7)) == {"40002"}


def test_create_failures_and_ones_not_the_hosts_fault_are_journaled_not_held_against_it(
    tmp_path: Path,
) -> None:
    journal = HostJournal(tmp_path)
    journal.append(outcome("40001", stage="create", reason="offer no longer available"))
    journal.append(outcome("40002", stage="model", reason="HTTP 403 gated", blames_host=False))
    journal.append(outcome("40003", stage="running", reason="never ran"))
    assert len(journal.read()) == 3
    assert set(journal.failed_hosts("vastai", NOW, 7)) == {"40003"}


def test_host_keys_per_provider() -> None:
    vast = offer("1001", machine_id="40001", host_id="50001")
    assert host_key(vast) == "40001"  # the machine, not its owner
    assert host_key(offer("1002", host_id="50001")) == "50001"
    assert host_key(offer("1003")) == "offer 1003"
    pod = offer("SECURE:NVIDIA GeForce RTX 4090", "runpod", data_centers=("US-TX-3", "EU-RO-1"))
    assert host_key(pod, data_center="EU-RO-1") == "EU-RO-1/NVIDIA GeForce RTX 4090"
    assert host_key(pod) == "*/NVIDIA GeForce RTX 4090"  # landed nowhere yet
    assert hosts_of(pod) == (
        "US-TX-3/NVIDIA GeForce RTX 4090",
        "EU-RO-1/NVIDIA GeForce RTX 4090",
        "*/NVIDIA GeForce RTX 4090",
    )
    one = dataclasses.replace(pod, data_centers=("US-TX-3",))
    assert host_key(one) == "US-TX-3/NVIDIA GeForce RTX 4090"
    assert host_key(offer("local", "local", host_id="gpu-box")) == "gpu-box"


def test_the_ranking_moves_failed_hosts_last_and_keeps_both_orders() -> None:
    offers = [offer(str(n), machine_id=f"m{n}", price_per_hour=1 - n / 10) for n in range(1, 7)]
    memory = memory_from([outcome("m1"), outcome("m4")], NOW, 7)
    assert [memory.avoids(o) for o in offers] == [True, False, False, True, False, False]
    ordered = BEST_FIRST.rank(offers, failed=memory.avoids)
    assert [o.offer_id for o in ordered] == ["6", "5", "3", "2", "4", "1"]  # each by $/h
    assert BEST_FIRST.rank(offers) == offers[::-1]
    assert BEST_FIRST.rank([], failed=memory.avoids) == []


def test_a_runpod_type_is_avoided_when_one_of_its_data_centers_failed_for_it() -> None:
    gpu = "NVIDIA GeForce RTX 4090"
    pod = offer(f"SECURE:{gpu}", "runpod", data_centers=("US-TX-3", "EU-RO-1"),
                price_per_hour=0.2)
    other = offer("SECURE:NVIDIA A40", "runpod", data_centers=("US-TX-3",))
    there = memory_from([outcome(f"EU-RO-1/{gpu}", provider="runpod")], NOW, 7)
    assert BEST_FIRST.rank([pod, other], failed=there.avoids) == [other, pod]
    elsewhere = memory_from([outcome("EU-RO-1/NVIDIA A40", provider="runpod")], NOW, 7)
    assert BEST_FIRST.rank([pod, other], failed=elsewhere.avoids) == [pod, other]


def test_memory_across_providers_badges_and_orders_with_the_newest_failure() -> None:
    outcomes = [
        outcome("40001", at=NOW - 7200, reason="first"),
        outcome("40001", at=NOW - 3600, reason="second"),
        outcome("gpu-box", provider="local", at=NOW - 60, stage="engine", reason="OOM"),
    ]
    memory = memory_from(outcomes, NOW, 7)
    bad, good = offer("1", machine_id="40001"), offer("2", machine_id="40002")
    here = offer("local", "local", host_id="gpu-box")
    # By $/h (all alike here), ties by row key, the failed hosts after the others.
    assert BEST_FIRST.rank([bad, here, good], failed=memory.avoids) == [good, here, bad]
    failure = memory.failure(bad)
    assert failure is not None and failure.reason == "second"
    assert memory.failure(good) is None
    assert describe(failure, NOW) == "failed 1 h ago at ssh: second (run r-7f3a)"
    assert failure_of(here, {"gpu-box": outcomes[2]}) == outcomes[2]


def test_stage_secs_in_an_outcome_may_be_any_mapping(tmp_path: Path) -> None:
    journal = HostJournal(tmp_path)
    journal.append(outcome(stage_secs=MappingProxyType({"create": 2.0, "bad": float("nan")})))
    (read,) = journal.read()
    assert dict(read.stage_secs) == {"create": 2.0} and read.seconds == 2.0
    assert os.access(journal.path, os.R_OK)


def test_headless_orders_by_memory_before_the_cut_and_keeps_offer_ids_as_given() -> None:
    from mvp_tui.engine.headless import UpOptions, _pick

    offers = [offer(str(n), machine_id=f"m{n}") for n in range(1, 5)]
    memory = memory_from([outcome("m1"), outcome("m2")], NOW, 7)
    best = _pick(offers, UpOptions(max_offers=2), "vastai", memory)
    assert [o.offer_id for o in best] == ["3", "4"]  # the failed hosts fell past the cut
    assert [o.offer_id for o in _pick(offers, UpOptions(max_offers=9), "vastai", memory)] == [
        "3", "4", "1", "2"
    ]
    by_hand = _pick(offers, UpOptions(offer_ids=("1", "3")), "vastai", memory)
    assert [o.offer_id for o in by_hand] == ["1", "3"]  # picked by hand: tried as named


def test_the_journal_names_the_stages_as_the_engine_does() -> None:
    from mvp_tui.engine.failures import Stage

    assert [stage.value for stage in Stage] == list(STAGES)
