"""The model picker in the real `mvp-tui` dashboard, by keys in a pseudo-terminal: at 80x24,
a search on the fake hub, a repo's quants with the largest one the board's RTX 3090 holds, a
split quant refused with why, a gated repo's error; then the terminal grows to 160x48 (the
tables side by side) and `s` uses a quant and saves it. The board's fit is read again for
the chosen model, the config file keeps its comments, and `q` quits with nothing leased."""

from __future__ import annotations

import asyncio
from pathlib import Path

from mvp_tui.rehearsal.vastai_server import FakeVast
from tests.fakes.hf_hub_server import picker_hub
from tests.faults.pty_dashboard import PtyDashboard
from tests.faults.test_dashboard_exits import (  # noqa: F401  (fixtures)
    closed_port,
    fake,
    vast_env,
)

DOWN, UP, ESC = b"\x1b[B", b"\x1b[A", b"\x1b"
CHOSEN = "Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf"


async def test_the_picker_by_keys_at_80x24_then_160x48(fake: FakeVast, tmp_path: Path) -> None:  # noqa: F811
    config = tmp_path / "config.toml"
    config.write_text("# my dashboard\n[ui]\ntheme = \"mvp-dark\"  # dark\n")
    with picker_hub() as hub:
        env = {**vast_env(fake, tmp_path), "MVP_HF_ENDPOINT": hub.url, "MVP_CONFIG": str(config)}
        term = PtyDashboard(env, cols=80, rows=24)

        async def shows(text: str, since: int = 0) -> None:
            await asyncio.to_thread(term.wait_for, text, 60, since)

        def press(keys: bytes) -> int:
            at = len(term.output)
            term.press(keys)
            return at

        try:
            await shows("RTX 3090")  # the board is up
            await shows("search the hub", press(b"m"))
            at = press(b"llama\r")
            await shows("unsloth/Llama-3.3-70B", at)
            await shows("Q5_K_M", press(b"\r"))  # the most downloaded repo's quants
            await shows("RTX 3090 ×1", at)  # below them: the largest quant it holds
            await shows("GGUF repos:", press(ESC))  # back to the repos
            await shows("69.0 GB", press(DOWN + b"\r"))  # the split repo: Q8_0's two parts
            await shows("split into 2 files", press(DOWN + b"\r"))
            await shows("GGUF repos:", press(ESC))
            await shows("is gated", press(DOWN + b"\r"))
            await shows("HF_TOKEN is not set")

            at = len(term.output)
            term.resize(160, 48)
            await shows("Model now:", at)  # drawn again at the new size
            at = press(UP + UP + b"\r")
            await shows("right, the largest quant", at)  # side by side at this width
            await shows("next lease serves", press(DOWN + b"s"))  # Q4_K_M: used and saved
            # The board's fit follows: the chosen file's size and header are read.
            await asyncio.to_thread(hub.wait_for_request, f"/resolve/main/{CHOSEN}", 60)
            press(b"q")  # nothing leased: it quits
            code = await asyncio.to_thread(term.wait, 60)
        finally:
            term.kill()
    assert code == 0
    assert config.read_text() == (
        '# my dashboard\n[ui]\ntheme = "mvp-dark"  # dark\n\n[model]\n'
        f'gguf_repo = "bartowski/Meta-Llama-3.1-8B-Instruct-GGUF"\ngguf_file = "{CHOSEN}"\n')

