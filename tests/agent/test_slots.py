"""Slots for parallel use (issue 40): `[model] parallel`, the fit's KV cache per slot, and the
engine's argv: llama-server gets `-np N` and `-c` context × N (it splits `-c` over its slots),
N from the key or, unset, from what the node's memory holds past the fit's need (at most 4);
llama-cpp-python's server serves one request at a time, and its endpoint line says so."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from mvp_tui.config import load_config
from mvp_tui.config.loader import ConfigPaths
from mvp_tui.engine.endpoint_words import endpoint_lines
from mvp_tui.engine.events import EndpointReady
from mvp_tui.engine.gguf_quants import QuantModel
from mvp_tui.engine.gguf_shape import parse_shape
from mvp_tui.engine.model_need import read_model_need
from mvp_tui.engine.quant_fit import quant_needs
from mvp_tui.engine.run import RunEngine
from mvp_tui.engine.settings import RunSettings, node_env
from mvp_tui.node import engine
from mvp_tui.node import slots as slots_module
from mvp_tui.node.engine import engine_spec
from mvp_tui.node.settings import Settings
from mvp_tui.node.slots import node_memory_mib
from mvp_tui.node_protocol import AgentEnv
from tests.agent.agent_run import agent_env

PARALLEL = AgentEnv.env_name("parallel")
KV_SLOT = AgentEnv.env_name("kv_slot_mib")
NEED = AgentEnv.env_name("vram_need_mib")
GPU_8G = [{"name": "RTX 4070", "memory_mib": 8_192}]


def config(tmp_path: Path, **env: str):  # type: ignore[no-untyped-def]
    env = {"MVP_STATE_DIR": str(tmp_path / "state"), **env}
    return load_config(env=env, paths=ConfigPaths(default=tmp_path / "none.toml"))


def _argv_value(argv: list[str], flag: str) -> str:
    assert argv.count(flag) == 1, argv
    return argv[argv.index(flag) + 1]


def _llama_server_spec(tmp_path: Path, model: Path, gpus: list[dict[str, object]],
                       **env: str) -> tuple[int, list[str]]:
    spec = engine_spec(Settings(agent_env(tmp_path, **env)), model, "tiny", gpus)
    assert spec.kind == "llama-server" and spec.at_once is not None
    return spec.at_once.slots, spec.argv


@pytest.fixture
def on_path(fake_llama_server_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{fake_llama_server_dir}:/usr/bin:/bin")


@pytest.mark.usefixtures("on_path")
def test_llama_server_gets_the_slots_of_the_key_each_with_the_whole_context(
    tmp_path: Path, tiny_model: Path
) -> None:
    slots, argv = _llama_server_spec(tmp_path, tiny_model, GPU_8G, MVP_MAX_CONTEXT="4096",
                                     **{PARALLEL: "3", NEED: "6000", KV_SLOT: "512"})
    assert slots == 3 and _argv_value(argv, "-np") == "3"
    assert _argv_value(argv, "-c") == str(3 * 4096)  # each slot keeps [model] max_context


@pytest.mark.usefixtures("on_path")
def test_unset_the_node_runs_as_many_slots_as_its_memory_holds_past_the_need(
    tmp_path: Path, tiny_model: Path
) -> None:
    """8,192 MiB of VRAM, 6,000 needed for one slot, 1,000 MiB a slot (1,050 with its
    margin): two more slots fit, a fourth does not."""
    fit = {NEED: "6000", KV_SLOT: "1000"}
    slots, argv = _llama_server_spec(tmp_path, tiny_model, GPU_8G, MVP_MAX_CONTEXT="2048", **fit)
    assert slots == 3 and _argv_value(argv, "-np") == "3"
    assert _argv_value(argv, "-c") == str(3 * 2048)
    # Room for many: at most 4 unless the key says more.
    small = {NEED: "600", KV_SLOT: "10"}
    assert _llama_server_spec(tmp_path, tiny_model, GPU_8G, **small)[0] == 4
    assert _llama_server_spec(tmp_path, tiny_model, GPU_8G, **small, **{PARALLEL: "8"})[0] == 8
    # A need past the node's memory, or none read: one slot.
    big = {NEED: "9000", KV_SLOT: "1000"}
    assert _llama_server_spec(tmp_path, tiny_model, GPU_8G, **big)[0] == 1
    assert _llama_server_spec(tmp_path, tiny_model, GPU_8G)[0] == 1


@pytest.mark.usefixtures("on_path")
def test_without_gpus_the_slots_are_sized_by_the_hosts_available_memory(
    tmp_path: Path, tiny_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert node_memory_mib([]) > 0  # this host's MemAvailable
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24000000 kB\nMemAvailable:    8388608 kB\n")
    monkeypatch.setattr(slots_module, "MEMINFO", meminfo)  # 8,192 MiB available
    slots, argv = _llama_server_spec(tmp_path, tiny_model, [], **{NEED: "6000", KV_SLOT: "1000"})
    assert slots == 3 and _argv_value(argv, "-np") == "3"


def test_node_memory_reads_meminfo(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24000000 kB\nMemAvailable:   2097152 kB\n")
    assert node_memory_mib([], meminfo) == 2048
    assert node_memory_mib([{"memory_mib": 24_576}, {"memory_mib": 24_576}], meminfo) == 49_152
    assert node_memory_mib([], tmp_path / "absent") == 0


def test_llama_cpp_python_serves_one_request_at_a_time(
    tmp_path: Path, tiny_model: Path, monkeypatch: pytest.MonkeyPatch, real_engine: None
) -> None:
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no llama-server: the llama_cpp package
    monkeypatch.setattr(engine, "KNOWN_LLAMA_SERVERS", ())
    settings = Settings(agent_env(tmp_path, **{PARALLEL: "4", NEED: "600", KV_SLOT: "1"}))
    spec = engine_spec(settings, tiny_model, "tiny", GPU_8G)
    assert spec.kind == "llama-cpp-python" and spec.at_once is not None
    assert spec.at_once.slots == 1 and "one request at a time" in spec.at_once.why
    assert "-np" not in spec.argv


def test_the_endpoint_line_says_one_request_at_a_time_for_one_slot() -> None:
    ready = EndpointReady(at=0.0, run_id="r-1", base_url="http://127.0.0.1:8080", model="tiny",
                          auth="key", slots=1)
    assert "one request at a time" in endpoint_lines(ready)[0]
    four = EndpointReady(at=0.0, run_id="r-1", base_url="http://127.0.0.1:8080", model="tiny",
                         auth="key", slots=4)
    assert "4 requests at once" in endpoint_lines(four)[0]
    assert "at a time" not in endpoint_lines(four)[0]


async def test_the_fit_counts_the_kv_cache_of_every_slot(tmp_path: Path, tiny_model: Path) -> None:
    shape = parse_shape(await asyncio.to_thread(tiny_model.read_bytes))
    needs = {}
    for parallel in ("", "3"):
        loaded = config(tmp_path, MVP_MAX_CONTEXT="256", MVP_GGUF_LOCAL_PATH=str(tiny_model),
                        **({"MVP_PARALLEL": parallel} if parallel else {}))
        model = RunSettings.from_config(loaded).model
        needs[parallel] = await read_model_need(model, nodes=1, environ={})
    one, three = needs[""], needs["3"]
    assert (one.slots, three.slots) == (1, 3)
    assert one.kv_bytes == shape.kv_bytes(256)
    assert three.kv_bytes == 3 * shape.kv_bytes(256)
    assert three.per_node_bytes > one.per_node_bytes
    assert three.kv_slot_mib == one.kv_slot_mib
    assert "× 3 slots" in three.describe()
    # The model picker's fit of a hub repo's quants counts the slots too.
    quant = QuantModel("Q4_K_M", ("m-Q4_K_M.gguf",), 1 << 30)
    (picked,) = quant_needs([quant], shape, context=256, nodes=1, slots=3)
    assert picked.need.kv_bytes == three.kv_bytes


def test_parallel_reaches_the_node(tmp_path: Path) -> None:
    for value, expected in (("", 0), ("6", 6)):
        loaded = config(tmp_path, **({"MVP_PARALLEL": value} if value else {}))
        settings = RunSettings.from_config(loaded)
        assert settings.model.parallel == (expected or None)
        env = node_env(settings.runtime, settings.model, provider="vastai", run_id="41",
                       environ={}, vram_need_mib=5_321, kv_slot_mib=256)
        node = Settings(env)
        assert (node.parallel, node.kv_slot_mib, node.vram_need_mib) == (expected, 256, 5_321)


def test_parallel_out_of_range_names_the_key(tmp_path: Path) -> None:
    from mvp_tui.errors import UserError

    with pytest.raises(UserError) as raised:
        config(tmp_path, MVP_PARALLEL="0")
    assert "parallel" in str(raised.value) and "MVP_PARALLEL" in str(raised.value)


async def test_the_fit_read_for_the_board_gives_the_node_one_slots_cache(
    tmp_path: Path, tiny_model: Path
) -> None:
    engine = RunEngine(config(tmp_path, MVP_GGUF_LOCAL_PATH=str(tiny_model), MVP_PROVIDER="local"),
                       lambda _event: None, environ={})
    try:
        assert KV_SLOT not in engine.ctx.node_env
        need = await engine.model_need()
        assert engine.ctx.node_env[KV_SLOT] == str(need.kv_slot_mib) != "0"
        assert engine.ctx.walk_settings().env[KV_SLOT] == str(need.kv_slot_mib)
    finally:
        await engine.aclose()
