"""Seed 003 (`003_413a7f860c720e63.txt`, `preflight` / `one_line`, `VERDICT_CHARS` 200,
`preflight_timeout` 3 min): the node switch's verdict has its own timeout from the agent's
start, and every verdict reason is one printable line of at most 200 characters."""

from __future__ import annotations

import asyncio
import json

from mvp_tui.datastream.hub import ChannelHub
from mvp_tui.engine.events import NodeWatchdog
from mvp_tui.engine.verdict_wait import (
    VERDICT_CHARS,
    VERDICT_TIMEOUT_S,
    VerdictWait,
    no_verdict_reason,
    verdict_line,
)
from mvp_tui.engine.watchdog import verdict_event
from mvp_tui.secrets import Redactor

AGENT = "mvp.node.1.agent"


def phase(name: str, status: str, **detail: object) -> bytes:
    record = {"type": "NodeAgentPhase", "phase": name, "status": status, "detail": detail}
    return json.dumps(record).encode()


def test_the_verdict_timeout_is_the_seeds_three_minutes_in_its_words() -> None:
    assert VERDICT_TIMEOUT_S == 180.0
    assert no_verdict_reason(VERDICT_TIMEOUT_S) == "no verdict within 180s"


async def test_no_verdict_after_the_agent_started_is_a_refusal_in_time() -> None:
    hub, wait = ChannelHub(), VerdictWait(timeout_s=0.05)
    hub.listeners.append(wait)
    expired = asyncio.ensure_future(wait.expired())
    await asyncio.sleep(0)
    hub.publish("mvp.node.1.engine", b"not the agent")
    await asyncio.sleep(0.1)
    assert not expired.done(), "the clock starts with the agent, not before"
    hub.publish(AGENT, phase("config", "started"))
    async with asyncio.timeout(5):
        assert await expired == "no verdict within 0.05s"


async def test_a_verdict_in_time_is_never_refused_and_a_new_attempt_starts_afresh() -> None:
    hub, wait = ChannelHub(), VerdictWait(timeout_s=0.05)
    hub.listeners.append(wait)
    hub.publish(AGENT, phase("config", "ready"))
    hub.publish(AGENT, phase("watchdog", "ready", armed=True))
    expired = asyncio.ensure_future(wait.expired())
    done, _ = await asyncio.wait([expired], timeout=0.2)
    assert not done
    expired.cancel()
    wait.reset()  # the next attempt's node
    hub.publish(AGENT, phase("config", "ready"))
    async with asyncio.timeout(5):
        assert await wait.expired() == "no verdict within 0.05s"


def test_a_verdict_is_one_short_line_of_printable_ascii() -> None:
    """The seed's own cases (`a_verdict_is_one_short_line_of_printable_ascii`); escape
    sequences go whole here, not only their ESC byte."""
    assert verdict_line("ready\n") == "ready"
    # The seed keeps "[31m" (it drops only the ESC byte); controls go without a space.
    assert verdict_line("failed http_403\x1b[31m\r\nsecond line\x07") == (
        "failed http_403second line"
    )
    assert verdict_line("failed caf\u00e9") == "failed caf"
    long = "failed " + "x" * 5000
    assert len(verdict_line(long)) == VERDICT_CHARS == 200
    assert len(verdict_line(long, 64)) == 64


def test_the_switch_verdict_event_carries_the_reduced_line_redacted() -> None:
    secret = "rpa_" + "k" * 40
    reason = f"\x1b]8;;http://x\x07[bold red]HTTP 403[/] key {secret} \u202e" + "y" * 900
    record = {"type": "NodeAgentPhase", "phase": "watchdog", "status": "failed",
              "detail": {"reason": reason}}
    event = verdict_event(record, "r-5eed0201", 0.0, Redactor([secret]))
    assert event is not None and event.status == "failed"
    assert len(event.reason) <= VERDICT_CHARS and event.reason.isascii()
    assert event.reason.isprintable() and "\x1b" not in event.reason
    assert secret not in event.reason
    # Kept as text (panes build rich Text from it, never markup).
    assert event.reason.startswith("[bold red]HTTP 403[/] key ")


def test_a_refused_switch_or_guard_is_scoped_to_the_run_and_an_unreachable_api_to_the_host(
) -> None:
    """Seed 003 refuses the run on a failed verdict: a key without the right (or none) fails
    the same on every host. Decided per cause here: a node that cannot reach the API, or
    says nothing in time, is that host's failure and the walk tries the next offer. This
    checks the scope each verdict gets; that a run-scoped one stops the run (one lease, the
    second offer never rented) is checked end to end by
    tests/e2e/test_node_watchdog.py::test_a_node_that_cannot_destroy_itself_is_not_run."""
    from mvp_tui.engine.events import NodeBootGuard
    from mvp_tui.engine.failures import FailureScope
    from mvp_tui.engine.watchdog import no_verdict, switch_refusal

    def verdict(**detail: object) -> NodeWatchdog:
        record = {"type": "NodeAgentPhase", "phase": "watchdog", "status": "failed",
                  "detail": detail}
        event = verdict_event(record, "r-5eed0202", 0.0, None)
        assert event is not None
        return event

    refused = verdict(reason="Vast refused the instance key (HTTP 401)", scope="run")
    unreachable = verdict(reason="cannot reach the Vast API to prove the switch", scope="host")
    old_agent = verdict(reason="no CONTAINER_API_KEY")  # an agent that names no scope
    guard = NodeBootGuard(at=0.0, run_id="r", status="failed", reason="no instance key")
    scopes = {
        name: (failure.scope, failure.kind) if failure is not None else None
        for name, failure in {
            "refused": switch_refusal(refused, None),
            "unreachable": switch_refusal(unreachable, None),
            "old agent": switch_refusal(old_agent, None),
            "guard": switch_refusal(unreachable, guard),  # the guard's refusal comes first
            "silent": switch_refusal(no_verdict("r", 0.0, no_verdict_reason(180.0)), None),
            "ready": switch_refusal(NodeWatchdog(at=0.0, run_id="r", status="ready"), None),
        }.items()
    }
    assert scopes == {
        "refused": (FailureScope.RUN, "switch_failed"),
        "unreachable": (FailureScope.HOST, "switch_failed"),
        "old agent": (FailureScope.RUN, "switch_failed"),
        "guard": (FailureScope.RUN, "guard_failed"),
        "silent": (FailureScope.HOST, "switch_failed"),
        "ready": None,
    }
    failure = switch_refusal(refused, None)
    assert failure is not None and "require_node_watchdog = false" in failure.fix
