"""`mvp-tui up --headless`: the run engine without a screen, one JSON object per line.

Every engine event and every datastream frame is printed as it happens (stdout), human hints
go to stderr. SIGINT, SIGTERM and SIGHUP tear down what the run leased, confirmed, before
exiting; so does a `stop`, `shutdown` or `quit` line on stdin (the seed's stop listener),
which ends the run with exit 0 once the teardown is confirmed. The run's lifecycle is the
`RunController`'s, this module only drives and prints.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

from mvp_tui.config import Config, ConfigError
from mvp_tui.config.schema import BY_DOTTED, PROVIDERS
from mvp_tui.datastream.display import display_text
from mvp_tui.datastream.frame import Frame
from mvp_tui.datastream.hub import ChannelHub
from mvp_tui.engine.controller import (
    Plan,
    PlanEnd,
    RunAborted,
    StopResult,
)
from mvp_tui.engine.endpoint_words import endpoint_lines, idle_stop_line
from mvp_tui.engine.events import (
    AccountKeyReady,
    EndpointReady,
    IdleStopNotice,
    ReadySummary,
    RunFinished,
    RunState,
)
from mvp_tui.engine.model_fit import ModelNeed
from mvp_tui.engine.offer_ranking import BEST_FIRST, outlook_of
from mvp_tui.engine.outlook import Outlook, no_outlook
from mvp_tui.engine.run import RunEngine, RunFailed
from mvp_tui.engine.session import RunSession
from mvp_tui.engine.vram_floor import NEED_TIMEOUT_S
from mvp_tui.events import EngineEvent
from mvp_tui.exit_codes import ExitCode
from mvp_tui.lease.host_journal import HostMemory, describe, host_key, load_memory
from mvp_tui.providers.base import Offer, ProviderError, VramNeedUser
from mvp_tui.secrets import Redactor
from mvp_tui.untrusted import clean_line

UNTIL = ("leased", "ready")


@dataclass(frozen=True, slots=True)
class UpOptions:
    until: str | None = None  # "leased" | "ready" | None (serve until a signal)
    yes: bool = False
    down_after: bool = False
    prompts: tuple[str, ...] = ()
    max_tokens: int | None = None
    offer_ids: tuple[str, ...] = ()  # the fallback order; empty = the best by the policy
    max_offers: int = 5
    extra: dict[str, Any] = field(default_factory=dict)


# Characters json.dumps(ensure_ascii=False) leaves raw that a terminal acts on or hides: C1
# controls (U+009B is an 8-bit CSI), bidi and zero-width format characters, and the Unicode
# line separators. They are only ever inside JSON strings, where `\uXXXX` means the same.
_INVISIBLE = re.compile(
    "[\x80-\x9f\u061c\u180e\u200b-\u200f\u202a-\u202e\u2028\u2029\u2060-\u2064\u2066-\u206f\ufeff]"
)


def escape_invisible(line: str) -> str:
    """A JSON line with its C1 controls and invisible format characters as `\\uXXXX`."""
    return _INVISIBLE.sub(lambda m: f"\\u{ord(m.group()):04x}", line)


class JsonLines:
    """Prints events and frames as JSON lines, secrets redacted, flushed per line."""

    def __init__(self, out: TextIO, redactor: Redactor) -> None:
        self._out = out
        self.redact = redactor

    def write(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, ensure_ascii=False, default=str)
        self._out.write(escape_invisible(self.redact(line)) + "\n")
        self._out.flush()

    def event(self, event: EngineEvent) -> None:
        self.write(event.to_dict())
        if isinstance(event, ReadySummary):  # the one human line at ready (stderr, as hints)
            print(f"mvp-tui: {self.redact(event.text)}", file=sys.stderr, flush=True)
        for line in _spoken(event):  # the endpoint and the idle stop also in words
            print(f"mvp-tui: {self.redact(line)}", file=sys.stderr, flush=True)

    def frame(self, frame: Frame) -> None:
        self.write(
            {
                "event": "frame",
                "channel": frame.channel,
                "position": frame.position,
                "payload": _decoded(frame),
            }
        )


def _spoken(event: EngineEvent) -> list[str]:
    if isinstance(event, AccountKeyReady):  # the seed says it on stderr
        return [event.line]
    if isinstance(event, EndpointReady):
        return endpoint_lines(event)
    if isinstance(event, IdleStopNotice):
        line = idle_stop_line(event)
        return [line] if line else []
    return []


def _decoded(frame: Frame) -> Any:
    try:
        return json.loads(frame.payload)
    except (ValueError, UnicodeDecodeError):
        return display_text(frame)


def offer_ref(text: str, own: str) -> tuple[str, str]:
    """`--offer ID` (the run's provider) or `--offer PROVIDER:ID` as (provider, id)."""
    kind, sep, offer_id = text.partition(":")
    if sep and kind in PROVIDERS:
        return kind, offer_id
    return own, text


def _pick(
    offers: list[Offer],
    opts: UpOptions,
    own: str,
    memory: HostMemory | None = None,
    outlook: Outlook = no_outlook,
) -> list[Offer]:
    """The offers to walk: `--offer` ids in their order (picked by hand: kept as given), or
    the best `max_offers` in the board's first order (engine/offer_ranking.py: $/h, those on
    a host that failed recently after the others, those the model cannot fit after them)."""
    if not opts.offer_ids:
        rentable = [o for o in offers if not o.refused]  # never a host that cannot run it
        memory = memory if memory is not None else HostMemory()
        return BEST_FIRST.rank(rentable, failed=memory.avoids, outlook=outlook)[: opts.max_offers]
    by_ref = {(o.provider, o.offer_id): o for o in offers}
    refs = [offer_ref(text, own) for text in opts.offer_ids]
    missing = [f"{k}:{i}" if k != own else i for k, i in refs if (k, i) not in by_ref]
    if missing:
        raise ConfigError(
            f"--offer {', '.join(missing)} is not among the {len(offers)} offers that match "
            "the policy; run `mvp-tui offers` to see them"
        )
    refused = [f"{i}: {clean_line(by_ref[(k, i)].refused, 200)}" for k, i in refs
               if by_ref[(k, i)].refused]
    if refused:
        raise ConfigError(
            f"--offer {'; '.join(refused)}: that host is never rented; pick another offer "
            "(`mvp-tui offers`), or set [image] cuda_min / [vastai] disk_gb if the floor is "
            "wrong for your image"
        )
    return [by_ref[ref] for ref in refs]


SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
STOP_WORDS = frozenset({"stop", "shutdown", "quit"})
STDIN_STOP = "stop on stdin"
MAX_STOP_LINE = 256


def is_stop_line(line: bytes) -> bool:
    """A line that asks the run to stop: `stop`, `shutdown` or `quit`, any case, trimmed."""
    return line.decode("utf-8", "replace").strip().lower() in STOP_WORDS


def listen_for_stop(
    fd: int, loop: asyncio.AbstractEventLoop, on_stop: Callable[[], None]
) -> threading.Thread:
    """Read file descriptor `fd` (stdin: a pipe, a file or a terminal) line by line on a
    daemon thread and call `on_stop` on the loop at the first stop line. End of input is not
    a stop: a run started with stdin closed serves on. Raw `os.read`, not `sys.stdin`: a
    daemon thread blocked inside a buffered reader aborts the interpreter at exit."""

    def read() -> None:
        pending = b""
        while True:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                return
            if not chunk:
                lines, pending = [pending], b""
            else:
                *lines, pending = (pending + chunk).split(b"\n")
                pending = pending[-MAX_STOP_LINE:]  # a stop word is short: keep the tail only
            if any(is_stop_line(line) for line in lines):
                with contextlib.suppress(RuntimeError):  # the loop already closed
                    loop.call_soon_threadsafe(on_stop)
                return
            if not chunk:
                return

    thread = threading.Thread(target=read, name="mvp-tui stdin stop", daemon=True)
    thread.start()
    return thread


async def run_up(
    config: Config, opts: UpOptions, out: TextIO = sys.stdout, stdin_fd: int = 0
) -> int:
    """Run one headless `up`; returns the exit code of the CLI surface."""
    printer = JsonLines(out, Redactor(config.secret_values()))
    engine = RunEngine(config, printer.event)
    printer.redact = engine.redactor  # the run's redactor knows every secret it holds
    engine.hub.listeners.append(printer.frame)

    def engine_for(kind: str, hub: ChannelHub) -> RunEngine:  # `--offer PROVIDER:ID`
        return RunEngine(config.for_provider(kind), printer.event, hub=hub,
                         ledger=engine.ledger)

    def on_engine(fresh: RunEngine) -> None:  # the session's hub: printed already
        printer.redact = fresh.redactor

    session = RunSession(engine, engine_for, on_engine)
    loop = asyncio.get_running_loop()
    signalled: list[str] = []
    waited: list[str | None] = []  # what the run waited for at the first stop
    stops: list[asyncio.Task[StopResult]] = []
    main = asyncio.current_task()

    def on_signal(sig: signal.Signals) -> None:
        # No question can be asked: the default is destroy, confirmed. Further signals
        # join the same stop (it is idempotent), they never cut the teardown short.
        stop_by(sig.name, f"{sig.name} received", f"signal {sig.name}")

    def stop_by(name: str, reason: str, source: str) -> None:
        if not signalled:
            waited.append(session.engine.ctx.sink.waiting_for)
        signalled.append(name)
        session.engine.ctx.sink.shutdown(source)  # the seed's `shutdown` phase: who asked
        controller = session.controller
        if controller.state is RunState.IDLE and main is not None and len(signalled) == 1:
            main.cancel()  # still choosing offers: nothing to tear down, stop asking
        stops.append(loop.create_task(controller.stop(final=True, reason=reason)))

    def say(line: str) -> None:
        # The seed's OrchStdioCapture: what this process tells its user also reaches the
        # node's stderr channel (and the archive). stdout is the JSON mirror: not again.
        # (The config's warnings the engine writes there itself, in either mode.)
        with contextlib.suppress(Exception):
            session.engine.ctx.sink.stderr(line)
        print(f"mvp-tui: {line}", file=sys.stderr)

    for sig in SIGNALS:
        loop.add_signal_handler(sig, on_signal, sig)
    listen_for_stop(
        stdin_fd,
        loop,
        lambda: stop_by(STDIN_STOP, "a stop line on stdin", "stdin"),
    )
    try:
        try:
            code, reason = await _drive(session, opts, signalled, waited)
        except asyncio.CancelledError:
            if not signalled:
                raise
            await asyncio.gather(*stops, return_exceptions=True)
            code, reason = int(ExitCode.RUN_FAILED), f"interrupted by {signalled[0]}"
            if signalled[0] == STDIN_STOP:  # asked for, before anything was leased
                code, reason = int(ExitCode.OK), "stopped by a stop line on stdin; nothing leased"
        controller, engine = session.controller, session.engine
        left = [ref.provider_id or ref.label for ref in (controller.result or StopResult()).left]
        engine.ctx.emit(
            RunFinished(
                at=engine.ctx.clock(),
                run_id=engine.ctx.run_id,
                exit_code=code,
                reason=reason,
                leases_left=tuple(left),
            )
        )
        if reason:
            say(reason)
        if controller.result is not None and not controller.result.kept:
            for line in controller.result.left_lines():
                say(line)
        return code
    finally:
        for sig in SIGNALS:
            loop.remove_signal_handler(sig)
        await asyncio.gather(*stops, return_exceptions=True)
        with contextlib.suppress(Exception):
            await engine.aclose()


async def _drive(
    session: RunSession, opts: UpOptions, signalled: list[str], waited: list[str | None]
) -> tuple[int, str]:
    """The run from offers to its end: (exit code, the reason when it is not plain success)."""
    engine = session.engine
    try:
        offers = await _prepare(engine, opts)
    except (RunFailed, ProviderError) as exc:
        return int(ExitCode.RUN_FAILED), engine.redactor(str(exc))
    max_tokens = (
        opts.max_tokens if opts.max_tokens is not None else engine.ctx.settings.prompt.max_tokens
    )
    plan = Plan(
        until=opts.until,
        prompts=opts.prompts,
        max_tokens=max_tokens,
        serve=not opts.down_after,
        keep=not opts.down_after,
    )
    serving = opts.until is None and not opts.prompts and not opts.down_after
    try:
        end = await session.lease_and_serve(offers, plan, on_fallback=_say_fallback)
    except RunAborted as aborted:
        code = ExitCode.RUN_FAILED if aborted.result.nothing_bills else ExitCode.MAY_BILL
        return int(code), aborted.reason
    except RunFailed:  # a signal came between the offers and the walk: nothing was created
        end = PlanEnd.STOPPED
    controller = session.controller  # the provider walked last
    if end in (PlanEnd.LEASED, PlanEnd.READY) and not signalled:
        await controller.stop(destroy=False, final=True, reason=f"--until {end.value}")
        return int(ExitCode.OK), ""
    result = await controller.stop(final=True)
    if not result.nothing_bills:
        return int(ExitCode.MAY_BILL), "teardown not confirmed: a lease may still bill"
    if signalled and signalled[0] == STDIN_STOP:  # the user's own stop, like the seed's
        # The seed ends a stop while waiting as an error (exit 1) with these words; here the
        # user's own stop is not a failure (exit 0, docs/seed-compatibility.md), the words say
        # where it came.
        wait = waited[0] if waited else None
        during = f"shutdown requested while waiting for {wait}; " if wait else ""
        return int(ExitCode.OK), f"{during}stopped by a stop line on stdin; torn down, confirmed"
    if signalled and not (serving and controller.served):
        return int(ExitCode.RUN_FAILED), f"interrupted by {signalled[0]}"
    if signalled:  # serving until a signal is the plan: its end is a success
        return int(ExitCode.OK), f"stopped by {signalled[0]}; torn down, confirmed"
    return int(ExitCode.OK), ""


def _say_fallback(kind: str, following: str, reason: str) -> None:
    print(f"mvp-tui: no lease on {kind} ({reason}); trying {following}", file=sys.stderr)




async def _need(engine: RunEngine) -> ModelNeed | None:
    """The model's need (the board's fit), so the offers it cannot fit are walked last as
    the board lists them; read within the VRAM floor's bound, None (fit unknown, nothing
    unfit) when it cannot be. A provider that took the need as its floor (RunPod `auto`)
    listed none too small: not read again. Read as the board reads it, but only for the
    order: what the node is told of the fit stays engine/run_lease.py's."""
    from mvp_tui.engine.model_need import ModelNeedError, read_model_need  # httpx: when asked

    provider = engine.provider
    if isinstance(provider, VramNeedUser) and provider.wants_vram_need:
        return None
    read = read_model_need(engine.ctx.settings.model, nodes=engine.config.settings.runtime.nodes,
                           environ=engine.ctx.environ)
    try:
        return await asyncio.wait_for(read, NEED_TIMEOUT_S)
    except (ModelNeedError, OSError, TimeoutError):
        return None


async def _prepare(engine: RunEngine, opts: UpOptions) -> list[Offer]:
    """Checks and the offers to walk; nothing is created here. The state dir is checked
    before the provider is asked anything (README "Every way out": exit 2)."""
    engine.check_model()
    engine.check_state_dir()
    engine.started()
    billing = engine.provider.info.billing
    if billing and not opts.yes and engine.config.confirm_lease:
        raise ConfigError(
            f"renting on {engine.config.provider} bills your account; headless runs need --yes "
            "to confirm (the dashboard asks instead)"
            + (f", or {BY_DOTTED[engine.config.kind.confirm_key].label} = false"
               if engine.config.kind.confirm_key else "")
        )
    own = engine.config.provider
    offers = await engine.search_offers()
    for kind in dict.fromkeys(offer_ref(t, own)[0] for t in opts.offer_ids):
        if kind != own:  # a pick of another provider: its offers, searched by its client
            other = RunEngine(engine.config.for_provider(kind), lambda _event: None)
            try:
                offers += await other.search_offers()
            finally:
                await other.aclose()
    now = engine.ctx.clock()
    memory = load_memory(engine.config, now)
    # The fit orders the walk only where there is an order to make (not for picks by hand,
    # nor for this machine's one offer): no model read for nothing.
    ranked = not opts.offer_ids and sum(not o.refused for o in offers) > 1
    need = await _need(engine) if ranked else None
    offers = _pick(offers, opts, own, memory, outlook_of(engine.config, need, memory))
    for offer in offers:
        failure = memory.failure(offer)
        if failure is not None:
            engine.ctx.log(
                f"host memory: offer {offer.offer_id} is on {offer.provider} host "
                f"{host_key(offer)}, which {describe(failure, now)}; "
                + ("kept where --offer puts it" if opts.offer_ids else "tried after the others")
            )
    if not offers:
        where = engine.config.kind.filters_hint or "the provider's filters"
        floor = f" ({engine.vram_floor_said})" if engine.vram_floor_said else ""
        raise RunFailed(
            f"no {engine.config.provider} offer matches the policy{floor}; loosen {where} or "
            "[limits] max_price_per_hour"
        )
    return offers
