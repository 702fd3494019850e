"""A fifth provider, added as a newcomer would (issue 39 item 4): a package under tests/
(tests/fakes/fifth_provider/: section, client, kind) joined by one `register(KIND)` call,
touching no other file, shows in `mvp-tui config`, on the board of the real dashboard, in
`mvp-tui offers` and in `down --all`, because every list of providers derives from the
kinds (providers/registry.py)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from mvp_tui.cli import main
from mvp_tui.providers import registry
from mvp_tui.widgets.offers import OffersPane
from tests.fakes.fifth_provider import client
from tests.fakes.fifth_provider.kind import KIND
from tests.tui.test_dashboard_run import dashboard
from tests.widgets.data import wait_until

TAG = "a1b2c3d4e5"  # this install's owner tag


@pytest.fixture
def fifth(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[client.Account]:
    """The fifth provider registered (the one line a newcomer adds), a fresh fake account
    with two offers, and an environment holding its key and nothing of the user's."""
    account = client.Account()
    account.add_offer("f-1", "RTX 5090", 0.61)
    account.add_offer("f-2", "L40S", 0.48)
    monkeypatch.setattr(client, "ACCOUNT", account)
    for name in [n for n in os.environ if n.startswith(("MVP_", "VAST", "RUNPOD"))]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("MVP_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("MVP_FIFTH_API_KEY", account.key)
    registry.register(KIND)
    try:
        yield account
    finally:
        registry.unregister(KIND.name)


def test_it_is_in_every_derived_list_and_gone_once_unregistered(fifth: client.Account) -> None:
    assert "fifth" in registry.PROVIDERS and "fifth" in registry.RENTED
    assert list(registry.BOARD) == ["vastai", "runpod", "fifth", "local", "docker"]
    registry.unregister("fifth")
    assert "fifth" not in registry.PROVIDERS
    registry.register(KIND)  # the fixture's own again, for its teardown


def test_config_shows_its_section_and_takes_it_as_the_provider(
    fifth: client.Account, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--provider", "fifth", "config"]) == 0
    out = capsys.readouterr().out
    assert "[fifth]" in out
    assert 'kind = "fifth"' in out
    assert "region = \"eu-1\"" in out
    assert fifth.key not in out  # its key is a secret, as it declared


def test_offers_lists_its_offers(fifth: client.Account, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--provider", "fifth", "offers", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["provider"], r["offer_id"]) for r in rows] == [("fifth", "f-2"), ("fifth", "f-1")]


async def test_the_board_of_the_real_dashboard_shows_its_offers(
    fifth: client.Account, tmp_path: Path
) -> None:
    app, _seen = dashboard({"MVP_PROVIDER": "fifth", "MVP_FIFTH_API_KEY": fifth.key}, tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        pane = app.query_one(OffersPane)
        await wait_until(pilot, lambda: {"fifth:f-1", "fifth:f-2"} <= set(pane.table.keys), 30)
        app._exit_cleared = True


def test_down_all_asks_its_account_and_ends_what_carries_our_tag(
    fifth: client.Account, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Run from another provider's configuration (local): `--all` asks every provider that
    rents, the fifth too, and destroys its instance carrying this install's tag only."""
    ours = fifth.add_instance(f"mvp-{TAG}-r-0000aaaa-0-1")
    person = fifth.add_instance("mvp-2024-01-15")  # named like a run, not made here
    monkeypatch.setenv("MVP_LEASE_OWNER_TAG", TAG)
    monkeypatch.setenv("MVP_LEASE_DELETE_TIMEOUT_SECS", "10")
    monkeypatch.setenv("MVP_LEASE_RECONCILE_WAITS_SECS", "0.05")
    assert main(["--provider", "local", "down", "--all", "--yes"]) == 0
    assert ours not in fifth.instances and person in fifth.instances
    err = capsys.readouterr().err
    assert f"mvp-tui down --instance fifth:{person}" in err
