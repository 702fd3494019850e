"""The Prompt pane (history, submit, cancel, streaming, faults) and the lease confirm modal."""

from __future__ import annotations

from textual.widgets import Static

from mvp_tui.engine.events import NodeReady
from mvp_tui.prompt.events import (
    FaultKind,
    PromptDone,
    PromptFault,
    PromptQueued,
    PromptRpcListening,
    PromptStarted,
    TextDelta,
)
from mvp_tui.ssh.events import PortForwarded
from mvp_tui.widgets.facts import NodeServing
from mvp_tui.widgets.lease_confirm import LeaseConfirmScreen, LeaseLimits
from mvp_tui.widgets.prompt import PromptPane
from tests.widgets.data import T0, small_offers
from tests.widgets.harness import Harness, screen_text

SIZE = (160, 48)


def harness() -> Harness:
    return Harness(lambda: [PromptPane()])


def stats(pane: PromptPane) -> str:
    """The figures line under the last answer, as the transcript draws it."""
    turn = pane.view.last_turn
    assert turn is not None and turn.figures in pane.view.text()
    return turn.figures


async def test_prompt_opens_when_the_node_serves_and_names_the_endpoints() -> None:
    app = harness()
    async with app.run_test(size=SIZE) as pilot:
        pane = app.query_one(PromptPane)
        assert pane.query_one(".empty", Static).display and not pane.input.display
        pane.post_message(NodeServing(NodeReady(at=T0, run_id="r", model_id="tiny-llama-q4",
                                                engine="llama.cpp",
                                                local_url="http://127.0.0.1:18081")))
        await pilot.pause()
        pane.handle_event(
            PortForwarded(at=T0, lease_key="7003", local_port=18080, remote_port=18081)
        )
        pane.handle_event(PromptRpcListening(at=T0, host="127.0.0.1", port=19777))
        await pilot.pause()
        assert pane.input.display and not pane.query_one(".empty", Static).display
        assert pane.border_subtitle == (
            "tiny-llama-q4 · also on 127.0.0.1:18080 (OpenAI) · rpc 127.0.0.1:19777"
        )


async def test_submit_posts_the_prompt_and_up_down_walk_the_history() -> None:
    app = harness()
    async with app.run_test(size=SIZE) as pilot:
        pane = app.query_one(PromptPane)
        pane.set_ready("tiny")
        pane.focus()
        await pilot.pause()
        assert app.focused is pane.input
        for text in ("first question", "second question"):
            await pilot.press(*text, "enter")
        await pilot.pause()
        assert [m.text for m in app.of(PromptPane.PromptSubmitted)] == [  # type: ignore[attr-defined]
            "first question",
            "second question",
        ]
        assert pane.input.value == ""
        await pilot.press(*"draft")
        await pilot.press("up")
        assert pane.input.value == "second question"
        await pilot.press("up")
        assert pane.input.value == "first question"
        await pilot.press("up")  # stays at the oldest
        assert pane.input.value == "first question"
        await pilot.press("down")
        assert pane.input.value == "second question"
        await pilot.press("down")
        assert pane.input.value == "draft"  # the unsent draft comes back


async def test_escape_posts_cancel_only_while_a_prompt_runs() -> None:
    app = harness()
    async with app.run_test(size=SIZE) as pilot:
        pane = app.query_one(PromptPane)
        pane.set_ready()
        pane.focus()
        await pilot.press("escape")
        assert app.of(PromptPane.PromptCancelRequested) == []
        pane.handle_event(PromptQueued(at=T0, prompt_id=1, text_chars=5, max_tokens=64, position=0))
        pane.handle_event(PromptStarted(at=T0, prompt_id=1))
        await pilot.press("escape")
        await pilot.pause()
        assert len(app.of(PromptPane.PromptCancelRequested)) == 1


async def test_answer_streams_as_markdown_with_live_figures_then_the_summary() -> None:
    app = harness()
    async with app.run_test(size=SIZE) as pilot:
        pane = app.query_one(PromptPane)
        pane.set_ready("tiny")
        pane.focus()
        await pilot.press(*"what is a lease?", "enter")
        pane.asked(4, "what is a lease?")  # the app hands back the id the queue gave it
        pane.handle_event(
            PromptQueued(at=T0, prompt_id=4, text_chars=16, max_tokens=64, position=0)
        )
        pane.handle_event(
            PromptQueued(
                at=T0,
                prompt_id=5,
                text_chars=9,
                max_tokens=64,
                position=1,
            )
        )
        pane.handle_event(PromptStarted(at=T0, prompt_id=4))
        words = ["A ", "**lease** ", "is ", "a ", "rented ", "GPU ", "\x1b[31m[red]", "node."]
        for i, word in enumerate(words):
            pane.handle_event(TextDelta(at=T0 + 0.18 + i * 0.01, prompt_id=4, text=word))
        turn = pane.view.last_turn
        assert turn is not None and turn.answer == "A **lease** is a rented GPU [red]node."
        # Plain while it streams: the markup is not read, the escape is gone.
        assert "A **lease** is a rented GPU [red]node." in pane.view.text()
        assert pane.view.text().startswith("> what is a lease?\n")
        live = stats(pane)
        assert "TTFT 180 ms" in live and "1 waiting" in live
        pane.handle_event(
            PromptDone(
                at=T0 + 1,
                prompt_id=4,
                final_text="",
                tokens_generated=8,
                elapsed_ms=900,
                ttft_ms=180,
                tokens_per_s=112.0,
                cost_usd=0.0002,
            )
        )
        await pilot.pause()
        assert stats(pane) == "8 tok · 112 tok/s · TTFT 180 ms · 0.90 s · $0.0002 · 1 waiting"
        assert "rented GPU [red]node." in screen_text(app)


async def test_a_fault_is_shown_as_such() -> None:
    app = harness()
    async with app.run_test(size=SIZE) as pilot:
        pane = app.query_one(PromptPane)
        pane.set_ready()
        pane.handle_event(PromptStarted(at=T0, prompt_id=2))
        pane.handle_event(
            PromptFault(
                at=T0 + 0.1,
                prompt_id=2,
                fault_kind=FaultKind.ENGINE_REJECTED,
                error="prompt is 5000 tokens, context is 4096",
                http_status=400,
                code="context_length_exceeded",
                fix="shorten the prompt or raise [model] max_context",
            )
        )
        await pilot.pause()
        assert pane.view.last_turn is not None and pane.view.last_turn.fault
        assert stats(pane).startswith("✗ context_length_exceeded (400): prompt is 5000 tokens")
        assert "fix: shorten the prompt" in stats(pane)


async def test_lease_confirm_starts_on_cancel_and_says_what_happens() -> None:
    results: list[bool | None] = []
    app = Harness(lambda: [Static("under")])
    async with app.run_test(size=SIZE) as pilot:
        limits = LeaseLimits(max_price_per_hour=0.5, max_spend_usd=5.0, max_hours=None)
        offers = small_offers()[:3]
        app.push_screen(LeaseConfirmScreen(offers, limits, provider="vastai"), results.append)
        await pilot.pause()
        assert app.screen.focused is not None and app.screen.focused.id == "lease-cancel"
        text = screen_text(app)
        assert "3 offers, tried in this order" in text
        assert "max $/h $0.50/h" in text and "max spend $5.00" in text
        assert "max hours not set" in text
        assert "next one is tried" in text and "confirm" in text
        await pilot.press("enter")
        await pilot.pause()
        app.push_screen(LeaseConfirmScreen(offers, limits, provider="vastai"), results.append)
        await pilot.pause()
        await pilot.press("escape")
        await pilot.pause()
        app.push_screen(LeaseConfirmScreen(offers, limits, provider="vastai"), results.append)
        await pilot.pause()
        await pilot.press("right", "enter")
        await pilot.pause()
        assert results == [False, False, True]
