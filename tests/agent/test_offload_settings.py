"""What the run tells the node about offload: the fit's need per node (once read) and
`[model] allow_partial_offload`, in the node's environment as the agent reads it."""

from __future__ import annotations

from pathlib import Path

from mvp_tui.config import load_config
from mvp_tui.config.loader import ConfigPaths
from mvp_tui.engine.run import RunEngine
from mvp_tui.engine.settings import RunSettings, node_env
from mvp_tui.node.settings import Settings
from mvp_tui.node_protocol import AgentEnv

NEED = AgentEnv.env_name("vram_need_mib")
PARTIAL = AgentEnv.env_name("allow_partial_offload")


def config(tmp_path: Path, **env: str):  # type: ignore[no-untyped-def]
    env = {"MVP_STATE_DIR": str(tmp_path / "state"), **env}
    return load_config(env=env, paths=ConfigPaths(default=tmp_path / "none.toml"))


def test_allow_partial_offload_reaches_the_node(tmp_path: Path) -> None:
    for value, expected in (("", False), ("true", True)):
        loaded = config(tmp_path, **({"MVP_ALLOW_PARTIAL_OFFLOAD": value} if value else {}))
        settings = RunSettings.from_config(loaded)
        env = node_env(settings.runtime, settings.model, provider="vastai", run_id="41",
                       environ={}, vram_need_mib=5_321)
        assert env[NEED] == "5321"
        assert (PARTIAL in env) is expected
        node = Settings(env)
        assert (node.vram_need_mib, node.allow_partial_offload) == (5_321, expected)


async def test_the_fit_read_for_the_board_goes_to_the_node(
    tmp_path: Path, tiny_model: Path
) -> None:
    """The board reads the need (RunEngine.model_need); the node's env then carries it."""
    engine = RunEngine(config(tmp_path, MVP_GGUF_LOCAL_PATH=str(tiny_model), MVP_PROVIDER="local"),
                       lambda _event: None, environ={})
    try:
        assert NEED not in engine.ctx.node_env  # not read yet: unknown, `--fit on` on a GPU node
        need = await engine.model_need()
        assert need.per_node_mib > 0
        assert engine.ctx.node_env[NEED] == str(need.per_node_mib)
        assert engine.ctx.walk_settings().env[NEED] == str(need.per_node_mib)
    finally:
        await engine.aclose()
