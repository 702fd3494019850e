"""The engine's debug lines that carry a prompt or an answer never leave the node: at `-lv 4`
(the multi-node main) llama-server logs request and response bodies and streamed chunks;
the agent drops them before framing, so neither the engine channel nor the agent's log has
them, while the load lines around them stay."""

from __future__ import annotations

import json
from pathlib import Path

from mvp_tui.node.engine_lines import PrivateLines
from tests.agent.agent_run import AgentRun, agent_env

PROMPT = "the-users-private-question-7f3a"
ANSWER = "the-models-private-answer-91bc"
# As llama-server prints them at -lv 4 (server-http.cpp log_server_request, SRV_DBG).
LOG = "\n".join([
    "load_tensors: CPU_Mapped model buffer size =   637.83 MiB",
    "srv  log_server_r: request: POST /v1/chat/completions 127.0.0.1 200",
    'srv  log_server_r: request:  {"messages":[{"role":"user","content":"' + PROMPT + '"}]}',
    'srv  log_server_r: response: {"choices":[{"message":{"content":"' + ANSWER + '"}}]}',
    'srv          send: http: streamed chunk: data: {"choices":[{"delta":{"content":"'
    + ANSWER + '"}}]}',
    'srv  log_server_r: request:  {"messages": [',
    '  {"role": "user", "content": "' + PROMPT + ' with } and ] inside"}',
    "]}",
    "slot print_timing: id  0 | task 1 | prompt eval time =      10.00 ms",
]) + "\n"


def test_body_lines_and_their_continuations_are_dropped_the_rest_kept() -> None:
    private = PrivateLines()
    kept = [line for line in LOG.splitlines() if private.keep(line)]
    assert kept == [
        "load_tensors: CPU_Mapped model buffer size =   637.83 MiB",
        "srv  log_server_r: request: POST /v1/chat/completions 127.0.0.1 200",
        "slot print_timing: id  0 | task 1 | prompt eval time =      10.00 ms",
    ]
    assert private.dropped == 6


async def test_the_agent_frames_none_of_them(
    tmp_path: Path, tiny_model: Path, path_with: str
) -> None:
    log = tmp_path / "engine.log"
    log.write_text(LOG)
    env = agent_env(tmp_path, PATH=path_with, MVP_GGUF_LOCAL_PATH=str(tiny_model),
                    FAKE_LOADING_PROBES="0", FAKE_LOG_FILE=str(log))
    run = await AgentRun.start(env)
    try:
        assert (await run.weights())["type"] == "WeightsLoaded"
        await run.send("shutdown\n")
        assert await run.wait_exit() == 0
    finally:
        await run.kill()
    engine = [json.dumps(x) if not isinstance(x, str) else x
              for x in run.channel("mvp.node.1.engine")]
    assert any("model buffer size" in line for line in engine)
    out = bytes(run.stdout + run.stderr)
    assert PROMPT.encode() not in out and ANSWER.encode() not in out
