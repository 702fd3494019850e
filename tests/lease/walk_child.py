"""A lease walk in its own process, for the SIGKILL test: prints each event as a JSON line.

Usage: python -m tests.lease.walk_child <api_url> <state_dir> <run_id>
The API key comes from the environment (MVP_TEST_VAST_KEY), never from argv.
"""

from __future__ import annotations

import asyncio
import os
import sys

from mvp_tui.events import EngineEvent
from mvp_tui.lease import LeaseWalk, RecordStore, WalkSettings
from mvp_tui.providers.base import SelectionPolicy
from mvp_tui.providers.vastai.client import VastAiProvider


def _print(event: EngineEvent) -> None:
    print(event.to_json(), flush=True)


async def main(api_url: str, state_dir: str, run_id: str) -> None:
    provider = VastAiProvider(api_key=os.environ["MVP_TEST_VAST_KEY"], api_url=api_url)
    try:
        offers = await provider.search_offers(SelectionPolicy())
        settings = WalkSettings(
            poll_interval_s=0.05, ready_timeout_s=120.0, image="ghcr.io/example/node:1"
        )
        walk = LeaseWalk(provider, RecordStore(state_dir), _print, settings, run_id=run_id)
        await walk.run(offers)
    finally:
        await provider.aclose()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
