"""The node agent's dead-man's switch, as a real process against the fake Vast API on
loopback: the verdict before ready, the deadline, the silence (heartbeats, detach, attach),
self-destroy with the instance's own key (retried until confirmed), and the local ending.

Timings are fractional on purpose (max_hours = 0.0005 is 1.8 s, idle 0.02 min is 1.2 s);
every wait is on a record or an exit, with a timeout."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import threading
import time
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.agent.agent_run import AgentRun, agent_env
from tests.agent.procs import alive
from tests.agent.test_agent_bundle import OLDEST, oldest_python
from tests.fakes.vastai_server import FakeVast

IDLE_MINS = 0.02  # 1.2 s
IDLE_S = IDLE_MINS * 60


def _env(tmp_path: Path, tiny_model: Path, path_with: str, **overrides: str) -> dict[str, str]:
    return agent_env(
        tmp_path,
        PATH=path_with,
        MVP_GGUF_LOCAL_PATH=str(tiny_model),
        FAKE_LOADING_PROBES="0",
        MVP_WATCHDOG_RETRY_INITIAL_S="0.05",
        **overrides,
    )


def _vast_env(fake: FakeVast, environ: Path, **overrides: str) -> dict[str, str]:
    return {
        "MVP_WATCHDOG_PROVIDER": "vastai",
        "MVP_VASTAI_API_URL": fake.url,
        "MVP_NODE_PROVIDER_ENV_FILE": str(environ),
        **overrides,
    }


def _watchdog(status: str, **detail: Any) -> Any:
    """A matcher for a `watchdog` phase record with this status and these detail values."""

    def match(channel: str, payload: Any) -> bool:
        return (
            channel == "mvp.node.1.agent"
            and isinstance(payload, dict)
            and payload.get("type") == "NodeAgentPhase"
            and payload.get("phase") == "watchdog"
            and payload.get("status") == status
            and all(payload["detail"].get(k) == v for k, v in detail.items())
        )

    return match


def _progress(state: str) -> Any:
    def match(channel: str, payload: Any) -> bool:
        return (
            channel == "mvp.node.1.agent"
            and isinstance(payload, dict)
            and payload.get("type") == "NodeAgentProgress"
            and payload.get("phase") == "watchdog"
            and payload.get("state") == state
        )

    return match


def _notices(run: AgentRun) -> list[str]:
    return [
        str(p["message"])
        for p in run.channel("mvp.node.1.agent")
        if p.get("type") == "NodeAgentNotice"
    ]


def _instance_key_requests(fake: FakeVast, key: str) -> list[tuple[str, str]]:
    return [
        (r.method, r.path)
        for r in fake.requests
        if r.headers.get("authorization") == f"Bearer {key}"
    ]


@contextlib.contextmanager
def control_fifo(path: Path) -> Iterator[int]:
    """The agent's control fifo, made before the agent starts and held open read-write by
    the test, so lines written before the agent opens it wait in the pipe for it."""
    os.mkfifo(path, 0o600)
    fd = os.open(path, os.O_RDWR)
    try:
        yield fd
    finally:
        os.close(fd)


@contextlib.asynccontextmanager
async def heartbeats(fd: int, every: float) -> AsyncIterator[None]:
    """`heartbeat` on the control fifo every `every` seconds while the block runs."""
    stop = asyncio.Event()

    async def beat() -> None:
        while not stop.is_set():
            os.write(fd, b"heartbeat\n")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), every)

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        stop.set()
        await task


async def test_deadline_destroys_the_instance_with_its_own_key(
    tmp_path: Path, tiny_model: Path, path_with: str
) -> None:
    with FakeVast() as fake:
        iid = fake.add_instance(label="mvp-r-0000abcd")
        other = fake.add_instance(label="someone-else")
        environ = fake.write_instance_env(iid, tmp_path / "environ")
        key = fake.instance_env(iid)["CONTAINER_API_KEY"]
        started = time.time()
        env = _env(
            tmp_path,
            tiny_model,
            path_with,
            **_vast_env(fake, environ, MVP_LEASE_STARTED_AT=repr(started), MVP_MAX_HOURS="0.0005"),
        )
        run = await AgentRun.start(env)
        try:
            verdict = (await run.wait_phase("watchdog", "ready"))["detail"]
            assert verdict["provider"] == "vastai" and verdict["instance_id"] == str(iid)
            assert verdict["armed"] is True and verdict["idle_teardown_mins"] is None
            assert verdict["deadline_at"] == pytest.approx(started + 1.8, abs=0.01)
            assert verdict["credentials"] == str(environ)
            # Proven by Vast's documented no-op write, not only the read.
            assert (verdict["proof"], verdict["destroy_proven"]) == ("write", True)

            fired = await run.wait_phase("watchdog", "started")
            assert fired["detail"]["trigger"] == "deadline"
            assert fired["at"] >= verdict["deadline_at"] - 0.01
            final = await run.wait_for(_watchdog("ready", destroyed=True))
            assert final["detail"]["trigger"] == "deadline"
            assert await run.wait_exit() == 0
        finally:
            await run.kill()
        assert fake.destroyed_by(iid) == "instance"
        assert fake.destroyed() == [iid] and other not in fake.destroyed()
        assert fake.scope_violations == []
        # Only its own show, the no-op write and destroy, each with our own User-Agent.
        own = f"/api/v0/instances/{iid}/"
        assert set(_instance_key_requests(fake, key)) == {
            ("GET", own), ("PUT", own), ("DELETE", own)}
        (put,) = [r for r in fake.requests if r.method == "PUT"]
        assert put.body == {"state": "running"}
        assert all("mvp-node" in r.headers.get("user-agent", "") for r in fake.requests)
    # The engine stopped (cleanly) before the destroy; the agent ended after the proof.
    phases = run.phases()
    assert phases.index(("shutdown", "ready")) < phases.index(("agent_exit", "ready"))
    assert phases[-2:] == [("watchdog", "ready"), ("agent_exit", "ready")]
    assert run.phase_detail("agent_exit", "ready")["source"] == "watchdog deadline"
    weights = run.channel("mvp.worker.weights")
    if weights:
        assert not alive(weights[0]["engine_pid"])
    output = bytes(run.stdout + run.stderr)
    assert key.encode() not in output
    assert run.non_frames == []


async def test_silence_destroys_the_instance(
    tmp_path: Path, tiny_model: Path, path_with: str
) -> None:
    with FakeVast() as fake:
        iid = fake.add_instance()
        environ = fake.write_instance_env(iid, tmp_path / "environ")
        env = _env(
            tmp_path,
            tiny_model,
            path_with,
            **_vast_env(fake, environ, MVP_IDLE_TEARDOWN_MINS=str(IDLE_MINS)),
        )
        run = await AgentRun.start(env)
        try:
            verdict = (await run.wait_phase("watchdog", "ready"))["detail"]
            assert verdict["idle_teardown_mins"] == IDLE_MINS and verdict["deadline_at"] is None
            assert verdict["armed"] is True and verdict["idle_armed"] is True
            fired = await run.wait_phase("watchdog", "started")
            assert fired["detail"]["trigger"] == "idle"
            assert fired["detail"]["silent_s"] >= IDLE_S
            await run.wait_for(_watchdog("ready", destroyed=True, trigger="idle"))
            assert await run.wait_exit() == 0
        finally:
            await run.kill()
        assert fake.destroyed_by(iid) == "instance"
        assert fake.scope_violations == []


async def test_heartbeats_keep_the_instance_for_three_idle_periods(
    tmp_path: Path, tiny_model: Path, path_with: str
) -> None:
    with FakeVast() as fake, control_fifo(tmp_path / "control") as fifo:
        iid = fake.add_instance()
        environ = fake.write_instance_env(iid, tmp_path / "environ")
        env = _env(
            tmp_path,
            tiny_model,
            path_with,
            MVP_CONTROL_FIFO=str(tmp_path / "control"),
            **_vast_env(fake, environ, MVP_IDLE_TEARDOWN_MINS=str(IDLE_MINS)),
        )
        run = await AgentRun.start(env)
        try:
            async with heartbeats(fifo, every=0.3):
                assert (await run.weights())["type"] == "WeightsLoaded"
                with pytest.raises(TimeoutError):
                    await run.wait_phase("watchdog", "started", within=3 * IDLE_S + 0.5)
            os.write(fifo, b"shutdown\n")
            assert await run.wait_exit() == 0
        finally:
            await run.kill()
        assert fake.destroyed() == [] and fake.billing()
        assert fake.scope_violations == []
    assert ("watchdog", "started") not in run.phases()
    assert run.phase_detail("shutdown", "started")["source"] == "fifo"
    assert not any("heartbeat" in n for n in _notices(run)), "heartbeat is a known word"


async def test_detach_disarms_the_silence_but_the_deadline_stays(
    tmp_path: Path, tiny_model: Path, path_with: str
) -> None:
    with FakeVast() as fake, control_fifo(tmp_path / "control") as fifo:
        iid = fake.add_instance()
        environ = fake.write_instance_env(iid, tmp_path / "environ")
        os.write(fifo, b"detach\n")  # waits in the fifo: read right at the agent's start
        started = time.time()
        overrides = {
            "MVP_IDLE_TEARDOWN_MINS": str(IDLE_MINS),
            "MVP_MAX_HOURS": "0.0015",  # 5.4 s, well past 3 idle periods
            "MVP_LEASE_STARTED_AT": repr(started),
        }
        env = _env(
            tmp_path,
            tiny_model,
            path_with,
            MVP_CONTROL_FIFO=str(tmp_path / "control"),
            **_vast_env(fake, environ, **overrides),
        )
        run = await AgentRun.start(env)
        try:
            detached = await run.wait_for(_progress("detached"))
            assert detached["idle_armed"] is False and detached["source"] == "fifo"
            assert detached["deadline_at"] == pytest.approx(started + 5.4, abs=0.01)
            fired = await run.wait_phase("watchdog", "started")
            assert fired["detail"]["trigger"] == "deadline", "silence was disarmed"
            assert fired["at"] >= started + 5.4 - 0.01
            await run.wait_for(_watchdog("ready", destroyed=True, trigger="deadline"))
            assert await run.wait_exit() == 0
        finally:
            await run.kill()
        assert fake.destroyed_by(iid) == "instance"


async def test_attach_rearms_the_silence(tmp_path: Path, tiny_model: Path, path_with: str) -> None:
    with FakeVast() as fake, control_fifo(tmp_path / "control") as fifo:
        iid = fake.add_instance()
        environ = fake.write_instance_env(iid, tmp_path / "environ")
        os.write(fifo, b"detach\n")
        env = _env(
            tmp_path,
            tiny_model,
            path_with,
            MVP_CONTROL_FIFO=str(tmp_path / "control"),
            **_vast_env(fake, environ, MVP_IDLE_TEARDOWN_MINS=str(IDLE_MINS)),
        )
        run = await AgentRun.start(env)
        try:
            await run.wait_for(_progress("detached"))
            with pytest.raises(TimeoutError):
                await run.wait_phase("watchdog", "started", within=2 * IDLE_S)
            os.write(fifo, b"attach\n")
            attached = await run.wait_for(_progress("attached"))
            assert attached["idle_armed"] is True
            fired = await run.wait_phase("watchdog", "started")
            assert fired["detail"]["trigger"] == "idle"
            assert fired["at"] >= attached["at"] + IDLE_S - 0.05  # attach counted as heard
            await run.wait_for(_watchdog("ready", destroyed=True, trigger="idle"))
            assert await run.wait_exit() == 0
        finally:
            await run.kill()
        assert fake.destroyed_by(iid) == "instance"


async def test_a_key_that_reads_but_may_not_change_its_instance_fails_the_verdict(
    tmp_path: Path, tiny_model: Path, path_with: str
) -> None:
    """A read alone does not prove the destroy: Vast's documented no-op write refused (403)
    is a failed verdict for the run (every host would have such a key), naming the fix."""
    from mvp_tui.rehearsal.vast_replies import Fault

    with FakeVast() as fake:
        iid = fake.add_instance(label="mvp-r-0000abcd")
        environ = fake.write_instance_env(iid, tmp_path / "environ")
        fake.script("manage", Fault(status=403, body={"success": False, "error": "forbidden",
                                                       "msg": "not allowed"}))
        env = _env(tmp_path, tiny_model, path_with, **_vast_env(fake, environ, MVP_MAX_HOURS="1"))
        run = await AgentRun.start(env)
        try:
            failed = (await run.wait_phase("watchdog", "failed"))["detail"]
            await run.send("shutdown\n")
            assert await run.wait_exit() == 0
        finally:
            await run.kill()
        reason = failed["reason"]
        assert "refused a no-op change" in reason and "HTTP 403" in reason, reason
        assert "require_node_watchdog = false" in reason
        assert failed["scope"] == "run" and failed["armed"] is False
        assert fake.destroyed() == []


async def test_no_credentials_is_a_failed_verdict_and_the_agent_still_serves(
    tmp_path: Path, tiny_model: Path, path_with: str
) -> None:
    with FakeVast() as fake:
        fake.add_instance()
        missing = tmp_path / "no-such-environ"
        env = _env(tmp_path, tiny_model, path_with, **_vast_env(fake, missing, MVP_MAX_HOURS="1"))
        run = await AgentRun.start(env)
        try:
            failed = (await run.wait_phase("watchdog", "failed"))["detail"]
            reason = failed["reason"]
            assert "no CONTAINER_API_KEY in the node environment" in reason, reason
            assert str(missing) in reason and "not found" in reason
            assert "[limits] require_node_watchdog = false" in reason
            assert "\n" not in reason and failed["armed"] is False
            assert failed["provider"] == "vastai"
            assert failed["scope"] == "run", "every host would lack the key: the run's"
            assert (await run.weights())["type"] == "WeightsLoaded"
            await run.send("shutdown\n")
            assert await run.wait_exit() == 0
        finally:
            await run.kill()
        assert fake.requests == [], "no credentials: no request at all"
    assert run.phases().index(("watchdog", "failed")) < run.phases().index(("probe", "started"))


async def test_the_switch_sends_the_instance_key_to_no_url_it_refuses(
    tmp_path: Path, tiny_model: Path, path_with: str
) -> None:
    """The node checks the API URL again (not only the dashboard): `?@` names a loopback
    host in its text while urllib connects to the text before the '?'. The verdict fails
    naming the variable, and the deadline ends the engine without sending the key."""
    with FakeVast() as fake:
        iid = fake.add_instance(label="mvp-r-0000abcd")
        environ = fake.write_instance_env(iid, tmp_path / "environ")
        key = fake.instance_env(iid)["CONTAINER_API_KEY"]
        sneaky = _vast_env(fake, environ, MVP_VASTAI_API_URL=f"{fake.url}?@127.0.0.1",
                           MVP_LEASE_STARTED_AT=repr(time.time()), MVP_MAX_HOURS="0.0005")
        run = await AgentRun.start(_env(tmp_path, tiny_model, path_with, **sneaky))
        try:
            failed = (await run.wait_phase("watchdog", "failed"))["detail"]
            assert "MVP_VASTAI_API_URL" in failed["reason"], failed["reason"]
            assert "a query" in failed["reason"] and "@127.0.0.1" not in failed["reason"]
            fired = await run.wait_phase("watchdog", "started")
            assert fired["detail"]["trigger"] == "deadline"
            final = await run.wait_for(_watchdog("failed", trigger="deadline"))
            assert final["detail"]["destroyed"] is False and final["detail"]["bills"] is True
            assert await run.wait_exit() == 0
        finally:
            await run.kill()
        assert fake.requests == [] and fake.destroyed() == []
    assert key.encode() not in bytes(run.stdout + run.stderr)


async def test_another_instances_key_is_refused_and_named(
    tmp_path: Path, tiny_model: Path, path_with: str
) -> None:
    with FakeVast() as fake:
        mine, theirs = fake.add_instance(), fake.add_instance()
        environ = tmp_path / "environ"
        stolen = fake.instance_env(theirs)["CONTAINER_API_KEY"]
        environ.write_bytes(f"CONTAINER_ID={mine}\0CONTAINER_API_KEY={stolen}\0".encode())
        env = _env(tmp_path, tiny_model, path_with, **_vast_env(fake, environ))
        run = await AgentRun.start(env)
        try:
            detail = (await run.wait_phase("watchdog", "failed"))["detail"]
            reason = detail["reason"]
            assert "Vast refused the instance key (HTTP 401" in reason, reason
            assert detail["scope"] == "run", "a key without the right: the run's failure"
            assert "require_node_watchdog" in reason
            assert (await run.weights())["type"] == "WeightsLoaded"
            await run.send("shutdown\n")
            assert await run.wait_exit() == 0
        finally:
            await run.kill()
        assert [(v.method, v.path) for v in fake.scope_violations] == [
            ("GET", f"/api/v0/instances/{mine}/")
        ]
        assert fake.destroyed() == []
    assert stolen.encode() not in bytes(run.stdout + run.stderr)


async def test_a_failing_destroy_is_retried_until_confirmed(
    tmp_path: Path, tiny_model: Path, path_with: str
) -> None:
    with FakeVast() as fake:
        iid = fake.add_instance()
        fake.fail_destroy(iid, 3, status=500)
        environ = fake.write_instance_env(iid, tmp_path / "environ")
        key = fake.instance_env(iid)["CONTAINER_API_KEY"]
        overrides = {"MVP_MAX_HOURS": "0.0005", "MVP_LEASE_STARTED_AT": repr(time.time())}
        env = _env(tmp_path, tiny_model, path_with, **_vast_env(fake, environ, **overrides))
        run = await AgentRun.start(env)
        try:
            final = await run.wait_for(_watchdog("ready", destroyed=True), within=60)
            assert final["detail"]["attempts"] == 4
            assert await run.wait_exit() == 0
        finally:
            await run.kill()
        deletes = [r for r in fake.requests if r.method == "DELETE"]
        assert len(deletes) == 4
        assert all(r.body == {} for r in deletes)
        assert fake.destroyed_by(iid) == "instance"
        assert fake.scope_violations == []
    failures = [n for n in _notices(run) if "dead-man's switch" in n]
    assert len(failures) == 3, failures
    assert all("HTTP 500" in n and "retrying in" in n for n in failures)
    assert key.encode() not in bytes(run.stdout + run.stderr)


async def test_local_deadline_ends_the_engine_and_the_agent(
    tmp_path: Path, tiny_model: Path, path_with: str
) -> None:
    started = time.time()
    env = _env(
        tmp_path,
        tiny_model,
        path_with,
        MVP_WATCHDOG_PROVIDER="local",
        MVP_MAX_HOURS="0.001",  # 3.6 s: the fake engine is up well before
        MVP_LEASE_STARTED_AT=repr(started),
    )
    run = await AgentRun.start(env)
    try:
        verdict = (await run.wait_phase("watchdog", "ready"))["detail"]
        assert verdict["provider"] == "local" and verdict["armed"] is True
        assert verdict["instance_id"] is None and verdict["action"] == "end"
        loaded = await run.weights()
        assert loaded["type"] == "WeightsLoaded"
        assert alive(loaded["engine_pid"])
        fired = await run.wait_phase("watchdog", "started")
        assert fired["detail"]["trigger"] == "deadline"
        final = await run.wait_for(_watchdog("ready", ended=True))
        assert final["detail"]["destroyed"] is False
        assert await run.wait_exit() == 0
        assert not alive(loaded["engine_pid"])
    finally:
        await run.kill()
    phases = run.phases()
    assert phases[-4:] == [
        ("shutdown", "started"),
        ("shutdown", "ready"),
        ("watchdog", "ready"),
        ("agent_exit", "ready"),
    ]


async def test_unconfigured_agent_reports_no_watchdog_and_accepts_the_words(
    tmp_path: Path, tiny_model: Path, path_with: str
) -> None:
    """No provider and no limits (older dashboards): no watchdog phase, and the control
    words are still known (no "ignored unknown command" notice)."""
    env = _env(tmp_path, tiny_model, path_with)
    env.pop("MVP_NODE_PROVIDER", None)
    env.pop("MVP_WATCHDOG_PROVIDER", None)
    run = await AgentRun.start(env)
    try:
        assert (await run.weights())["type"] == "WeightsLoaded"
        await run.send("heartbeat\nattach\nbogus\n")
        await run.wait_for(lambda _c, p: isinstance(p, dict) and p.get("type") == "NodeAgentNotice")
        await run.send("shutdown\n")
        assert await run.wait_exit() == 0
    finally:
        await run.kill()
    assert all(phase != "watchdog" for phase, _ in run.phases())
    notices = _notices(run)
    assert len(notices) == 1 and "bogus" in notices[0], notices
    assert run.find(_progress("attached"))["idle_armed"] is False


# ---------------------------------------------------------------------------------------
# RunPod: a minimal stub of GET / DELETE /pods/{id} (pod-scoped key), enough to run the path


class _RunPodStub:
    """GET /pods/{id} → the pod; DELETE → 204; then GET → RunPod's own 404 shape; POST
    /pods/{id}/action (podAction: terminate → 204 as deletePod, stop → 200 EXITED).
    `refuse_delete` answers 403 to deletes and actions (the recorded open risk)."""

    def __init__(self, pod_id: str, key: str) -> None:
        self.pod_id = pod_id
        self.key = key
        self.deleted = False
        self.refuse_delete = False
        self.status = "RUNNING"
        self.requests: list[tuple[str, str, str]] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self, status: int, body: Any = None) -> None:
                data = b"" if body is None else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _route(self, method: str) -> None:
                auth = self.headers.get("Authorization", "")
                stub.requests.append((method, self.path, auth))
                pod = f"/v1/pods/{stub.pod_id}"
                if auth != f"Bearer {stub.key}" or self.path not in (pod, pod + "/action"):
                    self._answer(401, {"error": "unauthorized", "status": 401})
                elif stub.deleted:
                    self._answer(404, {"error": "pod not found", "status": 404})
                elif method == "GET":
                    self._answer(200, {"id": stub.pod_id, "desiredStatus": stub.status})
                elif stub.refuse_delete:
                    self._answer(403, {"title": "Forbidden", "status": 403,
                                       "detail": "access denied"})
                elif method == "POST":
                    length = int(self.headers.get("Content-Length", "0"))
                    word = json.loads(self.rfile.read(length) or b"{}").get("action")
                    if word == "stop":
                        stub.status = "EXITED"
                        self._answer(200, {"id": stub.pod_id, "desiredStatus": "EXITED"})
                    else:
                        stub.deleted = word == "terminate"
                        self._answer(204 if stub.deleted else 409)
                else:
                    stub.deleted = True
                    self._answer(204)

            def do_GET(self) -> None:
                self._route("GET")

            def do_DELETE(self) -> None:
                self._route("DELETE")

            def do_POST(self) -> None:
                self._route("POST")

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> _RunPodStub:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


async def test_runpod_pod_destroys_itself_with_its_pod_key(
    tmp_path: Path, tiny_model: Path, path_with: str
) -> None:
    key = "rp-pod-scoped-key-4f1d9c"
    with _RunPodStub("pod-abc123", key) as stub:
        environ = tmp_path / "environ"
        environ.write_bytes(f"RUNPOD_POD_ID=pod-abc123\0RUNPOD_API_KEY={key}\0".encode())
        env = _env(
            tmp_path,
            tiny_model,
            path_with,
            MVP_NODE_PROVIDER="runpod",  # the fallback when MVP_WATCHDOG_PROVIDER is unset
            MVP_RUNPOD_API_URL=stub.url,
            MVP_NODE_PROVIDER_ENV_FILE=str(environ),
            MVP_MAX_HOURS="0.0005",
            MVP_LEASE_STARTED_AT=repr(time.time()),
        )
        run = await AgentRun.start(env)
        try:
            verdict = (await run.wait_phase("watchdog", "ready"))["detail"]
            assert verdict["provider"] == "runpod" and verdict["instance_id"] == "pod-abc123"
            # RunPod documents no harmless write: the delete right is said to be unproven.
            assert (verdict["proof"], verdict["destroy_proven"]) == ("read", False)
            await run.wait_for(_watchdog("ready", destroyed=True, trigger="deadline"))
            assert await run.wait_exit() == 0
        finally:
            await run.kill()
        assert stub.deleted
        assert {(m, p) for m, p, _ in stub.requests} == {
            ("GET", "/v1/pods/pod-abc123"),
            ("DELETE", "/v1/pods/pod-abc123"),
        }
    assert key.encode() not in bytes(run.stdout + run.stderr)


async def test_runpod_refused_self_delete_gives_up_after_the_other_ways(
    tmp_path: Path, tiny_model: Path, path_with: str
) -> None:
    """The recorded real failure: the pod key reads its pod but gets 403 on its own delete.
    The switch tries the documented other ways once (podAction terminate, then stop), says
    the pod may still bill and how to end it, and stops: no retry loop while it bills."""
    key = "rp-pod-scoped-key-4f1d9c"
    with _RunPodStub("pod-abc123", key) as stub:
        stub.refuse_delete = True
        environ = tmp_path / "environ"
        environ.write_bytes(f"RUNPOD_POD_ID=pod-abc123\0RUNPOD_API_KEY={key}\0".encode())
        env = _env(
            tmp_path, tiny_model, path_with,
            MVP_NODE_PROVIDER="runpod", MVP_RUNPOD_API_URL=stub.url,
            MVP_NODE_PROVIDER_ENV_FILE=str(environ), MVP_MAX_HOURS="0.0005",
            MVP_LEASE_STARTED_AT=repr(time.time()),
        )
        run = await AgentRun.start(env)
        try:
            gave_up = (await run.wait_for(_watchdog("failed", destroyed=False), within=60))
            assert await run.wait_exit() == 0
        finally:
            await run.kill()
        reason = gave_up["detail"]["reason"]
        assert gave_up["detail"]["bills"] is True and gave_up["detail"]["trigger"] == "deadline"
        assert "HTTP 403" in reason and "may still bill" in reason and "down --all" in reason
        assert "terminate: HTTP 403" in reason and "stop: HTTP 403" in reason
        calls = [(m, p) for m, p, _ in stub.requests]
        pod = "/v1/pods/pod-abc123"
        assert calls.count(("DELETE", pod)) == 3  # refused three times, then the other ways
        assert calls.count(("POST", pod + "/action")) == 2
        assert not stub.deleted
    assert key.encode() not in bytes(run.stdout + run.stderr)


async def test_runpod_refused_key_is_a_failed_verdict_naming_the_open_risk(
    tmp_path: Path, tiny_model: Path, path_with: str
) -> None:
    with _RunPodStub("pod-abc123", "the-right-pod-key") as stub:
        env = _env(
            tmp_path,
            tiny_model,
            path_with,
            MVP_WATCHDOG_PROVIDER="runpod",
            MVP_RUNPOD_API_URL=stub.url,
            RUNPOD_POD_ID="pod-abc123",
            RUNPOD_API_KEY="a-wrong-pod-key-123",
            MVP_NODE_PROVIDER_ENV_FILE=str(tmp_path / "none"),
        )
        run = await AgentRun.start(env)
        try:
            failed = (await run.wait_phase("watchdog", "failed"))["detail"]
            assert "RunPod refused the pod-scoped RUNPOD_API_KEY (HTTP 401" in failed["reason"]
            assert "open risk" in failed["reason"]
            assert "require_node_watchdog" in failed["reason"]
            await run.send("shutdown\n")
            assert await run.wait_exit() == 0
        finally:
            await run.kill()


async def test_the_switch_runs_on_the_oldest_node_python(
    tmp_path: Path, tiny_model: Path, path_with: str
) -> None:
    """Nodes may have an older python3: verdict, deadline and self-destroy on the oldest the
    docs promise (its HTTP calls included), from the zipapp."""
    python = oldest_python()
    with FakeVast() as fake:
        iid = fake.add_instance()
        environ = fake.write_instance_env(iid, tmp_path / "environ")
        overrides = {"MVP_MAX_HOURS": "0.0005", "MVP_LEASE_STARTED_AT": repr(time.time())}
        env = _env(tmp_path, tiny_model, path_with, **_vast_env(fake, environ, **overrides))
        run = await AgentRun.start(env, python=python)
        try:
            await run.wait_phase("watchdog", "ready")
            await run.wait_for(_watchdog("ready", destroyed=True, trigger="deadline"))
            assert await run.wait_exit() == 0
        finally:
            await run.kill()
        assert fake.destroyed_by(iid) == "instance"
    assert run.phase_detail("probe", "ready")["python"].startswith(f"{OLDEST}.")
    assert run.non_frames == [] and b"Traceback" not in run.stderr


async def test_with_vasts_v0_routes_retired_the_switch_proves_and_destroys_through_v1(
    tmp_path: Path, tiny_model: Path, path_with: str
) -> None:
    """v0's single-instance read and delete answer 410 `deprecated_endpoint` (peers
    2026-12-07 V6/V7): the verdict reads our row from the v1 list, the deadline's destroy goes
    to v1 and is confirmed there; the 410 is never taken for "gone"."""
    with FakeVast() as fake:
        iid = fake.add_instance()
        fake.retired_v0 = {"show", "destroy"}
        environ = fake.write_instance_env(iid, tmp_path / "environ")
        key = fake.instance_env(iid)["CONTAINER_API_KEY"]
        overrides = {"MVP_MAX_HOURS": "0.0005", "MVP_LEASE_STARTED_AT": repr(time.time())}
        env = _env(tmp_path, tiny_model, path_with, **_vast_env(fake, environ, **overrides))
        run = await AgentRun.start(env)
        try:
            verdict = (await run.wait_phase("watchdog", "ready"))["detail"]
            assert verdict["armed"] is True and verdict["destroy_proven"] is True
            final = await run.wait_for(_watchdog("ready", destroyed=True), within=60)
            assert final["detail"]["attempts"] == 1
            assert await run.wait_exit() == 0
        finally:
            await run.kill()
        assert fake.destroyed_by(iid) == "instance" and fake.billing() == []
        assert fake.scope_violations == []
        calls = _instance_key_requests(fake, key)
        assert ("DELETE", f"/api/v0/instances/{iid}/") in calls
        assert ("DELETE", f"/api/v1/instances/{iid}/") in calls
        assert ("GET", "/api/v1/instances/") in calls
    assert key.encode() not in bytes(run.stdout + run.stderr)
