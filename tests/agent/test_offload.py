"""GPU offload proven from llama-server's own log (mvp_tui/node/offload.py): the lines parsed
from recorded logs (tests/agent/logs/: a CPU build recorded here, a CUDA run from llama.cpp's
own CI, a CUDA build that offloaded nothing from a llama.cpp issue; each file names its
source), the flags a node with GPUs gets, and the verdict on what the log says."""

from __future__ import annotations

from pathlib import Path

import pytest

from mvp_tui.node import offload
from mvp_tui.node.offload import (
    OffloadLog,
    OffloadPlan,
    offload_plan,
    offload_problem,
    parse_buffer_line,
)
from mvp_tui.node_protocol import ENGINE_OFFLOAD, offload_report

LOGS = Path(__file__).parent / "logs"
ALL = OffloadPlan(("-ngl", "999", "-lv", "4"), "all", "the fit")
FIT = OffloadPlan(("--fit", "on", "-lv", "4"), "fit", "the fit is unknown: --fit on")
H100 = [{"name": "NVIDIA H100 80GB HBM3", "memory_mib": 81559}]


def read_log(name: str) -> OffloadLog:
    log = OffloadLog()
    for line in (LOGS / name).read_text().splitlines():
        log.feed(line)
    return log


def test_a_cpu_build_logs_0_of_n_layers_and_only_host_buffers() -> None:
    log = read_log("cpu_build_ngl0.log")
    assert (log.layers, log.total) == (0, 3)
    assert log.buffers == {"CPU_Mapped": 0.72} and log.gpu_buffers == {}
    assert log.loaded  # "llama_server: model loaded": every load line was read before it


def test_the_cuda_ci_log_gives_every_layer_and_the_cuda0_buffer() -> None:
    log = read_log("cuda_v100_ggml_ci.log")
    assert (log.layers, log.total) == (33, 33)
    # The model buffers only (not the KV cache's or compute buffers on CUDA0).
    assert log.buffers == {"CUDA0": 1454.83, "CPU_Mapped": 69.08}
    assert log.gpu_buffers == {"CUDA0": 1454.83}
    assert offload_problem(ALL, log) == ""
    assert offload_problem(FIT, log) == ""


def test_a_cpu_build_asked_for_every_layer_still_says_n_of_n_and_is_refused() -> None:
    """llama.cpp says "offloaded 3/3 layers to GPU" with no GPU at all: the device lines are
    the proof."""
    log = read_log("cpu_build_ngl999.log")
    assert (log.layers, log.total) == (3, 3)
    problem = offload_problem(ALL, log)
    assert "3/3 layers offloaded to GPU, but the engine's log names no CUDA device" in problem
    assert "CPU_Mapped 1 MiB" in problem and "runs on the CPU" in problem


def test_a_cuda_build_that_offloaded_nothing_is_refused_in_the_2024_log_form() -> None:
    log = read_log("cuda_h800_zero_layers_issue6787.log")
    assert (log.layers, log.total) == (0, 33)
    assert log.buffers == {"CPU": 5459.93}
    assert "0/33 layers offloaded to GPU, but the engine's log names no CUDA device" in (
        offload_problem(FIT, log)
    )


def test_fewer_layers_than_asked_is_refused_and_fit_needs_at_least_one() -> None:
    log = OffloadLog()
    for line in ("load_tensors: offloaded 20/33 layers to GPU",
                 "load_tensors:        CUDA0 model buffer size =  3000.00 MiB",
                 "load_tensors:   CPU_Mapped model buffer size =  1700.00 MiB"):
        log.feed(line)
    assert offload_problem(ALL, log) == "only 20/33 layers offloaded to GPU, 33 asked (the fit)"
    assert offload_problem(FIT, log) == ""  # --fit on placed what fits: that is its job


def test_no_offload_line_cannot_be_proven() -> None:
    assert "never said how many layers" in offload_problem(ALL, OffloadLog())


def test_rpc_and_host_buffers_are_not_gpus() -> None:
    assert parse_buffer_line(
        "load_tensors:   RPC0[127.0.0.1:50052] model buffer size = 12.30 MiB"
    ) == ("127.0.0.1:50052", 12.3)
    log = OffloadLog()
    log.feed("load_tensors: offloaded 33/33 layers to GPU")
    log.feed("load_tensors:   RPC0[127.0.0.1:50052] model buffer size = 12.30 MiB")
    log.feed("load_tensors:   CUDA_Host model buffer size = 5.00 MiB")
    assert log.gpu_buffers == {}


def test_every_layer_when_the_fit_says_it_fits_else_fit_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(offload, "has_fit_flag", lambda server: True)
    plan = offload_plan(H100, 6_000, "/app/llama-server")
    assert plan is not None and plan.flags == ("-ngl", "999", "-lv", "4") and plan.asked == "all"
    assert "6,000 MiB needed, 81,559 MiB VRAM" in plan.why
    too_big = offload_plan(H100, 90_000, "/app/llama-server")
    assert too_big is not None and too_big.flags == ("--fit", "on", "-lv", "4")
    assert too_big.asked == "fit" and "90,000 MiB needed > 81,559 MiB" in too_big.why
    unknown = offload_plan(H100, 0, "/app/llama-server")
    assert unknown is not None and unknown.asked == "fit"
    assert offload_plan([], 6_000, "/app/llama-server") is None  # no GPU: the defaults stay


def test_a_build_without_fit_gets_every_layer_never_an_unknown_flag(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(offload, "has_fit_flag", lambda server: False)
    plan = offload_plan(H100, 0, "/app/llama-server")
    assert plan is not None and "--fit" not in plan.flags and plan.flags[:2] == ("-ngl", "999")


def test_fit_support_is_read_from_the_servers_help(
    tmp_path: Path, fake_llama_server_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = str(fake_llama_server_dir / "llama-server")
    assert offload.has_fit_flag(server)
    monkeypatch.setenv("FAKE_NO_FIT", "1")
    assert not offload.has_fit_flag(server)
    assert not offload.has_fit_flag(str(tmp_path / "missing"))


def test_verbosity_support_is_read_from_the_servers_help(
    tmp_path: Path, fake_llama_server_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A build from before the 2024 logging rework has no `-lv` (it would refuse it, and
    prints the load lines anyway); a help that cannot be read keeps it."""
    server = str(fake_llama_server_dir / "llama-server")
    assert offload.has_verbosity_flag(server)
    assert offload.has_verbosity_flag(str(tmp_path / "missing"))
    monkeypatch.setenv("FAKE_NO_VERBOSITY", "1")
    assert not offload.has_verbosity_flag(server)
    monkeypatch.setenv("FAKE_NO_FIT", "1")
    plan = offload_plan(H100, 0, server)
    assert plan is not None and plan.flags == ("-ngl", "999")


def test_the_record_reads_back_as_the_panes_line() -> None:
    record = {"type": ENGINE_OFFLOAD, "layers": 33, "layers_total": 33, "asked": "all",
              "buffers_mib": {"CUDA0": 4403.5, "CPU_Mapped": 281.81}, "problem": ""}
    report = offload_report(record)
    assert report is not None and report.ok
    assert report.summary() == "33/33 layers · CUDA0 4,404 MiB"
    assert offload_report({**record, "layers": "33"}) is None
    assert offload_report({**record, "asked": "some"}) is None
