"""Bad usage or configuration: exit 2 before anything starts — no create reaches the
provider, no lease is on record."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fakes.vastai_server import FakeVast
from tests.faults.harness import Verdict, acli

CASES = {
    "billing-provider-without-yes": (["--until", "leased"], {}, "--yes"),
    "bad-config-value": (["--yes"], {"MVP_PROMPT_MAX_TOKENS": "-3"}, "max_tokens"),
    "unknown-provider": (["--yes"], {"MVP_NODE_PROVIDER": "nosuch"}, "nosuch"),
}


@pytest.mark.parametrize("case", list(CASES))
async def test_bad_usage_exits_2_and_creates_nothing(
    case: str, fake: FakeVast, env: dict[str, str], state: Path, verdict: Verdict
) -> None:
    args, extra, named = CASES[case]
    up = await acli("up", "--headless", *args, env={**env, **extra})
    verdict.exit_code(up.returncode, up.stderr, expected=2, what=case)
    assert named in up.stderr, f"stderr does not name {named!r}: {up.stderr!r}"
    creates = [r for r in fake.requests if r.method == "PUT" and "/asks/" in r.path]
    assert creates == [], "a create reached the provider"
    verdict.nothing_bills(fake, state)
