"""UI figures: Offers pane keystroke-to-repaint at 10,000 offers, and responsiveness of a
channel log while 50,000 lines/s stream into it. Prints figures; asserts nothing.

    .venv/bin/python bench/bench_ui.py [--offers 10000] [--rate 50000] [--seconds 3]

Runs the real widgets headless (Textual's test driver) at 160x48. Offers figures come two
ways. "key→repaint" posts the key event as the terminal driver would and stops the clock when
the screen update that shows its effect has been rendered to terminal output (the compositor
update's escape sequences, which a real driver then writes); this is the latency a user sees.
"pilot" is Textual's test harness (`press` + `pause`, which sleep in 20 ms steps until the
process is idle), kept for comparison with its no-op-key baseline: those figures are the
harness's granularity plus the work.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rich.console import RenderableType
from textual import events
from textual._compositor import CompositorUpdate
from textual.geometry import Region
from textual.pilot import Pilot
from textual.screen import Screen
from textual.strip import Strip
from textual.widgets import Static

from bench.smoke import add_smoke
from mvp_tui.datastream import ChannelHub
from mvp_tui.widgets.channel_log import ChannelLogScreen
from mvp_tui.widgets.offers import OffersPane
from tests.widgets.data import many_offers
from tests.widgets.harness import Harness

SIZE = (160, 48)


def ms(values: list[float]) -> str:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
    median = statistics.median(ordered) * 1000
    return f"median {median:6.1f} ms  p95 {p95 * 1000:6.1f} ms  (n={len(values)})"


async def timed_keys(pilot: Pilot[None], keys: list[str]) -> list[float]:
    out = []
    for key in keys:
        start = time.perf_counter()
        await pilot.press(key)
        await pilot.pause()
        out.append(time.perf_counter() - start)
    return out


class PaintProbe:
    """Times from a key (or a call) to the end of the first screen update in which the
    pane's table repainted after the pane refreshed its view, with that update rendered to
    terminal output as a driver would."""

    def __init__(self, app: Harness, pane: OffersPane) -> None:
        self._app = app
        self._armed = False
        self._viewed = False  # the pane refreshed its view since `arm`
        self._repainted = False  # ... and then the table rendered lines
        self._painted = asyncio.Event()
        self._painted_at = 0.0
        refresh_view, display = pane.refresh_view, app._display
        table = pane.table
        render_lines = table.render_lines

        def watched_refresh_view() -> None:
            refresh_view()
            self._viewed = self._armed

        def watched_render_lines(crop: Region) -> list[Strip]:
            self._repainted = self._repainted or self._viewed
            return render_lines(crop)

        def timed_display(screen: Screen[object], renderable: RenderableType | None) -> None:
            display(screen, renderable)
            if self._repainted and isinstance(renderable, CompositorUpdate):
                renderable.render_segments(app.console)
                self._painted_at = time.perf_counter()
                self._armed = self._viewed = self._repainted = False
                self._painted.set()

        pane.refresh_view = watched_refresh_view  # type: ignore[method-assign]
        table.render_lines = watched_render_lines  # type: ignore[method-assign]
        app._display = timed_display  # type: ignore[method-assign]

    def arm(self) -> float:
        self._painted.clear()
        self._armed, self._viewed, self._repainted = True, False, False
        return time.perf_counter()

    async def painted(self, start: float) -> float:
        await asyncio.wait_for(self._painted.wait(), 10)
        return self._painted_at - start

    async def key(self, pilot: Pilot[None], key: str) -> float:
        char = key if len(key) == 1 else None
        start = self.arm()
        self._app.post_message(events.Key(key, char))  # what the driver posts for a key
        took = await self.painted(start)
        await pilot.pause()  # settle before the next key
        return took


async def bench_offers(count: int, reps: int = 15) -> None:
    """The Offers pane's figures; `reps` caps each key's repeats (a smoke run: 2)."""
    app = Harness(lambda: [OffersPane(provider="vastai")])
    async with app.run_test(size=SIZE) as pilot:
        pane = app.query_one(OffersPane)
        probe = PaintProbe(app, pane)
        offers = many_offers(count)
        start = probe.arm()
        pane.set_offers(offers)
        loaded_ms = await probe.painted(start) * 1000
        await pilot.pause()
        print(f"offers: {count:,} offers loaded and painted in {loaded_ms:.0f} ms")
        pane.focus()
        await pilot.pause()
        print("  key→repaint (keystroke to the screen update that shows it)")
        sort = [await probe.key(pilot, "s") for _ in range(reps)]
        print(f"    s (sort cycle)          {ms(sort)}")
        await pilot.press("slash")
        keys = [*"4090", *["backspace"] * 4, *"texas"][: max(2, reps)]
        typing = [await probe.key(pilot, key) for key in keys]
        print(f"    filter keystroke        {ms(typing)}")
        print(f"    Esc (filter cleared)    {ms([await probe.key(pilot, 'escape')])}")
        for key in ("s", "S", "space"):  # a short cycle of view changes, for Esc below
            await pilot.press(key)
        await pilot.press("slash", *"ohio")
        escapes = []
        for _ in range(min(4, reps)):
            escapes.append(await probe.key(pilot, "escape"))
            await pilot.press("slash", *"ohio")
        await pilot.press("escape")
        print(f"    Esc after 'ohio'        {ms(escapes)}")
        refresh = []
        for step in range(1, min(6, reps + 1)):
            # A poll's answer: the same offers, every price moved a little.
            fresh = [
                replace(o, price_per_hour=o.price_per_hour * (1 + step / 1000)) for o in offers
            ]
            start = probe.arm()
            pane.set_offers(fresh)
            refresh.append(await probe.painted(start))
            await pilot.pause()
        print(f"    refresh, prices changed {ms(refresh)}  (set_offers to repaint)")
        print("  pilot (press + pause; sleeps in 20 ms steps until idle)")
        few = min(10, reps)
        print(f"    no-op key (baseline)    {ms(await timed_keys(pilot, ['x'] * few))}")
        print(f"    cursor down             {ms(await timed_keys(pilot, ['down'] * few))}")
        print(f"    s (sort cycle)          {ms(await timed_keys(pilot, ['s'] * reps))}")
        await pilot.press("slash")
        typing = await timed_keys(pilot, keys)
        print(f"    filter keystroke        {ms(typing)}")
        print(f"    Esc (filter cleared)    {ms(await timed_keys(pilot, ['escape']))}")


async def bench_stream(rate: int, seconds: float) -> None:
    hub = ChannelHub()
    channel = "mvp.provisioning.logs.node.1.stdout"
    app = Harness(lambda: [Static("under")])
    async with app.run_test(size=SIZE) as pilot:
        screen = ChannelLogScreen(hub, channel)
        await app.push_screen(screen)
        await pilot.pause()
        stop = asyncio.Event()
        published = 0

        async def produce() -> None:
            nonlocal published
            loop = asyncio.get_running_loop()
            begin = loop.time()
            batch = max(1, rate // 100)
            while not stop.is_set():
                due = int((loop.time() - begin) * rate)
                while published < due:
                    for _ in range(min(batch, due - published)):
                        hub.publish(
                            channel, b"llama server: decode token batch ok t=%d" % published
                        )
                        published += 1
                await asyncio.sleep(0.005)

        producer = asyncio.create_task(produce())
        latencies = []
        begin = time.perf_counter()
        keys = ["up", "f"]
        index = 0
        while time.perf_counter() - begin < seconds:
            key = keys[index % 2]
            index += 1
            want = key == "f"  # `up` stops following, `f` resumes it
            start = time.perf_counter()
            app.simulate_key(key)  # what the terminal driver posts for a key press
            while screen.following is not want:  # noqa: ASYNC110 - a benchmark's probe
                await asyncio.sleep(0.001)
            latencies.append(time.perf_counter() - start)
            await asyncio.sleep(0.05)
        stop.set()
        await producer
        elapsed = time.perf_counter() - begin
        screen.action_follow()
        await pilot.pause()
        print(
            f"stream: {published:,} lines in {elapsed:.1f} s ({published / elapsed:,.0f}/s offered)"
        )
        print(f"  key press handled         {ms(latencies)}")
        print(
            f"  frames counted {hub.snapshot().channels[0].count:,} · written to view "
            f"{screen.written:,} · dropped from view {screen.skipped:,} (counted, shown as a "
            f"'… N not shown' line) · log lines kept {len(screen.log_widget.lines):,}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--offers", type=int, default=10_000)
    parser.add_argument("--rate", type=int, default=50_000)
    parser.add_argument("--seconds", type=float, default=3.0)
    add_smoke(parser)
    args = parser.parse_args()
    if args.smoke:
        args.offers, args.rate, args.seconds = 200, 2_000, 0.3
    asyncio.run(bench_offers(args.offers, 2 if args.smoke else 15))
    asyncio.run(bench_stream(args.rate, args.seconds))


if __name__ == "__main__":
    main()
