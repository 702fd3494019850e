"""`mvp-tui up --headless`: the run engine without a screen, one JSON object per line.

Every engine event and every datastream frame is printed as it happens (stdout), human hints
go to stderr. SIGINT/SIGTERM tear down what the run leased, confirmed, before exiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any, TextIO

from mvp_tui.config import Config, ConfigError
from mvp_tui.datastream.display import display_text
from mvp_tui.datastream.frame import Frame
from mvp_tui.engine.events import RunFinished
from mvp_tui.engine.run import RunEngine, RunFailed
from mvp_tui.events import EngineEvent
from mvp_tui.exit_codes import ExitCode
from mvp_tui.providers.base import Offer, ProviderError
from mvp_tui.secrets import Redactor

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


class JsonLines:
    """Prints events and frames as JSON lines, secrets redacted, flushed per line."""

    def __init__(self, out: TextIO, redactor: Redactor) -> None:
        self._out = out
        self.redact = redactor

    def write(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, ensure_ascii=False, default=str)
        self._out.write(self.redact(line) + "\n")
        self._out.flush()

    def event(self, event: EngineEvent) -> None:
        self.write(event.to_dict())

    def frame(self, frame: Frame) -> None:
        self.write(
            {
                "event": "frame",
                "channel": frame.channel,
                "position": frame.position,
                "payload": _decoded(frame),
            }
        )


def _decoded(frame: Frame) -> Any:
    try:
        return json.loads(frame.payload)
    except (ValueError, UnicodeDecodeError):
        return display_text(frame)


def _pick(offers: list[Offer], opts: UpOptions) -> list[Offer]:
    if not opts.offer_ids:
        return offers[: opts.max_offers]
    by_id = {o.offer_id: o for o in offers}
    missing = [i for i in opts.offer_ids if i not in by_id]
    if missing:
        raise ConfigError(
            f"--offer {', '.join(missing)} is not among the {len(offers)} offers that match "
            "the policy; run `mvp-tui offers` to see them"
        )
    return [by_id[i] for i in opts.offer_ids]


async def run_up(config: Config, opts: UpOptions, out: TextIO = sys.stdout) -> int:
    """Run one headless `up`; returns the exit code of the CLI surface."""
    printer = JsonLines(out, Redactor(config.secret_values()))
    engine = RunEngine(config, printer.event)
    printer.redact = engine.redactor  # the run's redactor knows every secret it holds
    engine.hub.listeners.append(printer.frame)
    main = asyncio.current_task()
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()

    def on_signal() -> None:
        if not stopping.is_set() and main is not None:
            stopping.set()
            main.cancel()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal)
    code, reason = int(ExitCode.OK), ""
    keep = False
    try:
        try:
            keep = await _drive(engine, opts)
        except asyncio.CancelledError:
            if not stopping.is_set():
                raise
            code, reason = int(ExitCode.RUN_FAILED), "interrupted by a signal"
        except (RunFailed, ProviderError) as exc:
            code, reason = int(ExitCode.RUN_FAILED), engine.redactor(str(exc))
        except _WalkEnded as ended:
            code, reason = ended.code, ended.reason
        except ConfigError:
            await engine.shutdown()
            raise
        if not keep:
            # Teardown must finish even if a second signal arrives.
            confirmed = await asyncio.shield(engine.shutdown())
            if not confirmed:
                code = int(ExitCode.MAY_BILL)
                reason = (reason + "; " if reason else "") + (
                    "teardown not confirmed: the lease may still bill (see `mvp-tui ls`)"
                )
        left = () if engine.lease_record is None else (engine.lease_record.provider_id or "",)
        engine.emit(
            RunFinished(
                at=engine._clock(),
                run_id=engine.run_id,
                exit_code=code,
                reason=reason,
                leases_left=tuple(x for x in left if x),
            )
        )
        if reason:
            print(f"mvp-tui: {reason}", file=sys.stderr)
        return code
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        with contextlib.suppress(Exception):
            await engine.aclose()


async def _until_first(*waits: Awaitable[Any]) -> None:
    """Run the waits together; the first to end (or raise) ends the others. A shared future
    (the limit guard) is waited on, never cancelled here."""
    owned = [w for w in waits if not isinstance(w, asyncio.Future)]
    tasks = [w if isinstance(w, asyncio.Future) else asyncio.ensure_future(w) for w in waits]
    mine = [t for t, w in zip(tasks, waits, strict=True) if w in owned]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            task.result()
    finally:
        for task in mine:
            task.cancel()
        await asyncio.gather(*mine, return_exceptions=True)


class _WalkEnded(Exception):
    def __init__(self, code: int, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


async def _drive(engine: RunEngine, opts: UpOptions) -> bool:
    """The run's steps; returns True when the lease is deliberately left running."""
    engine.check_model()
    engine.started()
    billing = engine.provider.info.billing
    if billing and not opts.yes:
        raise ConfigError(
            f"renting on {engine.config.provider} bills your account; headless runs need --yes "
            "to confirm (the dashboard asks instead)"
        )
    offers = _pick(await engine.search_offers(), opts)
    if not offers:
        raise RunFailed(
            "no offer matches the policy; loosen [vastai] filters or [limits] max_price_per_hour"
        )
    await engine.prepare_ssh_identity()
    result = await engine.lease(offers)
    if not result.ok:
        code = ExitCode.MAY_BILL if result.may_bill else ExitCode.RUN_FAILED
        raise _WalkEnded(int(code), engine.redactor(result.reason))
    # Local nodes are child processes: they never outlive this command.
    can_keep = engine.provider.info.ssh and not opts.down_after
    limits = asyncio.ensure_future(engine.guard_limits())
    try:
        return await _serve(engine, opts, can_keep, limits)
    finally:
        limits.cancel()
        await asyncio.gather(limits, return_exceptions=True)


async def _serve(
    engine: RunEngine, opts: UpOptions, can_keep: bool, limits: asyncio.Future[None]
) -> bool:
    """From a running lease to the end the options ask for; a reached limit ends it early."""
    if opts.until == "leased":
        if can_keep:
            return True
    else:
        await _until_first(engine.bring_up(), limits)
        if opts.until == "ready" and can_keep and not opts.prompts:
            return True
        if opts.prompts:
            queue = await engine.start_prompts(rpc=False)
            max_tokens = opts.max_tokens or engine.config.get_int("prompt.max_tokens") or 64
            for text in opts.prompts:
                queue.submit(text, max_tokens)
            await _until_first(queue.drained(), engine.watch_node(), limits)
        elif opts.until is None and not opts.down_after:
            await engine.start_prompts(rpc=True)
            # Serve until a signal, the node fails, or a limit is reached.
            await _until_first(engine.watch_node(), limits)
    return False
