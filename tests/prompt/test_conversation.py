"""Issue 40 §1: the conversation's requests (trimmed from the oldest turn to fit the context),
what the queue sends for the pane's turns and for the RPC's lone prompts, the sampling keys,
and the saved transcript."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mvp_tui.prompt.client import PromptClient
from mvp_tui.prompt.conversation import MAX_TURNS, Conversation, estimate_tokens
from mvp_tui.prompt.events import PromptDone, PromptSource
from mvp_tui.prompt.queue import PromptQueue, Sampling
from mvp_tui.prompt.transcript import SavedTurn, TranscriptLog
from tests.prompt.fake_openai import Canned, fake_openai, sse
from tests.prompt.waiting import WaitingSink


def answer(text: str) -> Canned:
    return Canned(200, sse({"choices": [{"delta": {"content": text}}]},
                           {"choices": [{"delta": {}, "finish_reason": "stop"}]}, "[DONE]"))


def roles(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(m["role"], m["content"]) for m in messages]


def test_the_estimate_is_bytes_over_four_plus_the_templates_share() -> None:
    assert estimate_tokens("") == 4
    assert estimate_tokens("abcd") == 5
    assert estimate_tokens("abcde") == 6
    assert estimate_tokens("é" * 4) == 6  # 8 UTF-8 bytes


def test_turns_are_dropped_from_the_oldest_to_fit_the_context() -> None:
    q, a = "q" * 40, "a" * 40  # 14 tokens each: a turn is 28
    convo = Conversation(context=16 + 4 + 14 + 2 * 28, system="sys")  # sys: 1 + 4
    for n in range(4):
        convo.record(f"{q}{n}"[:40], f"{a}{n}"[:40], convo.generation)
    request = convo.request(q, max_tokens=16)
    # Room for one turn beside the system prompt, the question and the answer's 16 tokens.
    assert (request.turns_sent, request.turns_dropped) == (1, 3)
    assert roles(request.messages)[0] == ("system", "sys")
    assert roles(request.messages)[1:] == [("user", f"{q}3"[:40]), ("assistant", f"{a}3"[:40]),
                                           ("user", q)]
    # A question too long for any turn goes alone (the engine says if it is too long).
    alone = convo.request("x" * 1000, max_tokens=16)
    assert (alone.turns_sent, alone.turns_dropped) == (0, 4)
    assert roles(alone.messages) == [("system", "sys"), ("user", "x" * 1000)]


def test_what_is_kept_is_bounded_by_the_context_and_a_count() -> None:
    convo = Conversation(context=100)
    for n in range(50):
        convo.record("q" * 40, f"answer {n}", convo.generation)
    assert 1 <= len(convo) <= 100 // 20  # a turn is at least 14 + 6 tokens
    assert convo.recorded == 50 and convo.request("q", 1).turns_dropped == 50 - len(convo)
    big = Conversation(context=10**9)
    for _ in range(MAX_TURNS + 100):
        big.record("q", "a", big.generation)
    assert len(big) == MAX_TURNS


def test_a_new_conversation_sends_nothing_earlier_and_a_late_answer_stays_out() -> None:
    convo = Conversation(context=4096)
    convo.record("one", "1", convo.generation)
    streaming = convo.generation  # a prompt started before ctrl+n
    convo.clear()
    convo.record("two", "2", streaming)  # its answer comes after: not a turn of the new one
    request = convo.request("three", 64)
    assert roles(request.messages) == [("user", "three")]
    assert (request.turns_sent, request.turns_dropped) == (0, 0)


async def test_the_queue_sends_the_pane_turns_with_sampling_and_rpc_prompts_alone() -> None:
    async with fake_openai(answer("one"), answer("solo"), answer("two")) as fake:
        sink = WaitingSink()
        client = PromptClient(fake.base_url, "tiny")
        queue = PromptQueue(lambda: client, sink, conversation=Conversation(4096, system="s"),
                            sampling=Sampling(temperature=0.5, top_p=0.9, seed=7))
        first = queue.submit("first", 32, turn=True)
        rpc = queue.submit("lone", 32, source=PromptSource.RPC)
        second = queue.submit("second", 32, turn=True)
        for prompt_id in (first, rpc, second):
            assert isinstance(await sink.end_of(prompt_id), PromptDone)
        await queue.aclose()
        await client.aclose()
    bodies = [body for _, body in fake.requests]
    assert roles(bodies[0]["messages"]) == [("system", "s"), ("user", "first")]
    assert roles(bodies[1]["messages"]) == [("user", "lone")]  # the seed's one prompt a request
    assert roles(bodies[2]["messages"]) == [("system", "s"), ("user", "first"),
                                            ("assistant", "one"), ("user", "second")]
    for body in bodies:
        assert (body["temperature"], body["top_p"], body["seed"]) == (0.5, 0.9, 7)


def test_the_saved_transcript_keeps_every_turn_up_to_its_bound(tmp_path: Path) -> None:
    log = TranscriptLog(kept=3)
    log.add(SavedTurn("what is a GPU?", "A **GPU**.", "9 tok"))
    log.new_conversation()
    for n in range(3):
        log.add(SavedTurn(f"q{n}", f"a{n}\x1b[31m", f"{n} tok", dropped_before=n))
    assert len(log) == 3 and log.let_go == 2
    assert log.last_answer == "a2\x1b[31m"
    path = log.save(tmp_path / "run", "title", now=0)
    text = path.read_text()
    assert path.parent == tmp_path / "run" and path.name == "transcript-19700101-000000.md"
    assert path.stat().st_mode & 0o777 == 0o600  # private, as the run's other records
    assert "*(2 earlier turns were not kept.)*" in text
    assert "> q1\n\na1\n\n*1 tok*" in text and "\x1b" not in text
    assert "*(2 earlier turns were not sent with the next question" in text
