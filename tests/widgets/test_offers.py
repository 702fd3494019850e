"""The Offers pane driven by keys: a keyed view of the model, cursor kept by offer id."""

from __future__ import annotations

from dataclasses import replace

from textual.widgets import DataTable, Static

from mvp_tui.widgets.offers import OffersPane
from mvp_tui.widgets.offers_model import MAX_ROWS, OffersModel, SortKey
from tests.widgets.data import many_offers, offer, small_offers
from tests.widgets.harness import Harness, screen_text

SIZE = (160, 48)


def harness() -> Harness:
    return Harness(lambda: [OffersPane(provider="vastai")])


def table_keys(pane: OffersPane) -> list[str]:
    return [row.key.value or "" for row in pane.table.ordered_rows]


async def loaded(app: Harness) -> OffersPane:
    pane = app.query_one(OffersPane)
    pane.set_offers(small_offers())
    pane.focus()
    return pane


async def test_empty_pane_says_what_comes_and_dims_its_keys() -> None:
    app = harness()
    async with app.run_test(size=SIZE) as pilot:
        pane = app.query_one(OffersPane)
        assert pane.query_one(".empty", Static).display
        assert not pane.table.display
        for action in ("filter", "sort", "pick", "lease"):
            assert pane.check_action(action, ()) is None  # dimmed, not hidden
        pane.focus()
        await pilot.press("enter", "space", "s")
        assert app.of(OffersPane.LeaseRequested) == []


async def test_sort_cycles_and_keeps_the_cursor_on_the_same_offer() -> None:
    app = harness()
    async with app.run_test(size=SIZE) as pilot:
        pane = await loaded(app)
        await pilot.pause()
        assert table_keys(pane) == ["1004", "1001", "1002", "1003", "1005", "1006"]  # $/h ↑
        await pilot.press("down", "down")  # on 1002
        assert pane.table.cursor_key() == "1002"
        seen = []
        for _ in range(len(SortKey)):
            await pilot.press("s")
            seen.append(pane.model.sort_key)
            assert pane.table.cursor_key() == "1002"
            assert table_keys(pane) == pane.model.view()
        assert seen == [*list(SortKey)[1:], SortKey.PRICE]
        await pilot.press("s", "s")  # VRAM, biggest first
        assert table_keys(pane)[:2] == ["1005", "1006"]
        assert "sort VRAM ↓" in str(pane.border_subtitle)
        await pilot.press("S")
        assert "sort VRAM ↑" in str(pane.border_subtitle)
        assert pane.table.cursor_key() == "1002"


async def test_filter_narrows_and_escape_restores() -> None:
    app = harness()
    async with app.run_test(size=SIZE) as pilot:
        pane = await loaded(app)
        await pilot.press("down")  # 1001
        await pilot.press("slash", "o", "h", "i", "o")
        assert sorted(table_keys(pane)) == ["1002", "1005"]
        assert "2 match" in str(pane.border_subtitle) and "filter 'ohio'" in str(
            pane.border_subtitle
        )
        await pilot.press("escape")
        assert len(table_keys(pane)) == 6
        assert pane.model.filter_text == ""
        assert "filter" not in str(pane.border_subtitle)
        assert pane.table.cursor_key() == "1001"  # back on the offer it was on
        assert app.focused is pane.table


async def test_filter_kept_with_enter_matches_every_word() -> None:
    app = harness()
    async with app.run_test(size=SIZE) as pilot:
        pane = await loaded(app)
        await pilot.press("slash", *"4090 texas", "enter")
        assert table_keys(pane) == ["1001"]
        assert app.focused is pane.table
        await pilot.press("escape")  # Esc on the table drops a kept filter too
        assert len(table_keys(pane)) == 6


async def test_space_builds_the_ordered_pick_list_and_enter_leases_in_that_order() -> None:
    app = harness()
    async with app.run_test(size=SIZE) as pilot:
        pane = await loaded(app)
        # rows: 1004 1001 1002 1003 1005 1006; pick 1003, then 1001, then 1005
        await pilot.press("down", "down", "down", "space", "up", "up", "space")
        await pilot.press("down", "down", "down", "space")
        assert pane.model.picks == ("1003", "1001", "1005")
        pick_column = [pane.table.get_row(k)[0].plain for k in ("1003", "1001", "1005", "1004")]
        assert pick_column == ["1", "2", "3", ""]
        await pilot.press("up", "up", "up", "space")  # 1001 out: 1005 moves up to 2
        assert pane.model.picks == ("1003", "1005")
        assert pane.table.get_row("1005")[0].plain == "2"
        assert "2 picked" in str(pane.border_subtitle)
        await pilot.press("enter")
        await pilot.pause()
        (message,) = app.of(OffersPane.LeaseRequested)
        assert isinstance(message, OffersPane.LeaseRequested)
        assert [o.offer_id for o in message.offers] == ["1003", "1005"]


async def test_enter_without_picks_leases_the_highlighted_offer() -> None:
    app = harness()
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app)
        await pilot.press("down", "enter")
        await pilot.pause()
        (message,) = app.of(OffersPane.LeaseRequested)
        assert isinstance(message, OffersPane.LeaseRequested)
        assert [o.offer_id for o in message.offers] == ["1001"]


async def test_refresh_with_new_prices_updates_cells_in_place() -> None:
    app = harness()
    async with app.run_test(size=SIZE) as pilot:
        pane = await loaded(app)
        await pilot.press("down", "down")  # 1002
        table: DataTable[object] = pane.table
        added: list[str] = []
        removed: list[str] = []
        original_add, original_remove = table.add_row, table.remove_row
        table.add_row = lambda *a, **k: added.append(k["key"]) or original_add(*a, **k)  # type: ignore[method-assign]
        table.remove_row = lambda key: removed.append(key) or original_remove(key)  # type: ignore[method-assign]
        fresh = [replace(o, price_per_hour=o.price_per_hour + 0.001) for o in small_offers()]
        pane.set_offers(fresh)
        await pilot.pause()
        assert added == [] and removed == []  # updated in place, no row rebuilt
        assert table.row_count == 6
        assert pane.table.cursor_key() == "1002"
        assert table.get_cell("1002", "$/h").plain == "0.351"
        # One offer gone, one new: a diff, cursor still by key.
        fresh = [*fresh[:2], *fresh[3:], offer("1007", 0.05, "RTX 4080")]
        pane.set_offers(fresh)
        await pilot.pause()
        assert added == ["1007"] and removed == ["1003"]
        assert table_keys(pane)[0] == "1007"  # sorted by $/h: the new cheapest first
        assert pane.table.cursor_key() == "1002"


async def test_picks_of_offers_that_disappear_are_dropped() -> None:
    app = harness()
    async with app.run_test(size=SIZE) as pilot:
        pane = await loaded(app)
        await pilot.press("space", "down", "space")  # 1004, 1001
        pane.set_offers([o for o in small_offers() if o.offer_id != "1004"])
        await pilot.pause()
        assert pane.model.picks == ("1001",)
        assert pane.table.get_row("1001")[0].plain == "1"


async def test_provider_text_is_shown_literally_sanitised() -> None:
    app = harness()
    async with app.run_test(size=SIZE) as pilot:
        pane = app.query_one(OffersPane)
        evil = offer("666", 0.1, "[bold red]x[/] \x1b[31mRTX\x1b[0m", where="\x1b]0;pwn\x07Mars[/]")
        pane.set_offers([evil])
        await pilot.pause()
        gpu = pane.table.get_cell("666", "GPU")
        assert gpu.plain == "[bold red]x[/] RTX"
        assert gpu.spans == []  # no style came from the provider's text
        assert pane.table.get_cell("666", "where").plain == "Mars[/]"
        text = screen_text(app)
        assert "[bold red]x[/] RTX" in text and "\x1b" not in text


async def test_ten_thousand_offers_show_the_best_rows_and_count_all() -> None:
    app = harness()
    async with app.run_test(size=SIZE) as pilot:
        pane = app.query_one(OffersPane)
        offers = many_offers(10_000)
        pane.set_offers(offers)
        await pilot.pause()
        assert pane.table.row_count == MAX_ROWS
        cheapest = min(offers, key=lambda o: (o.price_per_hour, o.offer_id))
        assert table_keys(pane)[0] == cheapest.offer_id
        assert f"10000 match (best {MAX_ROWS})" in str(pane.border_subtitle)


def test_model_sorts_on_raw_values_not_formatted_text() -> None:
    model = OffersModel()
    model.set_offers([offer("a", 10.0), offer("b", 9.5), offer("c", 100.25)])
    assert model.view() == ["b", "a", "c"]  # text order would be 10, 100.25, 9.5
    model.reverse_sort()
    assert model.view() == ["c", "a", "b"]


def test_model_chosen_prefers_picks_in_order() -> None:
    model = OffersModel()
    model.set_offers(small_offers())
    assert [o.offer_id for o in model.chosen("1002")] == ["1002"]
    model.toggle_pick("1005")
    model.toggle_pick("1001")
    assert [o.offer_id for o in model.chosen("1002")] == ["1005", "1001"]
    assert model.chosen(None) == model.chosen("x")
