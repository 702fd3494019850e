"""Vast.ai on the node: the API its instance calls to prove its own key and destroy itself
(the dead-man's switch, mvp_tui/node/switch.py) and the boot guard's target
(providers/boot_guard.py). Shipped in the agent's zipapp: standard library and the node's
own modules only (a Python as old as 3.8 runs it)."""

from __future__ import annotations

import json
import urllib.parse
from typing import Any, Callable  # noqa: UP035 (3.8 nodes)

from mvp_tui.node.instance_api import ApiAnswer, GuardTarget, InstanceApi, NodeApi, api_request
from mvp_tui.node_protocol import DEFAULT_VASTAI_API_URL, api_url_env

V0_RETIRED = 410  # Vast's `deprecated_endpoint` on a v0 route: the v1 route is asked instead
VAST_RATE_LIMIT_WAIT_S = 3.0  # Vast's 429s carry no Retry-After; its destroy threshold is 3.0


class VastInstanceApi(InstanceApi):
    """Vast v0, as the official client calls it for one instance (ours research/vastai.md).

    A 410 on a v0 route (`deprecated_endpoint`: one report says Vast retired them, peers
    2026-12-07 V6/V7) is never "gone": the read asks the v1 list the CLI uses for our own id
    (its row, or none: then gone) and answers in the v0 shape; the delete is sent again to
    `/api/v1/instances/{id}/` (undocumented; the read that confirms every delete decides)."""

    name = "Vast"
    ID_NAME = "CONTAINER_ID"
    KEY_NAME = "CONTAINER_API_KEY"
    MISSING_KEY_HINT = (
        "this image does not expose Vast's instance key; use a Vast image that does"
    )

    @classmethod
    def fallback_id(cls, lookup: Callable[[str], tuple[str, str]]) -> tuple[str, str]:
        label, where = lookup("VAST_CONTAINERLABEL")  # "C.<id>", as Vast's boot uses it
        return (label[2:], where) if label.startswith("C.") else ("", where)

    @classmethod
    def id_problem(cls, instance_id: str) -> str:
        return "" if instance_id.isdigit() else "is not a Vast instance number"

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


GUARD = GuardTarget(
    id_name=VastInstanceApi.ID_NAME,
    key_name=VastInstanceApi.KEY_NAME,
    url_env=api_url_env("vastai"),
    default_url=DEFAULT_VASTAI_API_URL,
    path="/api/v0/instances/$i/",
    body="{}",
    gone='no_such_instance|"not_found"',  # a 404 auth_error is a bad key, not gone
    id_chars="0-9",
    # Vast's own boot reads the id from VAST_CONTAINERLABEL ("C.<id>") when CONTAINER_ID is unset
    id_fallback='[ -n "$i" ] || { i=${VAST_CONTAINERLABEL:-}; i=${i#C.}; }\n',
    # A 410 (`deprecated_endpoint`: v0 retired, peers 2026-12-07 V7) is never "gone": the
    # next tries go to the same destroy on v1 (idempotent: a v1 URL has no /api/v0/).
    retired=' [ "$r" = 410 ]&&u=${u%%/api/v0/*}/api/v1/instances/$i/\n',
)
NODE_API = NodeApi("vastai", VastInstanceApi, GUARD)
