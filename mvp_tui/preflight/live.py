"""`mvp-tui check --live PROVIDER`: a canary run on the real thing, bounded by a spend cap.

The cheapest offer that fits the model is leased, brought up, one prompt streams, it is torn
down (confirmed) and the provider's account is listed to show nothing of the run is left.
Every step is one line, with the time since the check began and what the run has cost.

The cap bounds it twice: the run tears down when its spend reaches the cap, and the node's
own switch is armed with a deadline (the cap's worth of the priciest offer walked, or
`--max-minutes` if sooner) that it enforces itself, so a laptop that is lost (or a check that
is `kill -9`ed) still ends the lease. A cap below one minute of the cheapest offer is refused
before anything is rented (exit 2).

The model: on this machine the configured local file, else the rehearsal's tiny generated
model (no download); on a rented node the configured model, whose default is the project's
smallest (Llama 3.2 1B, Q4_K_M, about 0.8 GB)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import signal
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TextIO

from mvp_tui.config import Config, ConfigError
from mvp_tui.config.values import Source
from mvp_tui.datastream.frame import Frame
from mvp_tui.engine.controller import Plan, RunAborted, StopResult
from mvp_tui.engine.failures import RunFailed
from mvp_tui.engine.run import RunEngine
from mvp_tui.engine.session import RunSession
from mvp_tui.events import EngineEvent
from mvp_tui.exit_codes import ExitCode
from mvp_tui.preflight.live_facts import V1_FALLBACK, Fact, Seen, judge
from mvp_tui.preflight.live_options import LiveOptions
from mvp_tui.preflight.live_steps import Record, Step, step_of
from mvp_tui.providers.base import Offer, ProviderError
from mvp_tui.providers.vastai.client import VastAiProvider
from mvp_tui.secrets import Redactor
from mvp_tui.untrusted import clean_line

MAX_OFFERS = 3  # hosts tried in turn, cheapest first
PROMPT = "Say hello in five words."
MAX_TOKENS = 32  # unless [prompt] max_tokens is set
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
WHY = "check --live"
LINE_CHARS = 400


@dataclass(frozen=True, slots=True)
class Bounds:
    """The run's bounds: the offers walked, the cap, and the deadline the node is armed
    with (hours; the cap's worth of the priciest offer walked, or max_minutes if sooner)."""

    offers: tuple[Offer, ...]
    max_spend_usd: float
    max_hours: float
    cheapest: Offer

    @property
    def minute_usd(self) -> float:
        return self.cheapest.price_per_hour / 60.0

    def why_deadline(self, max_minutes: float) -> str:
        priciest = max(o.price_per_hour for o in self.offers)
        if priciest <= 0 or self.max_hours * 60.0 >= max_minutes:
            return f"--max-minutes {max_minutes:g}"
        return (f"the cap's worth at ${priciest:.3f}/h, the dearest of the {len(self.offers)} "
                "offer(s) it may walk")


class CapTooLow(ConfigError):
    """The cap is below one minute of the cheapest offer: nothing is rented (exit 2)."""


def usd(value: float) -> str:
    return f"${value:.2f}" if value >= 0.01 else f"${value:.4f}"


def minute_usd(offer: Offer) -> float:
    return offer.price_per_hour / 60.0


def bounds(offers: list[Offer], opts: LiveOptions) -> Bounds:
    """The cheapest offers the cap can pay a minute of, and the deadline; `CapTooLow` when
    it cannot pay one minute of the cheapest."""
    ordered = sorted(offers, key=lambda o: o.price_per_hour)
    cheapest = ordered[0]
    cap = opts.max_spend_usd
    if cap < minute_usd(cheapest):
        need = math.ceil(minute_usd(cheapest) * 10_000) / 10_000
        raise CapTooLow(
            f"--max-spend {usd(cap)} is below one minute of the cheapest {opts.provider} offer "
            f"({cheapest.offer_id}, {cheapest.gpu_name}, ${cheapest.price_per_hour:.3f}/h = "
            f"${minute_usd(cheapest):.4f} a minute); nothing was rented",
            fix=f"raise --max-spend to at least ${need:.4f} (a bring-up takes minutes: "
            f"${minute_usd(cheapest) * 15:.2f} pays 15 of them)",
        )
    walked = tuple(o for o in ordered if minute_usd(o) <= cap)[:MAX_OFFERS]
    priciest = max(o.price_per_hour for o in walked)
    hours = opts.max_minutes / 60.0
    if priciest > 0:
        hours = min(hours, cap / priciest)
    return Bounds(walked, cap, hours, cheapest)


def bounded(config: Config, limits: Bounds) -> Config:
    """`config` with the cap and the deadline as [limits] (so the node's switch gets the
    deadline and the run's guard both), from `check --live`."""
    changes: Mapping[str, object] = {
        "limits.max_spend_usd": limits.max_spend_usd,
        "limits.max_hours": limits.max_hours,
    }
    values, sources = dict(config.values), dict(config.sources)
    for key, value in changes.items():
        values[key] = value
        sources[key] = Source("flag", WHY)
    return replace(config, values=values, sources=sources)


def live_config(config: Config, kind: str) -> Config:
    """The configuration the check runs with: `kind` selected, and on this machine a model
    that needs no download (the configured file, else the rehearsal's tiny one)."""
    own = config.for_provider(kind)
    if not own.kind.child_process:
        return own
    from mvp_tui.rehearsal.session import rehearsal_model

    return own.with_local_model(rehearsal_model(own), "check --live's model on this machine")


def model_words(config: Config) -> str:
    source = config.model_source
    where = config.sources.get("model.gguf_local_path" if source.local_path else "model.gguf_file")
    return f"{source.describe()} ({where or 'default'})"


async def search(config: Config) -> list[Offer]:
    """The provider's offers under the run's policy; nothing is created."""
    from mvp_tui.engine.provider_factory import build_provider
    from mvp_tui.engine.settings import selection_policy

    provider = build_provider(config)
    try:
        return await provider.search_offers(selection_policy(config))
    finally:
        await provider.aclose()


@dataclass
class Report:
    """What the check prints: the steps as they happen, then the facts and the end."""

    out: TextIO
    as_json: bool
    redact: Redactor
    started: float = field(default_factory=time.monotonic)
    steps: list[Step] = field(default_factory=list)
    records: list[Record] = field(default_factory=list)
    spent: Callable[[], float] | None = None  # USD so far

    def clean(self, text: str) -> str:
        return clean_line(text, LINE_CHARS, redact=self.redact)

    def step(self, name: str, ok: bool, detail: str) -> None:
        spent = self.spent() if self.spent is not None else 0.0
        step = Step(name, ok, self.clean(detail), time.monotonic() - self.started, spent)
        self.steps.append(step)
        if not self.as_json:
            mark = "✓" if ok else "✗"
            self.say(f"[{step.elapsed_s:7.1f} s  ${step.spent_usd:.4f}] {mark} "
                     f"{name.ljust(12)} {step.detail}")

    def say(self, line: str) -> None:
        if not self.as_json:
            self.out.write(line + "\n")
            self.out.flush()

    def record(self, record: Record) -> None:
        self.records.append(record)
        if record.get("event") == "text_delta" and not self._streamed():
            self.step("first token", True, "the answer began to stream")
        said = step_of(record)
        if said is not None:
            self.step(*said)

    def create_sent(self) -> bool:
        """Whether a create went to the provider (an attempt starts just before it)."""
        return any(r.get("event") == "attempt_started" for r in self.records)

    def _streamed(self) -> bool:
        return any(s.name == "first token" for s in self.steps)


async def run_live(config: Config, opts: LiveOptions, out: TextIO = sys.stdout) -> int:
    """One canary run; the exit code (0 only when it served and nothing bills)."""
    run_config = live_config(config, opts.provider)
    report = Report(out, opts.as_json, Redactor(run_config.secret_values()))
    report.say(f"check --live {opts.provider}: spend cap {usd(opts.max_spend_usd)}, at most "
               f"{opts.max_minutes:g} min; model {report.clean(model_words(run_config))}")
    try:
        offers = await search(run_config)
    except ProviderError as exc:
        report.step("offers", False, exc.message)
        return finish(report, opts, None, int(ExitCode.RUN_FAILED), "no offers were read")
    if not offers:
        report.step("offers", False, f"no {opts.provider} offer matches the policy")
        return finish(report, opts, None, int(ExitCode.RUN_FAILED),
                      "no offer: loosen the provider's filters or [limits] max_price_per_hour")
    limits = bounds(offers, opts)  # CapTooLow: exit 2, nothing rented
    cheapest = limits.cheapest
    report.step("offers", True, (
        f"{len(offers)} offer(s); cheapest {cheapest.offer_id} ({cheapest.gpu_name}) at "
        f"${cheapest.price_per_hour:.3f}/h, ${limits.minute_usd:.4f} a minute; walking "
        f"{len(limits.offers)}"))
    report.step("bounds", True, (
        f"tears down at {usd(limits.max_spend_usd)} spent; the node's switch is armed with a "
        f"{limits.max_hours * 60:.1f} min deadline it keeps without this machine "
        f"({limits.why_deadline(opts.max_minutes)})"))
    engine = RunEngine(bounded(run_config, limits), lambda event: record_event(report, event))
    report.redact = engine.redactor
    report.spent = lambda: engine.ledger.spent(engine.ctx.clock(), engine.ctx.run_id)
    engine.hub.listeners.append(lambda frame: record_frame(report, frame))
    try:
        return await _run(engine, report, limits, opts)
    finally:
        with contextlib.suppress(Exception):
            await engine.aclose()


def record_event(report: Report, event: EngineEvent) -> None:
    report.record(event.to_dict())


def record_frame(report: Report, frame: Frame) -> None:
    """An agent's record (a JSON object on a node channel) joins the facts' records."""
    try:
        value = json.loads(frame.payload)
    except (ValueError, UnicodeDecodeError):
        return
    if isinstance(value, dict):
        report.records.append(value)


async def _run(engine: RunEngine, report: Report, limits: Bounds, opts: LiveOptions) -> int:
    session = RunSession(engine)
    engine.check_model()
    engine.check_state_dir()
    engine.started()
    prompt = engine.ctx.settings.prompt
    named = engine.config.sources.get("prompt.max_tokens")
    max_tokens = prompt.max_tokens if named and named.layer != "default" else MAX_TOKENS
    plan = Plan(prompts=(PROMPT,), max_tokens=max_tokens, serve=False, keep=False)
    loop = asyncio.get_running_loop()
    stops: list[asyncio.Task[StopResult]] = []
    signalled: list[str] = []

    def on_signal(sig: signal.Signals) -> None:
        signalled.append(sig.name)
        stops.append(loop.create_task(session.controller.stop(final=True,
                                                              reason=f"{sig.name} received")))

    for sig in SIGNALS:
        loop.add_signal_handler(sig, on_signal, sig)
    reason = ""
    try:
        try:
            await session.lease_and_serve(limits.offers, plan)
        except RunAborted as aborted:
            reason = aborted.reason
        except RunFailed as failed:
            reason = str(failed)
        result = await session.controller.stop(final=True)
        await asyncio.gather(*stops, return_exceptions=True)
    finally:
        for sig in SIGNALS:
            loop.remove_signal_handler(sig)
    if signalled:
        reason = reason or f"interrupted by {signalled[0]}"
    if isinstance(engine.provider, VastAiProvider) and engine.provider.v0_retired:
        report.records.append({"event": V1_FALLBACK, "routes": sorted(engine.provider.v0_retired)})
    return verdict(report, opts, result, reason, engine.provider.info.billing)


def verdict(report: Report, opts: LiveOptions, result: StopResult, reason: str,
            billing: bool) -> int:
    """The exit code: 3 when something may bill (named), 1 when a step failed or the
    account could not be listed, else 0."""
    if not result.nothing_bills:
        for line in result.left_lines():
            report.say(report.clean(line))
        return finish(report, opts, result, int(ExitCode.MAY_BILL),
                      reason or "teardown not confirmed: a lease may still bill")
    served = any(s.name == "prompt" and s.ok for s in report.steps)
    account = result.account
    if billing and account is None and not report.create_sent():
        # The run ended before its first create (a missing key, the model): nothing of it
        # can bill, and `down --all` would be advice for a lease that never was.
        report.step("account", True, f"not listed: no create was sent to {opts.provider}, "
                    "so nothing of this run can bill")
    elif billing and (account is None or not account.nothing_bills):
        why = account.error if account is not None and account.error else "not listed"
        report.step("account", False, f"the account could not be checked ({why}): each "
                    "delete was confirmed by its id only; run `mvp-tui down --all` later")
        return finish(report, opts, result, int(ExitCode.RUN_FAILED),
                      reason or "the account was not checked")
    if not billing and not reason:
        report.step("account", True, f"{opts.provider} bills nothing: no account to list; "
                    "its node's processes ended, confirmed")
    if reason or not served:
        return finish(report, opts, result, int(ExitCode.RUN_FAILED),
                      reason or "no answer streamed")
    return finish(report, opts, result, int(ExitCode.OK), "")


def finish(report: Report, opts: LiveOptions, result: StopResult | None, code: int,
           reason: str) -> int:
    facts = judge(Seen(opts.provider, report.records))
    spent = report.steps[-1].spent_usd if report.steps else 0.0
    elapsed = time.monotonic() - report.started
    nothing_bills = result is None or result.nothing_bills
    left = [ref.provider_id or ref.label for ref in result.left] if result is not None else []
    end = ("nothing bills" if nothing_bills else
           f"MAY STILL BILL: {', '.join(left) or 'see above'}")
    summary = (f"{end}; spent ${spent:.4f} of {usd(opts.max_spend_usd)} in {elapsed:.1f} s"
               + (f"; {report.clean(reason)}" if reason else "") + f" (exit {code})")
    if report.as_json:
        json.dump({
            "ok": code == int(ExitCode.OK), "provider": opts.provider,
            "max_spend_usd": opts.max_spend_usd, "exit_code": code,
            "nothing_bills": nothing_bills, "leases_left": left,
            "reason": report.clean(reason), "spent_usd": round(spent, 6),
            "elapsed_s": round(elapsed, 3),
            "steps": [s.as_json() for s in report.steps],
            "facts": [f.as_json() for f in facts],
        }, report.out, ensure_ascii=False, indent=1)
        report.out.write("\n")
        report.out.flush()
        return code
    report.say("facts this run proved:")
    width = max(len(f.name) for f in facts)
    for fact in facts:
        report.say("  " + fact_line(fact, width, report))
    report.say(f"result: {summary}")
    return code


def fact_line(fact: Fact, width: int, report: Report) -> str:
    return report.clean(fact.line(width))
