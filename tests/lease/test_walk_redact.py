"""The walk redacts provider text before it cuts it: a secret straddling a cut limit (the
record's detail, a stop reason, a miss) never keeps a visible prefix (issue 8)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mvp_tui.events import RecordingSink
from mvp_tui.lease import LeaseWalk, RecordStore
from mvp_tui.providers.base import Outcome
from mvp_tui.secrets import Redactor
from tests.lease.conftest import fast_settings
from tests.lease.scripted import ScriptedProvider, Step, offer

SECRET = "vast-SECRET-key-4f9c2e7b1a0d5e6f"


@pytest.mark.parametrize(
    ("outcome", "limit"),
    [
        (Outcome.UNAVAILABLE, 200),  # the miss kept for the failure text
        (Outcome.REJECTED, 300),  # the stop reason
        (Outcome.REJECTED, 500),  # the attempt's detail in events and the record
    ],
)
async def test_a_secret_at_a_cut_limit_leaves_no_prefix(
    store: RecordStore, tmp_path: Path, outcome: Outcome, limit: int
) -> None:
    provider = ScriptedProvider()
    detail = "x" * (limit - 12) + SECRET + " tail"
    provider.steps.append(Step(outcome, http_status=400, detail=detail))
    sink = RecordingSink()
    redact = Redactor([SECRET])
    walk = LeaseWalk(provider, store, sink, fast_settings(), run_id="r-5ca1ab1e", redact=redact)
    result = await walk.run([offer("1")])
    assert not result.ok
    texts = [repr(event) for event in sink.events] + [result.reason]
    texts += [p.read_text() for p in (tmp_path / "state").rglob("*") if p.is_file()]
    assert any("<redacted>" in text for text in texts)
    for text in texts:
        assert SECRET[:8] not in text, text
