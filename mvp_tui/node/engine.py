"""The engine: llama.cpp's server (or the llama_cpp package) as a child process, its log as
frames, its readiness."""

from __future__ import annotations

import collections
import importlib.util
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mvp_tui.node.control import SCOPE_RUN, Control, PhaseFailed
from mvp_tui.node.engine_lines import PrivateLines
from mvp_tui.node.frames import Emitter, clean_text
from mvp_tui.node.settings import ENGINE_HOST, LAST_LINES_KEPT, Settings
from mvp_tui.node.slots import SlotPlan, node_memory_mib, slot_plan
from mvp_tui.node_protocol import RENTED_IMAGE, AgentEnv

if TYPE_CHECKING:
    pass

# ---------------------------------------------------------------------------------------
# Engine


class EngineSpec:
    """How to start the engine and how to tell it is ready."""

    def __init__(
        self,
        kind: str,
        argv: list[str],
        ready_path: str,
        port: int,
        env: Mapping[str, str] | None = None,
        at_once: SlotPlan | None = None,
    ) -> None:
        self.kind = kind
        self.argv = argv
        self.ready_path = ready_path
        self.port = port
        self.env = dict(env or {})  # added to the agent's environment for the engine
        # The requests it serves at once (its slots), and why (None: a user's command, unknown).
        self.at_once = at_once

    @property
    def base_url(self) -> str:
        return f"http://{ENGINE_HOST}:{self.port}"

    @property
    def key_env(self) -> str | None:
        """The environment variable this engine reads its API key from (never argv, which
        every local user can read): llama-server's LLAMA_API_KEY, or llama-cpp-python's
        API_KEY (its ServerSettings are pydantic settings, filled from the environment)."""
        return ENGINE_KEY_ENV.get(self.kind)


ENGINE_KEY_ENV = {"llama-server": "LLAMA_API_KEY", "llama-cpp-python": "API_KEY"}


def pick_free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((ENGINE_HOST, 0))
        port: int = sock.getsockname()[1]
        return port


def engine_spec(
    settings: Settings, model: Path, alias: str, gpus: list[dict[str, Any]] | None = None
) -> EngineSpec:
    """The engine command: MVP_ENGINE_CMD, else llama-server on PATH, else llama_cpp.server;
    llama-server with its slots sized for this node (`gpus`: its GPUs; none: its RAM)."""
    port = settings.engine_port or pick_free_port()
    ctx = settings.max_context
    threads = settings.engine_threads

    def plan(kind: str) -> SlotPlan:
        return slot_plan(kind=kind, parallel=settings.parallel,
                         memory_mib=node_memory_mib(gpus or []),
                         need_mib=settings.vram_need_mib, kv_slot_mib=settings.kv_slot_mib)

    if settings.engine_cmd:
        asked = plan("custom") if "{parallel}" in settings.engine_cmd else None
        values = {
            "{model}": str(model),
            "{host}": settings.engine_host,
            "{port}": str(port),
            "{ctx}": str(ctx),
            "{parallel}": str(asked.slots if asked is not None else 1),
            "{alias}": alias,
            "{python}": sys.executable,
        }
        argv = []
        for arg in shlex.split(settings.engine_cmd):
            for key, value in values.items():
                arg = arg.replace(key, value)
            argv.append(arg)
        kind = settings.engine_kind or (
            "llama-server" if os.path.basename(argv[0]) == "llama-server" else "custom"
        )
        ready = "/health" if kind == "llama-server" else "/v1/models"
        return EngineSpec(kind, argv, ready, port, at_once=asked)
    server = find_llama_server()
    if server:
        host = settings.engine_host
        slots = plan("llama-server")
        argv = [server, "-m", str(model), "--host", host, "--port", str(port), "-a", alias]
        argv += ["-np", str(slots.slots)]
        # llama-server splits -c over its slots: each keeps the whole [model] max_context.
        argv += ["-c", str(ctx * slots.slots)] if ctx else []
        argv += ["-t", str(threads)] if threads else []
        return EngineSpec("llama-server", argv, "/health", port, env=_beside_libs(server),
                          at_once=slots)
    if importlib.util.find_spec("llama_cpp") is not None:
        argv = [sys.executable, "-m", "llama_cpp.server", "--model", str(model)]
        argv += ["--host", settings.engine_host, "--port", str(port)]
        argv += ["--interrupt_requests", "False"]
        argv += ["--model_alias", alias]
        argv += ["--n_ctx", str(ctx)] if ctx else []
        argv += ["--n_threads", str(threads)] if threads else []
        return EngineSpec("llama-cpp-python", argv, "/v1/models", port,
                          at_once=plan("llama-cpp-python"))
    raise no_engine()


def no_engine() -> PhaseFailed:
    return PhaseFailed(
        "this image lacks a serving engine: llama-server is neither on PATH nor at "
        f"{', '.join(KNOWN_LLAMA_SERVERS)}, and the llama_cpp package is not installed for "
        f"{sys.executable}",
        fix=f"use an image that holds llama.cpp's server (the default for rented nodes is "
        f"{RENTED_IMAGE_HINT}), install it (pip install 'llama-cpp-python[server]'), or set "
        f"{AgentEnv.env_name('engine_cmd')}",
        scope=SCOPE_RUN,
    )


# What llama.cpp (and llama-cpp-python) print when the model file itself cannot be read; a
# load that fails for memory (too small a GPU) is the host's, not the file's.
_MODEL_UNREADABLE = ("error loading model", "failed to load model", "gguf_init_from_file",
                     "invalid magic", "failed to read magic")
_MEMORY_WORDS = ("alloc", "out of memory", "cuda", "vram")


def model_unreadable(lines: list[str]) -> bool:
    """The engine's last lines say the model file is unreadable (not a memory failure)."""
    text = "\n".join(lines).lower()
    return any(m in text for m in _MODEL_UNREADABLE) and not any(
        w in text for w in _MEMORY_WORDS
    )


# llama.cpp's own images (the "full" and "server" targets) keep llama-server in /app, off PATH.
KNOWN_LLAMA_SERVERS = ("/app/llama-server",)
RENTED_IMAGE_HINT = RENTED_IMAGE  # the pinned default (node_protocol.py)


def find_llama_server() -> str | None:
    """llama-server on PATH, else where llama.cpp's images keep it."""
    found = shutil.which("llama-server")
    if found:
        return found
    return next((p for p in KNOWN_LLAMA_SERVERS if os.access(p, os.X_OK)), None)


def _beside_libs(server: str) -> dict[str, str]:
    """llama.cpp's images copy its shared libraries next to the binaries (in /app), which
    is on no loader path; a server found off PATH gets that directory on LD_LIBRARY_PATH."""
    if shutil.which("llama-server") == server:
        return {}
    here = os.path.dirname(server)
    before = os.environ.get("LD_LIBRARY_PATH", "")
    return {"LD_LIBRARY_PATH": here + (os.pathsep + before if before else "")}


def cuda_runtime_missing(gpus: list[dict[str, Any]]) -> bool:
    """GPUs are visible but no CUDA runtime library is: a CUDA engine would fall back to
    the CPU (llama.cpp loads its CUDA backend only when libcudart and libcublas load)."""
    if not gpus:
        return False
    try:
        done = subprocess.run(
            ["ldconfig", "-p"], capture_output=True, timeout=10, check=False, text=True
        )
    except (OSError, subprocess.TimeoutExpired):
        return False  # cannot tell: say nothing rather than something wrong
    return done.returncode == 0 and "libcudart.so" not in done.stdout


LACKS_ENGINE = "engine (llama-server or the llama_cpp package)"


def engine_found(engine_cmd: str) -> str | None:
    """Which engine `engine_spec` starts here, in words (MVP_ENGINE_CMD's program, else
    llama-server, else the llama_cpp package), or None when there is none."""
    if engine_cmd:
        program = engine_cmd.split()[0] if engine_cmd.split() else engine_cmd
        return f"{AgentEnv.env_name('engine_cmd')} ({program})"
    server = find_llama_server()
    if server is not None:
        return f"llama-server at {server}"
    package = importlib.util.find_spec("llama_cpp")
    if package is not None:
        return f"the llama_cpp package ({package.origin}) for {sys.executable}"
    return None


def has_engine(settings: Settings) -> bool:
    return engine_found(settings.engine_cmd) is not None


def image_lacks(
    settings: Settings, gpus: list[dict[str, Any]], *, serves: bool = True
) -> list[str]:
    """What this image lacks for the agent's job, named for the first record."""
    lacks: list[str] = []
    if serves and not has_engine(settings):
        lacks.append(LACKS_ENGINE)
    if cuda_runtime_missing(gpus):
        lacks.append("CUDA runtime (libcudart): the engine would run on the CPU")
    return lacks


def _die_with_parent_hook() -> Callable[[], None] | None:
    """A preexec hook that makes the engine die with the agent (Linux prctl), resolved
    before fork so the child only makes one libc call."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    pr_set_pdeathsig = 1

    def hook() -> None:
        prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0)

    return hook


class Engine:
    """The running engine process, its log forwarder and its exit watcher."""

    # Python ignores SIGPIPE and Popen resets it in the child; a role may keep it ignored.
    restore_signals = True

    def __init__(self, spec: EngineSpec, emitter: Emitter, control: Control) -> None:
        self.spec = spec
        self.emitter = emitter
        self.control = control
        self.last_lines: collections.deque[str] = collections.deque(maxlen=LAST_LINES_KEPT)
        self.stopping = False
        self.proc: subprocess.Popen[bytes] | None = None
        self._log_thread: threading.Thread | None = None
        self.on_line: Callable[[str], None] | None = None  # sees every cleaned log line

    def start(self, env: Mapping[str, str], cwd: Path) -> int:
        try:
            self.proc = subprocess.Popen(
                self.spec.argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env={**env, **self.spec.env},
                cwd=str(cwd),
                preexec_fn=_die_with_parent_hook(),
                restore_signals=self.restore_signals,
            )
        except OSError as exc:
            raise PhaseFailed(
                f"cannot start the engine {self.spec.argv[0]}: {exc.strerror or exc}",
                fix="check MVP_ENGINE_CMD or the engine installation",
                scope=SCOPE_RUN,
            ) from None
        self._log_thread = threading.Thread(target=self._forward_log, daemon=True)
        self._log_thread.start()
        threading.Thread(target=self._watch_exit, daemon=True).start()
        return self.proc.pid

    def _forward_log(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        private = PrivateLines()
        for raw in iter(self.proc.stdout.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            if not private.keep(line):  # a prompt or an answer, in a debug log line
                continue
            text = clean_text(line, redact=self.emitter.redact)  # redacted before it is cut
            self.last_lines.append(text)
            if self.on_line is not None:
                self.on_line(text)
            self.emitter.engine_line(text)
            if READY_HINT.search(text):
                self.control.nudge()  # the health loop probes at once instead of next poll

    def _watch_exit(self) -> None:
        assert self.proc is not None
        code = self.proc.wait()
        if not self.stopping:
            self.control.engine_exited(code)

    def flush_log(self, timeout: float = 2.0) -> None:
        """Wait until the engine's last log lines have been forwarded."""
        if self._log_thread is not None:
            self._log_thread.join(timeout)

    @property
    def exit_code(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def stop(self, timeout: float) -> dict[str, Any]:
        """Terminate, wait, kill: the engine is gone when this returns."""
        self.stopping = True
        if self.proc is None:
            return {"engine": "not started"}
        killed = False
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                killed = True
        self.flush_log()
        return {"engine_exit_code": self.proc.returncode, "killed": killed}


# Engine log lines after which readiness may have changed: uvicorn (llama-cpp-python) and
# llama-server announce their listening socket, llama-server then its loaded model.
READY_HINT = re.compile(
    r"Uvicorn running on|server is listening on|HTTP server listening|model loaded"
    r"|all slots are idle"
)
HEALTH_POLL_FIRST_S = 0.02  # the fallback poll, for engines that say none of that
HEALTH_POLL_MAX_S = 0.25


def probe_ready(url: str, key: str = "") -> tuple[str, int | None]:
    """One readiness probe: ("ready"|"loading"|"refused"|"http"|"error", status); with the
    engine's key when it checks one (llama-cpp-python's /v1/models does)."""
    import urllib.error
    import urllib.request

    # No proxy handler: the engine is on this node's loopback, where HTTP(S)_PROXY / ALL_PROXY
    # in the node's environment must not send the probe.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    request = urllib.request.Request(url)
    if key:
        request.add_header("Authorization", f"Bearer {key}")
    try:
        with opener.open(request, timeout=2) as response:
            response.read(65536)
            return ("ready" if response.status == 200 else "http"), response.status
    except urllib.error.HTTPError as exc:
        return ("loading" if exc.code == 503 else "http"), exc.code
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, ConnectionRefusedError):
            return "refused", None
        return "error", None
    except OSError:
        return "error", None


