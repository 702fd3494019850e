"""Host memory on the Offers pane: offers whose host failed recently carry a badge, come after
the others in every sort and direction, stay pickable, and `i` shows why."""

from __future__ import annotations

from mvp_tui.providers.base import Offer
from mvp_tui.widgets.detail import DetailScreen
from mvp_tui.widgets.offers import OffersPane
from mvp_tui.widgets.offers_model import FAILED, OffersModel, SortKey
from tests.widgets.data import small_offers
from tests.widgets.harness import Harness
from tests.widgets.test_offers import keys, painted

ESC = "\x1b"
WHY = "failed 2 h ago at ssh: SSH refused after 12 tries (run r-7f3a)"


def failing(*offer_ids: str, why: str = WHY):  # type: ignore[no-untyped-def]
    def text(offer: Offer) -> str | None:
        return why if offer.offer_id in offer_ids else None

    return text


def model_with_memory(*offer_ids: str) -> OffersModel:
    model = OffersModel()
    model.set_offers(small_offers())
    model.set_failures(failing(*offer_ids))
    return model


def test_failed_hosts_come_last_in_every_sort_and_direction() -> None:
    plain = OffersModel()
    plain.set_offers(small_offers())
    model = model_with_memory("1002", "1005")
    for _ in SortKey:
        for _direction in range(2):
            before = plain.view()
            expected = [k for k in before if k not in keys("1002", "1005")] + [
                k for k in before if k in keys("1002", "1005")
            ]
            assert model.view() == expected, (model.sort_key, model.ascending)
            plain.reverse_sort()
            model.reverse_sort()
        plain.cycle_sort()
        model.cycle_sort()


def test_the_badge_is_in_the_pick_cell_and_a_pick_keeps_it() -> None:
    model = model_with_memory("1002")
    (key,) = keys("1002")
    assert model.row(key).failed and model.row(key).cells[0] == FAILED
    assert model.failure(key) == WHY
    model.toggle_pick(key)  # still pickable by hand
    assert model.picks == (key,)
    assert model.row(key).cells[0] == f"1 {FAILED}"
    assert model.widths()[0] >= len(f"{model.total} {FAILED}")
    assert "1 failed host last" in model.subtitle("vastai")
    (other,) = keys("1001")
    assert not model.row(other).failed and model.failure(other) is None


def test_enter_on_a_failed_offer_leases_it_and_the_walk_reaches_it_last() -> None:
    model = model_with_memory("1002")
    first = model.view()[0]
    chosen = [f"vastai:{o.offer_id}" for o in model.chosen(first, max_attempts=99)]
    assert chosen[-1] == "vastai:1002"
    assert [o.offer_id for o in model.chosen("vastai:1002")] == ["1002"]


def test_memory_survives_a_refresh_and_follows_the_offers() -> None:
    model = model_with_memory("1002")
    model.update_offers(small_offers(), providers=["vastai"])
    assert model.row("vastai:1002").failed and model.view()[-1] == "vastai:1002"
    model.set_failures(lambda offer: None)  # the host served since: the badge goes
    assert not model.row("vastai:1002").failed
    assert "failed host" not in model.subtitle("vastai")


def test_the_reason_is_cleaned() -> None:
    model = OffersModel()
    model.set_offers(small_offers())
    model.set_failures(failing("1002", why=f"failed {ESC}[2J at ssh: [bold]x[/bold]\nnext"))
    text = model.failure("vastai:1002")
    assert text is not None and ESC not in text and "\n" not in text
    assert "[bold]x[/bold]" in text  # kept as text: the detail view never reads markup


async def test_the_pane_badges_sorts_last_and_i_shows_why() -> None:
    app = Harness(lambda: [OffersPane(provider="vastai")])
    async with app.run_test(size=(160, 48)) as pilot:
        pane = app.query_one(OffersPane)
        pane.update_offers(small_offers(), providers=["vastai"], failures=failing("1002"))
        pane.focus()
        await pilot.pause()
        table = pane.table
        assert table.keys[-1] == "vastai:1002"
        assert painted(table, "vastai:1002").split()[0] == FAILED  # the badge, on screen
        await pilot.press("end", "i")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, DetailScreen)
        assert WHY in screen.text and "tried after the others" in screen.text
        await pilot.press("escape")
        await pilot.pause()
        await pilot.press("space")  # picked by hand, badge and all
        assert pane.model.picks == ("vastai:1002",)
        await pilot.press("enter")
        await pilot.pause()
        requested = [m for m in app.received if isinstance(m, OffersPane.LeaseRequested)]
        assert [o.offer_id for o in requested[-1].offers] == ["1002"]
