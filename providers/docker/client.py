"""The `docker` provider: "lease" this machine by running the node agent in a container.

The isolated sibling of `local` (the seed's `LocalDockerPlugin`), spoken through the Docker
SDK for Python against the daemon's Engine API (`DOCKER_HOST`, else the default socket);
no `docker` CLI subprocess.

- Offers: this machine, $0/h; its GPUs when the daemon has the NVIDIA runtime, otherwise
  one CPU offer that says so.
- Create: container `{prefix}-{run}-{node}` (prefix `mvp-orchestrator`), labels carrying
  the lease label, run, node and attempt, auto-remove (`--rm`), stdin open and attached once,
  `host.docker.internal:host-gateway` on a bridge network, env from the node spec, GPU device
  requests from `[docker] gpus`, the model file mounted read-only (`[docker]
  cached_model_host_path` at /models/cached/<file>, else `[model] gguf_local_path` at
  /models/local/<file>) with MVP_GGUF_LOCAL_PATH rewritten. The agent (the same
  zipapp every node gets, `mvp_tui/agent_bundle.py`) goes down the attached stdin as the
  container starts (its launcher reads exactly its length; no archive upload): every line
  it prints reaches `on_line`.
- Destroy: "shutdown" down stdin, a short wait, `stop` with a 2 s grace, `remove`; confirmed
  when the daemon no longer lists the container.
- A container that ends by itself (the agent killed, out of memory) is seen at once: its
  exit status and last lines become the node's WorkerFatal, so the run ends and tears down.
- Leftovers are found by label (`list_by_label`), so `down`, `ls` and the restart check
  treat them like rented leases; a container outlives no `mvp-tui`: the attach socket closing
  (even on SIGKILL) closes the agent's stdin and the agent shuts down.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import docker  # type: ignore[import-untyped]
import docker.errors  # type: ignore[import-untyped]

from mvp_tui.agent_bundle import agent_zip
from mvp_tui.config import Config, ConfigError
from mvp_tui.node_protocol import WEIGHTS_CHANNEL, WORKER_FATAL, frame_line
from mvp_tui.providers.base import (
    CreateRequest,
    CreateResult,
    DestroyOutcome,
    DestroyResult,
    LeaseState,
    LeaseStatus,
    Offer,
    Outcome,
    ProviderBase,
    ProviderError,
    ProviderInfo,
    SelectionPolicy,
)
from mvp_tui.providers.docker.node import AttachedNode
from mvp_tui.providers.docker.section import DockerSection
from mvp_tui.providers.docker.spec import (
    BRIDGE_ENGINE_PORT,
    CACHED_KEY,
    GPUS_KEY,
    IMAGE_KEY,
    LABEL_LEASE,
    LABEL_MANAGED,
    MANAGED_BY,
    NETWORK_KEY,
    NETWORKS,
    DockerSettings,
    GpuSpecError,
    create_config,
    gpu_request,
    published_url_rewrite,
    stdin_env,
    stdin_env_bytes,
)
from mvp_tui.providers.local.client import _probe_gpus, machine_offer
from mvp_tui.providers.local.node import LineHandler
from mvp_tui.untrusted import one_line_ascii

PROVIDER_NAME = "docker"
OFFER_ID = "docker"
NVIDIA_RUNTIME = "nvidia"
DAEMON_TIMEOUT_S = 60

T = TypeVar("T")


def settings_from_config(config: Config) -> DockerSettings:
    """`[docker]` keys (and `[image] node`, the fallback image) as DockerSettings. Reads
    only; nothing is checked against the daemon or the disk here (`down` builds this too)."""

    def source(dotted: str) -> str:
        return str(config.sources.get(dotted) or "built-in default")

    docker = config.settings.of(DockerSection)
    if docker is None:
        raise ConfigError(f"the [docker] keys are not read for provider {config.provider}")
    image = docker.image
    image_source = source("docker.image")
    if not image:
        image = config.settings.image.node
        image_source = f"[image] node, from {source('image.node')}"
    gpus_source = config.sources.get("docker.gpus")
    return DockerSettings(
        image=image,
        image_source=image_source,
        gpus=docker.gpus,
        gpus_source=str(gpus_source or "built-in default"),
        gpus_explicit=gpus_source is not None and gpus_source.layer != "default",
        network=docker.network,
        cached_model_host_path=docker.cached_model_host_path,
        cached_model_source=source("docker.cached_model_host_path"),
    )


@dataclass(slots=True)
class _Lease:
    provider_id: str  # the container id, 12 hex digits
    name: str
    label: str
    node: AttachedNode
    started_at: float
    stopping: bool = False
    destroyed: bool = False
    exit_status: int | None = None
    watcher: asyncio.Task[None] | None = None
    exit_wait: asyncio.Future[Any] | None = None


class _StepFailed(Exception):
    """A step of `create` after the container exists failed: undo, answer REJECTED."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class DockerProvider(ProviderBase):
    """Provider protocol over node containers on a Docker daemon (see `providers.base`)."""

    info = ProviderInfo(
        name=PROVIDER_NAME,
        billing=False,
        notes=(
            "runs the node agent in a container on this machine's Docker daemon",
            "no SSH: the container's output goes straight to on_line",
        ),
        ssh=False,
    )

    def __init__(
        self,
        settings: DockerSettings,
        *,
        on_line: LineHandler | None = None,
        agent_path: Path | None = None,
        client_factory: Callable[[], docker.DockerClient] | None = None,
    ) -> None:
        self.settings = settings
        self._on_line = on_line
        self._agent_path = agent_path
        self._agent_cache: bytes | None = None
        self._client_factory = client_factory or _client_from_env
        self._client: docker.DockerClient | None = None
        self._leases: dict[str, _Lease] = {}
        self._runtimes: set[str] | None = None
        self._ready = False  # check_ready passed

    # -- the daemon

    async def _call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """A blocking SDK call, off the event loop."""
        return await asyncio.to_thread(fn, *args, **kwargs)

    async def client(self) -> docker.DockerClient:
        if self._client is None:
            try:
                self._client = await self._call(self._client_factory)
            except docker.errors.DockerException as exc:
                raise ProviderError(
                    f"cannot reach the Docker daemon at {daemon_address()}: "
                    f"{one_line_ascii(str(exc), 300)}",
                    fix="start Docker (or point DOCKER_HOST at a running daemon)",
                ) from None
        return self._client

    def _agent_source(self) -> bytes:
        """The agent's zipapp (built or found in the cache unless a path was given), read
        once per provider: it is sent with every create."""
        if self._agent_cache is None:
            self._agent_cache = (self._agent_path or agent_zip()).read_bytes()
        return self._agent_cache

    async def runtimes(self) -> set[str]:
        if self._runtimes is None:
            client = await self.client()
            info = await self._call(client.info)
            self._runtimes = set((info.get("Runtimes") or {}).keys())
        return self._runtimes

    async def check_ready(self) -> None:
        """Everything that can be wrong before a container exists, as a ConfigError (exit 2)
        naming the key: a GPU request the daemon cannot give, a missing image, a cached
        model path that is not a file, an unknown network."""
        s = self.settings
        if s.network not in NETWORKS:
            raise ConfigError(
                f"{NETWORK_KEY} = {s.network!r} is not supported: use one of {', '.join(NETWORKS)}"
            )
        try:
            gpus = gpu_request(s)
        except GpuSpecError as exc:
            raise ConfigError(str(exc)) from None
        if s.cached_model_host_path is not None:
            path = s.cached_model_host_path.expanduser()
            if not path.is_file():
                raise ConfigError(
                    f"{CACHED_KEY} = {str(path)!r} (from {s.cached_model_source}) "
                    f"{'is not a file' if path.exists() else 'does not exist'}; point it at "
                    "a .gguf file on this machine"
                )
        if gpus.wants_gpus and s.gpus_explicit and NVIDIA_RUNTIME not in await self.runtimes():
            raise ConfigError(
                f"{GPUS_KEY} = {s.gpus!r} (from {s.gpus_source}) asks for "
                f"{gpus.describe()}, but the Docker daemon at {daemon_address()} has no NVIDIA "
                'runtime; install the NVIDIA Container Toolkit, or set [docker] gpus = "none" '
                "(env MVP_DOCKER_GPUS, flag --gpus) to run on the CPU"
            )
        if not s.image:
            raise ConfigError(
                f"{IMAGE_KEY} is empty; name an image that holds python3 and an engine"
            )
        client = await self.client()
        try:
            await self._call(client.images.get, s.image)
        except docker.errors.ImageNotFound:
            raise ConfigError(
                f"{IMAGE_KEY} = {s.image!r} (from {s.image_source}) is not in the Docker daemon "
                f"at {daemon_address()}; `docker pull {s.image}` (or build/load it) first — "
                "mvp-tui never pulls"
            ) from None
        except docker.errors.APIError as exc:
            raise ProviderError(f"cannot look up image {s.image!r}: {_api_text(exc)}") from None
        self._ready = True

    def _effective_gpus(self, runtimes: set[str]) -> DockerSettings:
        """The default `gpus = "all"` means every GPU there is: none without the runtime."""
        s = self.settings
        if not s.gpus_explicit and NVIDIA_RUNTIME not in runtimes:
            return _replace(s, gpus="none")
        return s

    # -- offers

    async def search_offers(self, policy: SelectionPolicy) -> list[Offer]:
        """One offer, this machine through Docker. The policy is not applied: choosing
        `docker` is choosing this machine."""
        await self.check_ready()
        runtimes = await self.runtimes()
        settings = self._effective_gpus(runtimes)
        wanted = gpu_request(settings)
        gpus = await _probe_gpus() if NVIDIA_RUNTIME in runtimes and wanted.wants_gpus else []
        if wanted.count > 0:
            gpus = gpus[: wanted.count]
        elif wanted.device_ids:
            gpus = [g for i, g in enumerate(gpus) if str(i) in wanted.device_ids] or gpus
        first = gpus[0] if gpus else {}
        if gpus:
            name = str(first.get("name", "GPU"))
        elif NVIDIA_RUNTIME in runtimes:
            name = "CPU only ([docker] gpus = none)"
        else:
            name = "CPU only (no NVIDIA runtime in Docker)"
        return [machine_offer(PROVIDER_NAME, OFFER_ID, name, gpus, "this machine (docker)")]

    # -- lease lifecycle

    async def create(self, offer: Offer, request: CreateRequest) -> CreateResult:
        """Creates the container, puts the agent in, attaches, starts it."""
        if offer.provider != PROVIDER_NAME:
            return CreateResult(
                Outcome.REJECTED, detail=f"offer {offer.offer_id} is from {offer.provider}"
            )
        if not self._ready:  # search_offers checked already, moments ago
            try:
                await self.check_ready()
            except ConfigError as exc:
                return CreateResult(Outcome.REJECTED, detail=str(exc))
        settings = self._effective_gpus(await self.runtimes())
        client = await self.client()
        api = client.api
        agent = self._agent_source()
        secrets = stdin_env_bytes(stdin_env(settings, request.env))
        name, config = create_config(
            settings,
            image=settings.image,
            label=request.label,
            request_env=request.env,
            agent_bytes=len(agent),
            stdin_env_length=len(secrets),
        )
        try:
            answer = await self._call(api.create_container_from_config, config, name)
        except docker.errors.APIError as exc:
            outcome = Outcome.REJECTED
            detail = _api_text(exc)
            if exc.status_code == 409:
                detail = f"a container named {name} already exists: {detail}"
            return CreateResult(outcome, detail=f"docker create: {detail}")
        except docker.errors.DockerException as exc:  # transport: it may exist; reconcile
            return CreateResult(Outcome.AMBIGUOUS, detail=f"docker create: {exc}")
        container_id = str(answer["Id"])
        provider_id = container_id[:12]
        # Every step after the container exists undoes the same way: one path.
        node: AttachedNode | None = None
        try:
            try:
                sock = await self._call(
                    api.attach_socket,
                    container_id,
                    {"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1},
                )
            except docker.errors.DockerException as exc:
                raise _StepFailed(f"docker attach: {exc}") from None
            node = AttachedNode(sock, provider_id, self._on_line)
            node.start()
            # Asked before the start, so the status is known even when auto-remove is quick.
            exit_wait = _in_daemon_thread(api.wait, container_id, None, "next-exit")
            try:
                await self._call(api.start, container_id)
            except docker.errors.APIError as exc:
                raise _StepFailed(_start_failure(exc, settings)) from None
            # The launcher reads the agent, then the secrets, from stdin.
            if not await self._call(node.send_bytes, agent + secrets):
                raise _StepFailed("docker: the agent could not be sent")
            if settings.network == "bridge":
                try:
                    port = await self._published_port(container_id)
                except ProviderError as exc:
                    raise _StepFailed(str(exc)) from None
                node.rewrite = published_url_rewrite(port)
        except _StepFailed as failed:
            if node is not None:
                node.close()
            await self._remove_quietly(container_id)
            return CreateResult(Outcome.REJECTED, detail=failed.detail)
        lease = _Lease(provider_id, name, request.label, node, time.time(), exit_wait=exit_wait)
        lease.watcher = asyncio.get_running_loop().create_task(
            self._watch(lease), name=f"docker-{provider_id}-exit"
        )
        self._leases[provider_id] = lease
        node.provider_line(
            f"container {name} ({provider_id}) started from {settings.image}, network "
            f"{settings.network}, {gpu_request(settings).describe()}"
        )
        return CreateResult(Outcome.CREATED, provider_id=provider_id, detail=f"container {name}")

    async def _watch(self, lease: _Lease) -> None:
        """The container's output ended: record its exit status; when nobody asked it to
        stop, make its end the node's WorkerFatal (with the last lines it printed)."""
        await lease.node.ended.wait()
        status = await _exit_status(lease.exit_wait)
        lease.exit_status = status
        if lease.stopping:
            return
        last = " | ".join(list(lease.node.last_lines)[-5:])
        lease.node.provider_line(f"container {lease.name} exited by itself, status {status}")
        if lease.node.saw_fatal:
            return
        reason = f"the node container {lease.name} exited by itself with status {status}"
        if status == 137:
            reason += " (killed: out of memory, or SIGKILL)"
        elif status == 0 and lease.node.saw_exit:
            reason += " (the agent ended on its own: its dead-man's switch, or a shutdown)"
        fatal = frame_line(
            WEIGHTS_CHANNEL,
            {
                "type": WORKER_FATAL,
                "reason": reason + (f"; last lines: {last}" if last else ""),
                "fix": "read the node's stderr and agent channels; check the image holds "
                "python3 and an engine",
                "exit_code": status,
                "last_log_lines": list(lease.node.last_lines),
                "source": "docker",
            },
        )
        if self._on_line is not None:
            self._on_line("stdout", fatal.encode())

    async def get(self, provider_id: str) -> LeaseStatus:
        client = await self.client()
        try:
            attrs = await self._call(client.api.inspect_container, provider_id)
        except docker.errors.NotFound:
            lease = self._leases.get(provider_id)
            return LeaseStatus(
                provider_id, lease.label if lease else None, LeaseState.GONE, raw_state="gone"
            )
        except docker.errors.DockerException as exc:
            raise ProviderError(f"docker inspect {provider_id}: {exc}") from None
        return _status(attrs)

    async def list_by_label(self, prefix: str) -> list[LeaseStatus]:
        client = await self.client()
        try:
            found = await self._call(
                client.api.containers, all=True, filters={"label": f"{LABEL_MANAGED}={MANAGED_BY}"}
            )
        except docker.errors.DockerException as exc:
            raise ProviderError(f"docker list: {exc}") from None
        out = []
        for summary in found:
            label = (summary.get("Labels") or {}).get(LABEL_LEASE) or ""
            if label.startswith(prefix):
                out.append(_status_from_summary(summary))
        return out

    async def destroy(self, provider_id: str) -> DestroyResult:
        """ "shutdown" on stdin (when we hold the attach), stop with a 2 s grace, remove;
        ACCEPTED once the daemon no longer lists the container."""
        client = await self.client()
        api = client.api
        lease = self._leases.get(provider_id)
        how = "stopped"
        if lease is not None:
            lease.stopping = True
            if not lease.node.ended.is_set() and lease.node.send("shutdown"):
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(lease.node.ended.wait(), self.settings.shutdown_wait_s)
                if lease.node.ended.is_set():
                    how = "shut down on request"
        try:
            await self._call(api.stop, provider_id, timeout=int(self.settings.stop_grace_s))
            await self._call(api.remove_container, provider_id, force=True)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:
            if exc.status_code != 409:  # 409: removal already in progress (auto-remove)
                return DestroyResult(
                    DestroyOutcome.FAILED,
                    detail=f"docker stop/remove {provider_id}: {_api_text(exc)}",
                    http_status=exc.status_code,
                )
        except docker.errors.DockerException as exc:
            return DestroyResult(DestroyOutcome.FAILED, detail=f"docker stop {provider_id}: {exc}")
        if not await self._gone(provider_id):
            return DestroyResult(
                DestroyOutcome.FAILED,
                detail=f"container {provider_id} is still listed after "
                f"{self.settings.remove_confirm_s:g} s",
            )
        if lease is not None:
            lease.node.close()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(lease.node.ended.wait(), 5)
            if lease.watcher is not None:
                with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                    await asyncio.wait_for(lease.watcher, 5)
            lease.destroyed = True
            status = lease.exit_status
            return DestroyResult(
                DestroyOutcome.ACCEPTED, detail=f"container {how}, exit status {status}, removed"
            )
        return DestroyResult(DestroyOutcome.ACCEPTED, detail="container stopped and removed")

    async def _gone(self, provider_id: str) -> bool:
        """Waits (bounded) until the daemon no longer lists the container: `wait` with the
        "removed" condition, then a listing to be sure."""
        client = await self.client()
        with contextlib.suppress(Exception):  # gone already (404), or the request timed out
            await self._call(
                client.api.wait, provider_id, self.settings.remove_confirm_s, "removed"
            )
        try:
            listed = await self._call(client.api.containers, all=True, filters={"id": provider_id})
        except docker.errors.DockerException:
            return False
        return not listed

    async def _remove_quietly(self, container_id: str) -> None:
        client = await self.client()
        with contextlib.suppress(docker.errors.DockerException):
            await self._call(client.api.remove_container, container_id, force=True)
        await self._gone(container_id)

    async def _published_port(self, container_id: str) -> int:
        """The loopback port the daemon published the engine's port on (bridge network)."""
        client = await self.client()
        attrs = await self._call(client.api.inspect_container, container_id)
        bindings = ((attrs.get("NetworkSettings") or {}).get("Ports") or {}).get(
            f"{BRIDGE_ENGINE_PORT}/tcp"
        ) or []
        for binding in bindings:
            if str(binding.get("HostPort") or "").isdigit():
                return int(binding["HostPort"])
        raise ProviderError(
            f"container {container_id[:12]} publishes no port for the engine "
            f"({BRIDGE_ENGINE_PORT}/tcp)",
            fix=f'use {NETWORK_KEY} = "host"',
        )

    async def engine_url(self, provider_id: str, node_base_url: str, port: int) -> str:
        """Where the prompt client reaches the node's engine: as the node says on the host
        network; the published loopback port on a bridge network. (The hook the run engine
        is to call for non-SSH nodes; until then the bridge's WeightsLoaded line is
        rewritten to the same URL.)"""
        if self.settings.network == "host":
            return node_base_url
        return f"http://127.0.0.1:{await self._published_port(provider_id)}"

    async def wait_exited(self, provider_id: str) -> int | None:
        """The container's exit status once its process has ended; None when unknown."""
        lease = self._leases.get(provider_id)
        if lease is None:
            return None
        await lease.node.ended.wait()
        if lease.watcher is not None:
            await asyncio.shield(lease.watcher)
        return lease.exit_status

    async def aclose(self) -> None:
        """Stops every node container still running: closing never leaves one behind."""
        live = [lease for lease in self._leases.values() if not lease.destroyed]
        await asyncio.gather(*(self.destroy(lease.provider_id) for lease in live))
        if self._client is not None:
            client, self._client = self._client, None
            await self._call(client.close)


def _client_from_env() -> docker.DockerClient:
    return docker.from_env(timeout=DAEMON_TIMEOUT_S)


def daemon_address() -> str:
    return os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"


def _replace(settings: DockerSettings, **changes: Any) -> DockerSettings:
    import dataclasses

    return dataclasses.replace(settings, **changes)


def _api_text(exc: docker.errors.APIError) -> str:
    return one_line_ascii(str(exc.explanation or exc), 400)


def _start_failure(exc: docker.errors.APIError, settings: DockerSettings) -> str:
    text = _api_text(exc)
    if "executable file not found" in text or "no such file or directory" in text:
        return (
            f"the image {settings.image!r} lacks python3, the node agent's interpreter: {text}; "
            "fix: use an image that holds python3 and an engine (llama-server or "
            "llama-cpp-python[server])"
        )
    if "could not select device driver" in text or "nvidia" in text.lower():
        return f"{GPUS_KEY} = {settings.gpus!r}: the daemon cannot give GPUs: {text}"
    return f"docker start: {text}"


_STATES = {
    "created": LeaseState.PENDING,
    "running": LeaseState.RUNNING,
    "restarting": LeaseState.PENDING,
    "paused": LeaseState.STOPPED,
    "removing": LeaseState.STOPPED,
    "exited": LeaseState.DEAD,
    "dead": LeaseState.DEAD,
}


def _status(attrs: dict[str, Any]) -> LeaseStatus:
    state = attrs.get("State") or {}
    raw = str(state.get("Status") or "")
    labels = (attrs.get("Config") or {}).get("Labels") or {}
    detail = f"container {str(attrs.get('Name') or '').lstrip('/')}"
    if raw in ("exited", "dead"):
        detail += f" exited with status {state.get('ExitCode')}"
    return LeaseStatus(
        provider_id=str(attrs.get("Id") or "")[:12],
        label=labels.get(LABEL_LEASE),
        state=_STATES.get(raw, LeaseState.PENDING),
        raw_state=raw,
        ssh=None,
        price_per_hour=0.0,
        started_at=_parse_time(str(state.get("StartedAt") or "")),
        detail=detail,
    )


def _status_from_summary(summary: dict[str, Any]) -> LeaseStatus:
    raw = str(summary.get("State") or "")
    names = summary.get("Names") or [""]
    return LeaseStatus(
        provider_id=str(summary.get("Id") or "")[:12],
        label=(summary.get("Labels") or {}).get(LABEL_LEASE),
        state=_STATES.get(raw, LeaseState.PENDING),
        raw_state=raw,
        ssh=None,
        price_per_hour=0.0,
        started_at=float(summary["Created"]) if summary.get("Created") else None,
        detail=f"container {str(names[0]).lstrip('/')}",
    )


def _parse_time(text: str) -> float | None:
    if not text or text.startswith("0001-"):
        return None
    from datetime import datetime

    try:
        head = text.split(".")[0].rstrip("Z")
        return datetime.fromisoformat(head + "+00:00").timestamp()
    except ValueError:
        return None


def _in_daemon_thread(fn: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
    """A blocking call that may last as long as the container (`wait`), in a daemon thread
    (an executor thread would hold up the interpreter's exit)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def settle(value: Any, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)

    def body() -> None:
        try:
            value = fn(*args)
        except BaseException as exc:  # handed to the loop, never lost
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(settle, None, exc)
            return
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(settle, value, None)

    threading.Thread(target=body, name="docker-wait", daemon=True).start()
    return future


async def _exit_status(waiting: asyncio.Future[Any] | None) -> int | None:
    """The container's exit status from the `wait` asked before its start."""
    if waiting is None:
        return None
    try:
        answer = await asyncio.wait_for(asyncio.shield(waiting), 10)
    except Exception:
        return None
    code = answer.get("StatusCode") if isinstance(answer, dict) else None
    return code if isinstance(code, int) else None


def build(config: Config, on_line: LineHandler | None = None) -> DockerProvider:
    """The kind's factory (providers/docker/kind.py): `[docker]` as DockerSettings."""
    return DockerProvider(settings_from_config(config), on_line=on_line)
