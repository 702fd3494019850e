"""The agent starts without loading HTTP (http.client pulls in email and ssl): its first
phases need none, so the engine starts sooner; the dashboard, which imports the agent's probe
for the local node, does not pay for it either (issue 14). Loaded from the built zipapp, as on
a node, every module of the agent imported."""

from __future__ import annotations

import subprocess
import sys

from mvp_tui.agent_bundle import agent_zip

HTTP = ("http.client", "urllib.request", "urllib.error")

LOAD = """
import sys
sys.path.insert(0, sys.argv[1])
import mvp_tui.node.main, mvp_tui.node.engine, mvp_tui.node.instance_api
class agent:
    probe_ready = mvp_tui.node.engine.probe_ready
    api_request = mvp_tui.node.instance_api.api_request
print(" ".join(m for m in {mods!r} if m in sys.modules))
{then}
print(" ".join(m for m in {mods!r} if m in sys.modules))
"""


def loaded(then: str) -> list[str]:
    code = LOAD.format(mods=HTTP, then=then)
    done = subprocess.run(
        [sys.executable, "-S", "-c", code, str(agent_zip())],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.splitlines()


def test_loading_the_agent_loads_no_http_and_a_probe_loads_it() -> None:
    at_start, after_probe = loaded('agent.probe_ready("http://127.0.0.1:9/v1/models")')
    assert at_start == ""
    assert after_probe.split() == ["http.client", "urllib.request", "urllib.error"]


def test_the_watchdogs_api_call_loads_http_itself_and_answers_without_raising() -> None:
    code = 'a = agent.api_request("GET", "http://127.0.0.1:9/x", "k"); print(a.status, a.error)'
    at_start, answer, after_call = loaded(code)
    assert at_start == ""
    assert answer.startswith("None ") and "refused" in answer.lower()  # port 9: nothing there
    assert after_call.split() == ["http.client", "urllib.request", "urllib.error"]
