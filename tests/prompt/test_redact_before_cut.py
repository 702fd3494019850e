"""The prompt client redacts the engine's text before it cuts it: an API key echoed at a
cut limit (an error body, a bad chunk, an error code) never keeps a prefix (issue 8)."""

from __future__ import annotations

import json

import pytest

from mvp_tui.prompt.client import PromptClient
from mvp_tui.prompt.events import PromptFault
from tests.prompt.fake_openai import Canned, fake_openai, sse

KEY = "fake-engine-key-4f9c2e7b1a0d5e6f8a7b"


def straddling(limit: int) -> str:
    return "x" * (limit - 12) + KEY + " and more"


@pytest.mark.parametrize(
    "canned",
    [
        Canned(502, [straddling(200).encode()], "text/html"),  # the body's snippet
        Canned(200, sse(straddling(80))),  # a chunk that is not JSON
        Canned(200, [f"data: [{json.dumps(straddling(80))}]\n\n".encode()]),  # not an object
        Canned(400, [json.dumps({"error": {"message": "no", "code": straddling(80)}}).encode()]),
    ],
    ids=["http-body", "chunk-not-json", "chunk-not-object", "error-code"],
)
async def test_a_key_at_a_cut_limit_leaves_no_prefix(canned: Canned) -> None:
    async with (
        fake_openai(canned) as fake,
        PromptClient(fake.base_url, "m", api_key=KEY) as client,
    ):
        events = [e async for e in client.stream("hi", 4)]
    (fault,) = [e for e in events if isinstance(e, PromptFault)]
    assert "<redacted>" in fault.error + (fault.code or "")
    for text in (fault.error, fault.code or "", repr(fault)):
        assert KEY[:8] not in text, text
