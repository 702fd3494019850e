"""A tiny app that leases this machine with LocalProvider, reports the pids, then either
returns without any clean-up ("exit") or hangs until killed ("hang")."""

from __future__ import annotations

import asyncio
import json
import sys

from mvp_tui.providers.base import CreateRequest, Outcome, SelectionPolicy
from mvp_tui.providers.local.client import LocalProvider


async def main(model: str, mode: str) -> None:
    loaded = asyncio.get_running_loop().create_future()

    def on_line(kind: str, raw: bytes) -> None:
        if kind == "stdout" and b"WeightsLoaded" in raw and not loaded.done():
            loaded.set_result(json.loads(raw)["payload"])

    provider = LocalProvider(on_line=on_line)
    offer = (await provider.search_offers(SelectionPolicy()))[0]
    env = {"MVP_GGUF_LOCAL_PATH": model, "MVP_MODEL_ID": "tiny", "MVP_MAX_CONTEXT": "256"}
    request = CreateRequest(label="mvp-app-1-1", image="", env=env, disk_gb=0)
    created = await provider.create(offer, request)
    assert created.outcome is Outcome.CREATED, created
    payload = await asyncio.wait_for(loaded, 60)
    agent_pid = int(str(created.provider_id).removeprefix("local-"))
    print(json.dumps({"agent_pid": agent_pid, "engine_pid": payload["engine_pid"]}), flush=True)
    if mode == "hang":
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
