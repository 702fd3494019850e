"""The dead-man's switch's settings, the instance's own credentials, and what a provider's
package declares for its nodes (`NodeApi`, in `providers/<name>/node_api.py`, shipped in the
agent's zipapp): the API its instance calls on itself, a harmless read to prove the key and
the delete, and its boot guard's target. The switch finds a provider's by its name."""

from __future__ import annotations

import importlib
import json
import pkgutil
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
# A node started with no provider named: nothing to call, the node ends with its process.
DEFAULT_PROVIDER = "local"
PROVIDERS_PACKAGE = "mvp_tui.providers"  # each provider's node part: <package>.<name>.node_api
WATCHDOG_USER_AGENT = "mvp-node/1 (dead-man switch)"
WATCHDOG_HTTP_TIMEOUT_S = 10.0
WATCHDOG_RETRY_CAP_S = 30.0
WATCHDOG_WAIT_CAP_S = 30.0  # the timer thread looks again at least this often (clock jumps)
VERDICT_ATTEMPTS = 4
REQUIRE_HINT = "or set [limits] require_node_watchdog = false to rent without the node switch"


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
            provider = DEFAULT_PROVIDER
        self.node_api = node_api(provider) if provider else None
        if provider and self.node_api is None and not self.problem:
            name = SwitchEnv.env_name("watchdog_provider" if explicit else "node_provider")
            known = known_providers()
            self.problem = (
                f"{name}={clean_text(provider, 40)!r} is not a provider the node switch knows; "
                f"expected {', '.join(known[:-1])} or {known[-1]}"
                if len(known) > 1
                else f"{name}={clean_text(provider, 40)!r} is not a provider the node switch knows"
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
    api: type[InstanceApi], provider: str, env: Mapping[str, str], env_file: str
) -> tuple[Credentials | None, str]:
    """The instance's credentials (the names `api` declares) from the agent's environment,
    else the env file; else (None, a one-line reason that names the variable and the fix)."""
    id_name, key_name = api.ID_NAME, api.KEY_NAME
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
    if not instance_id:
        instance_id, id_source = api.fallback_id(lookup)
    where = f"agent env, {env_file}"
    if loaded and loaded[0][1]:
        where += f" ({loaded[0][1]})"
    hint = f"{api.MISSING_KEY_HINT}, {REQUIRE_HINT}"
    if not key:
        return None, f"no {key_name} in the node environment (read: {where}): {hint}"
    if not instance_id:
        return None, f"no {id_name} in the node environment (read: {where}): {hint}"
    problem = api.id_problem(instance_id)
    if problem:
        return None, (
            f"{id_name}={clean_text(instance_id, 40)!r} (from {id_source}) {problem}; "
            f"{REQUIRE_HINT}"
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
    """The three calls the switch makes for its own instance, and how to read the answers; a
    provider's subclass (providers/<name>/node_api.py) also names its credentials."""

    name = ""
    ID_NAME = ""  # the instance's own id, in the container's environment
    KEY_NAME = ""  # the instance-scoped API key there
    MISSING_KEY_HINT = ""  # why an image may lack the key, and what to use instead

    @classmethod
    def fallback_id(cls, lookup: Callable[[str], tuple[str, str]]) -> tuple[str, str]:
        """(id, where) found another way when ID_NAME is unset; ("", "") for none.
        `lookup(name)` reads a variable as (value, where)."""
        return "", ""

    @classmethod
    def id_problem(cls, instance_id: str) -> str:
        """Why `instance_id` cannot be this provider's ("" when it can)."""
        return ""

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


def instance_api(settings: SwitchSettings, creds: Credentials) -> InstanceApi:
    declared = settings.node_api.instance_api if settings.node_api else None
    if declared is None:
        raise ValueError(f"provider {creds.provider!r} declares no instance API")
    return declared(settings.api_url, creds)


class GuardTarget:
    """What the boot guard's shell (providers/boot_guard.py) needs of a provider: the
    container's id/key names and the destroy call."""

    def __init__(
        self,
        *,
        id_name: str,
        key_name: str,
        url_env: str,
        default_url: str,
        path: str,  # after the base URL; $i is the instance id
        body: str,  # the DELETE's JSON body ("" = none)
        gone: str,  # an ERE a 404 body must match to count as "already gone"
        id_chars: str,  # the characters an id may hold (a sh bracket expression)
        id_fallback: str = "",  # sh that finds the id another way when the variable is unset
        retired: str = "",  # sh run after each destroy answer: where a 410 sends the next try
    ) -> None:
        self.id_name = id_name
        self.key_name = key_name
        self.url_env = url_env
        self.default_url = default_url
        self.path = path
        self.body = body
        self.gone = gone
        self.id_chars = id_chars
        self.id_fallback = id_fallback
        self.retired = retired


class NodeApi:
    """What a provider declares for its nodes (`NODE_API` in providers/<name>/node_api.py):
    the API its instance destroys itself with, and its boot guard's target; neither for a
    node on this machine, which ends with its process and bills nothing."""

    def __init__(
        self,
        name: str,
        instance_api: type[InstanceApi] | None = None,
        guard: GuardTarget | None = None,
    ) -> None:
        self.name = name
        self.instance_api = instance_api
        self.guard = guard

    @property
    def bills(self) -> bool:
        """Its instance bills until it is destroyed through the provider's API."""
        return self.instance_api is not None


def node_api(provider: str) -> NodeApi | None:
    """The node part `provider`'s package declares (shipped in the agent's zipapp), or None
    for a provider this agent does not carry."""
    if not provider.isidentifier():
        return None
    module_name = f"{PROVIDERS_PACKAGE}.{provider}.node_api"
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and module_name.startswith(exc.name):
            return None  # no such package, or it has no node part
        raise
    found = getattr(module, "NODE_API", None)
    return found if isinstance(found, NodeApi) else None


def known_providers() -> list[str]:
    """The providers whose node parts this agent carries (sorted)."""
    package = importlib.import_module(PROVIDERS_PACKAGE)
    return sorted(
        info.name
        for info in pkgutil.iter_modules(package.__path__)
        if info.ispkg and node_api(info.name) is not None
    )


