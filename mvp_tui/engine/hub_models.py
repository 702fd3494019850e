"""The hub's side of the model picker: search GGUF repos, list a repo's GGUF files with their
sizes, and read one file's header for the model's shape (the fit per quant).

The routes, as the official client (`huggingface_hub`'s `list_models`, `model_info` with
`files_metadata=True`) asks them:
- `GET {endpoint}/api/models?search=Q&filter=gguf&sort=downloads&limit=N&expand=downloads&…`:
  a JSON list of `{"_id", "id"}` and the `expand`ed fields (`downloads`, `likes`, `gated`);
- `GET {endpoint}/api/models/{repo}?blobs=true`: `{"id", "gated": false|"auto"|"manual",
  "siblings": [{"rfilename", "size", "lfs": {"sha256", "size", …}}, …]}`;
- the header: `model_need.read_hub_head` (a Range GET of `resolve/main/{file}`).
Errors follow the hub's `X-Error-Code` (`GatedRepo`, `RepoNotFound`) and status (429).
`HF_TOKEN` goes to the endpoint only (`[model]`'s hub, `MVP_HF_ENDPOINT`), never to the CDN
a file redirects to. Everything the hub says is untrusted: names are checked before use.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mvp_tui.engine.gguf_quants import HubFile, QuantModel, RepoHit, group_quants, valid_repo
from mvp_tui.engine.gguf_shape import GgufShape, NotGguf, ShortRead, parse_shape
from mvp_tui.engine.model_need import (
    HubRefused,
    ModelNeedError,
    hub_endpoint,
    read_hub_head,
)
from mvp_tui.engine.quant_fit import RepoFit, repo_fit
from mvp_tui.errors import UserError
from mvp_tui.node_protocol import DEFAULT_HF_ENDPOINT, AgentEnv
from mvp_tui.providers.base import Offer
from mvp_tui.untrusted import clean_line

if TYPE_CHECKING:  # httpx loads only when the hub is asked
    import httpx

SEARCH_LIMIT = 20
SEARCH_FIELDS = ("downloads", "likes", "gated")  # what a search hit shows (`expand`)
TIMEOUT_S = 15.0
TOKEN_ENV = "HF_TOKEN"
HF_SITE = DEFAULT_HF_ENDPOINT  # where a gated repo's terms are accepted


class HubError(UserError):
    """The hub could not answer what the picker asked, in words with the fix."""


class HubGated(HubError):
    """The repo is gated and this client may not read its files."""


@dataclass(frozen=True, slots=True)
class RepoListing:
    repo: str
    quants: tuple[QuantModel, ...]
    gated: bool  # the hub gates its files behind accepted terms


def gated_error(repo: str, *, token_set: bool) -> HubGated:
    """Which repo, that it is gated, and the fix. Terms are accepted on huggingface.co
    itself (a mirror at MVP_HF_ENDPOINT serves the files, not the terms)."""
    why = "the HF_TOKEN given has no access to it" if token_set else "HF_TOKEN is not set"
    return HubGated(
        f"hub repo {repo} is gated (only accounts that accepted its terms get its files) and "
        f"{why}",
        fix=f"accept its terms at {HF_SITE}/{repo}, then set {TOKEN_ENV} to a token of that "
        "account",
    )


class HubModels:
    """One hub's model search and file lists (`endpoint`: `MVP_HF_ENDPOINT` or the hub)."""

    def __init__(
        self, environ: Mapping[str, str], *, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        self.endpoint = hub_endpoint(environ)
        self._token = environ.get(TOKEN_ENV, "")
        self._transport = transport

    @property
    def token_set(self) -> bool:
        return bool(self._token)

    async def _get(self, path: str, params: dict[str, str | int | list[str]], what: str,
                   repo: str = "") -> Any:
        import httpx

        headers = {"Accept": "application/json"}
        if self._token:  # the hub's own API (httpx drops it on a redirect to another host)
            headers["Authorization"] = f"Bearer {self._token}"
        try:
            async with httpx.AsyncClient(transport=self._transport, timeout=TIMEOUT_S,
                                         follow_redirects=True) as client:  # a renamed repo
                answer = await client.get(f"{self.endpoint}{path}", params=params,
                                          headers=headers)
        except httpx.InvalidURL:
            raise HubError(f"{AgentEnv.env_name('hf_endpoint')} = {self.endpoint!r} is not a URL",
                           fix="set it to the hub's base URL, e.g. https://huggingface.co, "
                           "or unset it") from None
        except httpx.HTTPError as exc:
            raise HubError(f"the hub at {self.endpoint} did not answer {what} "
                           f"({type(exc).__name__})",
                           fix="check the network, or MVP_HF_ENDPOINT") from None
        if answer.status_code != 200:
            raise self._refusal(answer.status_code, answer.headers.get("X-Error-Code", ""),
                                answer.headers.get("X-Error-Message", ""), what, repo)
        try:
            return answer.json()
        except ValueError:
            raise HubError(f"the hub's answer to {what} is not JSON") from None

    def _refusal(self, status: int, code: str, message: str, what: str, repo: str) -> HubError:
        if code == "GatedRepo" and repo:
            return gated_error(repo, token_set=self.token_set)
        if repo and (code == "RepoNotFound" or status in (401, 404)):
            return HubError(f"hub repo {repo} was not found (or is private)",
                            fix="check the name (owner/name); a private repo needs HF_TOKEN")
        if status == 429:
            return HubError(f"the hub rate-limited {what} (429)",
                            fix="wait a minute and try again; a token (HF_TOKEN) raises the limit")
        said = f": {clean_line(message, 200)}" if message else ""
        return HubError(f"the hub answered {status} to {what}{said}")

    async def search(self, query: str, limit: int = SEARCH_LIMIT) -> list[RepoHit]:
        """GGUF repos whose name holds `query`, most downloaded first."""
        found = await self._get(
            "/api/models",
            {"search": query, "filter": "gguf", "sort": "downloads", "limit": limit,
             "expand": list(SEARCH_FIELDS)},  # only these come back, `id` always
            f"the search for {query!r}",
        )
        hits = []
        for item in found if isinstance(found, list) else []:
            repo = item.get("id") if isinstance(item, dict) else None
            if not isinstance(repo, str) or not valid_repo(repo):
                continue
            hits.append(RepoHit(repo, _count(item.get("downloads")), _count(item.get("likes")),
                                item.get("gated") not in (None, False)))
        return hits[:limit]

    async def listing(self, repo: str) -> RepoListing:
        """The repo's GGUF models with their sizes. Gated without a token: `HubGated` (its
        files could not be downloaded, here or on a node)."""
        if not valid_repo(repo):
            raise HubError(f"{clean_line(repo, 100)!r} is not a hub repo id",
                           fix="give it as owner/name, e.g. bartowski/Llama-3.2-1B-Instruct-GGUF")
        info = await self._get(f"/api/models/{repo}", {"blobs": "true"}, f"the files of {repo}",
                               repo)
        if not isinstance(info, dict):
            raise HubError(f"the hub's answer for {repo} is not a repo")
        gated = info.get("gated") not in (None, False)
        if gated and not self._token:
            raise gated_error(repo, token_set=False)
        files = [
            HubFile(s["rfilename"], _count(s.get("size") or (s.get("lfs") or {}).get("size")))
            for s in info.get("siblings") or []
            if isinstance(s, dict) and isinstance(s.get("rfilename"), str)
        ]
        return RepoListing(repo, tuple(group_quants(files)), gated)

    async def shape(self, repo: str, file: str, revision: str = "main") -> GgufShape:
        """The model's shape from `file`'s header (the first part of a split one)."""
        url = f"{self.endpoint}/{repo}/resolve/{revision}/{file}"
        try:
            _, head = await read_hub_head(url, self._token, self._transport)
        except HubRefused as refused:
            if refused.error_code == "GatedRepo" or refused.status == 403:
                raise gated_error(repo, token_set=self.token_set) from None
            raise HubError(str(refused), fix="set HF_TOKEN to a token that can read it") from None
        except ModelNeedError as exc:
            raise HubError(str(exc)) from None
        try:
            return parse_shape(head)
        except ShortRead:
            raise HubError(f"{url}: the GGUF header ends early") from None
        except NotGguf as exc:
            raise HubError(f"{url}: {exc}") from None

    async def fit(
        self, repo: str, offers: Iterable[Offer], *, context: int | None, nodes: int,
        slots: int = 1,
    ) -> RepoFit:
        """The repo's quants, each one's need, and the largest each kind of offer holds. The
        shape (every quant's KV cache) is read from the smallest quant `[model]` could serve;
        one that cannot be read leaves the sizes and says why. A gated repo raises."""
        listing = await self.listing(repo)
        readable = [q for q in listing.quants if not q.unservable()] or list(listing.quants)
        shape, note = None, ""
        if readable:
            try:
                shape = await self.shape(repo, readable[0].file)
            except HubGated:
                raise
            except HubError as exc:
                note = str(exc)
        return repo_fit(repo, listing.quants, shape, offers, context=context, nodes=nodes,
                        note=note, slots=slots)


MAX_HUB_NUMBER = 1 << 50  # a file size (or count) past a pebibyte is no model's: unknown


def _count(value: object) -> int:
    """A size or count from the hub's answer; 0 (unknown) unless a plain int in range."""
    ok = isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_HUB_NUMBER
    return value if ok else 0  # type: ignore[return-value]
