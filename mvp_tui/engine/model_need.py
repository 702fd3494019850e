"""The model's VRAM need, read once per board: the GGUF's size and header, from the local
file when it is on this machine, else from the hub the node will download it from.

The hub is asked once: a GET of the file with an open `Range` (the real hub and the tests'
loopback one both answer 206 with the total in `Content-Range`), read only until the header's
facts are in, then closed. `HF_TOKEN` goes in the header for private repos, as the agent's own
download does; it never appears in an error.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from mvp_tui.engine.gguf_shape import NotGguf, ShortRead, parse_shape
from mvp_tui.engine.model_fit import ModelNeed, fit_slots, need_from
from mvp_tui.engine.settings import ModelSettings
from mvp_tui.node_protocol import AgentEnv

if TYPE_CHECKING:  # httpx loads only when the hub is asked (the dashboard paints first)
    import httpx

FIRST_READ = 64 * 1024
MAX_HEADER_BYTES = 32 * 1024 * 1024  # past this the header's facts are not coming
TIMEOUT_S = 15.0


class ModelNeedError(Exception):
    """Why the need could not be read, in words (no secret in it)."""


class HubRefused(ModelNeedError):
    """The hub answered 401 or 403: `error_code` is its `X-Error-Code` (`GatedRepo`, …)."""

    def __init__(self, message: str, *, status: int, error_code: str) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code


def hub_endpoint(environ: Mapping[str, str]) -> str:
    """The hub this run's nodes download from (`AgentEnv.hf_endpoint`, as the agent reads
    it)."""
    raw = environ.get(AgentEnv.env_name("hf_endpoint"), "")
    return AgentEnv.from_env({AgentEnv.env_name("hf_endpoint"): raw}).hf_endpoint


def hub_url(model: ModelSettings, environ: Mapping[str, str]) -> str:
    revision = model.gguf_revision or "main"
    return f"{hub_endpoint(environ)}/{model.gguf_repo}/resolve/{revision}/{model.gguf_file}"


async def read_model_need(
    model: ModelSettings,
    *,
    nodes: int,
    environ: Mapping[str, str],
    transport: httpx.AsyncBaseTransport | None = None,
) -> ModelNeed:
    """The need at `[model] max_context` in `[model] parallel` slots (unset: one);
    `ModelNeedError` says why when it cannot be read."""
    local = model.gguf_local_path
    if local is not None and local.is_file():
        size, head = await asyncio.to_thread(_read_local, local)
        source = str(local)
    else:
        source = hub_url(model, environ)
        size, head = await read_hub_head(source, environ.get("HF_TOKEN", ""), transport)
    try:
        shape = parse_shape(head)
    except ShortRead:
        raise ModelNeedError(f"{source}: the GGUF header ends early") from None
    except NotGguf as exc:
        raise ModelNeedError(f"{source}: {exc}") from None
    return need_from(shape, size, context=model.max_context, nodes=nodes, source=source,
                     slots=fit_slots(model.parallel))


def _read_local(path: Path) -> tuple[int, bytes]:
    """The size and enough of the head (the header grows until it parses, up to the cap)."""
    size = path.stat().st_size
    want = FIRST_READ
    with path.open("rb") as file:
        while True:
            file.seek(0)
            head = file.read(want)
            try:
                parse_shape(head)
            except ShortRead:
                if len(head) < want or want >= MAX_HEADER_BYTES:
                    return size, head
                want *= 4
                continue
            except NotGguf:
                pass
            return size, head


async def read_hub_head(
    url: str, token: str, transport: httpx.AsyncBaseTransport | None
) -> tuple[int, bytes]:
    """A hub file's size and its first bytes, up to where its GGUF header's facts end. The
    token goes to the hub only: httpx drops it on a redirect to another host (the CDN)."""
    import httpx

    headers = {"Range": "bytes=0-", "Accept-Encoding": "identity"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    try:
        async with httpx.AsyncClient(
            transport=transport, timeout=TIMEOUT_S, follow_redirects=True
        ) as client, client.stream("GET", url, headers=headers) as answer:
            if answer.status_code in (401, 403):
                raise HubRefused(f"{url}: the hub refused ({answer.status_code}); "
                                 "a private repo needs HF_TOKEN", status=answer.status_code,
                                 error_code=answer.headers.get("X-Error-Code", ""))
            if answer.status_code not in (200, 206):
                raise ModelNeedError(f"{url}: the hub answered {answer.status_code}")
            size = _total_size(answer)
            head = bytearray()
            async for chunk in answer.aiter_bytes():
                head += chunk
                if _parses(bytes(head)) or len(head) >= MAX_HEADER_BYTES:
                    break
            return size, bytes(head)
    except httpx.HTTPError as exc:
        raise ModelNeedError(f"{url}: {type(exc).__name__}") from None


def _parses(head: bytes) -> bool:
    try:
        parse_shape(head)
    except ShortRead:
        return False
    except NotGguf:
        return True  # no more bytes will help: the caller says why
    return True


MAX_MODEL_BYTES = 1 << 50  # a file size past a pebibyte is no model's


def _total_size(answer: httpx.Response) -> int:
    match = re.search(r"/([0-9]+)\s*$", answer.headers.get("Content-Range", ""))
    length = answer.headers.get("Content-Length", "")
    if match:
        digits = match.group(1)
    elif answer.status_code == 200 and re.fullmatch(r"[0-9]+", length):
        digits = length
    else:
        raise ModelNeedError(f"{answer.request.url}: the hub gave no file size")
    if len(digits) > 20 or int(digits) > MAX_MODEL_BYTES:  # never int() of 4,300 digits
        raise ModelNeedError(f"{answer.request.url}: cannot read this GGUF: the hub gives a "
                             f"file size of {len(digits)} digits, past any model's")
    return int(digits)
