"""A streaming client of an OpenAI-compatible chat endpoint (llama.cpp's servers).

`PromptClient.stream` posts to `/v1/chat/completions` with `stream: true` and yields a
`TextDelta` per content chunk, then one `PromptDone` (counts, TTFT, tok/s) or `PromptFault`
(the engine's own message, a dropped stream, a refused connection with its fix). Cancelling
the consuming task, or closing the generator, closes the HTTP stream so the engine stops.
"""

from __future__ import annotations

import functools
import json
import math
import ssl
import time
from collections.abc import AsyncGenerator, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import httpx
import msgspec

from mvp_tui.prompt.events import FaultKind, PromptDone, PromptFault, StreamEvent, TextDelta
from mvp_tui.prompt.sse import SseParser
from mvp_tui.secrets import Redactor
from mvp_tui.untrusted import clean_bytes, clean_line

ChatMessage = Mapping[str, str]
"""One chat message: {"role": "user" | "system" | "assistant", "content": text}."""

DEFAULT_TIMEOUT = httpx.Timeout(30.0, connect=5.0, read=120.0)
ERROR_MAX_CHARS = 600
SNIPPET_CHARS = 200
_SNIPPET_SCAN_BYTES = 64 * 1024
ENGINE_FIX = (
    "check that the engine is running and listening there (for a remote node, that the SSH "
    "port forward is up); its log is on the node's stdout/stderr channels"
)
CONTEXT_FIX = "shorten the prompt or lower max_tokens; the model's context window is fixed"
CONTEXT_CODES = frozenset({"context_length_exceeded", "exceed_context_size_error"})


@functools.cache
def shared_ssl_context() -> ssl.SSLContext:
    """httpx's default TLS context (certifi's CAs), made once: every prompt of a run gets a
    client of its own (the node of the moment), and httpx loads the CA bundle anew for each
    one, ~600 KB of C heap and 5-50 ms before the request goes out (issue 40 §4)."""
    return httpx.create_ssl_context(trust_env=False)


class _Delta(msgspec.Struct):
    content: str | None = None


class _Choice(msgspec.Struct):
    delta: _Delta | None = None
    finish_reason: str | None = None


class _Usage(msgspec.Struct):
    completion_tokens: int | None = None


class _Timings(msgspec.Struct):
    """llama-server's own figures for the answer, in its last chunk (peers-2026-12-02.md
    §5.3): decode tokens per second and the prompt's processing time."""

    predicted_per_second: float | None = None
    prompt_ms: float | None = None


class _Chunk(msgspec.Struct):
    """A streamed chunk as the engines send it, decoded in one C call; any other shape (an
    error chunk, an odd type) is read by the general path in `_feed`."""

    choices: list[_Choice] | None = None
    usage: _Usage | None = None
    timings: _Timings | None = None


_decode_chunk = msgspec.json.Decoder(_Chunk).decode


def chat_url(base_url: str) -> str:
    """The chat-completions URL for a base like `http://127.0.0.1:8080` or `.../v1`."""
    base = base_url.rstrip("/")
    return f"{base}/chat/completions" if base.endswith("/v1") else f"{base}/v1/chat/completions"


@dataclass(slots=True)
class _Tally:
    """What one stream has produced so far: text, token count, first and last token times."""

    started: float
    parts: list[str] = field(default_factory=list)
    tokens: int = 0
    usage_tokens: int | None = None
    first_at: float | None = None
    finish_reason: str | None = None
    events: int = 0
    engine_rate: float | None = None  # llama-server's `timings.predicted_per_second`
    engine_prompt_ms: float | None = None  # its `timings.prompt_ms`

    def timed(self, timings: _Timings) -> None:
        rate, prompt = timings.predicted_per_second, timings.prompt_ms
        if isinstance(rate, int | float) and rate > 0 and math.isfinite(rate):
            self.engine_rate = float(rate)
        if isinstance(prompt, int | float) and prompt >= 0 and math.isfinite(prompt):
            self.engine_prompt_ms = float(prompt)

    def add(self, text: str, now: float) -> None:
        self.parts.append(text)
        self.tokens += 1
        if self.first_at is None:
            self.first_at = now

    @property
    def text(self) -> str:
        return "".join(self.parts)

    def done(self, prompt_id: int, now: float) -> PromptDone:
        tokens = self.usage_tokens if self.usage_tokens is not None else self.tokens
        elapsed = now - self.started
        ttft = None if self.first_at is None else self.first_at - self.started
        # Decode rate: tokens over the time spent producing them (after the first arrived
        # the prompt was already processed), as engines report it.
        generating = elapsed - (ttft or 0.0)
        rate = tokens / generating if tokens and generating > 0 else 0.0
        return PromptDone(
            at=time.time(),
            prompt_id=prompt_id,
            final_text=self.text,
            tokens_generated=tokens,
            elapsed_ms=round(elapsed * 1000),
            ttft_ms=None if ttft is None else round(ttft * 1000),
            tokens_per_s=rate,
            finish_reason=self.finish_reason,
            engine_tokens_per_s=self.engine_rate,
            engine_prompt_ms=self.engine_prompt_ms,
        )


class PromptClient:
    """Streams chat completions from one OpenAI-compatible endpoint for one model."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        http: httpx.AsyncClient | None = None,
        api_key: str | None = None,
        redactor: Redactor | None = None,
        timeout: httpx.Timeout = DEFAULT_TIMEOUT,
    ) -> None:
        self.base_url = base_url
        self.model = model
        self.url = chat_url(base_url)
        self._owns_http = http is None
        # trust_env=False: the engine is on loopback (a forward or a local port); an
        # HTTP(S)_PROXY / ALL_PROXY meant for the internet would carry every prompt and answer
        # through the proxy, or break the run where the proxy cannot reach our loopback.
        self._http = (
            http
            if http is not None
            else httpx.AsyncClient(timeout=timeout, trust_env=False, verify=shared_ssl_context())
        )
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._redact = redactor or Redactor()
        self._redact.add(api_key)

    async def aclose(self) -> None:
        """Close the HTTP client if this object created it."""
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> PromptClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def request_body(
        self,
        prompt: str | Sequence[ChatMessage],
        max_tokens: int,
        *,
        temperature: float | None = None,
        seed: int | None = None,
        stop: Sequence[str] | None = None,
        top_p: float | None = None,
    ) -> dict[str, Any]:
        """The JSON body of a streamed chat request (a bare string is one user message)."""
        messages = (
            [{"role": "user", "content": prompt}]
            if isinstance(prompt, str)
            else [dict(m) for m in prompt]
        )
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "max_tokens": max_tokens,
            "stream": True,
            # llama-server then ends with a usage chunk; llama-cpp-python ignores it.
            "stream_options": {"include_usage": True},
        }
        if temperature is not None:
            body["temperature"] = temperature
        if top_p is not None:
            body["top_p"] = top_p
        if seed is not None:
            body["seed"] = seed
        if stop:
            body["stop"] = list(stop)
        return body

    async def stream(
        self,
        prompt: str | Sequence[ChatMessage],
        max_tokens: int,
        *,
        prompt_id: int = 0,
        temperature: float | None = None,
        seed: int | None = None,
        stop: Sequence[str] | None = None,
        top_p: float | None = None,
    ) -> AsyncGenerator[StreamEvent, None]:
        """Yield `TextDelta`s, then exactly one `PromptDone` or `PromptFault`."""
        body = self.request_body(prompt, max_tokens, temperature=temperature, seed=seed,
                                 stop=stop, top_p=top_p)
        tally = _Tally(started=time.perf_counter())
        how = "closed the stream before [DONE]"
        try:
            response = await self._open(body)
            try:
                if response.status_code >= 400:
                    yield self._http_fault(prompt_id, response.status_code, await response.aread())
                    return
                parser = SseParser()
                parsing = False  # the parser holds part of an event
                data: str | None = None  # a lone `data:` line waiting for its blank line
                async for line in response.aiter_lines():
                    # The engines' shape, one `data: ` line then a blank one, read here;
                    # anything else (comments, names, multi-line data) by the parser.
                    if data is None and not parsing and line.startswith("data: "):
                        data = line[6:]
                        continue
                    if data is None or line:  # (a blank line after `data` dispatches it)
                        if data is not None:
                            parser.feed("data: " + data)
                            data = None
                        sse = parser.feed(line)
                        parsing = not parser.empty
                        if sse is None:
                            continue
                        data = sse.data
                    if data == "[DONE]":
                        yield tally.done(prompt_id, time.perf_counter())
                        return
                    outcome = self._feed(prompt_id, tally, data)
                    data = None
                    if outcome is not None:
                        yield outcome
                        if isinstance(outcome, PromptFault):
                            return
                if data is not None:
                    parser.feed("data: " + data)
                last = parser.flush()
                if last is not None and last.data == "[DONE]":
                    yield tally.done(prompt_id, time.perf_counter())
                    return
                if tally.finish_reason is not None:
                    # A server that ends after the finish chunk without [DONE] still finished.
                    yield tally.done(prompt_id, time.perf_counter())
                    return
            finally:
                await response.aclose()
        except httpx.ConnectError as exc:
            yield self._fault(
                prompt_id,
                FaultKind.CONNECTION_REFUSED,
                f"cannot connect to the engine at {self.url}: {exc}",
                fix=ENGINE_FIX,
            )
            return
        except httpx.TimeoutException as exc:
            yield self._fault(
                prompt_id,
                FaultKind.TIMEOUT,
                f"the engine at {self.url} timed out ({type(exc).__name__}) "
                f"after {tally.tokens} tokens",
                partial=tally.text,
                fix="the engine may be overloaded or stuck; see the node's log",
            )
            return
        except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
            how = f"broke the connection ({exc or type(exc).__name__})"
        if not tally.events:
            # llama-cpp-python rejects an over-long prompt after its 200 headers, with an
            # empty stream; the same request unstreamed gets the engine's reason as a 400.
            rejected = await self._probe_rejection(prompt_id, body)
            if rejected is not None:
                yield rejected
                return
        yield self._fault(
            prompt_id,
            FaultKind.STREAM_ENDED_EARLY,
            f"stream ended early: {self.url} {how} after {tally.tokens} tokens",
            partial=tally.text,
            fix="the engine may have crashed or restarted; see the node's log",
        )

    async def _open(self, body: dict[str, Any], *, stream: bool = True) -> httpx.Response:
        """Send the request; once more if a kept-alive connection turns out to be dead.

        The engine closes a connection it could not finish (an aborted stream) just after
        the pool may have picked it again; no response came, so the engine did no work.
        """
        request = self._http.build_request("POST", self.url, json=body, headers=self._headers)
        try:
            return await self._http.send(request, stream=stream)
        except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError):
            return await self._http.send(request, stream=stream)

    async def _probe_rejection(self, prompt_id: int, body: dict[str, Any]) -> PromptFault | None:
        """Re-ask unstreamed for one token: a 4xx/5xx then carries the engine's reason."""
        probe = {**body, "stream": False, "max_tokens": 1}
        probe.pop("stream_options", None)
        try:
            response = await self._open(probe, stream=False)
        except httpx.HTTPError:
            return None
        if response.status_code < 400:
            return None
        return self._http_fault(prompt_id, response.status_code, response.content)

    def _feed(self, prompt_id: int, tally: _Tally, data: str) -> StreamEvent | None:
        """Account one chunk; a `TextDelta` for content, a fault for an error chunk."""
        tally.events += 1
        if '"error"' not in data:
            try:
                fast = _decode_chunk(data)
            except msgspec.MsgspecError:
                pass
            else:
                if fast.usage is not None and fast.usage.completion_tokens is not None:
                    tally.usage_tokens = fast.usage.completion_tokens
                if fast.timings is not None:
                    tally.timed(fast.timings)
                if not fast.choices:
                    return None  # the usage/timings chunk has no choices
                first = fast.choices[0]
                if first.finish_reason is not None:
                    tally.finish_reason = first.finish_reason
                text = first.delta.content if first.delta is not None else None
                if text:
                    tally.add(text, time.perf_counter())
                    return TextDelta(at=time.time(), prompt_id=prompt_id, text=text)
                return None
        try:
            chunk = json.loads(data)
        except json.JSONDecodeError as exc:
            return self._fault(
                prompt_id,
                FaultKind.BAD_STREAM,
                f"the engine sent a chunk that is not JSON ({exc.msg}): "
                f"{self._redact(data)[:80]!r}",  # redacted before it is cut
                partial=tally.text,
            )
        if not isinstance(chunk, dict):
            return self._fault(
                prompt_id,
                FaultKind.BAD_STREAM,
                f"the engine sent a chunk that is not a JSON object: {self._redact(data)[:80]!r}",
                partial=tally.text,
            )
        if "error" in chunk:
            message, code = _engine_message(chunk)
            return self._fault(
                prompt_id,
                FaultKind.ENGINE_REJECTED,
                f"the engine stopped the stream: {message}",
                code=code,
                partial=tally.text,
                fix=CONTEXT_FIX if code in CONTEXT_CODES else None,
            )
        usage = chunk.get("usage")
        if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
            tally.usage_tokens = usage["completion_tokens"]
        timings = chunk.get("timings")
        if isinstance(timings, dict):
            rate, prompt = timings.get("predicted_per_second"), timings.get("prompt_ms")
            tally.timed(_Timings(
                float(rate) if isinstance(rate, int | float) else None,
                float(prompt) if isinstance(prompt, int | float) else None,
            ))
        choices = chunk.get("choices")
        if not choices or not isinstance(choices, list) or not isinstance(choices[0], dict):
            return None  # the usage/timings chunk has no choices
        choice = choices[0]
        reason = choice.get("finish_reason")
        if isinstance(reason, str):
            tally.finish_reason = reason
        delta = choice.get("delta")
        content = delta.get("content") if isinstance(delta, dict) else None
        if isinstance(content, str) and content:
            tally.add(content, time.perf_counter())
            return TextDelta(at=time.time(), prompt_id=prompt_id, text=content)
        return None

    def _http_fault(self, prompt_id: int, status: int, raw: bytes) -> PromptFault:
        """A fault for a 4xx/5xx answer, with the engine's message when it gave one."""
        try:
            body = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            body = None
        if isinstance(body, dict) and ("error" in body or "detail" in body):
            message, code = _engine_message(body)
            return self._fault(
                prompt_id,
                FaultKind.ENGINE_REJECTED,
                f"the engine refused the prompt (HTTP {status}): {message}",
                status=status,
                code=code,
                fix=CONTEXT_FIX if code in CONTEXT_CODES else None,
            )
        # Redacted before it is cut: a cut secret would keep its prefix.
        snippet = clean_bytes(
            raw, SNIPPET_CHARS, redact=self._redact, scan_bytes=_SNIPPET_SCAN_BYTES
        )
        return self._fault(
            prompt_id,
            FaultKind.HTTP_ERROR,
            f"the engine at {self.url} answered HTTP {status}: {snippet}",
            status=status,
            fix="check base_url points at an OpenAI-compatible server (/v1/chat/completions)",
        )

    def _fault(
        self,
        prompt_id: int,
        kind: FaultKind,
        error: str,
        *,
        status: int | None = None,
        code: str | None = None,
        partial: str = "",
        fix: str | None = None,
    ) -> PromptFault:
        return PromptFault(
            at=time.time(),
            prompt_id=prompt_id,
            fault_kind=kind,
            error=_one_line(error, self._redact),
            http_status=status,
            code=clean_line(code, 80, redact=self._redact) if code is not None else None,
            fix=fix,
            partial_text=partial,
        )


def _one_line(text: str, redact: Redactor) -> str:
    """Untrusted text as one bounded, escape-free line (newlines folded to spaces), its
    secrets redacted before it is cut."""
    return clean_line(" ".join(text.split()), ERROR_MAX_CHARS, redact=redact)


def _engine_message(body: dict[str, Any]) -> tuple[str, str | None]:
    """The human message and error code from an OpenAI-, llama-server- or FastAPI-style body."""
    error = body.get("error", body.get("detail"))
    if isinstance(error, dict):
        message = error.get("message")
        code = error.get("code")
        kind = error.get("type")
        code_text = code if isinstance(code, str) else kind if isinstance(kind, str) else None
        return (str(message) if message is not None else json.dumps(error)), code_text
    if isinstance(error, str):
        return error, None
    return json.dumps(error), None  # cut by `_one_line`, after redaction


class NodeClients:
    """One `PromptClient` per serving node (its URL and model), made on first use and kept:
    a prompt reuses the node's connection pool instead of opening (and leaving open) one of
    its own; a replaced node gets its own; `aclose` closes them all when prompting ends."""

    def __init__(self, *, api_key: str | None = None, redactor: Redactor | None = None) -> None:
        self._api_key = api_key
        self._redactor = redactor
        self._made: dict[tuple[str, str], PromptClient] = {}

    def __call__(self, base_url: str, model: str) -> PromptClient:
        client = self._made.get((base_url, model))
        if client is None:
            client = PromptClient(base_url, model, api_key=self._api_key,
                                  redactor=self._redactor)
            self._made[(base_url, model)] = client
        return client

    def __len__(self) -> int:
        return len(self._made)

    async def aclose(self) -> None:
        made, self._made = self._made, {}
        for client in made.values():
            await client.aclose()

