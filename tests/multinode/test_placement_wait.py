"""The placement proof reads llama-server's log through another thread: when /health already
answers, that reader may still be behind the `model buffer size` lines (they come before the
port opens). The main node waits for them, bounded, instead of failing a good placement."""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path

import pytest

from mvp_tui.node import roles
from mvp_tui.node.control import Control, PhaseFailed
from mvp_tui.node.frames import Emitter
from mvp_tui.node.roles import MainAgent, agent_for_role
from mvp_tui.node.settings import Settings
from mvp_tui.secrets import Redactor

WORKER = "127.0.0.1:50052"


def main_agent(tmp_path: Path) -> tuple[MainAgent, list[bytes]]:
    env = {"MVP_NODE_ROLE": "main", "MVP_RPC_SERVERS": WORKER, "MVP_RUN_ID": "r-0000abcd",
           "MVP_MODEL_CACHE_DIR": str(tmp_path)}
    read, write = os.pipe()
    emitter = Emitter(write, Redactor([]), "r-0000abcd", 1)
    agent = agent_for_role(
        env, Settings(env), emitter, Control(), None
    )
    assert isinstance(agent, MainAgent)
    out: list[bytes] = []
    threading.Thread(target=lambda: out.append(os.read(read, 1 << 16)), daemon=True).start()
    return agent, out


def test_a_buffer_line_read_after_health_still_proves_the_placement(tmp_path: Path) -> None:
    agent, _ = main_agent(tmp_path)
    late = threading.Timer(
        0.2, agent._on_engine_line,
        [f"load_tensors:   RPC0[{WORKER}] model buffer size =    12.30 MiB"],
    )
    late.start()  # the log reader, behind
    agent._report_loaded("WeightsLoaded", port=1)  # raised before: "no model buffer on …"
    late.join()
    assert agent.placement == {WORKER: pytest.approx(12.3)}


def test_no_buffer_on_a_worker_still_fails_after_the_grace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(roles, "PLACEMENT_GRACE_S", 0.3)
    agent, _ = main_agent(tmp_path)
    agent._on_engine_line("load_tensors:   CPU_Mapped model buffer size =    30.00 MiB")
    missing = re.escape(f"no model buffer on worker RPC {WORKER}")
    with pytest.raises(PhaseFailed, match=missing):
        agent._report_loaded("WeightsLoaded", port=1)
