"""The Docker provider's calls against a real (private) dockerd: leftovers found by label and
torn down by a provider that did not start them (as `down` after a crash does), an image
without python3, and a container that ends by itself."""

from __future__ import annotations

import asyncio
import io
import json
import tarfile
from pathlib import Path

import pytest

from mvp_tui.providers.base import (
    CreateRequest,
    DestroyOutcome,
    LeaseState,
    Outcome,
    SelectionPolicy,
)
from mvp_tui.providers.docker.client import DockerProvider
from mvp_tui.providers.docker.spec import DockerSettings
from tests.docker.conftest import DockerScope
from tests.e2e.headless import HeadlessRun, event, weights

pytestmark = pytest.mark.peer("dockerd")


def _provider(docker_host: str, image: str, lines: list[tuple[str, bytes]]) -> DockerProvider:
    import docker  # type: ignore[import-untyped]

    settings = DockerSettings(image=image, gpus="none", gpus_explicit=True, network="host")
    return DockerProvider(
        settings,
        on_line=lambda kind, line: lines.append((kind, line)),
        client_factory=lambda: docker.DockerClient(base_url=docker_host, timeout=60),
    )


def _label(scope: DockerScope) -> str:
    return f"{scope.prefix}-{scope.run_id}-1-1"


def _request(scope: DockerScope, image: str, model: Path) -> CreateRequest:
    env = {
        "MVP_RUN_ID": scope.run_id,
        "MVP_LOGICAL_NODE_ID": "1",
        "MVP_NODE_PROVIDER": "docker",
        "MVP_GGUF_LOCAL_PATH": str(model),
        "MVP_HF_ENDPOINT": "http://127.0.0.1:9",
    }
    return CreateRequest(label=_label(scope), image=image, env=env, disk_gb=20)


async def test_leftover_is_found_by_label_and_destroyed_by_another_provider(
    tiny_gguf: Path, docker_host: str, node_image: str, docker_scope: DockerScope
) -> None:
    lines: list[tuple[str, bytes]] = []
    first = _provider(docker_host, node_image, lines)
    (offer,) = await first.search_offers(SelectionPolicy())
    assert offer.price_per_hour == 0.0 and offer.provider == "docker"
    created = await first.create(offer, _request(docker_scope, node_image, tiny_gguf))
    assert created.outcome is Outcome.CREATED, created.detail
    assert created.provider_id is not None
    # A second client, as `down` builds one after a crash: it knows only the labels.
    second = _provider(docker_host, node_image, [])
    try:
        label = _label(docker_scope)
        run_prefix = f"{docker_scope.prefix}-{docker_scope.run_id}"
        listed = await second.list_by_label(run_prefix)
        assert [(s.provider_id, s.label) for s in listed] == [(created.provider_id, label)]
        assert listed[0].state is LeaseState.RUNNING
        assert await second.list_by_label(run_prefix + "0") == []  # another run's prefix
        status = await second.get(created.provider_id)
        assert status.state is LeaseState.RUNNING and status.label == label
        destroyed = await second.destroy(created.provider_id)
        assert destroyed.outcome is DestroyOutcome.ACCEPTED, destroyed.detail
        assert (await second.get(created.provider_id)).state is LeaseState.GONE
        assert not docker_scope.containers()
    finally:
        await second.aclose()
        await first.aclose()
    # The first client saw the agent's frames through the attach stream.
    assert any(kind == "stdout" and b'"mvp_frame"' in line for kind, line in lines)


async def test_image_without_python_is_rejected_naming_what_is_missing(
    tiny_gguf: Path, docker_host: str, node_image: str, docker_scope: DockerScope
) -> None:
    client = docker_scope.client
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        data = b"root:x:0:0:root:/root:/bin/sh\n"
        info = tarfile.TarInfo("etc/passwd")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    empty = "mvp-tui-test-empty:1"
    await asyncio.to_thread(
        client.api.import_image_from_data, buffer.getvalue(), repository=empty.split(":")[0],
        tag="1",
    )
    provider = _provider(docker_host, empty, [])
    try:
        (offer,) = await provider.search_offers(SelectionPolicy())
        created = await provider.create(offer, _request(docker_scope, empty, tiny_gguf))
    finally:
        await provider.aclose()
    assert created.outcome is Outcome.REJECTED
    assert "lacks python3" in created.detail and empty in created.detail, created.detail
    assert not docker_scope.containers()


async def test_container_ending_by_itself_ends_the_run_with_its_status(
    tiny_gguf: Path, tmp_path: Path, docker_host: str, node_image: str, docker_scope: DockerScope
) -> None:
    args = [
        "--provider", "docker", "--docker-network", "host", "--docker-image", node_image,
        "--label-prefix", docker_scope.prefix,
        "--gguf-local-path", str(tiny_gguf), "--rpc-bind", "127.0.0.1:0",
    ]
    env = {"DOCKER_HOST": docker_host}
    async with HeadlessRun(args, tmp_path / "state", env=env) as run:
        await run.until(event("prompt_rpc_listening"))
        (answered,) = [e for e in run.events("attempt_answered") if e.get("provider_id")]
        container = docker_scope.client.containers.get(answered["provider_id"])
        await asyncio.to_thread(container.kill)  # SIGKILL from outside, like the OOM killer
        fatal = await run.until(weights("WorkerFatal"))
        code = await run.finish()
    assert "exited by itself with status 137" in fatal["payload"]["reason"]
    assert fatal["payload"]["exit_code"] == 137
    assert code == 1, run.stderr
    assert run.events("node_failed") and run.events("lease_deleted")


async def test_hf_token_reaches_the_agent_but_not_the_containers_env(
    tiny_gguf: Path, docker_host: str, node_image: str, docker_scope: DockerScope
) -> None:
    import docker

    token = "hf_dockerprobe0123456789abcdef"
    config_phase: asyncio.Future[dict[str, object]] = asyncio.get_running_loop().create_future()

    def on_line(kind: str, line: bytes) -> None:  # the agent's config phase, once it is ready
        ready = b'"phase":"config"' in line and b'"status":"ready"' in line
        if kind == "stdout" and ready and not config_phase.done():
            config_phase.set_result(json.loads(line)["payload"])

    provider = DockerProvider(
        DockerSettings(image=node_image, gpus="none", gpus_explicit=True, network="host"),
        on_line=on_line,
        client_factory=lambda: docker.DockerClient(base_url=docker_host, timeout=60),
    )
    request = _request(docker_scope, node_image, tiny_gguf)
    request = CreateRequest(label=request.label, image=request.image,
                            env={**request.env, "HF_TOKEN": token}, disk_gb=20)
    try:
        (offer,) = await provider.search_offers(SelectionPolicy())
        created = await provider.create(offer, request)
        assert created.outcome is Outcome.CREATED and created.provider_id, created.detail
        inspected = await asyncio.to_thread(
            docker_scope.client.api.inspect_container, created.provider_id
        )
        # What `docker inspect` shows of the container: no token, not even its name.
        assert token not in str(inspected)
        assert not any(item.startswith("HF_TOKEN=") for item in inspected["Config"]["Env"])
        # The agent has it all the same: its config phase says a token is set.
        config = await asyncio.wait_for(config_phase, 60)
        assert config["detail"]["hf_token"] is True  # type: ignore[index]
        destroyed = await provider.destroy(created.provider_id)
        assert destroyed.outcome is DestroyOutcome.ACCEPTED, destroyed.detail
    finally:
        await provider.aclose()
    assert not docker_scope.containers()
