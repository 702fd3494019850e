"""`FakeHfHub`: the Hugging Face hub's model search, model info and file routes on loopback,
with a second loopback server as the CDN its files redirect to.

Shapes, from the official client (`huggingface_hub` `hf_api.py`: `list_models`, `model_info`
with `files_metadata=True` → `?blobs=true`, `RepoSibling`, `BlobLfsInfo`; `utils/_http.py`
`hf_raise_for_status` for the error headers) and /work/shared/reference/hf-hub.md:
- `GET /api/models?search=&filter=gguf&sort=downloads&limit=`: a JSON list of
  `{"_id", "id", "modelId", "likes", "downloads", "trendingScore", "private", "tags",
  "pipeline_tag", "library_name", "createdAt"}`, most downloaded first; with `expand=X&…`
  only `_id`, `id` and the properties asked for (`gated` among them);
- `GET /api/models/{repo}[?blobs=true]`: the repo's info with `gated` (false, "auto" or
  "manual": public metadata, gated or not) and `siblings` `[{"rfilename"}]`, with
  `size`, `blobId` and, for LFS files (every GGUF), `lfs: {"sha256", "size", "pointerSize"}`
  when `blobs=true`; a repo that does not exist: 401 `X-Error-Code: RepoNotFound`;
- `GET /{repo}/resolve/{revision}/{path}`: a 302 to the CDN with `X-Repo-Commit`,
  `X-Linked-Size` and `X-Linked-Etag`; a gated repo's file without a token: 401
  `X-Error-Code: GatedRepo` ("Access to model … is restricted. You must have access to it and
  be authenticated to access it. Please log in."), with a token not granted: 403 ("… you are
  not in the authorized list");
- the CDN answers a Range GET with 206 and the file's first bytes: a GGUF header of the
  repo's shape (the rest of a multi-GB file is not needed, so a short 206 with the total in
  `Content-Range`).
Every request is recorded (`requests`, `cdn_requests`) with its headers; `wait_for_request`
waits for one.
"""

from __future__ import annotations

import hashlib
import struct
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from mvp_tui.rehearsal.http_fake import ApiHandler, Reply

COMMIT = "7f3a" * 10
GIB = 1024**3


@dataclass(frozen=True, slots=True)
class Shape:
    """What the GGUF header says (a llama 8B by default)."""

    layers: int = 32
    embd: int = 4096
    heads: int = 32
    kv_heads: int = 8
    ctx: int = 131072


@dataclass
class FakeRepo:
    id: str
    files: dict[str, int]  # path -> size in bytes
    downloads: int = 0
    likes: int = 0
    gated: bool | str = False  # "manual" / "auto": gated
    granted: set[str] = field(default_factory=set)  # tokens whose account accepted its terms
    shape: Shape = field(default_factory=Shape)
    tags: tuple[str, ...] = ("gguf", "text-generation")
    header: bytes | None = None  # the files' first bytes, when not the shape's header


@dataclass
class Seen:
    path: str
    headers: dict[str, str]


def gguf_header(shape: Shape) -> bytes:
    """A GGUF v3 header with the shape's keys, then a tokenizer key (as real files order
    them): enough for `gguf_shape.parse_shape`."""

    def text(value: str) -> bytes:
        data = value.encode()
        return struct.pack("<Q", len(data)) + data

    pairs = [
        ("general.architecture", 8, text("llama")),
        ("llama.context_length", 4, struct.pack("<I", shape.ctx)),
        ("llama.embedding_length", 4, struct.pack("<I", shape.embd)),
        ("llama.block_count", 4, struct.pack("<I", shape.layers)),
        ("llama.attention.head_count", 4, struct.pack("<I", shape.heads)),
        ("llama.attention.head_count_kv", 4, struct.pack("<I", shape.kv_heads)),
        ("tokenizer.ggml.model", 8, text("llama")),
    ]
    body = b"".join(text(k) + struct.pack("<I", kind) + v for k, kind, v in pairs)
    return b"GGUF" + struct.pack("<IQQ", 3, 0, len(pairs)) + body


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class _HubServer(ThreadingHTTPServer):
    """A client that reads a file's head and closes (the GGUF header reader does) is how the
    real hub is used: its reset is not printed as a traceback on the test's stderr, which the
    tests read for the app's own lines."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return
        super().handle_error(request, client_address)


class FakeHfHub:
    """`url` is the hub (what MVP_HF_ENDPOINT takes); `cdn_url` where its files are."""

    def __init__(self) -> None:
        self.repos: dict[str, FakeRepo] = {}
        self.requests: list[Seen] = []
        self.cdn_requests: list[Seen] = []
        self._seen = threading.Condition()
        self._servers: list[ThreadingHTTPServer] = []
        self.url = ""
        self.cdn_url = ""

    def add_repo(self, repo: str, files: dict[str, int], **fields: Any) -> FakeRepo:
        self.repos[repo] = FakeRepo(repo, dict(files), **fields)
        return self.repos[repo]

    # -- lifecycle -----------------------------------------------------------------------
    def _serve(self, handle: Any, name: str) -> str:
        class Handler(ApiHandler):
            server_fake = handle

        server = _HubServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02},
                                  name=name, daemon=True)
        thread.start()
        self._servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    def start(self) -> None:
        self.url = self._serve(_Route(self.answer), "fake-hf-hub")
        self.cdn_url = self._serve(_Route(self.cdn_answer), "fake-hf-cdn")

    def stop(self) -> None:
        for server in self._servers:
            server.shutdown()
            server.server_close()
        self._servers.clear()

    def __enter__(self) -> FakeHfHub:
        self.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.stop()

    # -- the hub's answers ---------------------------------------------------------------
    def _record(self, into: list[Seen], handler: ApiHandler) -> None:
        with self._seen:
            into.append(Seen(handler.path, dict(handler.headers.items())))
            self._seen.notify_all()

    def wait_for_request(self, path_end: str, within: float = 30.0) -> Seen:
        """The first request to the hub whose path ends with `path_end`, once it has come."""
        with self._seen:
            found = self._seen.wait_for(
                lambda: next((r for r in self.requests if r.path.endswith(path_end)), None),
                within,
            )
        assert found is not None, f"no request for …{path_end} within {within} s"
        return found

    def answer(self, handler: ApiHandler) -> Reply:
        self._record(self.requests, handler)
        parts = urlsplit(handler.path)
        lists = parse_qs(parts.query)
        query = {k: v[-1] for k, v in lists.items()}
        path = unquote(parts.path)
        if path == "/api/models":
            return self._search(query, lists.get("expand", []))
        if path.startswith("/api/models/"):
            return self._info(path.removeprefix("/api/models/"), query.get("blobs") == "true")
        owner, _, rest = path.lstrip("/").partition("/")
        name, _, rest = rest.partition("/resolve/")
        revision, _, file = rest.partition("/")
        if name and file:
            return self._resolve(f"{owner}/{name}", revision, file, handler)
        return Reply(404, {"error": "Not Found"})

    def _search(self, query: dict[str, str], expand: list[str]) -> Reply:
        words = query.get("search", "").lower()
        wanted = query.get("filter", "")
        found = [r for r in self.repos.values()
                 if words in r.id.lower() and (not wanted or wanted in r.tags)]
        found.sort(key=lambda r: (-r.downloads, r.id))
        limit = int(query.get("limit", "1000"))
        items = [{
            "_id": _sha(r.id)[:24], "id": r.id, "modelId": r.id, "likes": r.likes,
            "trendingScore": 0, "private": False, "downloads": r.downloads, "tags": list(r.tags),
            "pipeline_tag": "text-generation", "library_name": "gguf",
            "createdAt": "2026-01-02T03:04:05.000Z", "gated": r.gated,
        } for r in found[:limit]]
        if expand:  # only the properties asked for come back (and the ids)
            items = [{k: v for k, v in i.items() if k in {"_id", "id", *expand}} for i in items]
        else:  # the default fields hold no `gated`
            items = [{k: v for k, v in i.items() if k != "gated"} for i in items]
        return Reply(200, items)

    def _info(self, repo_id: str, blobs: bool) -> Reply:
        repo = self.repos.get(repo_id)
        if repo is None:  # without a token the hub cannot tell missing from private: 401
            return Reply(401, {"error": "Repository not found"},
                         headers={"X-Error-Code": "RepoNotFound",
                                  "X-Error-Message": "Repository not found"})
        siblings: list[dict[str, Any]] = []
        for path, size in sorted({".gitattributes": 1519, "README.md": 4200,
                                  **repo.files}.items()):
            sibling: dict[str, Any] = {"rfilename": path}
            if blobs:
                sibling.update(size=size, blobId=_sha(path)[:40])
                if path.endswith(".gguf"):
                    sibling["lfs"] = {"sha256": _sha(repo.id + path), "size": size,
                                      "pointerSize": 135}
            siblings.append(sibling)
        return Reply(200, {
            "_id": _sha(repo.id)[:24], "id": repo.id, "modelId": repo.id,
            "author": repo.id.split("/")[0], "sha": COMMIT,
            "lastModified": "2026-01-02T03:04:05.000Z", "private": False, "disabled": False,
            "gated": repo.gated, "downloads": repo.downloads, "likes": repo.likes,
            "tags": list(repo.tags), "pipeline_tag": "text-generation", "library_name": "gguf",
            "createdAt": "2026-01-02T03:04:05.000Z", "siblings": siblings, "spaces": [],
            "usedStorage": sum(repo.files.values()),
        })

    def _resolve(self, repo_id: str, revision: str, file: str, handler: ApiHandler) -> Reply:
        repo = self.repos.get(repo_id)
        if repo is None or file not in repo.files:
            code = "RepoNotFound" if repo is None else "EntryNotFound"
            return Reply(404, {"error": f"{code}"}, headers={"X-Error-Code": code})
        auth = handler.headers.get("Authorization", "")
        if repo.gated:
            token = auth.removeprefix("Bearer ")
            if not auth:
                message = (f"Access to model {repo.id} is restricted. You must have access to "
                           "it and be authenticated to access it. Please log in.")
                return Reply(401, {"error": message},
                             headers={"X-Error-Code": "GatedRepo", "X-Error-Message": message})
            if token not in repo.granted:
                message = (f"Access to model {repo.id} is restricted and you are not in the "
                           f"authorized list. Visit {self.url}/{repo.id} to ask for access.")
                return Reply(403, {"error": message},
                             headers={"X-Error-Code": "GatedRepo", "X-Error-Message": message})
        return Reply(302, None, headers={
            "Location": f"{self.cdn_url}/repos/{repo.id}/{file}?signed=1",
            "X-Repo-Commit": COMMIT, "X-Linked-Size": str(repo.files[file]),
            "X-Linked-Etag": f'"{_sha(repo.id + file)}"',
        })

    def cdn_answer(self, handler: ApiHandler) -> Reply:
        self._record(self.cdn_requests, handler)
        path = unquote(urlsplit(handler.path).path).removeprefix("/repos/")
        repo = next((r for r in self.repos.values() if path.startswith(r.id + "/")), None)
        file = path.removeprefix(repo.id + "/") if repo is not None else ""
        if repo is None or file not in repo.files:
            return Reply(404, "not found", content_type="text/plain")
        head = repo.header if repo.header is not None else gguf_header(repo.shape)
        total = repo.files[file]
        head = head[: total]
        return Reply(206, head, content_type="application/octet-stream",
                     headers={"Content-Range": f"bytes 0-{len(head) - 1}/{total}",
                              "Accept-Ranges": "bytes"})


class _Route:
    """One server's side of the fake: its GETs answered by `answer`."""

    def __init__(self, answer: Callable[[ApiHandler], Reply]) -> None:
        self.answer = answer

    def _handle(self, handler: ApiHandler, method: str) -> None:
        handler.read_body()
        handler.reply(self.answer(handler) if method == "GET"
                      else Reply(405, {"error": "method not allowed"}))


def picker_hub() -> FakeHfHub:
    """The repos the picker's tests and snapshots search: a plain repo with several quants,
    one with a split quant, a gated one (not started: `with picker_hub() as hub`)."""
    hub = FakeHfHub()
    hub.add_repo("bartowski/Meta-Llama-3.1-8B-Instruct-GGUF", {
        "Meta-Llama-3.1-8B-Instruct-Q2_K.gguf": int(3.18 * GIB),
        "Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf": 4_920_734_432,
        "Meta-Llama-3.1-8B-Instruct-Q5_K_M.gguf": int(5.34 * GIB),
        "Meta-Llama-3.1-8B-Instruct-Q8_0.gguf": int(7.95 * GIB),
        "Meta-Llama-3.1-8B-Instruct-f16.gguf": int(14.97 * GIB),
    }, downloads=1_204_311, likes=1_402)
    hub.add_repo("unsloth/Llama-3.3-70B-Instruct-GGUF", {
        "Llama-3.3-70B-Instruct-Q4_K_M.gguf": int(39.6 * GIB),
        "Q8_0/Llama-3.3-70B-Instruct-Q8_0-00001-of-00002.gguf": int(37.1 * GIB),
        "Q8_0/Llama-3.3-70B-Instruct-Q8_0-00002-of-00002.gguf": int(31.9 * GIB),
        "mmproj-F16.gguf": 600_000_000,
    }, downloads=301_442, likes=388, shape=Shape(layers=80, embd=8192, heads=64, kv_heads=8))
    hub.add_repo("meta-llama/Llama-3.1-8B-Instruct-GGUF", {
        "Llama-3.1-8B-Instruct-Q4_K_M.gguf": 4_920_734_432,
    }, downloads=88_120, likes=911, gated="manual")
    return hub
