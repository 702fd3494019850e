"""Issue 40 §1: the Prompt pane holds a conversation. A local run whose engine is the fake
`llama-server` (tests/agent/fake_llama_server.py, on PATH), which records every chat request
it receives: the second question's request carries the first turn, and a long conversation
is trimmed from the oldest turn to fit `[model] max_context`, with the marker on screen."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from mvp_tui.engine.events import NodeReady, OffersListed
from mvp_tui.lease import events as lease
from mvp_tui.prompt.conversation import estimate_tokens
from mvp_tui.prompt.events import PromptDone
from mvp_tui.widgets.offers import OffersPane
from mvp_tui.widgets.prompt import PromptPane
from tests.fakes.tiny_gguf import write_tiny_gguf
from tests.tui.test_dashboard_run import dashboard, is_

FAKE = Path(__file__).parents[1] / "agent" / "fake_llama_server.py"
QUESTIONS = ["what is a GPU?", "and a TPU?", "which is cheaper?", "per hour?", "and per token?"]
MAX_TOKENS = 16


def fake_engine_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`llama-server` first on PATH is the fake; the requests it gets go to the file returned."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "llama-server"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE}" "$@"\n')
    script.chmod(0o755)
    requests = tmp_path / "requests.jsonl"
    monkeypatch.setenv("PATH", f"{bin_dir}:{Path(sys.executable).parent}:/usr/bin:/bin")
    monkeypatch.setenv("FAKE_REQUESTS_FILE", str(requests))
    monkeypatch.setenv("FAKE_LOADING_PROBES", "1")
    return requests


def turn_tokens(question: str, answer: str) -> int:
    return estimate_tokens(question) + estimate_tokens(answer)


async def test_each_question_carries_the_turns_that_fit_and_the_pane_marks_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    requests_file = fake_engine_on_path(tmp_path, monkeypatch)
    # Room for the question, the answer's max_tokens and two earlier turns, not three.
    turn = turn_tokens("which is cheaper?", "answer 3")
    context = MAX_TOKENS + estimate_tokens("and per token?") + 2 * turn + turn // 2
    model = write_tiny_gguf(tmp_path / "tiny.gguf")
    app, seen = dashboard({"MVP_GGUF_LOCAL_PATH": str(model),
                           "MVP_PROMPT_RPC_BIND": "127.0.0.1:0",
                           "MVP_MAX_CONTEXT": str(context),
                           "MVP_PROMPT_MAX_TOKENS": str(MAX_TOKENS),
                           "MVP_PROMPT_SYSTEM": "be brief"}, tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await seen.first(is_(OffersListed))
        await pilot.pause()
        await pilot.press("enter")  # local: $0, no confirm
        await seen.first(is_(NodeReady), within=60)
        await pilot.pause()
        assert app.focused is app.query_one("#prompt-input")
        for n, question in enumerate(QUESTIONS, 1):
            await pilot.press(*question, "enter")
            end = await seen.end_of(n, within=60)
            assert isinstance(end, PromptDone), end
            await pilot.pause()
        pane = app.query_one(PromptPane)
        for _ in range(100):  # the pane's facts are messages behind the recorded events
            if "not sent" in pane.view.text():
                break
            await pilot.pause()
        marker = next(line for line in pane.view.text().splitlines() if "not sent" in line)
        app.query_one(OffersPane).focus()
        await pilot.press("q")
        await pilot.pause()
        await pilot.press("enter")
        await seen.first(is_(lease.LeaseDeleted), within=60)
        await pilot.pause()

    received: list[dict[str, Any]] = [
        json.loads(line) for line in requests_file.read_text().splitlines()
    ]
    assert len(received) == len(QUESTIONS)
    said = [[(m["role"], m["content"]) for m in r["messages"]] for r in received]
    assert said[0] == [("system", "be brief"), ("user", "what is a GPU?")]
    # The second question's request carries the first turn, answer and all.
    assert said[1] == [("system", "be brief"), ("user", "what is a GPU?"),
                       ("assistant", "answer 1"), ("user", "and a TPU?")]
    # From the fourth on, only the last two turns fit: the oldest are dropped first.
    assert said[3] == [("system", "be brief"), ("user", "and a TPU?"), ("assistant", "answer 2"),
                       ("user", "which is cheaper?"), ("assistant", "answer 3"),
                       ("user", "per hour?")]
    assert said[4][1:] == [("user", "which is cheaper?"), ("assistant", "answer 3"),
                           ("user", "per hour?"), ("assistant", "answer 4"),
                           ("user", "and per token?")]
    assert all(r["max_tokens"] == MAX_TOKENS for r in received)
    assert "2 earlier turns not sent" in marker, marker
