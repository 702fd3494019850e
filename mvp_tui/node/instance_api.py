"""The dead-man's switch's settings, the instance's own credentials, and its provider API
(Vast.ai, RunPod): a harmless read to prove the key, and the delete."""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Callable  # noqa: UP035 (3.8 nodes)

from mvp_tui.node.control import exc_name
from mvp_tui.node.frames import clean_text
from mvp_tui.node_protocol import NodeEnvError, SwitchEnv, api_url_env

if TYPE_CHECKING:
    import urllib.error
    import urllib.request

# ---------------------------------------------------------------------------------------
# The dead-man's switch: deadline and silence, proven at start, destroying its own instance

IDLE_STOP_WARN_S = 120.0  # the warning comes this long before an idle stop (or at 3/4 of
# a shorter window)
API_PROVIDERS = ("vastai", "runpod")
LOCAL_PROVIDERS = ("local", "docker")
WATCHDOG_USER_AGENT = "mvp-node/1 (dead-man switch)"
WATCHDOG_HTTP_TIMEOUT_S = 10.0
WATCHDOG_RETRY_CAP_S = 30.0
WATCHDOG_WAIT_CAP_S = 30.0  # the timer thread looks again at least this often (clock jumps)
VERDICT_ATTEMPTS = 4
V0_RETIRED = 410  # Vast's `deprecated_endpoint` on a v0 route: the v1 route is asked instead
VAST_RATE_LIMIT_WAIT_S = 3.0  # Vast's 429s carry no Retry-After; its destroy threshold is 3.0
REQUIRE_HINT = "or set [limits] require_node_watchdog = false to rent without the node switch"
_CREDENTIAL_NAMES = {
    "vastai": ("CONTAINER_ID", "CONTAINER_API_KEY"),
    "runpod": ("RUNPOD_POD_ID", "RUNPOD_API_KEY"),
}
_MISSING_KEY_HINTS = {
    "vastai": "this image does not expose Vast's instance key; use a Vast image that does",
    "runpod": "this pod does not expose its pod-scoped key; use a RunPod template that does",
}


class SwitchSettings:
    """The switch's inputs (`SwitchEnv`). Never raises: a bad value becomes `problem`, which
    the verdict reports as `failed` (the agent keeps serving; the dashboard decides)."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.problem: str | None = None
        self._refused: dict[str, str] = {}  # variable → why it was refused
        read = self._read(env)
        explicit = read.watchdog_provider
        provider = explicit or read.node_provider
        self.max_hours = read.max_hours
        self.idle_mins = read.idle_teardown_mins
        self.idle_stop_mins = read.idle_stop_mins
        self.lease_started_at = read.lease_started_at
        self.retry_initial_s = read.retry_initial_s or 1.0
        self.enabled = bool(provider) or self.max_hours > 0 or self.idle_mins > 0
        self.enabled = self.enabled or self.idle_stop_mins > 0
        self.enabled = self.enabled or self.problem is not None
        if self.enabled and not provider:
            provider = "local"
        if provider and provider not in API_PROVIDERS + LOCAL_PROVIDERS and not self.problem:
            name = SwitchEnv.env_name("watchdog_provider" if explicit else "node_provider")
            self.problem = (
                f"{name}={clean_text(provider, 40)!r} is not a provider the node switch knows; "
                "expected vastai, runpod, local or docker"
            )
        self.provider = provider
        self.api_url = read.api_url(provider)
        # A refused API URL is no reason to send the instance key to the default instead:
        # the switch sends it nowhere (checked here again, not only by the dashboard).
        self.url_problem = self._refused.get(api_url_env(provider)) if provider else None
        if self.url_problem:
            self.api_url = ""
        self.env_file = read.provider_env_file
        self.boot_guard_dir = read.boot_guard_dir

    def _read(self, env: Mapping[str, str]) -> SwitchEnv:
        """The inputs, a bad one read as unset (the first becomes `problem`)."""
        usable = dict(env)
        while True:
            try:
                return SwitchEnv.from_env(usable)
            except NodeEnvError as exc:
                why = f"{clean_text(str(exc), 300)}; the node switch cannot enforce it"
                if self.problem is None:
                    self.problem = why
                self._refused[exc.name] = why
                usable.pop(exc.name, None)


class Credentials:
    """The instance's own id and key (the key is secret: redacted, never printed)."""

    def __init__(self, provider: str, instance_id: str, key: str, source: str) -> None:
        self.provider = provider
        self.instance_id = instance_id
        self.key = key
        self.source = source


def read_env_file(path: str) -> tuple[dict[str, str], str | None]:
    """A NUL-separated environ file (like /proc/1/environ): (variables, why unreadable)."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return {}, "not found"
    except OSError as exc:
        return {}, f"unreadable: {exc.strerror or exc}"
    found: dict[str, str] = {}
    for entry in data.split(b"\0"):
        name, sep, value = entry.decode("utf-8", "replace").partition("=")
        if sep and name:
            found[name.strip()] = value
    return found, None


def resolve_credentials(
    provider: str, env: Mapping[str, str], env_file: str
) -> tuple[Credentials | None, str]:
    """The instance's credentials from the agent's environment, else the env file; else
    (None, a one-line reason that names the variable and the fix)."""
    id_name, key_name = _CREDENTIAL_NAMES[provider]
    loaded: list[tuple[dict[str, str], str | None]] = []

    def from_file() -> dict[str, str]:
        if not loaded:
            loaded.append(read_env_file(env_file))
        return loaded[0][0]

    def lookup(name: str) -> tuple[str, str]:
        value = env.get(name, "").strip()
        if value:
            return value, "agent env"
        value = from_file().get(name, "").strip()
        return (value, env_file) if value else ("", "")

    key, key_source = lookup(key_name)
    instance_id, id_source = lookup(id_name)
    if not instance_id and provider == "vastai":
        label, id_source = lookup("VAST_CONTAINERLABEL")  # "C.<id>", as Vast's boot uses it
        instance_id = label[2:] if label.startswith("C.") else ""
    where = f"agent env, {env_file}"
    if loaded and loaded[0][1]:
        where += f" ({loaded[0][1]})"
    hint = f"{_MISSING_KEY_HINTS[provider]}, {REQUIRE_HINT}"
    if not key:
        return None, f"no {key_name} in the node environment (read: {where}): {hint}"
    if not instance_id:
        return None, f"no {id_name} in the node environment (read: {where}): {hint}"
    if provider == "vastai" and not instance_id.isdigit():
        return None, (
            f"{id_name}={clean_text(instance_id, 40)!r} (from {id_source}) is not a Vast "
            f"instance number; {REQUIRE_HINT}"
        )
    return Credentials(provider, instance_id, key, key_source), ""


class ApiAnswer:
    """One provider API answer: HTTP status (None: no answer), parsed body, transport error."""

    def __init__(self, status: int | None, body: Any, error: str = "") -> None:
        self.status = status
        self.body = body
        self.error = error

    @property
    def transient(self) -> bool:
        return self.status is None or self.status in (408, 429) or self.status >= 500

    def field(self, name: str) -> Any:
        return self.body.get(name) if isinstance(self.body, dict) else None

    def describe(self) -> str:
        if self.status is None:
            return f"no answer ({self.error})"
        text = ""
        if isinstance(self.body, dict):
            parts = [self.body.get(k) for k in ("error", "msg", "title", "detail", "message")]
            text = " ".join(str(p) for p in parts if p)
        elif isinstance(self.body, str):
            text = self.body
        # Bounded only loosely here: the switch's records redact (the instance key) and
        # then cut, so a cut never shows a secret's prefix.
        text = clean_text(text.replace("\n", " ").strip(), 2000)
        return f"HTTP {self.status}" + (f" {text}" if text else "")


def _no_redirects() -> urllib.request.HTTPRedirectHandler:
    """A handler that follows no redirect: the instance key is never carried to wherever a
    redirect points."""
    import urllib.request

    class NoRedirects(urllib.request.HTTPRedirectHandler):
        def redirect_request(
            self,
            req: urllib.request.Request,
            fp: IO[bytes],
            code: int,
            msg: str,
            headers: Any,
            newurl: str,
        ) -> urllib.request.Request | None:
            return None

    return NoRedirects()


def api_request(
    method: str, url: str, key: str, body: Any = None, timeout: float = WATCHDOG_HTTP_TIMEOUT_S
) -> ApiAnswer:
    """One authenticated JSON call (Bearer key, our own User-Agent); never raises."""
    import http.client
    import urllib.error
    import urllib.request

    data = None if body is None else json.dumps(body).encode()
    headers = {
        "Authorization": f"Bearer {key}",
        "Accept": "application/json",
        "User-Agent": WATCHDOG_USER_AGENT,
    }
    if data is not None:
        headers["Content-Type"] = "application/json"
    request = urllib.request.Request(url, data=data, headers=headers, method=method)
    opener = urllib.request.build_opener(_no_redirects())
    try:
        with opener.open(request, timeout=timeout) as response:
            status, raw = response.status, response.read(1 << 20)
    except urllib.error.HTTPError as exc:
        status = exc.code
        try:
            raw = exc.read(1 << 20)
        except (OSError, http.client.HTTPException):
            raw = b""
    except urllib.error.URLError as exc:
        reason = exc.reason
        text = str(reason)
        if "CERTIFICATE" in text.upper() or "SSL" in type(reason).__name__.upper():
            text = f"TLS failure: {text} (the node may lack CA certificates)"
        return ApiAnswer(None, None, clean_text(text, 2000))
    except (OSError, http.client.HTTPException, ValueError) as exc:
        return ApiAnswer(None, None, clean_text(f"{exc_name(exc)}: {exc}", 2000))
    text = raw.decode("utf-8", "replace")
    try:
        parsed: Any = json.loads(text) if text.strip() else None
    except ValueError:
        parsed = text
    return ApiAnswer(status, parsed)


class InstanceApi:
    """The three calls the switch makes for its own instance, and how to read the answers."""

    name = ""

    def __init__(self, base_url: str, creds: Credentials) -> None:
        self.base_url = base_url
        self.creds = creds

    def read(self) -> ApiAnswer:
        raise NotImplementedError

    def delete(self) -> ApiAnswer:
        raise NotImplementedError

    def write_probe(self) -> ApiAnswer | None:
        """A documented no-op change of our own instance, which needs the key's write right
        (None: the provider documents none, so the delete right stays unproven)."""
        return None

    def fallback_calls(self) -> list[tuple[str, Callable[[], ApiAnswer]]]:
        """(what it does, the call) for each other documented way to end the instance after
        a refused delete, in order, each tried once."""
        return []

    def shows_self(self, answer: ApiAnswer) -> bool:
        raise NotImplementedError

    def is_gone(self, answer: ApiAnswer) -> bool:
        raise NotImplementedError

    def delete_accepted(self, answer: ApiAnswer) -> bool:
        return answer.status in (200, 202, 204) and answer.field("success") is not False

    def refused(self, answer: ApiAnswer) -> bool:
        return answer.status in (401, 403)

    def refusal_text(self, answer: ApiAnswer, doing: str) -> str:
        return (
            f"{self.name} refused the instance key ({answer.describe()}) {doing}: this node "
            f"cannot destroy itself; {REQUIRE_HINT}"
        )

    def retry_floor(self, answer: ApiAnswer) -> float:
        return 0.0


class VastInstanceApi(InstanceApi):
    """Vast v0, as the official client calls it for one instance (ours research/vastai.md).

    A 410 on a v0 route (`deprecated_endpoint`: one report says Vast retired them, peers
    2026-12-07 V6/V7) is never "gone": the read asks the v1 list the CLI uses for our own id
    (its row, or none: then gone) and answers in the v0 shape; the delete is sent again to
    `/api/v1/instances/{id}/` (undocumented; the read that confirms every delete decides)."""

    name = "Vast"

    @property
    def url(self) -> str:
        return f"{self.base_url}/api/v0/instances/{self.creds.instance_id}/"

    def read(self) -> ApiAnswer:
        answer = api_request("GET", self.url + "?owner=me", self.creds.key)
        return self._v1_read() if answer.status == V0_RETIRED else answer

    def delete(self) -> ApiAnswer:
        answer = api_request("DELETE", self.url, self.creds.key, body={})
        if answer.status != V0_RETIRED:
            return answer
        v1 = f"{self.base_url}/api/v1/instances/{self.creds.instance_id}/"
        return api_request("DELETE", v1, self.creds.key, body={})

    def _v1_read(self) -> ApiAnswer:
        """Our own row from `GET /api/v1/instances/` filtered on our id, as `{"instances":
        row | None}` (the v0 read's shape); any other answer as it came."""
        query = urllib.parse.urlencode({
            "select_filters": json.dumps({"id": {"eq": int(self.creds.instance_id)}}),
            "order_by": json.dumps([{"col": "id", "dir": "asc"}]),
            "limit": "25",
        })
        answer = api_request("GET", f"{self.base_url}/api/v1/instances/?{query}", self.creds.key)
        rows = answer.field("instances") if answer.status == 200 else None
        if not isinstance(rows, list):
            return answer
        own = [r for r in rows if isinstance(r, dict)
               and str(r.get("id")) == self.creds.instance_id]
        return ApiAnswer(200, {"instances": own[0] if own else None})

    def write_probe(self) -> ApiAnswer | None:
        # "a no-op since it's already running" (Vast's docker-environment docs): the key
        # that may start, stop and destroy its instance answers 200 success.
        return api_request("PUT", self.url, self.creds.key, body={"state": "running"})

    def _row(self, answer: ApiAnswer) -> Any:
        return answer.field("instances") if answer.status == 200 else None

    def shows_self(self, answer: ApiAnswer) -> bool:
        row = self._row(answer)
        return isinstance(row, dict) and str(row.get("id")) == self.creds.instance_id

    def is_gone(self, answer: ApiAnswer) -> bool:
        if answer.status == 200:
            return (
                isinstance(answer.body, dict)
                and "instances" in answer.body
                and (answer.body["instances"] is None)
            )
        # A 404 is "gone" only in Vast's own shape; a 404 auth_error is a bad key.
        return answer.status == 404 and answer.field("error") in ("no_such_instance", "not_found")

    def refused(self, answer: ApiAnswer) -> bool:
        auth_404 = answer.status == 404 and (
            answer.field("error") == "auth_error" or "Invalid user key" in str(answer.body)
        )
        return answer.status in (401, 403) or auth_404

    def retry_floor(self, answer: ApiAnswer) -> float:
        return VAST_RATE_LIMIT_WAIT_S if answer.status == 429 else 0.0


class RunPodInstanceApi(InstanceApi):
    """RunPod REST (v2 by default): GET / DELETE /pods/{id} with the pod-scoped key."""

    name = "RunPod"

    @property
    def url(self) -> str:
        return f"{self.base_url}/pods/{urllib.parse.quote(self.creds.instance_id, safe='')}"

    def read(self) -> ApiAnswer:
        return api_request("GET", self.url, self.creds.key)

    def delete(self) -> ApiAnswer:
        return api_request("DELETE", self.url, self.creds.key)

    def fallback_calls(self) -> list[tuple[str, Callable[[], ApiAnswer]]]:
        # The seed's order after a refused DELETE: podAction terminate ("equivalent to
        # deletePod"), then stop (the GPU stops billing; the disk still bills).
        def action(word: str) -> Callable[[], ApiAnswer]:
            return lambda: api_request("POST", self.url + "/action", self.creds.key,
                                       body={"action": word})

        return [("terminate", action("terminate")), ("stop", action("stop"))]

    def shows_self(self, answer: ApiAnswer) -> bool:
        return answer.status == 200 and str(answer.field("id")) == self.creds.instance_id

    def is_gone(self, answer: ApiAnswer) -> bool:
        # RunPod's own error shapes only (v1 {error, status}, v2 problem+json {title, status,
        # detail}): an HTML 404 from a wrong base URL is not "deleted".
        body = answer.body
        shaped = (
            isinstance(body, dict) and "status" in body and ("error" in body or "title" in body)
        )
        return answer.status == 404 and shaped

    def refused(self, answer: ApiAnswer) -> bool:
        return answer.status in (401, 403) and not self._cloudflare(answer)

    def _cloudflare(self, answer: ApiAnswer) -> bool:
        return answer.status == 403 and "error code: 1010" in str(answer.body)

    def refusal_text(self, answer: ApiAnswer, doing: str) -> str:
        return (
            f"RunPod refused the pod-scoped RUNPOD_API_KEY ({answer.describe()}) {doing}: this "
            "pod cannot destroy itself (an open risk: RunPod pod keys have been seen refused "
            f"with HTTP 403 on self-delete); {REQUIRE_HINT}"
        )

    def retry_floor(self, answer: ApiAnswer) -> float:
        return 0.0


def instance_api(settings: SwitchSettings, creds: Credentials) -> InstanceApi:
    if creds.provider == "runpod":
        return RunPodInstanceApi(settings.api_url, creds)
    return VastInstanceApi(settings.api_url, creds)


