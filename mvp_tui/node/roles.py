"""Roles of a multi-node run (llama.cpp's RPC backend): workers and the main node."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mvp_tui.node.agent import Agent
from mvp_tui.node.control import Control, Interrupted, PhaseFailed, ms_since
from mvp_tui.node.engine import Engine, EngineSpec, _die_with_parent_hook, pick_free_port
from mvp_tui.node.frames import Emitter, clean_text
from mvp_tui.node.offload import parse_buffer_line
from mvp_tui.node.probe import probe_environment
from mvp_tui.node.settings import (
    ENGINE_HOST,
    EXIT_CONFIG,
    RPC_HOST,
    ConfigError,
    Settings,
)
from mvp_tui.node.slots import slot_plan
from mvp_tui.node.switch import Watchdog
from mvp_tui.node_protocol import RPC_SERVER_READY, BootEnv, RoleEnv
from mvp_tui.secrets import is_secret_name

# ---------------------------------------------------------------------------------------
# Roles of a multi-node run (llama.cpp's RPC backend): one main node runs llama-server with
# `--rpc` listing the workers; each worker runs ggml-rpc-server bound to loopback (the RPC
# protocol has no authentication: its port is reached through loopback or an SSH tunnel only).

ROLE_SINGLE = "single"
ROLE_MAIN = "main"
ROLE_WORKER = "worker"
RPC_SERVER_BIN = "ggml-rpc-server"
LLAMA_SERVER_BIN = "llama-server"
# Where scripts/llama-rpc-build.sh caches what it builds: $MVP_LLAMA_CACHE (default
# ~/.cache/mvp-tui)/llama.cpp-<version>/bin.
RPC_BUILD_CACHE_ENV = BootEnv.env_name("llama_cache")
RPC_BUILD_CACHE = "~/.cache/mvp-tui"
RPC_BIN_FIX = (
    "build them once with `scripts/llama-rpc-build.sh` (in the mvp-tui source tree; about 7 "
    "minutes on 2 cores), which caches them where every node of this machine finds them "
    f"({RPC_BUILD_CACHE}/llama.cpp-<version>/bin); or build llama.cpp with -DGGML_RPC=ON and "
    "put its bin directory in MVP_RPC_BIN_DIR or on PATH"
)
RPC_PROBE_TIMEOUT_S = 1.0
PLACEMENT_GRACE_S = 10.0  # how long the placement proof waits for the log reader to catch up


class RoleSettings:
    """A multi-node role (`RoleEnv`), parsed once, with what follows from it (ConfigError
    names the key and the fix)."""

    def __init__(self, env: Mapping[str, str]) -> None:
        read = RoleEnv.from_env(env)
        self.role = read.role
        self.bin_dir = read.rpc_bin_dir
        self.rpc_port = read.rpc_port
        self.rpc_servers = list(read.rpc_servers)
        self.rpc_nodes = list(read.rpc_nodes)
        self.tensor_split = read.tensor_split
        self.gpu_layers = read.gpu_layers
        self.tunnel_pubkey = read.tunnel_pubkey
        self.authorized_keys = read.authorized_file or os.path.join(
            os.path.expanduser("~"), ".ssh", "authorized_keys"
        )
        self.tunnels = list(read.tunnels)
        self.tunnel_key = read.tunnel_key
        self.known_hosts = read.known_hosts
        for tunnel in self.tunnels:
            _split_tunnel(tunnel)
        if self.tunnels and (len(self.tunnels) != len(self.rpc_servers) or not self.tunnel_key):
            raise ConfigError(
                f"{_name('tunnels')} needs one entry per {_name('rpc_servers')} entry and "
                f"{_name('tunnel_key')}; fix: let the dashboard start the main node"
            )
        for endpoint in self.rpc_servers:
            _split_endpoint(endpoint)
        if self.role == ROLE_MAIN and not self.rpc_servers:
            raise ConfigError(
                f"{_name('role')}=main needs {_name('rpc_servers')} (host:port of each worker, "
                "comma-separated); fix: start the main node after its workers"
            )
        if self.rpc_nodes and len(self.rpc_nodes) != len(self.rpc_servers):
            raise ConfigError(
                f"{_name('rpc_nodes')} names {len(self.rpc_nodes)} nodes for "
                f"{len(self.rpc_servers)} {_name('rpc_servers')}; fix: one node id per server"
            )
        if self.tensor_split and not re.fullmatch(r"[0-9.]+(,[0-9.]+)*", self.tensor_split):
            raise ConfigError(
                f"{_name('tensor_split')}={self.tensor_split!r} is not a list of proportions; "
                "fix: comma-separated numbers, e.g. 3,1"
            )

    def worker_name(self, index: int) -> str:
        """How a failure names the worker behind `--rpc` entry `index`."""
        endpoint = self.rpc_servers[index]
        if index < len(self.rpc_nodes):
            return f"worker node {self.rpc_nodes[index]} (RPC {endpoint})"
        return f"worker RPC {endpoint}"


def _name(field: str) -> str:
    return RoleEnv.env_name(field)


def _split_endpoint(endpoint: str) -> tuple[str, int]:
    host, sep, port = endpoint.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(
            f"{_name('rpc_servers')} entry {endpoint!r} is not host:port; fix: e.g. "
            "127.0.0.1:50052"
        )
    return host, int(port)


def _split_tunnel(tunnel: str) -> tuple[str, str, int]:
    """`user@host:port` → (user, host, port): how the main node reaches a worker's sshd."""
    user, at, rest = tunnel.partition("@")
    host, sep, port = rest.rpartition(":")
    if not at or not user or not sep or not host or not port.isdigit():
        raise ConfigError(
            f"{_name('tunnels')} entry {tunnel!r} is not user@host:port; fix: e.g. "
            "root@1.2.3.4:22"
        )
    return user, host, int(port)


def built_bin_dirs(env: Mapping[str, str]) -> list[str]:
    """The bin directories scripts/llama-rpc-build.sh filled, newest version first."""
    base = os.path.expanduser(env.get(RPC_BUILD_CACHE_ENV, "").strip() or RPC_BUILD_CACHE)
    found = [str(p) for p in Path(base).glob("llama.cpp-*/bin") if p.is_dir()]
    return sorted(found, key=_version_key, reverse=True)


def _version_key(path: str) -> tuple[int, ...]:
    version = Path(path).parent.name.rpartition("-")[2]
    return tuple(int(part) for part in re.findall(r"\d+", version))


def find_engine_binary(
    name: str, bin_dir: str, env: Mapping[str, str] | None = None
) -> str:
    """The path of a llama.cpp binary: MVP_RPC_BIN_DIR first, then the project's own build
    (scripts/llama-rpc-build.sh's cache, built with RPC), then PATH."""
    env = os.environ if env is None else env
    dirs = [os.path.expanduser(bin_dir)] if bin_dir else []
    for directory in [*dirs, *built_bin_dirs(env)]:
        candidate = os.path.join(directory, name)
        if os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which(name)
    if found:
        return found
    where = f"{_name('rpc_bin_dir')}={bin_dir}, " if bin_dir else ""
    cache = env.get(RPC_BUILD_CACHE_ENV, "").strip() or RPC_BUILD_CACHE
    raise PhaseFailed(
        f"this node cannot take its role: {name} is not in {where}the build cache "
        f"({cache}/llama.cpp-*/bin) or PATH",
        fix=RPC_BIN_FIX,
    )


def rpc_reachable(endpoint: str, timeout: float = RPC_PROBE_TIMEOUT_S) -> bool:
    """A TCP connect to a worker (harmless: the server reads EOF and waits for the next)."""
    host, port = _split_endpoint(endpoint)
    try:
        with socket.create_connection((host, port), timeout):
            return True
    except OSError:
        return False


class RpcWorkerEngine(Engine):
    # A queued client that leaves would kill ggml-rpc-server with SIGPIPE.
    restore_signals = False

    def stop(self, timeout: float) -> dict[str, Any]:
        # A frozen (SIGSTOPped) server only acts on SIGTERM once it runs again.
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(OSError):
                self.proc.send_signal(signal.SIGCONT)
        return super().stop(timeout)


class WorkerAgent(Agent):
    """A worker node: ggml-rpc-server on loopback, reported once it accepts connections."""

    def __init__(self, *args: Any, role: RoleSettings, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.role = role
        self.endpoint = ""

    def run(self) -> int:
        s = self.settings
        try:
            self._phase("config", lambda: {**s.summary(self.env), "role": ROLE_WORKER})
            if self.watchdog is not None:
                self.watchdog.report_verdict()
            self._phase("probe", lambda: probe_environment(s, serves=False))
            self._phase("engine_start", self._start_rpc_server)
            if self.role.tunnel_pubkey:  # before it is reported: the main tunnels right away
                self._phase("rpc_authorize", self._authorize_tunnel)
            self._phase("engine_health", self._wait_listening)
            return self._watch()
        except Interrupted:
            return self._shutdown()
        except PhaseFailed as failure:
            return self.fail(failure)

    def _start_rpc_server(self) -> dict[str, Any]:
        binary = find_engine_binary(RPC_SERVER_BIN, self.role.bin_dir)
        port = self.role.rpc_port or pick_free_port()
        threads = self.settings.engine_threads or 1
        argv = [binary, "-H", RPC_HOST, "-p", str(port), "-t", str(threads)]
        spec = EngineSpec(RPC_SERVER_BIN, argv, "", port)
        self.endpoint = f"{RPC_HOST}:{port}"
        engine = RpcWorkerEngine(spec, self.emitter, self.control)
        self.engine = engine
        env = {k: v for k, v in self.env.items() if not is_secret_name(k)}
        pid = engine.start(env, _engine_cwd(self.settings.cache_dir))
        return {"engine": RPC_SERVER_BIN, "pid": pid, "port": port, "argv": argv}

    def _wait_listening(self) -> dict[str, Any]:
        assert self.engine is not None
        started = time.monotonic()
        deadline = started + self.settings.ready_timeout_s
        while not rpc_reachable(self.endpoint):
            if time.monotonic() >= deadline:
                raise PhaseFailed(
                    f"{RPC_SERVER_BIN} did not listen on {self.endpoint} within "
                    f"{self.settings.ready_timeout_s:g} s",
                    fix="raise MVP_ENGINE_READY_TIMEOUT_S or read the engine log channel",
                    detail={"last_log_lines": list(self.engine.last_lines)},
                )
            event = self.control.wait(0.05)
            if self.control.stop_requested:
                raise Interrupted()
            if event is not None and event[0] == Control.ENGINE_EXIT:
                raise self._engine_died(event[1], "before it listened")
        load_ms = ms_since(started)
        proc = self.engine.proc
        self.emitter.weights(
            RPC_SERVER_READY,
            endpoint=self.endpoint,
            port=self.engine.spec.port,
            engine=RPC_SERVER_BIN,
            engine_pid=proc.pid if proc else None,
            load_ms=load_ms,
        )
        return {"endpoint": self.endpoint, "load_ms": load_ms}

    def _tunnel_line(self) -> str:
        port = int(self.endpoint.rpartition(":")[2])
        return tunnel_line(port, self.role.tunnel_pubkey, self.settings.run_id)

    def _authorize_tunnel(self) -> dict[str, Any]:
        path = Path(self.role.authorized_keys)
        try:  # an earlier run's (or attempt's) tunnel lines go: a key of theirs opens nothing
            edit_authorized_keys(path, add=self._tunnel_line(), sweep=is_tunnel_line)
        except OSError as exc:
            raise PhaseFailed(
                f"cannot authorize the run's tunnel key in {path}: {exc.strerror or exc}",
                fix="make ~/.ssh/authorized_keys writable on the worker, or set "
                f"{_name('authorized_file')}",
            ) from None
        return {"authorized_keys": str(path), "permitopen": self.endpoint}

    def stop_engine(self) -> dict[str, Any]:
        if self.role.tunnel_pubkey and self.endpoint:
            with contextlib.suppress(OSError):
                edit_authorized_keys(Path(self.role.authorized_keys), remove=self._tunnel_line())
        return super().stop_engine()

    def _engine_died(self, code: int | None, when: str) -> PhaseFailed:
        failure = super()._engine_died(code, when)
        failure.reason = (
            f"worker node {self.settings.node_id} ({RPC_SERVER_BIN} on {self.endpoint}): "
            f"{failure.reason}"
        )
        failure.detail["worker_node"] = self.settings.node_id
        return failure


TUNNEL_MARK = "mvp-tui-tunnel"  # the comment of every tunnel key line a worker writes
# Port forwarding to the RPC port only: no shell, pty, agent or X11 (restrict), no other
# port to open (permitopen), and no port to listen on: `port-forwarding` allows -R too, and
# authorized_keys has no permitlisten="none" (sshd refuses the key outright), so listening
# is limited to loopback port 1, where nothing serves.
_TUNNEL_OPTIONS = (
    'restrict,port-forwarding,permitopen="{host}:{port}",permitlisten="{host}:1",'
    'command="/bin/false"'
)
_TUNNEL_LINE = re.compile(  # this options string, or the one before permitlisten
    r'restrict,port-forwarding,permitopen="127\.0\.0\.1:[0-9]+",'
    r'(permitlisten="127\.0\.0\.1:1",)?command="/bin/false" \S+ \S+( .*)?'
)


def tunnel_line(port: int, public_key: str, run_id: str) -> str:
    """The worker's authorized_keys line for the run's tunnel key (its type and blob; any
    comment replaced by the mark and the run)."""
    kind, blob = public_key.split()[:2]
    run = re.sub(r"[^A-Za-z0-9._-]", "_", run_id) or "run"
    options = _TUNNEL_OPTIONS.format(host=RPC_HOST, port=port)
    return f"{options} {kind} {blob} {TUNNEL_MARK}:{run}"


def is_tunnel_line(line: str) -> bool:
    """A tunnel line a worker wrote (this run's, or one left by a worker that was killed)."""
    return _TUNNEL_LINE.fullmatch(line.strip()) is not None


def edit_authorized_keys(
    path: Path, *, add: str = "", remove: str = "", sweep: Any = None
) -> None:
    """Add or remove one line of an authorized_keys file, written atomically, mode 0600;
    `sweep(line)` true: that line goes too (but the one added)."""
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        lines = []
    kept = [line for line in lines if not remove or line != remove]
    if sweep is not None:
        kept = [line for line in kept if line == add or not sweep(line)]
    if add and add not in kept:
        kept.append(add)
    if kept == lines:
        return
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.mvp-{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write("".join(f"{line}\n" for line in kept))
    os.replace(tmp, path)


def _engine_cwd(cache_dir: Path) -> Path:
    return cache_dir if cache_dir.is_dir() else Path.cwd()


class MainAgent(Agent):
    """The main node: llama-server with `--rpc` over the workers; ready only once its log
    shows model buffers on every worker (the "offloaded N/N layers" line is printed even
    when everything stayed here)."""

    def __init__(self, *args: Any, role: RoleSettings, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.role = role
        self.tunnels = Tunnels(self.emitter, self.settings.cache_dir)
        self.placement: dict[str, float] = {}
        # Notified per buffer line: the log is read by another thread, which may still be
        # behind when /health already answers (the lines come before the port opens).
        self._placement_lock = threading.Condition()

    def _start_engine(self, model: Path) -> dict[str, Any]:
        role = self.role
        binary = find_engine_binary(LLAMA_SERVER_BIN, role.bin_dir)
        if role.tunnels:
            role.rpc_servers = self.tunnels.open(role)
        s = self.settings
        # Behind the gate like a single node (the key, the Host check, the idle stop): the
        # engine on a private loopback port, checking the key itself too.
        gated = self._gate_wanted()
        host = ENGINE_HOST if gated else s.engine_host
        port = pick_free_port() if gated or not s.engine_port else s.engine_port
        argv = [binary, "-m", str(model), "--host", host, "--port", str(port)]
        argv += ["-a", self._alias(), "--rpc", ",".join(role.rpc_servers)]
        # -lv 4: the load log (the per-device `model buffer size` lines) is info level 4.
        argv += ["-ngl", str(role.gpu_layers), "-lv", "4"]
        argv += ["--tensor-split", role.tensor_split] if role.tensor_split else []
        # Slots as on one node, but no node here knows the whole cluster's memory: unset
        # [model] parallel is one slot.
        slots = slot_plan(kind=LLAMA_SERVER_BIN, parallel=s.parallel, memory_mib=0,
                          need_mib=0, kv_slot_mib=0)
        argv += ["-np", str(slots.slots)]
        argv += ["-c", str(s.max_context * slots.slots)] if s.max_context else []
        argv += ["-t", str(s.engine_threads)] if s.engine_threads else []
        for index, endpoint in enumerate(role.rpc_servers):
            if not rpc_reachable(endpoint):
                raise PhaseFailed(
                    f"{role.worker_name(index)} does not answer: llama-server would abort",
                    fix="read that worker's channels (mvp.node.<id>.agent) for why",
                    detail={"worker": endpoint},
                )
        spec = EngineSpec(LLAMA_SERVER_BIN, argv, "/health", port, at_once=slots)
        engine = Engine(spec, self.emitter, self.control)
        engine.on_line = self._on_engine_line
        self.engine = engine
        if s.api_key:  # passed on purpose (the filter below drops *KEY* names)
            self._engine_key = spec.env["LLAMA_API_KEY"] = s.api_key
        env = {k: v for k, v in self.env.items() if not is_secret_name(k)}
        pid = engine.start(env, model.parent if model.parent.is_dir() else Path.cwd())
        return {"engine": spec.kind, "pid": pid, "port": port, "argv": argv, "role": ROLE_MAIN}

    def stop_engine(self) -> dict[str, Any]:
        detail = super().stop_engine()
        self.tunnels.close()
        return detail

    def _on_engine_line(self, text: str) -> None:
        parsed = parse_buffer_line(text)
        if parsed is not None:
            device, mib = parsed
            with self._placement_lock:
                self.placement[device] = self.placement.get(device, 0.0) + mib
                self._placement_lock.notify_all()

    def _missing_workers(self) -> list[str]:
        return [
            self.role.worker_name(i)
            for i, endpoint in enumerate(self.role.rpc_servers)
            if self.placement.get(endpoint, 0.0) <= 0.0
        ]

    def _report_loaded(self, kind: str, **fields: Any) -> None:
        with self._placement_lock:
            # Bounded: the log reader catches up in well under this on a loaded machine.
            self._placement_lock.wait_for(lambda: not self._missing_workers(), PLACEMENT_GRACE_S)
            placement = dict(self.placement)
            missing = self._missing_workers()
        if missing:
            raise PhaseFailed(
                f"llama-server serves, but its log shows no model buffer on {', '.join(missing)}: "
                "the layers stayed on the main node",
                fix="check -ngl / MVP_TENSOR_SPLIT and the workers' devices",
                detail={"placement_mib": placement},
            )
        self.emitter.weights(kind, **fields, placement_mib=placement, role=ROLE_MAIN)

    def _engine_died(self, code: int | None, when: str) -> PhaseFailed:
        failure = super()._engine_died(code, when)
        lost = [
            self.role.worker_name(i)
            for i, endpoint in enumerate(self.role.rpc_servers)
            if not rpc_reachable(endpoint)
        ]
        if lost:
            failure.reason = f"lost {', '.join(lost)}: {failure.reason}"
            failure.detail["lost_workers"] = lost
        return failure


class Tunnels:
    """`ssh -N -L` from the main node to each worker's loopback RPC port, with the run's key
    (written 0600 for ssh, removed at exit) and the workers' pinned host keys."""

    def __init__(self, emitter: Emitter, cache_dir: Path) -> None:
        self.emitter = emitter
        self.dir = cache_dir / f"tunnels-{os.getpid()}"
        self.procs: list[subprocess.Popen[bytes]] = []

    def open(self, role: RoleSettings) -> list[str]:
        """The local endpoints that reach the workers, in `--rpc` order."""
        ssh = shutil.which("ssh")
        if ssh is None:
            raise PhaseFailed(
                "this main node has remote workers but no ssh client (ssh is not on PATH)",
                fix="use an image with openssh-client installed",
            )
        self.dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        key = self.dir / "id"
        fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(role.tunnel_key.strip() + "\n")
        known = self.dir / "known_hosts"
        known.write_text(role.known_hosts.strip() + "\n")
        local = []
        # RoleSettings checked the lengths agree; zip's strict= needs Python 3.10.
        pairs = zip(role.tunnels, role.rpc_servers)  # noqa: B905
        for index, (tunnel, target) in enumerate(pairs):
            user, host, port = _split_tunnel(tunnel)
            local_port = pick_free_port()
            argv = [ssh, "-N", "-T", "-i", str(key), "-p", str(port),
                    "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes",
                    "-o", "ExitOnForwardFailure=yes", "-o", "StrictHostKeyChecking=yes",
                    "-o", f"UserKnownHostsFile={known}", "-o", "ServerAliveInterval=5",
                    "-L", f"{ENGINE_HOST}:{local_port}:{target}", f"{user}@{host}"]
            proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE, preexec_fn=_die_with_parent_hook(),
            )
            self.procs.append(proc)
            endpoint = f"{ENGINE_HOST}:{local_port}"
            self._wait(proc, endpoint, role.worker_name(index))
            local.append(endpoint)
        return local

    def _wait(self, proc: subprocess.Popen[bytes], endpoint: str, name: str) -> None:
        deadline = time.monotonic() + 30.0
        while not rpc_reachable(endpoint):
            if proc.poll() is not None or time.monotonic() >= deadline:
                err = (
                    proc.stderr.read().decode("utf-8", "replace")
                    if proc.poll() is not None and proc.stderr
                    else ""
                )
                raise PhaseFailed(
                    f"the SSH tunnel to {name} did not open: "
                    f"{clean_text(err.strip(), 300, redact=self.emitter.redact) or 'timed out'}",
                    fix="check that the worker is up and authorized the run's tunnel key",
                )
            time.sleep(0.05)  # ssh has no readiness signal but its listening port

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        self.procs = []
        shutil.rmtree(self.dir, ignore_errors=True)


def agent_for_role(
    env: Mapping[str, str],
    settings: Settings,
    emitter: Emitter,
    control: Control,
    watchdog: Watchdog | None,
) -> Agent:
    """The agent for MVP_NODE_ROLE; a bad role setting becomes an agent that fails its
    config phase (exit 2) with the reason."""
    try:
        role = RoleSettings(env)
    except ConfigError as exc:
        return _ConfigFailedAgent(env, settings, emitter, control, watchdog, error=exc)
    if role.role == ROLE_WORKER:
        return WorkerAgent(env, settings, emitter, control, watchdog, role=role)
    if role.role == ROLE_MAIN:
        return MainAgent(env, settings, emitter, control, watchdog, role=role)
    return Agent(env, settings, emitter, control, watchdog)


class _ConfigFailedAgent(Agent):
    def __init__(self, *args: Any, error: ConfigError, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.error = error

    def run(self) -> int:
        def refuse() -> dict[str, Any]:
            raise self.error

        try:
            self._phase("config", refuse)
        except PhaseFailed as failure:
            return self.fail(failure)
        return EXIT_CONFIG  # not reached: the phase always fails


