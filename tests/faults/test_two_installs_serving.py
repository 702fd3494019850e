"""Two installs, one account, both serving (issue 36's "must show"): state dirs of their
own, each its own tag, each with run 41 (the seed's fixed id) brought up on its own rented
node (a real sshd on loopback, the real agent serving the tiny model with llama.cpp) from
ONE fake Vast account.

Two other installs serve for the whole module: B headless (`up --headless --yes`, waiting)
and D, the dashboard in a real pty. For each way out of install A — the dashboard's `q`
(Esc out of the prompt box, then `q`) and ctrl+c, each answered "Destroy and quit", and its
SIGTERM; a headless run's SIGTERM; `down 41 --yes` and `down --all --yes` from A's state dir
after `up --until ready` — A was serving (its endpoint answered a chat), its instance is
destroyed, and B's and D's:

- are still running on the account, each with the label its own tag gave it;
- still serve: a chat request to each one's OpenAI endpoint (`mvp-tui endpoint --json` from
  its state dir; through its own process's SSH port forward to its node's engine) answers 200
  with text, its process is alive, and its node's agent and engine run;

and A's account check (the run record's `account_check`, or the `account_checked` event,
and the receipt it kept or said) names exactly B's and D's instances as not its own:
another install's tag, with the command that ends each. At the end D's own ctrl+c and
destroy leave B serving and name B's instance so, and B's SIGTERM ends B.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from mvp_tui.install_tag import kept_tag
from tests.e2e.headless import HeadlessRun, event
from tests.e2e.node import Node, container_env, processes_under, rented_node
from tests.e2e.test_endpoint import chat
from tests.fakes.vastai_server import FakeVast
from tests.faults.harness import KEY, Run, acli, is_event, vast_env
from tests.faults.pty_dashboard import PtyDashboard
from tests.faults.receipts import kept_receipt, records
from tests.faults.test_dashboard_receipt import quit_with
from tests.faults.test_dashboard_signals import lease_by_keys

pytestmark = [
    pytest.mark.peer("sshd, llama-cpp-python"),
    pytest.mark.asyncio(loop_scope="module"),  # the other installs' runs live on this loop
]

RUN_ID = "41"  # both installs: the sharpest case
ESC = b"\x1b"


@pytest.fixture(scope="module")
def account() -> Iterator[FakeVast]:
    """The one fake Vast account both installs rent from (each offer its own node)."""
    with FakeVast(api_key=KEY, loading_polls=1) as server:
        yield server


def install_env(
    account: FakeVast, node: Node, model: Path, home: Path, *, gpu: str, price: float
) -> dict[str, str]:
    """An install (state dir `home/state`, its own tag) renting run 41 on `account`; the one
    offer added for it (`gpu`) runs on `node`. Creates come one at a time: the fake writes
    the next instance's container environment where this install's agent reads it."""
    offer = account.add_offer(dph_total=price, gpu_name=gpu)
    account.offer_ssh[offer] = ("127.0.0.1", node.port, True)
    state = home / "state"
    return {
        **vast_env(account, node.client_key, state),
        "MVP_RUN_ID": RUN_ID,
        "MVP_NODE_PYTHON": sys.executable,  # the "node" is this machine, engine in our venv
        "MVP_NODE_DIR": str(node.node_dir),
        "MVP_GGUF_LOCAL_PATH": str(model),
        "MVP_PROMPT_RPC_BIND": "127.0.0.1:0",
        **container_env(account, home),
    }


@dataclass
class Serving:
    """Another install's run, serving for the whole module: what proves it still does."""

    env: dict[str, str]
    tag: str
    instance: str  # its provider id
    node_dir: Path  # where its agent and engine run
    running: Callable[[], bool]  # its own process (headless run or dashboard) is alive


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def headless_other(
    account: FakeVast, tiny_gguf: Path, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Serving]:
    """Install B: `up --headless --yes` serving run 41 on its own node; its output is read
    all along (a full pipe would stall it). At the end, its SIGTERM: destroyed, exit 0."""
    home = tmp_path_factory.mktemp("install-b")
    async with rented_node(home) as node:
        env = install_env(account, node, tiny_gguf, home, gpu="RTX 4090", price=0.40)
        async with HeadlessRun(["--yes"], home / "state", env=env) as run:
            await run.until(event("endpoint_ready"), within=100)
            (running,) = run.events("lease_running")
            proc = run.proc
            assert proc is not None
            serving = Serving(env, _tag(env), str(running["provider_id"]), node.node_dir,
                              lambda: proc.returncode is None)
            drain = asyncio.create_task(_read_on(run))
            try:
                await still_serves(account, [serving])
                yield serving
            finally:
                drain.cancel()
                run.signal(signal.SIGTERM)
                code = await run.finish(within=60)
            assert code == 0, run.stderr
            assert int(serving.instance) in account.destroyed()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def dashboard_other(
    account: FakeVast, tiny_gguf: Path, tmp_path_factory: pytest.TempPathFactory,
    headless_other: Serving,
) -> AsyncIterator[Serving]:
    """Install D: the dashboard in a pty serving run 41 on its own node (made after B: one
    create at a time). At the end, its ctrl+c and destroy, while B still serves: D's
    receipt names B's instance as not its own, and B serves on."""
    home = tmp_path_factory.mktemp("install-d")
    async with rented_node(home) as node:
        env = install_env(account, node, tiny_gguf, home, gpu="RTX 3090", price=0.30)
        term = await dashboard_serving(account, env, billing=2)
        try:
            (instance,) = [str(row["id"]) for row in account.billing()
                           if str(row["id"]) != headless_other.instance]
            serving = Serving(env, _tag(env), instance, node.node_dir,
                              lambda: term.proc.poll() is None)
            yield serving
            code = await quit_with(term, keep=False, key=b"\x03")
        finally:
            term.kill()
        assert code == 0
        destroyed(account, instance)
        await still_serves(account, [headless_other])
        state = home / "state"
        (record,) = records(state)
        named_not_ours(record.get("account_check"), kept_receipt(state),  # type: ignore[arg-type]
                       [headless_other])


@pytest.fixture
def others(headless_other: Serving, dashboard_other: Serving) -> list[Serving]:
    return [headless_other, dashboard_other]


def _tag(env: dict[str, str]) -> str:
    tag = kept_tag(env["MVP_STATE_DIR"])
    assert tag, "no install tag was kept"
    return tag


async def _read_on(run: HeadlessRun) -> None:
    assert run.proc is not None and run.proc.stdout is not None
    while line := await run.proc.stdout.readline():
        if line.strip():
            run.records.append(json.loads(line))


async def still_serves(account: FakeVast, others: list[Serving]) -> None:
    """Each other install's instance runs on the account under its own tag, its process is
    alive, its endpoint answers a chat, and its node's agent and engine run."""
    live = {str(row["id"]): str(row["label"]) for row in account.billing()}
    for other in others:
        assert other.instance in live, f"the other install's instance is gone: {live}"
        assert live[other.instance].startswith(f"mvp-{other.tag}-{RUN_ID}-"), live
        assert other.running(), f"the other install's process exited ({other.instance})"
        await answers(other.env)
        assert processes_under(other.node_dir), "nothing runs on the other's node"


@pytest_asyncio.fixture(loop_scope="module")
async def node_a(tmp_path: Path) -> AsyncIterator[Node]:
    async with rented_node(tmp_path) as node:
        yield node


@pytest.fixture
def env_a(account: FakeVast, node_a: Node, tiny_gguf: Path, tmp_path: Path,
          others: list[Serving]) -> dict[str, str]:
    """Install A, made after B and D serve (one create at a time; their offers are taken)."""
    return install_env(account, node_a, tiny_gguf, tmp_path, gpu="RTX 3090", price=0.30)


def ours_now(account: FakeVast, others: list[Serving]) -> str:
    """Install A's instance: the one billing beside the others'."""
    theirs = {other.instance for other in others}
    (mine,) = [str(row["id"]) for row in account.billing() if str(row["id"]) not in theirs]
    return mine


def named_not_ours(check: dict[str, Any] | None, text: str, others: list[Serving]) -> None:
    """An account check (`account_check` of the record, or the event) and the words said
    of it: each other install's instance is a stranger, another install's tag, with the
    command that ends it; nothing else is."""
    assert check is not None, "no account check was made"
    strangers = check["strangers"]
    ids = {s if isinstance(s, str) else f"{s['provider']}:{s['provider_id']}" for s in strangers}
    assert ids == {f"vastai:{other.instance}" for other in others}, check
    for other in others:
        assert f"another install's tag ({other.tag})" in text, text
        assert f"`mvp-tui down --instance vastai:{other.instance}`" in text, text


def destroyed(account: FakeVast, mine: str) -> None:
    assert int(mine) in account.destroyed(), f"A's instance {mine} was not destroyed"
    assert mine not in {str(row["id"]) for row in account.billing()}


# ---- the dashboard's ways out --------------------------------------------------------------


async def dashboard_serving(account: FakeVast, env: dict[str, str], billing: int) -> PtyDashboard:
    """The dashboard in a pty, its one Vast offer leased by keys (the fake then bills
    `billing` instances), held until it serves and its endpoint answers."""
    term = PtyDashboard(env)
    await lease_by_keys(term, account, billing=billing)
    leased = len(term.output)
    # The prompt pane's title names the OpenAI endpoint once the node serves (the box is
    # drawn before); the prompt box takes the focus then, and the footer says " esc ".
    await asyncio.to_thread(term.wait_for, "(OpenAI, key: y", 100, leased)
    await asyncio.to_thread(term.wait_for, " esc ", 30, term.output.find(b"(OpenAI", leased))
    await answers(env)
    return term


async def answers(env: dict[str, str]) -> None:
    """The install's endpoint (`mvp-tui endpoint --json` from its state dir) answers."""
    shown = await acli("endpoint", "--json", env=env)
    assert shown.returncode == 0, shown.stderr
    facts = json.loads(shown.stdout)
    status, body = await asyncio.to_thread(chat, facts["base_url"].removesuffix("/v1"),
                                           facts["api_key"])
    assert status == 200 and body["choices"][0]["message"]["content"], (status, body)


@pytest.mark.parametrize("how", ["q", "ctrl+c", "sigterm"])
async def test_the_dashboard_s_exit_leaves_the_other_install_serving(
    how: str, account: FakeVast, env_a: dict[str, str], others: list[Serving], tmp_path: Path
) -> None:
    term = await dashboard_serving(account, env_a, billing=3)
    try:
        mine = ours_now(account, others)
        if how == "sigterm":
            term.proc.send_signal(signal.SIGTERM)
            code = await asyncio.to_thread(term.wait, 90)
        elif how == "q":  # the prompt box has the keys: Esc leaves it, for the board's own
            since = len(term.output)
            term.press(ESC)
            # The Offers pane's footer (its key and word in two colours).
            await asyncio.to_thread(term.wait_for, " s sort ", 10, since, plain=True)
            code = await quit_with(term, keep=False, key=b"q")
        else:
            code = await quit_with(term, keep=False, key=b"\x03")
    finally:
        term.kill()
    assert code == 0
    destroyed(account, mine)
    await still_serves(account, others)
    state = tmp_path / "state"
    (record,) = records(state)
    assert record["run_id"] == RUN_ID
    named_not_ours(record.get("account_check"), kept_receipt(state), others)  # type: ignore[arg-type]


# ---- a headless run's SIGTERM, `down 41`, `down --all` -------------------------------------


async def test_a_headless_sigterm_leaves_the_other_install_serving(
    account: FakeVast, env_a: dict[str, str], others: list[Serving], tmp_path: Path
) -> None:
    async with Run(["--yes"], tmp_path / "state", env_a) as run:
        await run.until(is_event("endpoint_ready"), within=100)
        await answers(env_a)
        mine = ours_now(account, others)
        run.signal(signal.SIGTERM)
        code = await run.ended(within=60, after="SIGTERM while serving")
    assert code == 0, run.stderr
    destroyed(account, mine)
    await still_serves(account, others)
    (checked,) = run.events("account_checked")
    named_not_ours(checked, run.stderr, others)


@pytest.mark.parametrize("down", [("down", RUN_ID, "--yes"), ("down", "--all", "--yes")],
                         ids=["down 41", "down --all"])
async def test_down_leaves_the_other_install_serving(
    down: tuple[str, ...], account: FakeVast, env_a: dict[str, str], others: list[Serving],
    tmp_path: Path,
) -> None:
    async with Run(["--yes", "--until", "ready"], tmp_path / "state", env_a) as run:
        code = await run.ended(within=100, after="--until ready")
    assert code == 0, run.stderr
    assert run.events("node_ready"), "A's node never served"  # and serves on: --until ready
    mine = ours_now(account, others)
    ended = await acli(*down, env=env_a)
    assert ended.returncode == 0, ended.stderr
    destroyed(account, mine)
    await still_serves(account, others)
    (record,) = records(tmp_path / "state")
    named_not_ours(record.get("account_check"), ended.stderr, others)  # type: ignore[arg-type]

