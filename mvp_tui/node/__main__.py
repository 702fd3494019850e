"""`python3 agent.pyz` (the built zipapp) and `python -m mvp_tui.node`: run the node agent;
with `follow ...` or `stop ...` as the first arguments, the node's log reader and stopper
instead (mvp_tui/node/follow.py), which load nothing of the agent."""

from __future__ import annotations

import sys


def run() -> int:
    """The agent, or the reader/stopper the first argument names; the exit code."""
    if sys.argv[1:2] in (["follow"], ["stop"]):
        from mvp_tui.node.follow import main as follow

        return follow()
    from mvp_tui.node.main import main

    return main()


if __name__ == "__main__":
    sys.exit(run())
