"""Each node's seed stage (stage_index, layer_end_exclusive) → llama-server's layer split."""

from __future__ import annotations

import pytest

from mvp_tui.config import ConfigError
from mvp_tui.engine.cluster import Split, Stage, parse_stages, rpc_split


def test_two_nodes_stages_give_ngl_and_tensor_split() -> None:
    stages = parse_stages(["0:6", "1:8"], 2, "file x.toml")
    assert stages == (Stage(0, 6), Stage(1, 8))
    # Main keeps layers 0..5; the worker holds 6, 7 and the output layer.
    assert rpc_split(stages, 1) == Split(gpu_layers=3, tensor_split="3", worker_order=(0,))


def test_three_nodes_follow_stage_order_not_node_order() -> None:
    stages = parse_stages(["0:2", "2:10", "1:4"], 3, "env MVP_NODE_STAGES")
    split = rpc_split(stages, 2)
    # Layers 2..3 on the stage-1 worker (node 3), 4..9 + output on the stage-2 worker.
    assert split == Split(gpu_layers=9, tensor_split="2,7", worker_order=(1, 0))


def test_without_stages_the_workers_split_by_memory() -> None:
    assert parse_stages([], 2, "default") == ()
    assert rpc_split((), 2) == Split(gpu_layers=99, tensor_split="", worker_order=(0, 1))


@pytest.mark.parametrize(
    ("raw", "nodes", "words"),
    [
        (["0:6"], 2, "1 stages for [runtime] nodes = 2"),
        (["0:6", "x"], 2, "'x' is not stage_index:layer_end_exclusive"),
        (["0:6", "0:8"], 2, "the same stage_index"),
        (["0:6", "1:6"], 2, "must rise"),
        (["1:8", "0:6"], 2, "main node (first) must serve the first stage"),
    ],
)
def test_bad_stages_name_key_value_source_and_fix(raw: list[str], nodes: int, words: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_stages(raw, nodes, "file /tmp/c.toml:3")
    text = str(caught.value)
    assert words in text and "[runtime] node_stages" in text and "/tmp/c.toml:3" in text
    assert "fix" in text or "must serve" in text
