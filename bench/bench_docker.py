"""The Docker provider's costs, against the plainest way to do the same with the same image.

1. Container start → first agent line: `DockerProvider.create` (create, attach, start, the
   agent down the attached stdin) until its first line reaches `on_line`, against a bare
   `containers.run` of the same image printing one line (target ≤ 1.1x).
2. Enter → engine healthy, tiny model: `create` until the node's `WeightsLoaded` line,
   against starting the engine (llama-cpp-python's server) directly on the host until its
   /v1/models answers; and the same agent as a child process (`local`), to show what the
   container itself adds.
Runs alternate; medians of N each. Needs a Docker daemon: MVP_TEST_DOCKER_HOST or DOCKER_HOST,
else a private one is started with scripts/dockerd.sh (root) and stopped at the end. The
test image is built/imported as the tests do (tests/docker/image.py).

Run: .venv/bin/python bench/bench_docker.py [--runs 7]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import docker  # type: ignore[import-untyped]  # noqa: E402
from docker.utils.socket import frames_iter  # type: ignore[import-untyped]  # noqa: E402

from bench.smoke import add_smoke  # noqa: E402
from mvp_tui.agent_bundle import agent_zip  # noqa: E402
from mvp_tui.providers.base import CreateRequest, SelectionPolicy  # noqa: E402
from mvp_tui.providers.docker.client import DockerProvider  # noqa: E402
from mvp_tui.providers.docker.spec import (  # noqa: E402
    AGENT_BYTES_ENV,
    DockerSettings,
    container_command,
)
from mvp_tui.providers.local.client import LocalProvider  # noqa: E402
from tests.docker.image import ensure_image  # noqa: E402
from tests.fakes.tiny_gguf import write_tiny_gguf  # noqa: E402


def bare_first_line(client: Any, image: str) -> float:
    started = time.perf_counter()
    client.containers.run(
        image, ["python3", "-c", "print('first line')"], network_mode="host", remove=True
    )
    return time.perf_counter() - started


def raw_agent_first_line(client: Any, image: str, model: Path) -> float:
    """The provider's steps with plain blocking SDK calls (create with the stdin launcher,
    attach, start, the agent down stdin, first line): the floor of this design, without the
    provider's own overhead."""
    api = client.api
    agent = agent_zip().read_bytes()  # the zipapp every node gets
    started = time.perf_counter()
    answer = api.create_container(
        image,
        container_command("python3"),
        environment={
            "MVP_RUN_ID": "r-bench",
            "MVP_GGUF_LOCAL_PATH": "/none.gguf",
            AGENT_BYTES_ENV: str(len(agent)),
        },
        host_config=api.create_host_config(network_mode="host", auto_remove=True),
        stdin_open=True,
    )
    sock = api.attach_socket(answer["Id"], {"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1})
    api.start(answer["Id"])
    sock._sock.sendall(agent)
    next(iter(frames_iter(sock, False)))
    elapsed = time.perf_counter() - started
    sock.close()
    with contextlib.suppress(docker.errors.DockerException):
        api.wait(answer["Id"], timeout=30, condition="removed")
    return elapsed


async def provider_run(host: str, image: str, model: Path, until_healthy: bool) -> float:
    """Seconds from `create` to the first line (or to WeightsLoaded); then torn down."""
    got = asyncio.Event()
    marker = b'"WeightsLoaded"' if until_healthy else b""

    def on_line(kind: str, line: bytes) -> None:
        if kind == "stdout" and marker in line:
            got.set()

    settings = DockerSettings(image=image, gpus="none", gpus_explicit=True, network="host")
    provider = DockerProvider(
        settings,
        on_line=on_line,
        client_factory=lambda: docker.DockerClient(base_url=host, timeout=60),
    )
    run_id = "r-" + secrets.token_hex(4)
    env = {
        "MVP_RUN_ID": run_id,
        "MVP_LOGICAL_NODE_ID": "1",
        "MVP_NODE_PROVIDER": "docker",
        "MVP_MODEL_ID": "tiny",
        "MVP_GGUF_LOCAL_PATH": str(model),
    }
    request = CreateRequest(label=f"bench-{run_id}-1-1", image=image, env=env, disk_gb=1)
    try:
        (offer,) = await provider.search_offers(SelectionPolicy())  # daemon connected first
        started = time.perf_counter()
        created = await provider.create(offer, request)
        assert created.provider_id is not None, created.detail
        await asyncio.wait_for(got.wait(), 120)
        return time.perf_counter() - started
    finally:
        await provider.aclose()


async def local_healthy(model: Path) -> float:
    """The same agent as a child process (the `local` provider): what the container adds."""
    got = asyncio.Event()

    def on_line(kind: str, line: bytes) -> None:
        if kind == "stdout" and b'"WeightsLoaded"' in line:
            got.set()

    provider = LocalProvider(on_line=on_line)
    env = {"MVP_RUN_ID": "r-bench", "MVP_MODEL_ID": "tiny", "MVP_GGUF_LOCAL_PATH": str(model)}
    request = CreateRequest(label="bench-r-bench-1-1", image="", env=env, disk_gb=1)
    try:
        (offer,) = await provider.search_offers(SelectionPolicy())
        started = time.perf_counter()
        await provider.create(offer, request)
        await asyncio.wait_for(got.wait(), 120)
        return time.perf_counter() - started
    finally:
        await provider.aclose()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def host_engine_healthy(model: Path) -> float:
    port = free_port()
    started = time.perf_counter()
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "llama_cpp.server", "--model", str(model),
            "--host", "127.0.0.1", "--port", str(port), "--model_alias", "tiny",
            "--interrupt_requests", "False",
        ],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        while True:  # the agent probes the same way (50 ms, growing)
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2):
                    return time.perf_counter() - started
            except OSError:
                if proc.poll() is not None:
                    raise RuntimeError("the engine exited before it was healthy") from None
                time.sleep(0.05)
    finally:
        proc.terminate()
        proc.wait(10)


def daemon() -> tuple[str, str | None]:
    """(socket URL, the private dockerd dir to stop, or None)."""
    given = os.environ.get("MVP_TEST_DOCKER_HOST") or os.environ.get("DOCKER_HOST")
    if given:
        return given, None
    workdir = tempfile.mkdtemp(prefix="mvp-dockerd.", dir="/tmp")
    subprocess.run([str(REPO / "scripts" / "dockerd.sh"), "start", workdir], check=True)
    return (Path(workdir) / "docker_host").read_text().strip(), workdir


def main(runs: int, smoke: bool = False) -> None:
    host, private = daemon()
    try:
        client = docker.DockerClient(base_url=host, timeout=60)
        image = ensure_image(client)
        model = write_tiny_gguf(Path(tempfile.mkdtemp(prefix="mvp-bench-")) / "tiny.gguf")
        if not smoke:
            bare_first_line(client, image)  # warm the image's files in the page cache
            asyncio.run(provider_run(host, image, model, until_healthy=False))
        bare, raw, ours, direct, healthy, local = [], [], [], [], [], []
        for _ in range(runs):
            bare.append(bare_first_line(client, image))
            raw.append(raw_agent_first_line(client, image, model))
            ours.append(asyncio.run(provider_run(host, image, model, until_healthy=False)))
            direct.append(host_engine_healthy(model))
            healthy.append(asyncio.run(provider_run(host, image, model, until_healthy=True)))
            local.append(asyncio.run(local_healthy(model)))
        b, o, r = statistics.median(bare), statistics.median(ours), statistics.median(raw)
        d, h = statistics.median(direct), statistics.median(healthy)
        print(f"runs: {runs} each, alternating; daemon {host}; image {image}")
        print(f"bare containers.run printing one line     median {b * 1000:7.1f} ms")
        print(f"raw SDK steps (agent down stdin) → agent line median {r * 1000:7.1f} ms")
        print(f"DockerProvider.create → first agent line  median {o * 1000:7.1f} ms")
        print(f"ratio provider/bare: {o / b:.2f}x (target ≤ 1.1x)")
        print(f"ratio provider/raw SDK steps: {o / r:.2f}x (the provider's own overhead)")
        print(f"engine started directly on the host, healthy median {d * 1000:7.1f} ms")
        print(f"DockerProvider.create → WeightsLoaded         median {h * 1000:7.1f} ms")
        print(f"ratio docker/host: {h / d:.2f}x")
        lo = statistics.median(local)
        print(f"LocalProvider.create → WeightsLoaded (same agent) median {lo * 1000:7.1f} ms")
        print(f"ratio docker/local: {h / lo:.2f}x (what the container adds to the agent's path)")
        client.close()
    finally:
        if private is not None:
            subprocess.run([str(REPO / "scripts" / "dockerd.sh"), "stop", private], check=False)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    add_smoke(parser)
    args = parser.parse_args()
    main(1 if args.smoke else args.runs, args.smoke)
