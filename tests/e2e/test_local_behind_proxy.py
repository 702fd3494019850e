"""As a user behind a corporate proxy runs it: with HTTP_PROXY, HTTPS_PROXY and ALL_PROXY
(both cases) pointing at a local listener that counts its connections, a whole local run
(`up --headless --prompt … --down-after`) serves its prompt and tears down, and the proxy
sees none of the engine's loopback traffic (before: the run never became ready)."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.headless import HeadlessRun
from tests.prompt.test_no_proxy import PROXY_VARS, CountingProxy


async def test_a_local_run_with_proxy_variables_serves_without_the_proxy(
    tiny_gguf: Path, tmp_path: Path
) -> None:
    proxy = CountingProxy()
    env = {name: proxy.url for name in PROXY_VARS} | {"NO_PROXY": "", "no_proxy": ""}
    args = ["--gguf-local-path", str(tiny_gguf), "--prompt", "hello", "--max-tokens", "8",
            "--down-after", "--rpc-bind", "127.0.0.1:0"]
    try:
        async with HeadlessRun(args, tmp_path / "state", env=env) as run:
            code = await run.finish(within=120)
    finally:
        proxy.close()
    assert code == 0, run.stderr
    (done,) = run.events("prompt_done")
    assert done["tokens_generated"] >= 1
    assert proxy.connections == 0
