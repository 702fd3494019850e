"""The `local` provider: "lease" this machine by running the node agent as a child process.

The default for a user with no account and no GPU. There is one offer (this machine, $0/h),
no SSH (the agent's stdio is handed straight to `on_line`, where the datastream bridge plugs
in), and a lease lives exactly as long as its child process.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mvp_tui.agent_bundle import agent_zip
from mvp_tui.config import Config
from mvp_tui.node.download import gguf_problem
from mvp_tui.node.probe import cpu_model, parse_nvidia_smi, ram_mib
from mvp_tui.node_protocol import AgentEnv
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
    ProviderInfo,
    SelectionPolicy,
)
from mvp_tui.providers.local.node import AgentProcess, LineHandler
from mvp_tui.secrets import is_secret_name
from mvp_tui.untrusted import one_line_ascii

PROVIDER_NAME = "local"
OFFER_ID = "local"
NVIDIA_SMI_TIMEOUT_S = 10.0
MODEL_KEY = f"[model] gguf_local_path ({AgentEnv.env_name('gguf_local_path')})"


@dataclass(slots=True)
class _Lease:
    provider_id: str
    label: str
    agent: AgentProcess
    destroyed: bool = False


class LocalProvider(ProviderBase):
    """Provider protocol over child processes of this app (see `providers.base.Provider`)."""

    info = ProviderInfo(
        name=PROVIDER_NAME,
        billing=False,
        notes=("runs the node agent on this machine", "no SSH: output goes straight to on_line"),
        ssh=False,
    )

    def __init__(
        self,
        *,
        agent_python: str = sys.executable,
        agent_path: Path | None = None,
        on_line: LineHandler | None = None,
        shutdown_timeout: float = 15.0,
        kill_timeout: float = 5.0,
    ) -> None:
        self._agent_python = agent_python
        self._agent_path = agent_path
        self._on_line = on_line
        self._shutdown_timeout = shutdown_timeout
        self._kill_timeout = kill_timeout
        self._leases: dict[str, _Lease] = {}

    # -- offers

    async def search_offers(self, policy: SelectionPolicy) -> list[Offer]:
        """Exactly one offer, this machine. The policy is not applied: choosing `local`
        is choosing this machine, whatever it has."""
        gpus = await _probe_gpus()
        first = gpus[0] if gpus else {}
        name = str(first.get("name", "CPU only"))
        return [machine_offer(PROVIDER_NAME, OFFER_ID, name, gpus, "this machine")]

    # -- lease lifecycle

    async def create(self, offer: Offer, request: CreateRequest) -> CreateResult:
        """Starts the agent with `request.env`; a bad model setting is rejected first."""
        if offer.provider != PROVIDER_NAME:
            return CreateResult(
                Outcome.REJECTED, detail=f"offer {offer.offer_id} is from {offer.provider}"
            )
        problem = model_problem(request.env)
        if problem:
            return CreateResult(Outcome.REJECTED, detail=problem)
        env = agent_environment(os.environ, request.env)
        try:
            # The zipapp every node runs (found in the cache, else built: milliseconds).
            agent_path = self._agent_path or agent_zip()
            argv = [self._agent_python, str(agent_path)]
            agent = await AgentProcess.start(argv, env, self._on_line)
        except OSError as exc:
            return CreateResult(
                Outcome.REJECTED,
                detail=f"cannot start the node agent with {self._agent_python}: "
                f"{exc.strerror or exc}; fix: check that Python exists and that the node agent's "
                "zipapp can be written under ~/.cache/mvp-tui/agent (or XDG_CACHE_HOME)",
            )
        provider_id = f"local-{agent.pid}"
        self._leases[provider_id] = _Lease(provider_id, request.label, agent)
        return CreateResult(Outcome.CREATED, provider_id=provider_id, detail=f"pid {agent.pid}")

    async def get(self, provider_id: str) -> LeaseStatus:
        lease = self._leases.get(provider_id)
        if lease is None:
            return LeaseStatus(provider_id, None, LeaseState.GONE, raw_state="unknown")
        return _status(lease)

    async def list_by_label(self, prefix: str) -> list[LeaseStatus]:
        return [
            _status(lease)
            for lease in self._leases.values()
            if lease.label.startswith(prefix) and not lease.destroyed
        ]

    async def destroy(self, provider_id: str) -> DestroyResult:
        """Stops the agent (shutdown, then TERM, then KILL) and everything it started."""
        lease = self._leases.get(provider_id)
        if lease is None or lease.destroyed:
            return DestroyResult(DestroyOutcome.GONE, detail=f"no local node {provider_id}")
        try:
            report = await lease.agent.stop(self._shutdown_timeout, self._kill_timeout)
        except PermissionError as exc:
            return DestroyResult(DestroyOutcome.FAILED, detail=f"cannot stop {provider_id}: {exc}")
        lease.destroyed = True
        return DestroyResult(DestroyOutcome.ACCEPTED, detail=report.describe())

    async def wait_exited(self, provider_id: str) -> int | None:
        """The agent's exit code once it has exited (the seed's `Exited` observation);
        None for an unknown lease. Wrap in a timeout: a healthy node runs until destroyed."""
        lease = self._leases.get(provider_id)
        if lease is None:
            return None
        return await lease.agent.wait_exited()

    async def aclose(self) -> None:
        """Stops every node still running: closing the provider never leaves a child."""
        live = [lease for lease in self._leases.values() if not lease.destroyed]
        await asyncio.gather(*(self.destroy(lease.provider_id) for lease in live))


def _status(lease: _Lease) -> LeaseStatus:
    code = lease.agent.returncode
    if lease.destroyed:
        state, raw, detail = LeaseState.GONE, "destroyed", ""
    elif code is None:
        state, raw, detail = LeaseState.RUNNING, "running", f"pid {lease.agent.pid}"
    else:
        state, raw, detail = LeaseState.DEAD, f"exited {code}", f"agent exited with code {code}"
    return LeaseStatus(
        provider_id=lease.provider_id,
        label=lease.label,
        state=state,
        raw_state=raw,
        ssh=None,
        price_per_hour=0.0,
        started_at=lease.agent.started_at,
        detail=detail,
    )


def model_problem(env: Mapping[str, str]) -> str | None:
    """Why the agent could not get a model with this env, or None. Checked before any
    process starts so a typo costs nothing."""
    local = env.get(AgentEnv.env_name("gguf_local_path"), "").strip()
    if local:
        path = Path(local).expanduser()
        problem = gguf_problem(path)
        if problem:
            return (
                f"{MODEL_KEY} = {path}: {problem}; fix: point [model] gguf_local_path at a "
                ".gguf file on this machine"
            )
        return None
    if not env.get(AgentEnv.env_name("gguf_repo"), "").strip():
        return (
            f"no model: {MODEL_KEY} is empty and no [model] gguf_repo / gguf_file is set; "
            "fix: set [model] gguf_local_path to a .gguf file"
        )
    return None


def agent_environment(
    inherited: Mapping[str, str], request_env: Mapping[str, str]
) -> dict[str, str]:
    """The agent's environment: ours without secrets, the request's env on top, and the
    instruction to stop when our end of its stdin closes (we crashed or exited)."""
    env = {k: v for k, v in inherited.items() if not is_secret_name(k)}
    env.update(request_env)
    env.update(AgentEnv(stdin_eof_shutdown=True).to_env())
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def machine_offer(
    provider: str, offer_id: str, gpu_name: str, gpus: list[dict[str, Any]], location: str
) -> Offer:
    """This machine as one $0 offer (its GPUs as probed, its CPU and memory)."""
    first = gpus[0] if gpus else {}
    return Offer(
        provider=provider,
        offer_id=offer_id,
        gpu_name=gpu_name,
        num_gpus=len(gpus),
        gpu_ram_mib=int(first.get("memory_mib", 0)),
        price_per_hour=0.0,
        reliability=1.0,
        down_mbps=0.0,
        up_mbps=0.0,
        location=location,
        host_id=one_line_ascii(socket.gethostname(), 64),
        verified=True,
        cpu=f"{cpu_model()} ({os.cpu_count() or 0} cores)",
        ram_mib=ram_mib(),
    )


async def _probe_gpus() -> list[dict[str, Any]]:
    """GPUs from nvidia-smi when installed; none when it is absent or fails."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return []
    try:
        proc = await asyncio.create_subprocess_exec(
            exe,
            "--query-gpu=name,memory.total",
            "--format=csv,noheader",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )
    except OSError:
        return []
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), NVIDIA_SMI_TIMEOUT_S)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        return []
    if proc.returncode != 0:
        return []
    return list(parse_nvidia_smi(out.decode("utf-8", "replace")))


def build(config: Config, on_line: LineHandler | None = None) -> LocalProvider:
    """The kind's factory (providers/local/kind.py): nothing to configure."""
    return LocalProvider(on_line=on_line)
