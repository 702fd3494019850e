"""Provable zero on the fake Vast (issue 28 §3): after a teardown the account is listed
under our prefix in every billing state; what is ours and in scope is destroyed, confirmed;
other runs are reported; foreign labels are never touched nor called ours."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from mvp_tui.config import ConfigPaths, load_config
from mvp_tui.engine.controller import RunController
from mvp_tui.engine.run import RunEngine
from mvp_tui.events import EngineEvent
from mvp_tui.lease.account_check import AccountCheck, Held, recorded_check
from mvp_tui.lease.events import AccountChecked
from mvp_tui.lease.records import LeaseRecord, LeaseRecordState, RecordStore, decode_record
from mvp_tui.providers.base import KeptVolume
from tests.e2e.test_vast_headless import cli
from tests.fakes.vastai_server import FakeVast, Fault

KEY = "fake-vast-key-0123456789"
TAG = "a1b2c3d4e5"  # this install's tag ([lease] owner_tag)
FAST = {"MVP_LEASE_OWNER_TAG": TAG, "MVP_LEASE_DELETE_TIMEOUT_SECS": "10",
        "MVP_LEASE_DESTROY_BACKOFF_SECS": "0.01"}


@pytest.fixture
def fake() -> Iterator[FakeVast]:
    with FakeVast(api_key=KEY, loading_polls=0) as server:
        yield server


def _env(fake: FakeVast, state: Path) -> dict[str, str]:
    """The default (local) profile with the Vast key: `down --all` asks Vast anyway."""
    return {"XDG_CONFIG_HOME": str(state.parent / "xdg"), "MVP_STATE_DIR": str(state),
            "VASTAI_API_KEY": KEY, "MVP_VASTAI_API_URL": fake.url, **FAST}


def _live(fake: FakeVast) -> set[int]:
    return {int(row["id"]) for row in fake.billing()}


def test_down_all_destroys_our_stopped_instance_and_paused_bid_and_leaves_foreign_ones(
    fake: FakeVast, tmp_path: Path
) -> None:
    stopped = fake.add_instance(label=f"mvp-{TAG}-r-0000aaaa-1-1")
    fake.stop_instance(stopped)
    paused = fake.add_instance(label=f"mvp-{TAG}-r-0000bbbb-1-2")
    fake.outbid_instance(paused)
    # Not ours: another prefix (which `mvp` must not match), the user's own, a bare `mvp-`.
    foreign = {fake.add_instance(label=f"mvpx-{TAG}-r-0000cccc-1-1"),
               fake.add_instance(label="my-training-job"),
               fake.add_instance(label="mvp-notes")}
    fake.stop_instance(min(foreign))
    state = tmp_path / "state"
    store = RecordStore(state)  # one run on record too: its lease goes by its id
    on_record = fake.add_instance(label="mvp-r-0000ffff-1-1")  # recorded before tags
    store.create_run("r-0000ffff", provider="vastai", label_prefix="mvp", created_at=1.0)
    _lease(store, "r-0000ffff", on_record)
    down = cli("down", "--all", "--yes", env=_env(fake, state))
    assert down.returncode == 0, down.stderr
    assert _live(fake) == foreign, "ours destroyed, the rest untouched"
    assert set(fake.destroyed()) == {stopped, paused, on_record}
    assert f"deleted {on_record} (mvp-r-0000ffff-1-1) of run r-0000ffff" in down.stderr
    assert "account checked (vastai): nothing of ours under prefix 'mvp' remains" in down.stderr
    assert f"1 stopped instance {stopped} destroyed, confirmed" in down.stderr
    assert f"1 paused bid (stopped, outbid) instance {paused} destroyed, confirmed" in down.stderr
    for label in ("mvpx", "my-training-job"):
        assert label not in down.stderr + down.stdout, f"{label} reported as ours"
    # Under the prefix but not ours: counted and named, with the command that ends it.
    assert "1 instance named like mvp-tui runs was not made here" in down.stderr
    notes = max(foreign)
    assert "'mvp-notes'" in down.stderr
    assert f"`mvp-tui down --instance vastai:{notes}`" in down.stderr
    # On record before the destroy, and the records say what the check found.
    assert recorded_check(store.load("r-0000ffff")) is not None
    record = store.load("r-0000aaaa")
    assert record.leases[0].state is LeaseRecordState.DELETED
    check = recorded_check(record)
    assert check is not None and check.nothing_bills and check.run_id is None
    events = [json.loads(line) for line in down.stdout.splitlines() if line.strip()]
    (said,) = [e for e in events if e.get("event") == AccountChecked.kind]
    assert said["listed"] and said["nothing_bills"] and len(said["destroyed"]) == 2


def _engine(fake: FakeVast, tmp_path: Path, seen: list[EngineEvent]) -> RunEngine:
    env = {"MVP_STATE_DIR": str(tmp_path / "state"), "MVP_NODE_PROVIDER": "vastai",
           "VASTAI_API_KEY": KEY, "MVP_VASTAI_API_URL": fake.url, **FAST}
    config = load_config(env=env, paths=ConfigPaths(default=tmp_path / "none.toml"))
    engine = RunEngine(config, seen.append)
    engine.store.create_run(engine.ctx.run_id, provider="vastai", label_prefix="mvp",
                            created_at=1.0, owner_tag=TAG)
    return engine


def _lease(store: RecordStore, run_id: str, provider_id: int) -> None:
    """A running lease of `run_id` on record (label `mvp-RUN-1-1`, or tagged as its record)."""
    record = store.load(run_id)
    tag = f"{record.owner_tag}-" if record.owner_tag else ""
    record.leases.append(LeaseRecord(
        provider="vastai", label=f"mvp-{tag}{run_id}-1-1", node_id=1, offer_id="1",
        gpu_name="RTX 3090", price_per_hour=0.3, state=LeaseRecordState.RUNNING,
        provider_id=str(provider_id), created_at=2.0,
    ))
    store.save(record)


def _recorded(engine: RunEngine, provider_id: int) -> None:
    _lease(engine.store, engine.ctx.run_id, provider_id)


async def test_the_final_stop_destroys_a_stopped_instance_the_walk_never_saw(
    fake: FakeVast, tmp_path: Path
) -> None:
    seen: list[EngineEvent] = []
    engine = _engine(fake, tmp_path, seen)
    leased = fake.add_instance(label=f"mvp-{TAG}-{engine.ctx.run_id}-1-1")
    _recorded(engine, leased)
    left_behind = fake.add_instance(label=f"mvp-{TAG}-{engine.ctx.run_id}-1-2")  # never on record
    fake.stop_instance(left_behind)
    other = fake.add_instance(label=f"mvp-{TAG}-r-0000eeee-1-1")  # another run's: reported only
    try:
        result = await RunController(engine).stop(final=True)
    finally:
        await engine.aclose()
    assert _live(fake) == {other}
    assert result.nothing_bills and result.exit_code == 0
    account = result.account
    assert account is not None and account.listed
    assert [h.provider_id for h in account.destroyed] == [str(left_behind)]
    assert [(h.provider_id, h.run_id) for h in account.other_runs] == [(str(other), "r-0000eeee")]
    lines = result.left_lines()
    assert (f"account checked (vastai): nothing of run {engine.ctx.run_id} remains · 1 stopped "
            f"instance {left_behind} destroyed, confirmed") in lines
    assert any("of another run, r-0000eeee, may still bill" in line
               and "`mvp-tui down r-0000eeee`" in line for line in lines)
    assert any(isinstance(e, AccountChecked) for e in seen)
    record = engine.store.load(engine.ctx.run_id)
    assert recorded_check(record) == account, "the receipt can be rebuilt from the record"


async def test_a_failed_listing_is_a_warning_not_a_false_nothing_bills(
    fake: FakeVast, tmp_path: Path
) -> None:
    engine = _engine(fake, tmp_path, [])
    leased = fake.add_instance(label=f"mvp-{TAG}-{engine.ctx.run_id}-1-1")
    _recorded(engine, leased)
    fake.script("list", *[Fault(status=400, body={"success": False, "error": "broken",
                                                   "msg": "the list is down"})] * 5)
    try:
        result = await RunController(engine).stop(final=True)
    finally:
        await engine.aclose()
    assert _live(fake) == set(), "the recorded lease went, confirmed by its id"
    account = result.account
    assert account is not None and not account.listed and not account.nothing_bills
    assert result.exit_code == 0, "every delete was confirmed by id: a warning, not exit 3"
    (warning,) = [line for line in result.left_lines() if "account not checked" in line]
    assert warning.startswith("warning: account not checked (vastai)")
    assert "`mvp-tui down --all`" in warning


async def test_ours_found_and_not_destroyed_exits_3_named(fake: FakeVast, tmp_path: Path) -> None:
    engine = _engine(fake, tmp_path, [])
    stray = fake.add_instance(label=f"mvp-{TAG}-{engine.ctx.run_id}-1-3")
    fake.fail_destroy(stray, times=1000)
    try:
        result = await RunController(engine).stop(final=True)
    finally:
        await engine.aclose()
    assert result.exit_code == 3 and not result.nothing_bills
    account = result.account
    assert account is not None and [h.provider_id for h in account.unconfirmed] == [str(stray)]
    assert any(f"lease {stray} of run {engine.ctx.run_id} may still bill" in line
               and f"`mvp-tui down {engine.ctx.run_id}`" in line for line in result.left_lines())
    label = f"mvp-{TAG}-{engine.ctx.run_id}-1-3"
    assert f"instance {stray} ({label}, running) of run {engine.ctx.run_id} NOT " \
        "confirmed destroyed" in " ".join(account.lines())


def test_records_without_a_check_load_and_a_check_round_trips(tmp_path: Path) -> None:
    store = RecordStore(tmp_path)
    record = store.create_run("r-1", provider="runpod", label_prefix="mvp", created_at=1.0)
    data = json.loads(store.record_path("r-1").read_text())
    data.pop("account_check")  # a record written before account checks
    raw = json.dumps(data).encode()
    assert decode_record(store.record_path("r-1"), raw).account_check is None
    check = AccountCheck(
        "runpod", True, "r-1", "mvp",
        destroyed=(Held("pod9", "mvp-r-1-1-1", "r-1", "EXITED"),),
        kept=(KeptVolume("vol1", "mvp-cache", 100, 7.0),),
    )
    record.account_check = check.to_json()
    store.save(record)
    again = recorded_check(store.load("r-1"))
    assert again == check
    assert again.lines() == [
        "account checked (runpod): nothing of run r-1 remains · 1 EXITED pod pod9 destroyed, "
        "confirmed",
        "volume mvp-cache (vol1) kept: $7.00/month until `mvp-tui volume delete mvp-cache`",
    ]
