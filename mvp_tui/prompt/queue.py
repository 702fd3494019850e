"""One prompt at a time: the FIFO queue shared by the prompt pane and the prompt RPC.

The engine serves one stream at a time (llama-cpp-python even aborts a running stream when a
second arrives), so prompts wait here, visibly, and run in order. Cancelling the active prompt
closes its HTTP stream and the next one starts at once. The pane's prompts are turns of one
conversation (`Conversation`: each request carries the earlier turns that fit the context);
the prompt RPC's stay one prompt a request, as the seed defines them. Every event goes to the
engine's sink and to the submitter's own listener (the RPC connection that asked, if any).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mvp_tui.events import EngineEvent, EventSink
from mvp_tui.prompt.conversation import Conversation
from mvp_tui.prompt.events import (
    FaultKind,
    PromptCancelled,
    PromptDone,
    PromptFault,
    PromptQueued,
    PromptSource,
    PromptStarted,
    TextDelta,
    is_end,
)
from mvp_tui.prompt.history import PromptHistory
from mvp_tui.untrusted import clean_line

if TYPE_CHECKING:  # httpx loads with the client, when the first prompt runs
    from mvp_tui.prompt.client import ChatMessage, PromptClient

ClientFactory = Callable[[], "PromptClient"]
"""Gives the client for the next prompt (the endpoint may move when a port forward is redone)."""

SECONDS_PER_HOUR = 3600.0


@dataclass(frozen=True, slots=True)
class PendingPrompt:
    """A prompt waiting its turn, as the pane lists it."""

    prompt_id: int
    text: str
    max_tokens: int
    source: PromptSource
    turn: bool = False  # a turn of the conversation: its request carries the earlier turns


@dataclass(frozen=True, slots=True)
class Sampling:
    """`[prompt] temperature`, `top_p` and `seed`: None leaves the engine's default."""

    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None


@dataclass(slots=True)
class _Job:
    prompt: PendingPrompt
    listener: EventSink | None
    parts: list[str] = field(default_factory=list)
    ended: bool = False  # its end event was emitted


def prompt_cost(price_per_hour: float | None, elapsed_ms: int) -> float | None:
    """What a prompt cost on a paid lease: $/h × its elapsed time; None when unpriced."""
    if price_per_hour is None:
        return None
    return price_per_hour * elapsed_ms / 1000.0 / SECONDS_PER_HOUR


class PromptQueue:
    """Runs submitted prompts one after another through a `PromptClient`."""

    def __init__(
        self,
        client_factory: ClientFactory,
        sink: EventSink,
        price_per_hour: float | None = None,
        *,
        system_prompt: str | None = None,
        history_size: int = 200,
        conversation: Conversation | None = None,
        sampling: Sampling | None = None,
    ) -> None:
        self._client_factory = client_factory
        self._sink = sink
        self.price_per_hour = price_per_hour
        self._system_prompt = system_prompt
        # The pane's turns; without one (headless, benches) each prompt stands alone.
        self.conversation = conversation
        self.sampling = sampling or Sampling()
        self._pending: deque[_Job] = deque()
        self._active: _Job | None = None
        self._active_task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._worker: asyncio.Task[None] | None = None
        self._open = asyncio.Event()  # cleared while no node serves (a lost node's replacement)
        self._open.set()
        self._next_id = 1
        self.history = PromptHistory(history_size)

    # -- what the pane reads ------------------------------------------------------------------

    def pending(self) -> list[PendingPrompt]:
        """The prompts waiting, first to run first."""
        return [job.prompt for job in self._pending]

    @property
    def active(self) -> PendingPrompt | None:
        """The prompt streaming now, if any."""
        return self._active.prompt if self._active else None

    # -- what the pane and the RPC do ---------------------------------------------------------

    def submit(
        self,
        text: str,
        max_tokens: int,
        *,
        source: PromptSource = PromptSource.PANE,
        listener: EventSink | None = None,
        request_id: int | None = None,
        turn: bool = False,
    ) -> int:
        """Queue a prompt and return its id; it starts when every earlier one has ended.
        `request_id` is an RPC client's own id, carried on the channel records; `turn`: a
        turn of the conversation (the pane's), sent with the earlier turns that fit."""
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1, got {max_tokens}")
        prompt = PendingPrompt(self._next_id, text, max_tokens, source, turn)
        self._next_id += 1
        job = _Job(prompt, listener)
        position = len(self._pending) + (1 if self._active else 0)
        self._pending.append(job)
        self._idle.clear()
        if source is PromptSource.PANE:
            self.history.add(text)
        self._emit(
            job,
            PromptQueued(
                at=time.time(),
                prompt_id=prompt.prompt_id,
                text_chars=len(text),
                max_tokens=max_tokens,
                position=position,
                source=source,
                text_bytes=len(text.encode("utf-8", "surrogatepass")),
                request_id=request_id,
            ),
        )
        self._ensure_worker()
        self._wake.set()
        return prompt.prompt_id

    def cancel(self, prompt_id: int | None = None) -> bool:
        """Cancel a prompt (the active one when `prompt_id` is None); False if none matched."""
        active = self._active
        if active is not None and prompt_id in (None, active.prompt.prompt_id):
            if active.ended:
                return False
            if self._active_task is not None and not self._active_task.done():
                self._active_task.cancel()
                return True
            return False
        for job in self._pending:
            if job.prompt.prompt_id == prompt_id:
                self._pending.remove(job)
                self._emit(
                    job, PromptCancelled(at=time.time(), prompt_id=prompt_id, was_active=False)
                )
                self._note_if_idle()
                return True
        return False

    async def aclose(self) -> None:
        """Cancel everything queued and running, and stop the worker."""
        while self._pending:
            job = self._pending.popleft()
            self._emit(
                job,
                PromptCancelled(at=time.time(), prompt_id=job.prompt.prompt_id, was_active=False),
            )
        self._note_if_idle()
        self.cancel()
        if self._active_task is not None:
            await asyncio.wait({self._active_task})
        if self._worker is not None:
            self._worker.cancel()
            await asyncio.wait({self._worker})
            self._worker = None

    def pause(self) -> None:
        """No node serves for now: queued prompts wait (none starts) until `resume`."""
        self._open.clear()

    def resume(self) -> None:
        """A node serves again: the waiting prompts run, in order."""
        self._open.set()

    @property
    def paused(self) -> bool:
        return not self._open.is_set()

    async def drained(self) -> None:
        """Wait until nothing is queued or running (for headless runs and tests)."""
        await self._idle.wait()

    def _note_if_idle(self) -> None:
        if not self._pending and self._active is None:
            self._idle.set()

    # -- the worker ---------------------------------------------------------------------------

    def _ensure_worker(self) -> None:
        if self._worker is None or self._worker.done():
            self._worker = asyncio.get_running_loop().create_task(self._work(), name="prompt-queue")

    async def _work(self) -> None:
        """Take prompts in order; each runs in its own task so cancelling it spares the queue."""
        while True:
            if not self._pending:
                self._wake.clear()
                await self._wake.wait()
                continue
            if not self._open.is_set():
                await self._open.wait()
                continue
            job = self._pending.popleft()
            self._active = job
            self._active_task = asyncio.get_running_loop().create_task(
                self._run(job), name=f"prompt-{job.prompt.prompt_id}"
            )
            task = self._active_task
            try:
                await asyncio.wait({task})
            finally:
                if not task.done():
                    task.cancel()  # the worker itself is being stopped
                if not job.ended:
                    self._emit(job, self._unended(job, task))
                self._active = None
                self._active_task = None
                self._note_if_idle()

    @staticmethod
    def _unended(job: _Job, task: asyncio.Task[None]) -> EngineEvent:
        """The end event of a prompt whose task stopped without one: cancelled, or a crash."""
        partial = "".join(job.parts)
        error = None if not task.done() or task.cancelled() else task.exception()
        if error is None:
            return PromptCancelled(
                at=time.time(),
                prompt_id=job.prompt.prompt_id,
                was_active=True,
                partial_text=partial,
            )
        return PromptFault(
            at=time.time(),
            prompt_id=job.prompt.prompt_id,
            fault_kind=FaultKind.CLIENT_ERROR,
            error=clean_line(f"the prompt client failed: {type(error).__name__}: {error}"),
            partial_text=partial,
        )

    def new_conversation(self) -> None:
        """The pane's next prompt starts a new conversation (nothing earlier is sent)."""
        if self.conversation is not None:
            self.conversation.clear()

    async def _run(self, job: _Job) -> None:
        """Stream one prompt, relaying its events and pricing its answer."""
        prompt = job.prompt
        conversation = self.conversation if prompt.turn else None
        messages: Sequence[ChatMessage]
        if conversation is not None:
            generation = conversation.generation
            request = conversation.request(prompt.text, prompt.max_tokens)
            messages = request.messages
            started = PromptStarted(at=time.time(), prompt_id=prompt.prompt_id,
                                    turns_sent=request.turns_sent,
                                    turns_dropped=request.turns_dropped)
        else:
            messages = self._messages(prompt.text)
            started = PromptStarted(at=time.time(), prompt_id=prompt.prompt_id)
        self._emit(job, started)
        client = self._client_factory()
        sampling = self.sampling
        stream = client.stream(
            messages, prompt.max_tokens, prompt_id=prompt.prompt_id,
            temperature=sampling.temperature, top_p=sampling.top_p, seed=sampling.seed,
        )
        try:
            async for event in stream:
                if isinstance(event, TextDelta):
                    job.parts.append(event.text)
                    self._emit(job, event)
                elif isinstance(event, PromptDone):
                    if conversation is not None:
                        conversation.record(prompt.text, event.final_text, generation)
                    cost = prompt_cost(self.price_per_hour, event.elapsed_ms)
                    self._emit(job, dataclasses.replace(event, cost_usd=cost))
                else:
                    self._emit(job, event)
        finally:
            await stream.aclose()

    def _messages(self, text: str) -> Sequence[ChatMessage]:
        messages: list[ChatMessage] = []
        if self._system_prompt:
            messages.append({"role": "system", "content": self._system_prompt})
        messages.append({"role": "user", "content": text})
        return messages

    def _emit(self, job: _Job, event: EngineEvent) -> None:
        job.ended = job.ended or is_end(event)
        self._sink(event)
        if job.listener is not None:
            job.listener(event)
