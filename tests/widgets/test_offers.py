"""The Offers pane driven by keys and mouse: a virtual view of the model, cursor kept by id."""

from __future__ import annotations

from dataclasses import replace

from rich.cells import cell_len
from textual.widgets import Static

from mvp_tui.widgets.offers import OffersPane
from mvp_tui.widgets.offers_model import COLUMNS, OfferRow, OffersModel, SortKey, offer_key
from mvp_tui.widgets.offers_table import OffersTable
from tests.widgets.data import many_offers, offer, small_offers
from tests.widgets.harness import Harness, screen_text

SIZE = (160, 48)


def keys(*offer_ids: str) -> list[str]:
    """Board row keys of these fake Vast offers."""
    return [f"vastai:{offer_id}" for offer_id in offer_ids]


def harness() -> Harness:
    return Harness(lambda: [OffersPane(provider="vastai")])


def table_keys(pane: OffersPane) -> list[str]:
    return list(pane.table.keys)


def visible_rows(table: OffersTable) -> list[int]:
    """The row indexes painted on screen now (below the header)."""
    rows = (table.row_at(y) for y in range(table.scrollable_content_region.height))
    return [row for row in rows if row is not None]


def painted(table: OffersTable, key: str) -> str:
    """The text of the screen line that shows this offer's row (it must be on screen)."""
    index = table.keys.index(key)
    assert index in visible_rows(table), f"row {index} ({key}) is not on screen"
    return table.render_line(index - int(table.scroll_y) + 1).text


def pick_cell(table: OffersTable, key: str) -> str:
    return painted(table, key)[: 2 + len("pick")].strip()


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
        assert table_keys(pane) == keys("1004", "1001", "1002", "1003", "1005", "1006")  # $/h ↑
        await pilot.press("down", "down")  # on 1002
        assert pane.table.cursor_key() == "vastai:1002"
        seen = []
        for _ in range(len(SortKey)):
            await pilot.press("s")
            seen.append(pane.model.sort_key)
            assert pane.table.cursor_key() == "vastai:1002"
            assert table_keys(pane) == pane.model.view()
        assert seen == [*list(SortKey)[1:], SortKey.PRICE]
        await pilot.press("s", "s")  # VRAM, biggest first
        assert table_keys(pane)[:2] == ["vastai:1005", "vastai:1006"]
        assert "sort VRAM ↓" in str(pane.border_subtitle)
        await pilot.press("S")
        assert "sort VRAM ↑" in str(pane.border_subtitle)
        assert pane.table.cursor_key() == "vastai:1002"


async def test_filter_narrows_and_escape_restores() -> None:
    app = harness()
    async with app.run_test(size=SIZE) as pilot:
        pane = await loaded(app)
        await pilot.press("down")  # 1001
        await pilot.press("slash", "o", "h", "i", "o")
        assert sorted(table_keys(pane)) == ["vastai:1002", "vastai:1005"]
        assert "2 match" in str(pane.border_subtitle) and "filter 'ohio'" in str(
            pane.border_subtitle
        )
        await pilot.press("escape")
        assert len(table_keys(pane)) == 6
        assert pane.model.filter_text == ""
        assert "filter" not in str(pane.border_subtitle)
        assert pane.table.cursor_key() == "vastai:1001"  # back on the offer it was on
        assert app.focused is pane.table


async def test_filter_kept_with_enter_matches_every_word() -> None:
    app = harness()
    async with app.run_test(size=SIZE) as pilot:
        pane = await loaded(app)
        await pilot.press("slash", *"4090 texas", "enter")
        assert table_keys(pane) == ["vastai:1001"]
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
        assert pane.model.picks == ("vastai:1003", "vastai:1001", "vastai:1005")
        pick_column = [pick_cell(pane.table, k) for k in keys("1003", "1001", "1005", "1004")]
        assert pick_column == ["1", "2", "3", ""]
        await pilot.press("up", "up", "up", "space")  # 1001 out: 1005 moves up to 2
        assert pane.model.picks == ("vastai:1003", "vastai:1005")
        assert pick_cell(pane.table, "vastai:1005") == "2"
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
        # The highlighted offer, then the next ones in the board's order (up to 5).
        assert [o.offer_id for o in message.offers] == ["1001", "1002", "1003", "1005", "1006"]


async def test_refresh_with_new_prices_repaints_and_keeps_the_cursor_by_key() -> None:
    app = harness()
    async with app.run_test(size=SIZE) as pilot:
        pane = await loaded(app)
        await pilot.press("down", "down")  # 1002
        fresh = [replace(o, price_per_hour=o.price_per_hour + 0.001) for o in small_offers()]
        pane.set_offers(fresh)
        await pilot.pause()
        assert pane.table.row_count == 6
        assert pane.table.cursor_key() == "vastai:1002"
        assert " 0.351 " in painted(pane.table, "vastai:1002")
        assert " 0.351 " in screen_text(app)
        # One offer gone, one new: the cursor stays on its offer, which moved down a row.
        fresh = [*fresh[:2], *fresh[3:], offer("1007", 0.05, "RTX 4080")]
        pane.set_offers(fresh)
        await pilot.pause()
        assert "vastai:1003" not in table_keys(pane)
        assert table_keys(pane)[0] == "vastai:1007"  # sorted by $/h: the new cheapest first
        assert pane.table.cursor_key() == "vastai:1002"
        assert pane.table.cursor_row == 3


async def test_picks_of_offers_that_disappear_are_dropped() -> None:
    app = harness()
    async with app.run_test(size=SIZE) as pilot:
        pane = await loaded(app)
        await pilot.press("space", "down", "space")  # 1004, 1001
        pane.set_offers([o for o in small_offers() if o.offer_id != "1004"])
        await pilot.pause()
        assert pane.model.picks == ("vastai:1001",)
        assert pick_cell(pane.table, "vastai:1001") == "1"


async def test_provider_text_is_shown_literally_sanitised() -> None:
    app = harness()
    async with app.run_test(size=SIZE) as pilot:
        pane = app.query_one(OffersPane)
        evil = offer("666", 0.1, "[bold red]x[/] \x1b[31mRTX\x1b[0m", where="\x1b]0;pwn\x07Mars[/]")
        pane.set_offers([evil])
        await pilot.pause()
        line = pane.table.render_line(1)
        assert "[bold red]x[/] RTX" in line.text and "Mars[/]" in line.text
        # GPU and place are painted in one style, the row's: none came from the text.
        styles = {seg.style for seg in line if "[bold" in seg.text or "Mars" in seg.text}
        assert len(styles) == 1
        text = screen_text(app)
        assert "[bold red]x[/] RTX" in text and "Mars[/]" in text and "\x1b" not in text
        assert "pwn" not in text


async def test_all_ten_thousand_offers_are_rows_and_end_reaches_the_last() -> None:
    app = harness()
    async with app.run_test(size=SIZE) as pilot:
        pane = app.query_one(OffersPane)
        offers = many_offers(10_000)
        pane.set_offers(offers)
        pane.focus()
        await pilot.pause()
        table = pane.table
        assert table.row_count == 10_000 and table_keys(pane) == pane.model.view()
        assert "10000 match ·" in str(pane.border_subtitle)
        cheapest = min(offers, key=lambda o: (o.price_per_hour, o.offer_id))
        dearest = max(offers, key=lambda o: (o.price_per_hour, o.offer_id))
        assert table.cursor_key() == offer_key(cheapest)
        await pilot.press("end")
        assert table.cursor_row == 9_999 and table.cursor_key() == offer_key(dearest)
        assert 9_999 in visible_rows(table)
        assert f" {dearest.price_per_hour:.3f} " in painted(table, offer_key(dearest))
        assert f" {dearest.price_per_hour:.3f} " in screen_text(app)
        await pilot.press("home")
        assert table.cursor_row == 0 and table.scroll_y == 0


async def test_page_down_walks_every_page_with_the_cursor_on_screen() -> None:
    app = harness()
    async with app.run_test(size=SIZE) as pilot:
        pane = app.query_one(OffersPane)
        pane.set_offers(many_offers(10_000))
        pane.focus()
        await pilot.pause()
        table = pane.table
        page = table.scrollable_content_region.height - 1  # rows below the header
        for presses in range(1, 4):
            await pilot.press("pagedown")
            assert table.cursor_row == presses * page
            assert table.cursor_row in visible_rows(table)
        await pilot.press("pageup", "up")
        assert table.cursor_row == 2 * page - 1 and table.cursor_row in visible_rows(table)
        # Far down by keys alone: the last page is reached and PageDown stops there.
        table.move_cursor(9_990)
        await pilot.press("pagedown", "pagedown")
        assert table.cursor_row == 9_999 and 9_999 in visible_rows(table)
        assert max(visible_rows(table)) == 9_999


async def test_cursor_stays_on_its_offer_across_sort_and_filter_at_ten_thousand() -> None:
    app = harness()
    async with app.run_test(size=SIZE) as pilot:
        pane = app.query_one(OffersPane)
        pane.set_offers(many_offers(10_000))
        pane.focus()
        await pilot.pause()
        table = pane.table
        await pilot.press("pagedown", "pagedown", "down")
        key = table.cursor_key()
        assert key is not None
        where = pane.model.offer(key)
        assert where is not None
        for _ in range(3):
            await pilot.press("s")
            assert table.cursor_key() == key
            assert table.cursor_row in visible_rows(table)  # scrolled to where it went
        await pilot.press("slash", *where.gpu_name.split()[-1].lower())
        assert table.cursor_key() == key and table.cursor_row in visible_rows(table)
        assert table.row_count < 10_000
        await pilot.press("escape")
        assert table.cursor_key() == key and table.row_count == 10_000


async def test_only_the_rows_on_screen_are_formatted_and_painted() -> None:
    app = harness()
    async with app.run_test(size=SIZE) as pilot:
        pane = app.query_one(OffersPane)
        asked: list[str] = []
        model_row = pane.model.row

        def counting_row(key: str) -> OfferRow:
            asked.append(key)
            return model_row(key)

        pane.model.row = counting_row  # type: ignore[method-assign]
        pane.set_offers(many_offers(10_000))
        pane.focus()
        await pilot.pause()
        table = pane.table
        on_screen = {table.keys[i] for i in visible_rows(table)}
        assert set(asked) == on_screen
        assert len(on_screen) == table.scrollable_content_region.height - 1
        asked.clear()
        await pilot.press("end")
        assert set(asked) <= {table.keys[i] for i in visible_rows(table)}
        assert table.keys[-1] in asked


async def test_click_moves_the_cursor_and_a_second_click_leases() -> None:
    app = harness()
    async with app.run_test(size=SIZE) as pilot:
        pane = await loaded(app)
        await pilot.pause()
        table = pane.table
        assert await pilot.click(OffersTable, offset=(20, 3))  # line 3: the third row
        assert table.cursor_key() == table_keys(pane)[2] == "vastai:1002"
        assert await pilot.click(OffersTable, offset=(20, 0))  # the header: nothing
        assert table.cursor_key() == "vastai:1002"
        assert app.of(OffersPane.LeaseRequested) == []
        assert await pilot.click(OffersTable, offset=(5, 3))
        await pilot.pause()
        (message,) = app.of(OffersPane.LeaseRequested)
        assert isinstance(message, OffersPane.LeaseRequested)
        assert [o.offer_id for o in message.offers] == ["1002", "1003", "1005", "1006"]


def test_model_sorts_on_raw_values_not_formatted_text() -> None:
    model = OffersModel()
    model.set_offers([offer("a", 10.0), offer("b", 9.5), offer("c", 100.25)])
    assert model.view() == keys("b", "a", "c")  # text order would be 10, 100.25, 9.5
    model.reverse_sort()
    assert model.view() == ["vastai:c", "vastai:a", "vastai:b"]


def test_model_chosen_prefers_picks_in_order() -> None:
    model = OffersModel()
    model.set_offers(small_offers())
    assert [o.offer_id for o in model.chosen("vastai:1002")] == ["1002"]
    assert [o.offer_id for o in model.chosen("vastai:1002", 3)] == ["1002", "1003", "1005"]
    model.toggle_pick("vastai:1005")
    model.toggle_pick("vastai:1001")
    assert [o.offer_id for o in model.chosen("vastai:1002", 3)] == ["1005", "1001"]
    assert model.chosen(None) == model.chosen("x")


def test_model_sort_ties_keep_id_order_both_ways() -> None:
    model = OffersModel()
    model.set_offers([offer("c", 1.0), offer("a", 1.0), offer("b", 0.5), offer("d", 1.0)])
    assert model.view() == ["vastai:b", "vastai:a", "vastai:c", "vastai:d"]
    model.reverse_sort()
    assert model.view() == ["vastai:a", "vastai:c", "vastai:d", "vastai:b"]


def test_model_filter_matches_every_word_in_gpu_or_place() -> None:
    model = OffersModel()
    model.set_offers(small_offers())
    model.set_filter("  rtx   OHIO ")
    assert model.view() == ["vastai:1002"]
    model.set_filter("us 4090")
    assert model.view() == ["vastai:1001", "vastai:1002"]
    model.set_filter("")
    assert len(model.view()) == 6


def test_model_widths_fit_every_formatted_cell_without_formatting_them_all() -> None:
    model = OffersModel()
    offers = [*many_offers(500), offer("wide", 12_345.5, "Ｈ100 全角", n=16, down=123_456)]
    model.set_offers(offers)
    widths = model.widths()
    rows = [model.row(offer_key(o)) for o in offers]
    for index, column in enumerate(COLUMNS):
        needed = max([cell_len(column.value), *(cell_len(r.cells[index]) for r in rows)])
        assert widths[index] == needed, column


def test_model_filter_typed_letter_by_letter_equals_a_fresh_filter() -> None:
    offers = many_offers(400)
    model = OffersModel()
    model.set_offers(offers)
    steps = ["o", "oh", "ohio", "ohio 4", "ohio 40", "ohio", "t", "tex", "texas", "texas rtx"]
    for step, text in enumerate(steps):
        if step == 8:
            model.cycle_sort()  # the filter grows, but the sort changed: no narrowing
        model.set_filter(text)
        fresh = OffersModel()
        fresh.set_offers(offers)
        fresh.sort_key, fresh.ascending = model.sort_key, model.ascending
        fresh.set_filter(text)
        assert model.view() == fresh.view(), text
        assert model.view(), text  # every step matches something: a real comparison


async def test_a_theme_change_repaints_rows_in_the_new_theme_colours() -> None:
    app = harness()
    async with app.run_test(size=SIZE) as pilot:
        pane = await loaded(app)
        await pilot.press("space")  # the cursor row is picked: cursor and picked styles
        dark = {seg.style for seg in pane.table.render_line(1)}
        app.theme = "mvp-light"
        await pilot.pause()
        light = {seg.style for seg in pane.table.render_line(1)}
        assert dark.isdisjoint(light)
        assert pick_cell(pane.table, "vastai:1004") == "1"


async def test_an_offer_the_walk_found_sold_is_marked_gone_at_once_and_never_walked() -> None:
    from mvp_tui.lease.events import AttemptAnswered
    from mvp_tui.widgets.facts import OfferGone

    app = harness()
    async with app.run_test(size=SIZE) as pilot:
        pane = await loaded(app)
        await pilot.press("enter")  # no picks: 1004 (cheapest), then the next ones
        await pilot.pause()
        (message,) = app.of(OffersPane.LeaseRequested)
        assert [o.offer_id for o in message.offers][:2] == ["1004", "1001"]
        answer = AttemptAnswered(
            at=0.0, run_id="r-1", label="mvp-r-1-1-1", offer_id="1004",
            outcome="unavailable", http_status=404, detail="no_such_ask", provider_id=None,
        )
        pane.post_message(OfferGone(answer.offer_id))  # as the engine port posts it
        await pilot.pause()
        assert pick_cell(pane.table, "vastai:1004") == "gone"
        assert "1 gone" in str(pane.border_subtitle)
        assert pane.model.row("vastai:1004").gone
        # Enter again on the gone row: it is skipped, the walk starts at the next offer.
        await pilot.press("enter")
        await pilot.pause()
        again = app.of(OffersPane.LeaseRequested)[-1]
        assert isinstance(again, OffersPane.LeaseRequested)
        assert again.offers[0].offer_id == "1001"
        # A refresh that lists it again makes it rentable again; one without it drops it.
        fresh = [o for o in small_offers() if o.offer_id != "1004"]
        pane.update_offers(fresh, providers=["vastai"])
        await pilot.pause()
        assert "vastai:1004" not in pane.table.keys


REFUSED_WHY = ("cuda_max_good 12.4 < the image's CUDA floor 12.8 ([image] cuda_min): its "
               "driver cannot start the image")


async def test_a_refused_offer_is_dimmed_last_with_its_reason_and_never_leased() -> None:
    """`Offer.refused` (a host below the image's CUDA floor): listed, dimmed as a sold row,
    after every other, "refused" in its pick cell, `i` gives the reason; space cannot pick
    it and Enter on it leases the offers after it, never it."""
    from mvp_tui.widgets.detail import DetailScreen

    offers = [replace(o, refused=REFUSED_WHY) if o.offer_id == "1004" else o
              for o in small_offers()]
    app = harness()
    async with app.run_test(size=SIZE) as pilot:
        pane = app.query_one(OffersPane)
        pane.set_offers(offers)
        pane.focus()
        await pilot.pause()
        table = pane.table
        # The cheapest offer, yet last: nothing sorts a host that cannot start the image up.
        assert table.keys[-1] == "vastai:1004" and table.keys[0] == "vastai:1001"
        assert painted(table, "vastai:1004").split()[0] == "refused"
        assert "1 refused (i: why)" in str(pane.border_subtitle)
        row = pane.model.row("vastai:1004")
        assert row.refused and not row.cheap
        line = table.render_line(table.keys.index("vastai:1004") + 1)
        dimmed = table.rich_style + table.get_component_rich_style("offers-table--gone")
        assert dimmed != table.rich_style
        assert {seg.style for seg in line if seg.text.strip()} == {dimmed}  # as a sold row
        await pilot.press("end", "i")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, DetailScreen)
        assert f"Never rented: {REFUSED_WHY}." in screen.text
        await pilot.press("escape")
        await pilot.pause()
        await pilot.press("space")  # not pickable
        assert pane.model.picks == ()
        await pilot.press("enter")
        await pilot.pause()
        assert not app.of(OffersPane.LeaseRequested)  # the only offer from here is refused
        await pilot.press("home", "enter")
        await pilot.pause()
        (message,) = app.of(OffersPane.LeaseRequested)
        assert "1004" not in [o.offer_id for o in message.offers]
