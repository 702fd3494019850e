"""The agent's phases, in order: config, watchdog, probe, model, engine_start, engine_health,
watch, shutdown (the single-node role; `roles` adds the multi-node ones)."""

from __future__ import annotations

import copy
import errno
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from mvp_tui.node.cached_model import cached_problem, drop_cached
from mvp_tui.node.control import SCOPE_HOST, SCOPE_RUN, Control, Interrupted, PhaseFailed, ms_since
from mvp_tui.node.download import Downloader, gguf_problem, hub_url, model_cache_path
from mvp_tui.node.engine import (
    HEALTH_POLL_FIRST_S,
    HEALTH_POLL_MAX_S,
    LACKS_ENGINE,
    Engine,
    engine_spec,
    model_unreadable,
    no_engine,
    probe_ready,
)
from mvp_tui.node.frames import Emitter
from mvp_tui.node.gate import Gate
from mvp_tui.node.hub import DownloadError, hub_metadata
from mvp_tui.node.offload import LOG_GRACE_S, OffloadLog, OffloadPlan, offload_plan, offload_problem
from mvp_tui.node.prefetch import read_prefetch, stop_prefetch
from mvp_tui.node.probe import probe_environment
from mvp_tui.node.settings import (
    ENGINE_HOST,
    EXIT_CONFIG,
    EXIT_OK,
    LOCAL_PATH_KEY,
    ConfigError,
    Settings,
)
from mvp_tui.node.switch import Watchdog
from mvp_tui.node_protocol import WEIGHTS_LOADED, WORKER_FATAL
from mvp_tui.secrets import is_secret_name

# ---------------------------------------------------------------------------------------
# The agent


class Agent:
    """Runs the phases top to bottom and always leaves no engine behind."""

    def __init__(
        self,
        env: Mapping[str, str],
        settings: Settings,
        emitter: Emitter,
        control: Control,
        watchdog: Watchdog | None = None,
    ) -> None:
        self.env = env
        self.settings = settings
        self.emitter = emitter
        self.control = control
        self.watchdog = watchdog
        self.engine: Engine | None = None
        self.gate: Gate | None = None
        self._engine_key = ""  # the key the engine itself checks (llama-server, llama_cpp)
        self.gpus: list[dict[str, Any]] = []  # what the probe found (nvidia-smi)
        self.offload: OffloadPlan | None = None  # asked of llama-server on a node with GPUs
        self.offload_log = OffloadLog()

    def run(self) -> int:
        s = self.settings
        try:
            self._phase("config", lambda: s.summary(self.env))
            if self.watchdog is not None:
                self.watchdog.report_verdict()
            self._phase("probe", lambda: self._probe(s))
            model = self._phase_value("model", self._resolve_model)
            self._phase("engine_start", lambda: self._start_engine(model))
            self._phase("engine_health", self._wait_healthy)
            return self._watch()
        except Interrupted:
            return self._shutdown()
        except PhaseFailed as failure:
            return self.fail(failure)

    def _probe(self, settings: Settings) -> dict[str, Any]:
        """The node as found; an image without an engine fails here, before the model is
        downloaded, naming everything it lacks."""
        detail = probe_environment(settings)
        self.gpus = list(detail["gpus"])
        if LACKS_ENGINE in detail["lacks"]:
            failure = no_engine()
            lacks = "; ".join(detail["lacks"])
            raise PhaseFailed(
                f"{failure}; it lacks: {lacks}", failure.fix, detail=detail, scope=SCOPE_RUN
            )
        return detail

    # -- phase plumbing

    def _phase(self, name: str, body: Callable[[], dict[str, Any]]) -> None:
        self._phase_value(name, lambda: (None, body()))

    def _phase_value(self, name: str, body: Callable[[], tuple[Any, dict[str, Any]]]) -> Any:
        """Runs one phase: `started`, then `ready` with its detail or `failed` with why."""
        if self.control.stop_requested:
            raise Interrupted()
        self.emitter.phase(name, "started", {})
        started = time.monotonic()
        try:
            value, detail = body()
        except PhaseFailed as failure:
            failure.detail.setdefault("phase", name)
            self.emitter.phase(
                name,
                "failed",
                {"reason": failure.reason, "fix": failure.fix},
                ms_since(started),
            )
            raise
        except Interrupted:
            self.emitter.phase(
                name, "failed", {"reason": "interrupted by shutdown"}, ms_since(started)
            )
            raise
        except ConfigError as exc:
            self.emitter.phase(name, "failed", {"reason": str(exc)}, ms_since(started))
            raise PhaseFailed(str(exc), exit_code=EXIT_CONFIG, detail={"phase": name}) from None
        self.emitter.phase(name, "ready", detail, ms_since(started))
        return value

    def fail(self, failure: PhaseFailed) -> int:
        trigger = self.watchdog.close() if self.watchdog is not None else None
        self.emitter.weights(
            WORKER_FATAL,
            reason=failure.reason,
            fix=failure.fix,
            model_id=self._alias(),
            scope=failure.scope,
            **failure.detail,
        )
        self.stop_engine()
        if trigger is not None and self.watchdog is not None:
            self.watchdog.finish(trigger)  # the switch fired first: it still destroys
        self.emitter.phase(
            "agent_exit", "failed", {"exit_code": failure.exit_code, "reason": failure.reason}
        )
        return failure.exit_code

    # -- phases

    def _resolve_model(self) -> tuple[Path, dict[str, Any]]:
        s = self.settings
        if s.gguf_local_path:
            path = Path(s.gguf_local_path).expanduser()
            problem = gguf_problem(path)
            if problem:
                raise PhaseFailed(
                    f"{LOCAL_PATH_KEY} = {path}: {problem}",
                    fix="point [model] gguf_local_path at a .gguf file on the node, or set "
                    "[model] gguf_repo and gguf_file to download one",
                    exit_code=EXIT_CONFIG,
                )
            return path, {"source": "local", "path": str(path), "bytes": path.stat().st_size}
        if not s.gguf_repo:
            raise PhaseFailed(
                f"no model: {LOCAL_PATH_KEY} is empty and no [model] gguf_repo / gguf_file "
                "to download",
                fix="set [model] gguf_local_path, or [model] gguf_repo and gguf_file",
                exit_code=EXIT_CONFIG,
            )
        dest = model_cache_path(s)
        detail: dict[str, Any] = {"source": "hub", "repo": s.gguf_repo, "file": s.gguf_file}
        detail.update(revision=s.gguf_revision, path=str(dest))
        url = hub_url(s)
        try:
            if dest.exists() and gguf_problem(dest) is None:
                served = self._cached(dest, url)
                if served is not None:
                    detail.update(served)
                    return dest, detail
            detail.update(self._adopt_prefetch(dest))
            meta = hub_metadata(s, url)
            if meta is not None and meta.commit:
                detail.update(commit=meta.commit)
            detail.update(Downloader(s, self.emitter, self.control).fetch(url, dest, meta))
        except DownloadError as exc:
            raise PhaseFailed(
                f"model download of {url} failed: {exc}; without network, copy the file to "
                f"the node and set {LOCAL_PATH_KEY}",
                fix="check the node's network and HF_TOKEN, or set [model] gguf_local_path",
                # Missing, denied or corrupt at the source fails on every host; a slow or
                # broken link is this host's.
                scope=SCOPE_RUN if exc.permanent and not exc.stalled else SCOPE_HOST,
            ) from None
        except OSError as exc:
            raise PhaseFailed(
                f"cannot write the model under {s.cache_dir}: {exc}; set MVP_MODEL_CACHE_DIR "
                f"or {LOCAL_PATH_KEY}",
                fix="free disk space or choose another cache dir",
            ) from None
        detail.update(cached=False)
        return dest, detail

    def _cached(self, dest: Path, url: str) -> dict[str, Any] | None:
        """The cached file's detail when the hub still vouches for it (node/cached_model.py);
        None after dropping one it does not, which is then downloaded again."""
        meta = hub_metadata(self.settings, url)
        problem, detail = cached_problem(dest, meta, self.settings.verified_dir)
        if problem is None:
            if meta is not None and meta.commit:
                detail.update(commit=meta.commit)
            return detail
        self.emitter.progress("model", state="refused", reason=f"the cached file {problem}")
        drop_cached(dest, self.settings.verified_dir)
        return None

    def _adopt_prefetch(self, dest: Path) -> dict[str, Any]:
        """The start command's prefetch, stopped: its bytes so far become the downloader's
        `.part` to resume (never fetched twice); what it did goes into the phase's detail."""
        prefetch = read_prefetch(dest)
        if prefetch is None:
            return {}
        part = dest.with_name(dest.name + ".part")
        running = stop_prefetch(prefetch, part)
        have = part.stat().st_size if part.exists() else 0
        self.emitter.progress(
            "model", state="adopting", bytes_done=have, prefetch_started_at=prefetch.started_at
        )
        return {
            "prefetch": {
                "tool": prefetch.tool,
                "started_at": prefetch.started_at,
                "bytes": have,
                "was_running": running,
            }
        }

    def _alias(self) -> str:
        return self.settings.model_id or "model"

    def _gate_wanted(self) -> bool:
        """A key to check or uses to count: the engine goes behind the gate."""
        idle_stop = self.watchdog is not None and self.watchdog.idle_stop_s is not None
        return bool(self.settings.api_key) or idle_stop

    def _start_engine(self, model: Path) -> dict[str, Any]:
        settings = self.settings
        if self._gate_wanted():  # the engine on a private loopback port; the gate on ours
            settings = copy.copy(self.settings)
            settings.engine_host, settings.engine_port = ENGINE_HOST, 0
        spec = engine_spec(settings, model, self._alias(), self.gpus)
        if spec.kind == "llama-server" and not settings.engine_cmd:  # a user's command is theirs
            self.offload = offload_plan(self.gpus, settings.vram_need_mib, spec.argv[0])
            spec.argv += list(self.offload.flags) if self.offload is not None else []
        if self.settings.api_key and spec.key_env:
            # Passed on purpose (the filter below drops *KEY* names), in the environment,
            # never argv: the engine checks the key too, so its private port is no way
            # around the gate for another local user.
            self._engine_key = self.settings.api_key
            spec.env[spec.key_env] = self._engine_key
        engine = Engine(spec, self.emitter, self.control)
        engine.on_line = self.offload_log.feed if self.offload is not None else None
        self.engine = engine
        engine_env = {k: v for k, v in self.env.items() if not is_secret_name(k)}
        cwd = model.parent if model.parent.is_dir() else Path.cwd()
        pid = engine.start(engine_env, cwd)
        detail = {"engine": spec.kind, "pid": pid, "port": spec.port, "argv": spec.argv}
        if spec.at_once is not None:
            detail["parallel"] = {"slots": spec.at_once.slots, "why": spec.at_once.why}
        if self.offload is not None:
            detail["offload"] = {"asked": self.offload.asked, "why": self.offload.why}
        return detail

    def _open_gate(self, engine: Engine) -> tuple[int, str]:
        """The port and URL clients use: the gate's once it listens, else the engine's."""
        if not self._gate_wanted():
            return engine.spec.port, engine.spec.base_url
        s = self.settings
        watchdog = self.watchdog
        gate = Gate(s.engine_host, s.engine_port, engine.spec.port, s.api_key,
                    engine_key=self._engine_key, max_body=s.gate_max_body,
                    on_use=watchdog.note_use if watchdog is not None else None)
        try:
            port = self._start_gate(gate)
        except OSError as exc:
            raise PhaseFailed(
                f"cannot open the engine's port {s.engine_host}:{s.engine_port}: "
                f"{exc.strerror or exc}",
                fix="free that port or leave MVP_ENGINE_PORT unset",
            ) from None
        self.gate = gate
        if watchdog is not None:
            watchdog.serving()
        return port, f"http://{ENGINE_HOST}:{port}"

    def _start_gate(self, gate: Gate) -> int:
        """The gate's port: the one asked for, or (when that was only a preference, as a local
        run's [prompt] openai_port is) any free one once another process holds it — the
        engine checked it free, but a second run may take it in the meantime."""
        try:
            return gate.start()
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE or not self.settings.engine_port_fallback:
                raise
        gate.port = 0
        return gate.start()

    def _wait_healthy(self) -> dict[str, Any]:
        assert self.engine is not None
        engine = self.engine
        url = engine.spec.base_url + engine.spec.ready_path
        started = time.monotonic()
        deadline = started + self.settings.ready_timeout_s
        interval = self.settings.health_poll_s or HEALTH_POLL_FIRST_S
        longest = self.settings.health_poll_s or HEALTH_POLL_MAX_S
        last_state = ""
        while True:
            state, status = probe_ready(url, self._engine_key)
            if state != last_state:
                last_state = state
                self.emitter.progress(
                    "engine_health",
                    state=state,
                    http_status=status,
                    url=url,
                    elapsed_ms=ms_since(started),
                )
            if state == "ready":
                break
            if time.monotonic() >= deadline:
                raise PhaseFailed(
                    f"engine not ready after {self.settings.ready_timeout_s:.0f} s "
                    f"(last probe: {state} {status or ''})",
                    fix="raise MVP_ENGINE_READY_TIMEOUT_S or read the engine log channel",
                    detail={"last_log_lines": list(engine.last_lines)},
                )
            event = self.control.wait(min(interval, max(deadline - time.monotonic(), 0.0)))
            interval = min(interval * 1.5, longest)
            if self.control.stop_requested:
                raise Interrupted()
            if event is not None and event[0] == Control.ENGINE_EXIT:
                raise self._engine_died(event[1], "before it was ready")
        load_ms = ms_since(started)
        self._prove_offload()
        port, base_url = self._open_gate(engine)
        self._report_loaded(
            WEIGHTS_LOADED,
            model_id=self._alias(),
            engine=engine.spec.kind,
            port=port,
            base_url=base_url,
            openai_base_url=base_url + "/v1",
            engine_pid=engine.proc.pid if engine.proc else None,
            load_ms=load_ms,
            auth="key" if self.gate is not None and self.settings.api_key else "none",
            # Requests served at once, its slots (0: unknown, a user's command): the endpoint
            # line says "one request at a time" for 1.
            parallel=engine.spec.at_once.slots if engine.spec.at_once is not None else 0,
            idle_stop_mins=self.watchdog.settings.idle_stop_mins or None
            if self.watchdog is not None and self.gate is not None
            else None,
        )
        return {"url": url, "load_ms": load_ms}

    def _prove_offload(self) -> None:
        """On a node with GPUs: what the engine's load log says it offloaded, reported; less
        than asked, or no GPU device at all, fails this host (the run tries the next offer)
        unless [model] allow_partial_offload makes it a warning."""
        plan = self.offload
        if plan is None:
            return
        log = self.offload_log
        log.wait(LOG_GRACE_S)
        problem = offload_problem(plan, log)
        allowed = bool(problem) and self.settings.allow_partial_offload
        self.emitter.offload(
            asked=plan.asked, why=plan.why, layers=log.layers or 0, layers_total=log.total or 0,
            buffers_mib=dict(log.buffers), gpus=[g.get("name", "") for g in self.gpus],
            problem=problem, allowed=allowed,
        )
        if not problem:
            return
        if allowed:
            self.emitter.notice(f"[model] allow_partial_offload = true: serving anyway; {problem}")
            return
        raise PhaseFailed(
            f"GPU offload not proven: {problem}",
            fix="this host is given up for the next offer; set [model] allow_partial_offload "
            "= true to serve anyway, or choose an image whose llama-server is built with CUDA",
            detail={"offload": {"layers": log.layers, "layers_total": log.total,
                                "buffers_mib": dict(log.buffers), "asked": plan.asked}},
            scope=SCOPE_HOST,
        )

    def _report_loaded(self, kind: str, **fields: Any) -> None:
        """The engine serves: say so (a role may first check more, and raise PhaseFailed)."""
        self.emitter.weights(kind, **fields)

    def _engine_died(self, code: int | None, when: str) -> PhaseFailed:
        assert self.engine is not None
        self.engine.flush_log()
        lines = list(self.engine.last_lines)
        if model_unreadable(lines):  # the file, not this host: every host would fail it
            return PhaseFailed(
                f"the engine cannot load the model (exit code {code} {when}): "
                f"{next(x for x in lines if model_unreadable([x]))}",
                fix="the GGUF file is corrupt or not a model this engine reads: download it "
                "again, or point [model] gguf_local_path / gguf_repo + gguf_file at another",
                detail={"exit_code": code, "last_log_lines": lines},
                scope=SCOPE_RUN,
            )
        return PhaseFailed(
            f"engine exited unexpectedly with code {code} {when}",
            fix=f"read the engine log channel (mvp.node.{self.settings.node_id}.engine)",
            detail={"exit_code": code, "last_log_lines": lines},
        )

    def _watch(self) -> int:
        assert self.engine is not None
        pid = self.engine.proc.pid if self.engine.proc else None
        self.emitter.phase("watch", "started", {"engine_pid": pid})
        started = time.monotonic()
        while True:
            event = self.control.wait(1.0)
            if self.control.stop_requested:
                self.emitter.phase(
                    "watch", "ready", {"reason": "shutdown requested"}, ms_since(started)
                )
                return self._shutdown()
            if event is not None and event[0] == Control.ENGINE_EXIT:
                failure = self._engine_died(event[1], "while serving")
                failure.detail["phase"] = "watch"
                self.emitter.phase(
                    "watch", "failed", {"reason": failure.reason}, ms_since(started)
                )
                return self.fail(failure)

    def _shutdown(self) -> int:
        trigger = self.watchdog.close() if self.watchdog is not None else None
        source = self.control.stop_source or "request"
        self.emitter.phase("shutdown", "started", {"source": source})
        started = time.monotonic()
        detail = self.stop_engine()
        self.emitter.phase("shutdown", "ready", detail, ms_since(started))
        if trigger is not None and self.watchdog is not None:
            self.watchdog.finish(trigger)  # after the engine stopped: destroy, or just end
        self.emitter.phase("agent_exit", "ready", {"exit_code": EXIT_OK, "source": source})
        return EXIT_OK

    def stop_engine(self) -> dict[str, Any]:
        if self.gate is not None:
            self.gate.close()
            self.gate = None
        if self.engine is None:
            return {"engine": "not started"}
        return self.engine.stop(self.settings.stop_timeout_s)


