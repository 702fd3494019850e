"""Each answer's measured speed into the host journal, so the board learns this user's own
decode tok/s and TTFT per GPU model and host (lease/learned.py reads them back).

A tap on the prompt queue's sink: every `PromptDone` of at least `MIN_TOKENS` tokens becomes
one `SpeedSample` line (llama-server's `timings` when it sent them, else the client's clock).
A journal that cannot be written is said once; prompts go on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from mvp_tui.events import EngineEvent, EventSink
from mvp_tui.lease.host_journal import HostJournal, SpeedSample, host_key
from mvp_tui.prompt.events import PromptDone
from mvp_tui.providers.base import Offer

MIN_TOKENS = 8  # shorter answers time the first token more than the decode


@dataclass(frozen=True, slots=True)
class ServedOn:
    """What the node of the moment serves, on which offer."""

    run_id: str
    offer: Offer
    model: str  # `model_key`
    context: int


def sample_of(done: PromptDone, serving: ServedOn, now: float) -> SpeedSample | None:
    """The answer's speed sample, or None when it is too short to tell."""
    if done.tokens_generated < MIN_TOKENS:
        return None
    rate = done.engine_tokens_per_s or done.tokens_per_s
    ttft = done.engine_prompt_ms if done.engine_prompt_ms is not None else done.ttft_ms
    if rate <= 0:
        return None
    offer = serving.offer
    return SpeedSample(at=now, run_id=serving.run_id, provider=offer.provider,
                       host=host_key(offer), gpu_name=offer.gpu_name, model=serving.model,
                       decode_tok_s=rate, ttft_ms=float(ttft or 0.0),
                       tokens=done.tokens_generated, context=serving.context)


class SpeedLog:
    """Writes answers' speeds for the node `serving()` names (None: not known, nothing)."""

    def __init__(self, journal: HostJournal, serving: Callable[[], ServedOn | None],
                 clock: Callable[[], float], say: Callable[[str], None]) -> None:
        self._journal = journal
        self._serving = serving
        self._clock = clock
        self._say = say
        self._failed = False

    def tap(self, sink: EventSink) -> EventSink:
        def forward(event: EngineEvent) -> None:
            if isinstance(event, PromptDone):
                self.observe(event)
            sink(event)

        return forward

    def observe(self, done: PromptDone) -> None:
        serving = self._serving()
        sample = sample_of(done, serving, self._clock()) if serving is not None else None
        if sample is None:
            return
        try:
            self._journal.append_speed(sample)
        except OSError as exc:
            if not self._failed:  # once: a full disk would otherwise say it per answer
                self._failed = True
                self._say(f"the host journal could not take this answer's speed: {exc}")
