"""One run, top to bottom: offers → lease walk → node up → prompts → confirmed teardown.

`RunEngine` owns every resource a run holds (provider client, SSH session, prompt queue,
RPC server, datastream archive) and releases them in `aclose`. It reports through its
event sink and the channel hub only; the dashboard and headless mode both drive it.
"""

from __future__ import annotations

from mvp_tui.engine.failures import RunFailed
from mvp_tui.engine.run_core import NODE_CLUSTER_SOURCE, local_port_free
from mvp_tui.engine.run_lease import LeasePhase
from mvp_tui.providers.base import ProviderError


class RunEngine(LeasePhase):
    """Drives one run. Call `search_offers`, `lease`, `bring_up`, `start_prompts`, and
    always the teardown steps (tears down what was leased, confirmed) then `aclose`.

    The phases live in their own modules, each building on the ones below it: the shared
    state and checks (run_core), bring-up (run_bringup), serving (run_serve), teardown
    (run_teardown), attempts (run_attempts) and leasing (run_lease)."""


__all__ = ["NODE_CLUSTER_SOURCE", "ProviderError", "RunEngine", "RunFailed", "local_port_free"]
