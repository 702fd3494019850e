"""The entry point: parse the env, start the switch and the control readers, run the role."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Mapping
from typing import Any

from mvp_tui.node.agent import Agent
from mvp_tui.node.control import Control, PhaseFailed, exc_name, open_control_fifo, read_commands
from mvp_tui.node.frames import Emitter, clean_text
from mvp_tui.node.instance_api import SwitchSettings
from mvp_tui.node.settings import EXIT_CONFIG, ConfigError, Settings
from mvp_tui.node.switch import Watchdog
from mvp_tui.node_protocol import WORKER_FATAL, AgentEnv, RoleEnv
from mvp_tui.secrets import Redactor, secret_values


def _install_signal_handlers(control: Control) -> None:
    def on_signal(signum: int, _frame: Any) -> None:
        control.request_stop(signal.Signals(signum).name)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    if hasattr(signal, "SIGHUP"):
        # A dropped SSH session must not take the node down with it.
        signal.signal(signal.SIGHUP, signal.SIG_IGN)


def _start_thread(target: Callable[..., None], *args: Any) -> None:
    threading.Thread(target=target, args=args, daemon=True).start()


def run_agent(env: Mapping[str, str], out_fd: int) -> int:
    """Runs the agent with this environment, writing frames to `out_fd`; returns the exit
    code."""
    redactor = Redactor(secret_values(env))
    try:
        settings = Settings(env)
    except ConfigError as exc:
        run_id = clean_text(env.get(AgentEnv.env_name("run_id"), "").strip(), 64)
        node_id = _lenient_int(env.get(AgentEnv.env_name("node_id")))
        emitter = Emitter(out_fd, redactor, run_id, node_id)
        emitter.phase("config", "failed", {"reason": str(exc)})
        emitter.weights(WORKER_FATAL, reason=str(exc), fix="", phase="config")
        emitter.phase("agent_exit", "failed", {"exit_code": EXIT_CONFIG, "reason": str(exc)})
        return EXIT_CONFIG
    emitter = Emitter(out_fd, redactor, settings.run_id, settings.node_id)
    control = Control()
    if threading.current_thread() is threading.main_thread():
        _install_signal_handlers(control)
    watchdog = Watchdog(env, SwitchSettings(env), emitter, control, redactor)
    watchdog.start()  # the deadline and the silence count from the agent's start
    _start_thread(
        read_commands, 0, "stdin", control, emitter, settings.stdin_eof_shutdown, watchdog
    )
    fifo: tuple[int, bool] | None = None
    agent = _agent(env, settings, emitter, control, watchdog)
    try:
        if settings.control_fifo:
            try:
                fifo = open_control_fifo(settings.control_fifo)
            except (ConfigError, OSError) as exc:
                return agent.fail(PhaseFailed(str(exc), exit_code=EXIT_CONFIG))
            _start_thread(read_commands, fifo[0], "fifo", control, emitter, False, watchdog)
        return agent.run()
    except Exception as exc:  # a bug: report it as a fatal node error, never hang
        emitter.stderr(f"mvp-node: internal error: {exc!r}")
        return agent.fail(PhaseFailed(f"internal error in mvp-node: {exc_name(exc)}: {exc}"))
    finally:
        watchdog.close()
        agent.stop_engine()
        if fifo is not None and fifo[1]:
            _unlink_quietly(settings.control_fifo)


def _lenient_int(raw: str | None) -> int:
    try:
        return int(raw or 0)
    except ValueError:
        return 0


def _unlink_quietly(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def main() -> int:
    """Console entry point (`mvp-node`); the wrapper exits with what this returns."""
    return run_agent(os.environ, sys.stdout.fileno())




def _agent(
    env: Mapping[str, str],
    settings: Settings,
    emitter: Emitter,
    control: Control,
    watchdog: Watchdog | None,
) -> Agent:
    """The agent for MVP_NODE_ROLE. The roles of a multi-node run load only where one of
    their keys is set: a single node (nearly every run) does not compile their ~500 lines at
    each start."""
    if not any(name in env for name in RoleEnv.env_names()):
        return Agent(env, settings, emitter, control, watchdog)
    from mvp_tui.node.roles import agent_for_role

    return agent_for_role(env, settings, emitter, control, watchdog)
