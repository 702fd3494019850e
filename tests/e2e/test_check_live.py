"""`mvp-tui check --live PROVIDER` as a user runs it (a fresh process): against the fake Vast
and the fake RunPod over real HTTP, whose instances are a real sshd node on loopback with the
real agent and engine, and on this machine. Each passes, prints every step with its time and
cost, and ends with nothing billing at the provider; a cap below one minute of the cheapest
offer rents nothing; a check `kill -9`ed mid-run leaves the node's own switch to end the
lease at the deadline the check armed it with."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sys
from pathlib import Path

import asyncssh

from tests.agent.procs import alive
from tests.e2e.node import Node
from tests.e2e.test_node_watchdog import KEY, creates, destroyed_by_itself, rented_env
from tests.fakes.runpod_server import FakeRunPod
from tests.fakes.tiny_gguf import write_tiny_gguf
from tests.fakes.vastai_server import FakeVast
from tests.faults.harness import (
    TRACEBACK,
    acli,
    cli,
    open_leases,
    records_match,
    until_true,
    vast_env,
)
from tests.runpod.conftest import assert_contract
from tests.runpod.test_e2e import catalog, runpod_env, start_pod_command

# Every step a run that passes prints, in order (a boot guard line comes where one ran).
STEPS = ["offers", "bounds", "leased", "running", "node switch", "node ready", "first token",
         "prompt", "torn down", "account"]
STEP_LINE = re.compile(r"^\[\s*(?P<s>\d+\.\d) s  \$(?P<usd>\d+\.\d{4})\] (?P<mark>[✓✗]) "
                       r"(?P<name>[a-z ]+?)\s{2,}(?P<detail>.*)$")


class LiveCheck:
    """`mvp-tui check --live ARGS` as a child process, its lines read as they come."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        base = {k: v for k, v in os.environ.items() if not k.startswith(("MVP_", "VAST"))}
        self.env = {**base, "MVP_PROMPT_OPENAI_PORT": "0", **env}
        self.args = args
        self.lines: list[str] = []
        self.stderr = ""
        self.proc: asyncio.subprocess.Process | None = None

    async def __aenter__(self) -> LiveCheck:
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "mvp_tui", "check", "--live", *self.args,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=self.env,
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()

    async def until(self, text: str, within: float = 120.0) -> str:
        """The first stdout line holding `text` (already read or new)."""
        assert self.proc is not None and self.proc.stdout is not None
        stdout = self.proc.stdout

        async def read() -> str:
            for line in self.lines:
                if text in line:
                    return line
            while raw := await stdout.readline():
                line = raw.decode().rstrip("\n")
                self.lines.append(line)
                if text in line:
                    return line
            raise AssertionError(f"the check ended before {text!r}: {self.lines}")

        return await asyncio.wait_for(read(), within)

    async def finish(self, within: float = 180.0) -> int:
        assert self.proc is not None
        out, err = await asyncio.wait_for(self.proc.communicate(), within)
        self.lines += out.decode().splitlines()
        self.stderr = err.decode()
        assert TRACEBACK not in self.stderr, self.stderr
        assert self.proc.returncode is not None
        return self.proc.returncode

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    def steps(self) -> list[re.Match[str]]:
        return [m for line in self.lines if (m := STEP_LINE.match(line))]

    def step(self, name: str) -> str:
        (found,) = [m["detail"] for m in self.steps() if m["name"] == name]
        return found

    def fact(self, name: str) -> str:
        (line,) = [ln.strip() for ln in self.lines if ln.strip()[2:].startswith(name + " ")]
        return line


def passed_every_step(check: LiveCheck, *, extra: tuple[str, ...] = ()) -> None:
    """Every step printed, in order, each ✓ with its time and the cost so far (never
    falling), and the end line saying nothing bills."""
    steps = check.steps()
    names = [m["name"] for m in steps]
    assert [n for n in names if n in STEPS] == STEPS, check.text
    assert set(names) <= {*STEPS, *extra}, names
    assert all(m["mark"] == "✓" for m in steps), check.text
    times = [float(m["s"]) for m in steps]
    costs = [float(m["usd"]) for m in steps]
    assert times == sorted(times) and costs == sorted(costs), check.text
    assert check.lines[-1].startswith("result: nothing bills; spent $"), check.lines[-1]
    assert check.lines[-1].endswith("(exit 0)")


async def test_vastai_passes_and_leaves_nothing_billing(
    node: Node, tiny_gguf: Path, tmp_path: Path
) -> None:
    with FakeVast(api_key=KEY) as fake:
        env = rented_env(fake, node, tmp_path, tiny_gguf)  # an offer at $0.40/h
        fake.add_offer(dph_total=0.90)  # dearer: the check takes the cheapest first
        cheapest = min(fake.offers(), key=lambda o: float(o["dph_total"]))["id"]
        async with LiveCheck(["vastai", "--max-spend", "0.10"], env) as check:
            code = await check.finish()
        assert code == 0, check.text + check.stderr
        passed_every_step(check, extra=("boot guard",))
        assert fake.billing() == [] and fake.instances() == []
        assert fake.destroyed_by(fake.destroyed()[0]) == "account"
        assert f"from offer {cheapest}" in check.step("leased")
        # Priced as Vast prices them, with the 50 GB disk the create rents (allocated_storage):
        # $0.40/h + 42 GB more than the default 8 at $0.15/GB/month = $0.409/h.
        assert "$0.409/h, $0.0068 a minute" in check.step("offers")
        # The node's switch is armed with the cap's worth in time at the dearest offer the
        # check may walk: $0.10 / $0.909/h = 6.6 min.
        assert "6.6 min deadline" in check.step("bounds")
        assert "the cap's worth at $0.909/h, the dearest of the 2" in check.step("bounds")
        armed = re.search(r"deadline in (\d+) s", check.step("node switch"))
        assert armed and 370 <= int(armed[1]) <= 400, check.step("node switch")
        assert "lists nothing of this run" in check.step("account")
        assert check.fact("pod key delete").startswith("✓ ")
        assert check.fact("vast v0/v1").startswith("✓ ")
        assert check.fact("image CUDA floor").startswith("✓ ")
        assert check.fact("secrets route").startswith("– ")
        assert check.fact("GPU offload").startswith("– ")
        assert KEY not in check.text and KEY not in check.stderr


async def test_runpod_passes_and_leaves_nothing_billing(
    node: Node, tiny_gguf: Path, tmp_path: Path
) -> None:
    with FakeRunPod() as fake:
        catalog(fake)
        fake.running_without_ssh(10**6)  # until the "image" has installed its host key
        env = {**runpod_env(fake, node, tmp_path), "MVP_GGUF_LOCAL_PATH": str(tiny_gguf),
               "MVP_STATE_DIR": str(tmp_path / "state")}
        async with LiveCheck(["runpod"], env) as check:
            await check.until("✓ leased", within=60)
            await until_true("the pod to exist", lambda: len(fake.pods()) == 1)
            (pod,) = fake.pods()
            await start_pod_command(node, fake, pod["id"])  # the pod runs its start command
            fake.show_ssh()
            code = await check.finish()
        assert code == 0, check.text + check.stderr
        passed_every_step(check, extra=("boot guard", "secret"))
        assert fake.pods() == [] and fake.billing() == [] and fake.secrets() == []
        assert [r.body["gpu"]["id"] for r in fake.create_requests()] == ["NVIDIA RTX A5000"]
        assert check.fact("start command").startswith("✓ "), check.text
        assert check.fact("secrets route").startswith("✓ "), check.text
        assert check.fact("vast v0/v1").startswith("– ")
        assert_contract(fake)
        assert fake.api_key not in check.text and fake.api_key not in check.stderr


async def test_local_passes_and_leaves_no_process(tiny_gguf: Path, tmp_path: Path) -> None:
    env = {"MVP_STATE_DIR": str(tmp_path / "state"), "MVP_GGUF_LOCAL_PATH": str(tiny_gguf),
           "MVP_PROMPT_RPC_BIND": "127.0.0.1:0", "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    async with LiveCheck(["local"], env) as check:
        code = await check.finish()
    assert code == 0, check.text + check.stderr
    passed_every_step(check)
    created = re.search(r"local-(\d+) created", check.step("leased"))
    assert created is not None and not alive(int(created[1]))
    assert "bills nothing" in check.step("account")
    assert all(check.fact(n).startswith("– ") for n in ("start command", "secrets route"))
    async with LiveCheck(["local", "--json"], env) as again:
        assert await again.finish() == 0
    report = json.loads(again.text)
    assert report["ok"] and report["exit_code"] == 0 and report["nothing_bills"]
    assert [s["step"] for s in report["steps"]] == STEPS
    assert {f["status"] for f in report["facts"]} == {"not proven"}
    assert report["facts"][0]["fact"] == "start command"


def test_a_cap_below_one_minute_of_the_cheapest_offer_rents_nothing(tmp_path: Path) -> None:
    with FakeVast(api_key=KEY) as fake:
        fake.add_offer(dph_total=0.30)  # $0.005 a minute
        fake.add_offer(dph_total=0.50)
        # Everything a rent needs (an SSH identity, a model on disk): without the refusal the
        # run would go on to create, not stop at a missing key or at the hub.
        identity = tmp_path / "id_ed25519"
        asyncssh.generate_private_key("ssh-ed25519").write_private_key(str(identity))
        identity.chmod(0o600)
        env = {**vast_env(fake, identity, tmp_path / "state"),
               "MVP_GGUF_LOCAL_PATH": str(write_tiny_gguf(tmp_path / "tiny.gguf"))}
        done = cli("check", "--live", "vastai", "--max-spend", "0.004", env=env)
        assert creates(fake) == 0 and fake.instances() == [], done.stdout + done.stderr
        assert done.returncode == 2, done.stdout + done.stderr
        assert "--max-spend $0.0040 is below one minute of the cheapest vastai offer" \
            in done.stderr
        # $0.30/h with the 50 GB disk priced in (allocated_storage): $0.309/h
        assert "$0.309/h = $0.0051 a minute" in done.stderr
        assert "nothing was rented; fix: raise --max-spend to at least $0.0052" in done.stderr
        assert not fake.account_keys, "no SSH key was registered either"
        assert TRACEBACK not in done.stderr and KEY not in done.stderr + done.stdout


def test_a_run_that_ends_before_renting_says_nothing_can_bill(tmp_path: Path) -> None:
    """A check that fails before its first create (here: no SSH identity) says so, rather
    than that the account could not be listed and `down --all` is needed."""
    with FakeVast(api_key=KEY) as fake:
        fake.add_offer(dph_total=0.30)
        env = {**vast_env(fake, tmp_path / "no-such-key", tmp_path / "state"),
               "MVP_GGUF_LOCAL_PATH": str(write_tiny_gguf(tmp_path / "tiny.gguf"))}
        done = cli("check", "--live", "vastai", env=env)
        assert creates(fake) == 0, done.stdout
        assert done.returncode == 1, done.stdout + done.stderr
        lines = done.stdout.splitlines()
        steps = [m for line in lines if (m := STEP_LINE.match(line))]
        (account,) = [m for m in steps if m["name"] == "account"]
        assert account["mark"] == "✓", account.string
        assert "no create was sent to vastai, so nothing of this run can bill" in account.string
        assert "down --all" not in done.stdout
        assert lines[-1].startswith("result: nothing bills;") and "no-such-key" in lines[-1]
        assert lines[-1].endswith("(exit 1)")


async def test_kill_9_leaves_the_nodes_switch_to_end_the_lease(
    node: Node, tiny_gguf: Path, tmp_path: Path
) -> None:
    with FakeVast(api_key=KEY) as fake:
        env = rented_env(fake, node, tmp_path, tiny_gguf)
        # An 18 s deadline (sooner than the cap's worth): past the bring-up, not a minute off.
        args = ["vastai", "--max-spend", "0.10", "--max-minutes", "0.3"]
        async with LiveCheck(args, env) as check:
            await check.until("✓ node switch", within=120)
            (instance,) = fake.billing()
            assert check.proc is not None
            check.proc.send_signal(signal.SIGKILL)
            await check.proc.wait()
        assert fake.billing() == [instance], "the killed check left its lease (the premise)"
        # On record as open, as a killed `up` leaves it: `ls` and `down --all` know of it.
        state = tmp_path / "state"
        assert [lease.provider_id for lease in open_leases(state)] == [str(instance["id"])]
        await destroyed_by_itself(fake, instance["id"], 18 + 60)
        assert fake.billing() == [] and fake.scope_violations == []
        await until_true("the fake to list nothing", lambda: fake.instances() == [], 5)
        # `down --all` then finds it gone and closes the record (the fault matrix's checks).
        down = await acli("down", "--all", "--yes", env=env)
        assert down.returncode == 0 and TRACEBACK not in down.stderr, down.stderr
        records_match(fake, state)
        assert open_leases(state) == []


def test_the_docs_name_every_step_and_fact() -> None:
    """docs/commands.md#check lists what a user will read: each step and each fact, the
    flags and their defaults (the doc is written by hand; this keeps it whole)."""
    from mvp_tui.preflight.live_facts import FACTS
    from mvp_tui.preflight.live_options import DEFAULT_MAX_MINUTES, DEFAULT_MAX_SPEND_USD
    from mvp_tui.preflight.live_steps import STEPS as EVENT_STEPS

    text = (Path(__file__).parents[2] / "docs" / "commands.md").read_text()
    section = text[text.index("### `check --live`"):text.index("## `config`")]
    named = {said[0] for r in EVENT_STEPS.values()
             if (said := r({"status": "failed", "outcome": "created"})) is not None}
    for name in {*STEPS, *named, "boot guard", "secret"}:
        assert f"`{name}`" in section, name
    for name, _ in FACTS:
        assert f"| `{name}` |" in section, name
    assert f"`--max-spend` (default `${DEFAULT_MAX_SPEND_USD:.2f}`)" in section
    assert f"`--max-minutes` (default {DEFAULT_MAX_MINUTES:g})" in section
