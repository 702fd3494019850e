"""RunPod on the node: the API its pod calls to prove its pod-scoped key and delete itself
(the dead-man's switch, mvp_tui/node/switch.py) and the boot guard's target
(providers/boot_guard.py). Shipped in the agent's zipapp: standard library and the node's
own modules only (a Python as old as 3.8 runs it)."""

from __future__ import annotations

import urllib.parse
from typing import Callable  # noqa: UP035 (3.8 nodes)

from mvp_tui.node.instance_api import (
    REQUIRE_HINT,
    ApiAnswer,
    GuardTarget,
    InstanceApi,
    NodeApi,
    api_request,
)
from mvp_tui.node_protocol import DEFAULT_RUNPOD_API_URL, api_url_env


class RunPodInstanceApi(InstanceApi):
    """RunPod REST (v2 by default): GET / DELETE /pods/{id} with the pod-scoped key."""

    name = "RunPod"
    ID_NAME = "RUNPOD_POD_ID"
    KEY_NAME = "RUNPOD_API_KEY"
    MISSING_KEY_HINT = (
        "this pod does not expose its pod-scoped key; use a RunPod template that does"
    )

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


GUARD = GuardTarget(
    id_name=RunPodInstanceApi.ID_NAME,
    key_name=RunPodInstanceApi.KEY_NAME,
    url_env=api_url_env("runpod"),
    default_url=DEFAULT_RUNPOD_API_URL,
    path="/pods/$i",
    body="",
    gone='"(title|error)"',  # v2 problem+json or v1 {error, status}
    id_chars="A-Za-z0-9",
)
NODE_API = NodeApi("runpod", RunPodInstanceApi, GUARD)
