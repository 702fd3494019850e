"""Only what is ours (issue 36, security read F1): on a shared account, `down` destroys a
lease a record here holds or an instance carrying this install's tag, and nothing else under
`--yes`; every other instance named like an mvp-tui run is reported with the command that
ends it. Each account (fake Vast, fake RunPod) holds two leases of run 41 recorded here, one
instance with this install's tag and no record, another install's run 41, a person's
`mvp-2024-01-15`, `mvp-r-prod-0-0`, an untagged `mvp-41-0-1`, and a paused bid (Vast) or an
EXITED pod (RunPod) carrying this install's tag."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from mvp_tui.install_tag import TAG_FILE
from mvp_tui.lease.records import LeaseRecord, LeaseRecordState, RecordStore
from tests.e2e.test_vast_headless import cli
from tests.fakes.runpod_server import FakeRunPod
from tests.fakes.vastai_server import FakeVast

TAG = "a1b2c3d4e5"  # this install's
OTHER = "0f0f0f0f0f"  # another install's, on the same account
FAST = {"MVP_LEASE_DELETE_TIMEOUT_SECS": "10", "MVP_LEASE_DESTROY_BACKOFF_SECS": "0.01",
        "MVP_LEASE_RECONCILE_WAITS_SECS": "0.05"}
VAST_KEY = "fake-vast-key-0123456789"


@dataclass
class Account:
    """One fake marketplace account, whichever provider: what a test needs of it."""

    kind: str
    env: dict[str, str]
    add: Callable[[str], str]  # label -> id, running
    pause: Callable[[str], None]  # a paused bid (Vast) / an EXITED pod (RunPod)
    live: Callable[[], set[str]]
    fail_destroy: Callable[[str], None]


@pytest.fixture(params=["vastai", "runpod"])
def account(request: pytest.FixtureRequest) -> Iterator[Account]:
    if request.param == "vastai":
        with FakeVast(api_key=VAST_KEY, loading_polls=0) as vast:
            yield Account(
                "vastai",
                {"VASTAI_API_KEY": VAST_KEY, "MVP_VASTAI_API_URL": vast.url},
                lambda label: str(vast.add_instance(label=label)),
                lambda i: vast.outbid_instance(int(i)),
                lambda: {str(row["id"]) for row in vast.billing()},
                lambda i: vast.fail_destroy(int(i), times=10**6),
            )
    else:
        with FakeRunPod() as pods:
            yield Account(
                "runpod",
                {"RUNPOD_API_KEY": pods.api_key, "MVP_RUNPOD_API_URL": pods.api_url},
                pods.add_pod,
                pods.exit_pod,
                lambda: {str(p["id"]) for p in pods.billing()},
                lambda i: pods.fail_delete(i, 10**6),
            )


@dataclass
class Holding:
    recorded: tuple[str, str]  # two leases of run 41, recorded here
    tagged: str  # this install's tag, no record
    paused: str  # this install's tag, paused bid / EXITED
    others: dict[str, str]  # label -> id: not made here

    @property
    def ours(self) -> set[str]:
        return {*self.recorded, self.tagged, self.paused}


def _fill(account: Account) -> Holding:
    recorded = (account.add(f"mvp-{TAG}-41-0-1"), account.add(f"mvp-{TAG}-41-1-1"))
    tagged = account.add(f"mvp-{TAG}-r-0000aaaa-0-1")
    paused = account.add(f"mvp-{TAG}-r-0000bbbb-0-2")
    account.pause(paused)
    others = {label: account.add(label) for label in (
        f"mvp-{OTHER}-41-0-1",  # another install's run with the same fixed run id
        "mvp-2024-01-15",  # a person's
        "mvp-r-prod-0-0",
        "mvp-41-0-1",  # another machine's run 41, labelled before tags
    )}
    return Holding(recorded, tagged, paused, others)


def _env(account: Account, state: Path, **extra: str) -> dict[str, str]:
    return {"XDG_CONFIG_HOME": str(state.parent / "xdg"), "MVP_STATE_DIR": str(state),
            **account.env, **FAST, **extra}


def _made_run_41(account: Account, state: Path, holding: Holding) -> None:
    """The state dir that made run 41: its record (both leases) and the kept tag."""
    state.mkdir(parents=True)
    (state / TAG_FILE).write_text(TAG + "\n")
    store = RecordStore(state)
    record = store.create_run("41", provider=account.kind, label_prefix="mvp", created_at=1.0,
                              owner_tag=TAG)
    for node, provider_id in enumerate(holding.recorded):
        record.leases.append(LeaseRecord(
            provider=account.kind, label=f"mvp-{TAG}-41-{node}-1", node_id=node, offer_id="1",
            gpu_name="g", price_per_hour=0.3, state=LeaseRecordState.RUNNING,
            provider_id=provider_id, created_at=2.0,
        ))
    store.save(record)


def _reported_not_ours(stderr: str, account: Account, holding: Holding) -> None:
    n = len(holding.others)
    assert f"{n} instances named like mvp-tui runs were not made here" in stderr
    for label, provider_id in holding.others.items():
        (line,) = [x for x in stderr.splitlines() if f"'{label}'" in x]
        assert f"`mvp-tui down --instance {account.kind}:{provider_id}`" in line
        assert f"{account.kind} {provider_id} " in line and " · $" in line and " · age " in line


def test_down_all_yes_from_an_empty_state_dir_destroys_only_what_carries_our_tag(
    account: Account, tmp_path: Path
) -> None:
    holding = _fill(account)
    down = cli("down", "--all", "--yes",
               env=_env(account, tmp_path / "state", MVP_LEASE_OWNER_TAG=TAG))
    assert down.returncode == 0, down.stderr
    assert account.live() == set(holding.others.values()), "only ours destroyed"
    _reported_not_ours(down.stderr, account, holding)
    assert "nothing of ours under prefix 'mvp' remains" in down.stderr


def test_down_all_yes_from_the_state_dir_that_made_the_run(
    account: Account, tmp_path: Path
) -> None:
    holding = _fill(account)
    state = tmp_path / "state"
    _made_run_41(account, state, holding)  # the tag from the kept file, not the config
    down = cli("down", "--all", "--yes", env=_env(account, state))
    assert down.returncode == 0, down.stderr
    assert account.live() == set(holding.others.values())
    for provider_id in holding.recorded:
        assert f"deleted {provider_id} " in down.stderr and "of run 41" in down.stderr
    _reported_not_ours(down.stderr, account, holding)


def test_exit_0_only_when_nothing_of_ours_bills(account: Account, tmp_path: Path) -> None:
    holding = _fill(account)
    account.fail_destroy(holding.tagged)
    down = cli("down", "--all", "--yes",
               env=_env(account, tmp_path / "state", MVP_LEASE_DELETE_TIMEOUT_SECS="1"))
    # No tag configured: a fresh state dir makes its own, which nothing carries. Nothing is
    # ours, so nothing is destroyed and nothing of ours bills (the rest is reported).
    assert down.returncode == 0, down.stderr
    assert account.live() == {*holding.ours, *holding.others.values()}
    assert "8 instances named like mvp-tui runs were not made here" in down.stderr
    down = cli("down", "--all", "--yes",
               env=_env(account, tmp_path / "state2", MVP_LEASE_OWNER_TAG=TAG,
                        MVP_LEASE_DELETE_TIMEOUT_SECS="1"))
    assert down.returncode == 3, down.stderr
    assert account.live() == {holding.tagged, *holding.others.values()}
    assert "MAY STILL BILL" in down.stderr


def test_down_41_never_touches_another_install_s_41(account: Account, tmp_path: Path) -> None:
    holding = _fill(account)
    state = tmp_path / "state"
    _made_run_41(account, state, holding)
    down = cli("down", "41", "--yes", env=_env(account, state))
    assert down.returncode == 0, down.stderr
    assert account.live() == {holding.tagged, holding.paused, *holding.others.values()}
    # Our other runs are named as ours (with `down RUN`); the rest as not made here.
    assert "of another run, r-0000aaaa" in down.stderr
    _reported_not_ours(down.stderr, account, holding)


def test_include_foreign_is_refused_with_yes_and_destroys_nothing(
    account: Account, tmp_path: Path
) -> None:
    holding = _fill(account)
    down = cli("down", "--all", "--include-foreign", "--yes",
               env=_env(account, tmp_path / "state", MVP_LEASE_OWNER_TAG=TAG))
    assert down.returncode == 2 and "refused with --yes" in down.stderr
    assert account.live() == {*holding.ours, *holding.others.values()}


def test_down_instance_shows_whose_it_is_and_asks(account: Account, tmp_path: Path) -> None:
    holding = _fill(account)
    person = holding.others["mvp-2024-01-15"]
    env = _env(account, tmp_path / "state", MVP_LEASE_OWNER_TAG=TAG)
    asked = cli("down", "--instance", f"{account.kind}:{person}", env=env)
    assert asked.returncode == 2, asked.stderr  # no terminal to answer: nothing destroyed
    assert "NOT made by this install" in asked.stderr and "'mvp-2024-01-15'" in asked.stderr
    assert person in account.live()
    done = cli("down", "--instance", f"{account.kind}:{person}", "--yes", env=env)
    assert done.returncode == 0, done.stderr
    assert person not in account.live()
    assert account.live() == {*holding.ours, *(set(holding.others.values()) - {person})}


def test_the_upgrade_a_record_of_today_s_label_shape_is_torn_down(
    account: Account, tmp_path: Path
) -> None:
    """A state dir written before tags (its records have no `owner_tag`, its labels no tag):
    what a record holds is still ours; an unrecorded label of that shape is reported."""
    leased = account.add("mvp-r-0000cccc-1-1")
    account.add("mvp-r-0000cccc-1-2")  # a create whose answer never came: known by label
    unrecorded = account.add("mvp-r-0000dddd-1-1")
    state = tmp_path / "state"
    store = RecordStore(state)
    record = store.create_run("r-0000cccc", provider=account.kind, label_prefix="mvp",
                              created_at=1.0)
    for label, provider_id, lease_state in (
        ("mvp-r-0000cccc-1-1", leased, LeaseRecordState.RUNNING),
        ("mvp-r-0000cccc-1-2", None, LeaseRecordState.UNKNOWN),
    ):
        record.leases.append(LeaseRecord(
            provider=account.kind, label=label, node_id=1, offer_id="1", gpu_name="g",
            price_per_hour=0.3, state=lease_state, provider_id=provider_id,
            created_at=None if provider_id is None else 2.0,
        ))
    store.save(record)
    path = store.record_path("r-0000cccc")
    old = json.loads(path.read_text())
    del old["owner_tag"]  # as written before tags
    path.write_text(json.dumps(old))
    down = cli("down", "--all", "--yes", env=_env(account, state))
    assert down.returncode == 0, down.stderr
    assert account.live() == {unrecorded}
    assert f"deleted {leased} (mvp-r-0000cccc-1-1) of run r-0000cccc" in down.stderr
    assert f"`mvp-tui down --instance {account.kind}:{unrecorded}`" in down.stderr
    assert not store.load("r-0000cccc").is_open


def _asked(args: list[str], env: dict[str, str], answers: str) -> tuple[int, str, str]:
    """`mvp-tui ARGS` with a terminal on stdin that answers `answers`; (rc, stdout, stderr)."""
    master, slave = pty.openpty()
    base = {k: v for k, v in os.environ.items() if not k.startswith(("MVP_", "VAST", "RUNPOD"))}
    try:
        os.write(master, answers.encode())
        done = subprocess.run([sys.executable, "-m", "mvp_tui", *args], stdin=slave,
                              capture_output=True, text=True, env={**base, **env}, timeout=120)
    finally:
        os.close(slave)
        os.close(master)
    return done.returncode, done.stdout, done.stderr


def test_the_confirm_says_what_it_does_in_numbers(account: Account, tmp_path: Path) -> None:
    holding = _fill(account)
    state = tmp_path / "state"
    _made_run_41(account, state, holding)
    rc, out, err = _asked(["down", "--all"], _env(account, state), "n\n")
    assert rc == 2 and "nothing destroyed" in err
    assert ("Destroy 2 leases of 1 run recorded here and 2 instances carrying this install's "
            f"tag with no record here ({account.kind} 2)? 4 other instances named like mvp-tui "
            "runs are left alone.") in out
    assert account.live() == {*holding.ours, *holding.others.values()}


def test_include_foreign_lists_them_first_and_asks_again(
    account: Account, tmp_path: Path
) -> None:
    holding = _fill(account)
    env = _env(account, tmp_path / "state", MVP_LEASE_OWNER_TAG=TAG)
    rc, out, err = _asked(["down", "--all", "--include-foreign"], env, "y\ny\n")
    assert rc == 0, err
    assert err.index("4 instances named like mvp-tui runs were not made here") < err.index(
        "not made here, destroyed as asked, confirmed")
    assert "Also destroy these 4 instances that this install did not make?" in out
    assert "and the 4 not made here, as confirmed?" in out
    assert account.live() == set()
    # Answering no to the first question keeps them, and the sweep of ours goes on.
    holding = _fill(account)
    rc, out, err = _asked(["down", "--all", "--include-foreign"], env, "n\ny\n")
    assert rc == 0, err
    assert account.live() == set(holding.others.values())
