"""A taken prompt RPC port is the user's to fix, never "unexpected" (issue 31 §5): it was
`mvp-tui: unexpected RpcAddrError: …`. The port is bound once the weights are loaded (the
seed's order, tests/seed/test_seed_rpc_bind_failed.py), so the run fails and is torn down:
exit 1 (docs/commands.md, exit codes), its last line the error and its fix."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from mvp_tui.config import ConfigPaths, load_config
from mvp_tui.engine.controller import RunController
from mvp_tui.engine.run import RunEngine
from mvp_tui.errors import UserError
from mvp_tui.exit_codes import ExitCode
from mvp_tui.prompt.client import PromptClient
from mvp_tui.prompt.queue import PromptQueue
from mvp_tui.prompt.rpc import PromptRpcServer, RpcAddr, RpcAddrError
from tests.fakes.tiny_gguf import write_tiny_gguf
from tests.prompt.engine import require_engine
from tests.seed.proc import clean_env

FIX = (
    "fix: free the port (another run may serve there: `mvp-tui endpoint` says), or choose "
    "another loopback port with --rpc-bind 127.0.0.1:PORT (env MVP_PROMPT_RPC_BIND, "
    "[prompt] rpc_addr in the config file)"
)


@pytest.fixture
def taken() -> Iterator[int]:
    """A loopback port another process listens on."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


def test_a_run_whose_rpc_port_is_taken_ends_with_the_error_and_its_fix(
    tmp_path: Path, taken: int
) -> None:
    require_engine()
    model = write_tiny_gguf(tmp_path / "tiny.gguf")
    done = subprocess.run(
        [sys.executable, "-m", "mvp_tui", "up", "--headless", "--gguf-local-path", str(model),
         "--rpc-bind", f"127.0.0.1:{taken}"],
        capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL,
        env=clean_env(tmp_path / "state", MVP_NODE_PROVIDER="local"),
    )
    assert done.returncode == ExitCode.RUN_FAILED, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last == (
        f"mvp-tui: cannot bind the prompt RPC to 127.0.0.1:{taken}: Address already in use; "
        + FIX
    ), last
    assert "unexpected" not in done.stderr and "Traceback" not in done.stderr


async def test_the_bind_error_is_a_user_error_and_the_runs_reason_is_its_words(
    tmp_path: Path, taken: int
) -> None:
    def no_engine() -> PromptClient:
        raise AssertionError("no prompt may reach the engine")

    queue = PromptQueue(no_engine, lambda event: None)
    server = PromptRpcServer(queue, RpcAddr("127.0.0.1", taken), token="t" * 16)
    with pytest.raises(RpcAddrError) as caught:
        await server.start()
    await queue.aclose()
    error = caught.value
    assert isinstance(error, UserError) and f"fix: {error.fix}" == FIX
    # What the CLI's last line and the dashboard's toast say: the error's own words.
    config = load_config(env={}, paths=ConfigPaths(default=tmp_path / "absent.toml"))
    engine = RunEngine(config, lambda event: None)
    try:
        reason = RunController(engine)._describe(error)
    finally:
        await engine.aclose()
    assert reason == str(error) and not reason.startswith("unexpected")
