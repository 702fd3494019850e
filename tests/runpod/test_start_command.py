"""A RunPod start the API allows (issue 37, item 3): `[runpod] template_id` sends `templateId`
and no `args`; without one the start command rides in `args`, and a pod whose log shows the
image's own entrypoint (llama.cpp's /app/tools.sh usage, no boot line) ends its attempt at
once, deleted, with the cause and the fix named, not after the SSH budget."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import httpx
import pytest

from mvp_tui.events import RecordingSink
from mvp_tui.lease import LeaseWalk, RecordStore, WalkFailure
from mvp_tui.lease import events as ev
from mvp_tui.lease.settings import WalkSettings
from mvp_tui.providers.base import CreateRequest, Outcome, SelectionPolicy
from mvp_tui.providers.runpod.boot import BOOT_MARKER, pod_args, pod_command
from mvp_tui.providers.runpod.client import USER_AGENT
from mvp_tui.providers.runpod.logs import start_verdict
from tests.fakes.runpod_server import TOOLS_SH_USAGE, FakeRunPod
from tests.lease.conftest import fast_settings
from tests.runpod.conftest import make_provider
from tests.runpod.contract import check_all

POLICY = SelectionPolicy(require_verified=False)
LLAMA_IMAGE = "ghcr.io/ggml-org/llama.cpp:full-cuda"
TEMPLATE = "30zmvf89kd"
# The test's clock for "within the first minute after RUNNING": the walk's SSH budget is ten
# times that, so a walk that waited its budget fails here.
MINUTE_S = 60.0


def usage_lines(arg1: str) -> list[str]:
    return [f"[container] {line.format(arg1=arg1)}" for line in TOOLS_SH_USAGE]


def test_the_verdict_reads_the_entrypoints_usage_and_the_boot_line() -> None:
    # tools.sh quotes the whole start command, boot lines and all: still the entrypoint's.
    assert start_verdict(usage_lines(pod_args())) == (False, f"Unknown command: {pod_args()}")
    assert start_verdict([f"[container] {BOOT_MARKER} the start command runs"]) == (True, "")
    later = [f"{BOOT_MARKER} starting sshd", *usage_lines("x")]
    assert start_verdict(later)[0] is True, "a boot line means the start command ran"
    assert start_verdict(["[system] pulling image", "[container] hello"]) == (None, "")
    assert start_verdict([]) == (None, "")


def test_the_boot_script_says_its_marker_first() -> None:
    script = pod_command()[-1]
    assert script.splitlines()[0] == f'echo "{BOOT_MARKER} the start command runs" >&2'


async def test_a_template_carries_the_start_command_and_the_create_sends_no_args(
    fake: FakeRunPod,
) -> None:
    fake.args_reach_entrypoint = True  # a pod from the template still runs our command
    fake.add_template(TEMPLATE, args=pod_args())
    provider = make_provider(fake, template_id=TEMPLATE)
    try:
        offers = await provider.search_offers(POLICY)
        request = CreateRequest(label="mvp-t-1", image=LLAMA_IMAGE, env={}, disk_gb=20)
        result = await provider.create(offers[0], request)
        assert result.outcome is Outcome.CREATED, result.detail
        (sent,) = fake.create_requests()
        assert sent.body["templateId"] == TEMPLATE and "args" not in sent.body
        assert sent.body["image"] == LLAMA_IMAGE
        assert result.provider_id is not None
        assert fake.cmd_of(result.provider_id) == pod_command()
        check = await provider.start_check(result.provider_id)
        assert check.ran is None, "no usage text: nothing to end it for"
    finally:
        await provider.aclose()


async def test_without_a_template_the_start_command_is_the_create_args(
    fake: FakeRunPod,
) -> None:
    provider = make_provider(fake)
    try:
        offers = await provider.search_offers(POLICY)
        request = CreateRequest(label="mvp-t-2", image=LLAMA_IMAGE, env={}, disk_gb=20)
        await provider.create(offers[0], request)
        (sent,) = fake.create_requests()
        assert "templateId" not in sent.body and sent.body["args"] == pod_args()
    finally:
        await provider.aclose()


async def test_the_fake_holds_the_create_to_the_document() -> None:
    """unevaluatedProperties false: an unknown field is a 422 naming it; templateId is a
    non-empty string naming a template the account can use (404 otherwise). The document's
    own validator agrees each refused body is invalid (the fixture's contract check would
    fail on them, so this fake is not that fixture's)."""
    gpu = {"id": "NVIDIA RTX A5000", "count": 1}
    with FakeRunPod() as fake:
        fake.add_gpu("NVIDIA RTX A5000")
        await _refused_creates(fake, gpu)
        problems = [str(p) for p in check_all(fake.exchanges)]
    assert any("'entrypoint' was unexpected" in p for p in problems), problems
    assert any("templateId: '' should be non-empty" in p for p in problems), problems
    assert any("'image' is a required property" in p for p in problems), problems


async def _refused_creates(fake: FakeRunPod, gpu: dict[str, object]) -> None:
    headers = {"Authorization": f"Bearer {fake.api_key}", "User-Agent": USER_AGENT}
    async with httpx.AsyncClient(base_url=fake.api_url, headers=headers) as client:
        sent = {"name": "p", "image": LLAMA_IMAGE, "gpu": gpu, "entrypoint": ["/bin/sh"]}
        answer = await client.post("/pods", json=sent)
        assert answer.status_code == 422 and "'entrypoint'" in answer.text
        answer = await client.post("/pods", json={"name": "p", "gpu": gpu, "templateId": ""})
        assert answer.status_code == 422 and "templateId" in answer.text
        answer = await client.post("/pods", json={"name": "p", "gpu": gpu, "templateId": "nope"})
        assert answer.status_code == 404
        fake.add_template("srv", serverless=True)
        answer = await client.post("/pods", json={"name": "p", "gpu": gpu, "templateId": "srv"})
        assert answer.status_code == 422
        answer = await client.post("/pods", json={"name": "p", "gpu": gpu})
        assert answer.status_code == 422 and "image" in answer.text
    assert fake.pods() == []


@pytest.mark.parametrize("template", [None, TEMPLATE])
async def test_a_pod_running_the_images_entrypoint_is_ended_within_a_minute(
    template: str | None, fake: FakeRunPod, tmp_path: Path
) -> None:
    """Without a template the create's `args` reach /app/tools.sh (the document's reading);
    with one, its start command is not in the JSON form (a plain command, which tools.sh
    gets as arguments too). Either way the pod is RUNNING, its port mapped, nothing answers.
    The walk reads its log, sees the usage and no boot line, deletes it and stops (no other
    type would start differently), naming the fix for the route taken."""
    fake.args_reach_entrypoint = True
    if template:
        fake.add_template(template, args="bash -c '/usr/sbin/sshd -D'")
    provider = make_provider(fake, probe_ssh_banner=True, template_id=template)
    settings = fast_settings(
        image=LLAMA_IMAGE, ready_timeout_s=10 * MINUTE_S, poll_interval_s=0.02,
        start_check_every_s=0.2,
    )
    store, sink = RecordStore(tmp_path / "state"), RecordingSink()
    try:
        offers = await provider.search_offers(POLICY)
        walk = LeaseWalk(provider, store, sink, settings, run_id="r-5a7c0001")
        started = time.monotonic()
        result = await walk.run(offers)
        took = time.monotonic() - started
    finally:
        await provider.aclose()
    assert took < MINUTE_S, f"the attempt ran {took:.1f} s"
    assert result.failure is WalkFailure.PROVIDER_ERROR, result.reason
    assert "image's own entrypoint" in result.reason and "Unknown command:" in result.reason
    if template:
        assert f"template '{TEMPLATE}'" in result.reason
    else:
        assert "set [runpod] template_id" in result.reason
    assert len(fake.create_requests()) == 1, "no other type is tried: it would start alike"
    assert fake.pods() == [] and len(fake.deleted()) == 1
    (not_ready,) = sink.of(ev.LeaseNotReady)
    assert "image's own entrypoint" in not_ready.reason
    reads = [r for r in fake.log_reads() if r.query.get("source") == "container"]
    assert reads, "the start check reads the container log"
    record = json.loads(next((tmp_path / "state").rglob("*.json")).read_text())
    assert all(lease["state"] == "deleted" for lease in record["leases"])


class FakeTime:
    """The walk's clock and sleep on fake time: a sleep moves the clock, never waits."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds
        await asyncio.sleep(0)


async def test_with_the_default_schedule_the_pod_ends_within_its_first_minute(
    fake: FakeRunPod, tmp_path: Path
) -> None:
    """The shipped schedule (a poll every 5 s, the log read 15 s after RUNNING, then every
    15 s) on fake time: the attempt ends within 60 s of the first RUNNING read, while the
    SSH budget (600 s) is far from spent."""
    fake.args_reach_entrypoint = True
    fake.provisioning_polls = 3  # PROVISIONING for a while first: the minute is RUNNING's
    clock = FakeTime()
    defaults = WalkSettings()
    assert (defaults.start_check_every_s, defaults.start_check_s) == (15.0, 60.0)
    settings = fast_settings(
        image=LLAMA_IMAGE, ready_timeout_s=10 * MINUTE_S, poll_interval_s=5.0,
        start_check_s=defaults.start_check_s, start_check_every_s=defaults.start_check_every_s,
        sleep=clock.sleep, monotonic=clock.monotonic,
    )
    provider = make_provider(fake, probe_ssh_banner=True)
    store, sink = RecordStore(tmp_path / "state"), RecordingSink()
    try:
        offers = await provider.search_offers(POLICY)
        walk = LeaseWalk(provider, store, sink, settings, run_id="r-5a7c0002")
        started = clock.now
        result = await walk.run(offers)
    finally:
        await provider.aclose()
    assert result.failure is WalkFailure.PROVIDER_ERROR, result.reason
    assert "image's own entrypoint" in result.reason
    running = [e for e in sink.of(ev.LeasePending) if e.raw_state.startswith("RUNNING")]
    assert running, [e.raw_state for e in sink.of(ev.LeasePending)]
    ran_for = clock.now - started - running[0].waited_s
    assert 15.0 <= ran_for <= MINUTE_S, f"ended {ran_for:.0f} s (fake) after RUNNING"
    assert fake.pods() == [] and len(fake.deleted()) == 1


class LatePull(FakeTime):
    """RunPod says RUNNING while the image still pulls (runpod.md §0.4): the entrypoint's
    usage reaches the pod's log only `after_s` (fake) after the create."""

    def __init__(self, fake: FakeRunPod, after_s: float) -> None:
        super().__init__()
        self.fake, self.at = fake, self.now + after_s
        self.held: dict[str, list[tuple[str, str]]] = {}

    async def sleep(self, seconds: float) -> None:
        with self.fake._lock:
            logs = self.fake._pod_logs
            for pod_id in [p for p in logs if p not in self.held]:
                self.held[pod_id], logs[pod_id] = logs[pod_id], []
            if self.now + seconds >= self.at:
                for pod_id, lines in self.held.items():
                    logs[pod_id] = lines
        await super().sleep(seconds)


async def test_an_entrypoint_that_speaks_after_the_first_minute_still_ends_the_pod(
    fake: FakeRunPod, tmp_path: Path
) -> None:
    """The usage comes 3 minutes (fake) after the create: the log is read again once a
    minute after RUNNING's first, so the pod ends soon after, not at the SSH budget."""
    fake.args_reach_entrypoint = True
    clock = LatePull(fake, after_s=3 * MINUTE_S)
    settings = fast_settings(
        image=LLAMA_IMAGE, ready_timeout_s=10 * MINUTE_S, poll_interval_s=5.0,
        sleep=clock.sleep, monotonic=clock.monotonic,
    )
    provider = make_provider(fake, probe_ssh_banner=True)
    store, sink = RecordStore(tmp_path / "state"), RecordingSink()
    try:
        offers = await provider.search_offers(POLICY)
        walk = LeaseWalk(provider, store, sink, settings, run_id="r-5a7c0003")
        started = clock.now
        result = await walk.run(offers)
    finally:
        await provider.aclose()
    assert result.failure is WalkFailure.PROVIDER_ERROR, result.reason
    assert "image's own entrypoint" in result.reason
    took = clock.now - started
    assert 3 * MINUTE_S <= took <= 4 * MINUTE_S + 10, f"ended {took:.0f} s (fake) after create"
    assert len(fake.create_requests()) == 1 and fake.pods() == []
