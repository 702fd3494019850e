"""`check --live`'s facts, judged from records as they come: the offload from the agent's own
`EngineOffload` record (mvp_tui/node/frames.py), layers on a GPU proving it, a shortfall
failing it, a run on no GPU proving nothing; Vast's routes from the v1 fallback the provider
met."""

from __future__ import annotations

from typing import Any

from mvp_tui.preflight.live_facts import V1_FALLBACK, Mark, Seen, offload, vast_routes


def engine_offload(layers: int, total: int, buffers: dict[str, float], problem: str = "",
                   allowed: bool = False) -> dict[str, Any]:
    record: dict[str, Any] = {"type": "EngineOffload", "run_id": "r", "node_id": 0,
                              "layers": layers, "layers_total": total, "asked": "all",
                              "buffers_mib": buffers, "at": 1.0}
    if problem:
        record["problem"] = problem
    if allowed:
        record["allowed"] = True
    return record


def test_layers_on_a_gpu_prove_the_offload() -> None:
    seen = Seen("vastai", [engine_offload(33, 33, {"CPU_Mapped": 70.5, "CUDA0": 1455.0})])
    mark, detail = offload(seen)
    assert mark is Mark.PROVEN
    assert "33/33 layers" in detail and "CUDA0 1,455 MiB" in detail


def test_no_layers_on_a_gpu_node_fails_the_fact() -> None:
    problem = "GPU offload not proven: 0/33 layers on the GPU"
    seen = Seen("vastai", [engine_offload(0, 33, {"CPU": 4403.0}, problem=problem)])
    assert offload(seen)[0] is Mark.FAILED


def test_a_partial_offload_let_through_is_still_not_a_proof() -> None:
    seen = Seen("runpod", [engine_offload(20, 33, {"CUDA0": 900.0}, problem="20/33",
                                          allowed=True)])
    assert offload(seen)[0] is Mark.FAILED


def test_a_cpu_run_proves_nothing_and_fails_nothing() -> None:
    mark, detail = offload(Seen("local", [engine_offload(3, 3, {"CPU": 10.0})]))
    assert mark is Mark.NOT_PROVEN
    assert "no GPU" in detail
    assert offload(Seen("local", []))[0] is Mark.NOT_PROVEN


def test_the_vast_routes_fact_names_the_v1_fallback_the_provider_met() -> None:
    leased = [{"event": "lease_running"}, {"event": "lease_deleted", "deleted_by": "account"}]
    mark, detail = vast_routes(Seen("vastai", leased))
    assert mark is Mark.PROVEN and detail.startswith("the v0 ")
    fallback = {"event": V1_FALLBACK, "routes": ["delete", "read"]}
    mark, detail = vast_routes(Seen("vastai", [*leased, fallback]))
    assert mark is Mark.PROVEN
    assert "v1 (after a 410 on the v0 delete and read)" in detail
