"""The fake RunPod itself: state, scripted faults, Cloudflare, pod-scoped keys, and the
contract check that judges every exchange of this suite."""

from __future__ import annotations

import httpx
import pytest

from tests.fakes.runpod_server import CAPACITY_DETAIL, Exchange, FakeRunPod, Fault, RecordedRequest
from tests.runpod.contract import DEVIATIONS, check_exchange

UA = {"User-Agent": "mvp-tui-tests/1"}


def client(fake: FakeRunPod, key: str | None = None) -> httpx.Client:
    headers = {**UA, "Authorization": f"Bearer {key or fake.api_key}"}
    return httpx.Client(base_url=fake.api_url, headers=headers, timeout=5)


def body(name: str = "mvp-r-1-1-1", gpu: str = "NVIDIA RTX A5000") -> dict[str, object]:
    return {"name": name, "image": "img:1", "gpu": {"id": gpu, "count": 1}, "ports": ["22/tcp"],
            "env": {"A": "b"}, "disk": 20, "cloud": "SECURE"}


def test_pods_move_from_provisioning_to_running_with_ssh_after_scripted_reads(
    fake: FakeRunPod,
) -> None:
    fake.running_without_ssh(2)
    with client(fake) as http:
        created = http.post("/pods", json=body())
        assert created.status_code == 201
        pod_id = created.json()["id"]
        assert created.json()["status"] == "PROVISIONING"
        seen = [http.get(f"/pods/{pod_id}").json() for _ in range(4)]
    assert [s["status"] for s in seen] == ["PROVISIONING", "RUNNING", "RUNNING", "RUNNING"]
    assert [s["ssh"]["direct"] is not None for s in seen] == [False, False, False, True]
    assert seen[2]["runtime"] is None and seen[3]["runtime"]["ports"][0]["private"] == 22


def test_capacity_402_403_and_unknown_fields_answer_as_runpod_does(fake: FakeRunPod) -> None:
    fake.no_capacity("NVIDIA RTX A5000")
    fake.forbid_pool("NVIDIA A40")
    with client(fake) as http:
        refused = http.post("/pods", json=body())
        assert refused.status_code == 400 and refused.json()["detail"] == CAPACITY_DETAIL
        assert refused.headers["content-type"] == "application/problem+json"
        assert http.post("/pods", json=body(gpu="NVIDIA A40")).status_code == 403
        bad = http.post("/pods", json={**body(), "dockerStartCmd": ["x"]})  # a v1 field
        assert bad.status_code == 422 and "dockerStartCmd" in bad.json()["errors"][0]
        # Strict to the document: `cmd` (sent by some newer clients) is not in CreatePodRequest
        # either; the answer is the document's ErrorResponse.
        bad = http.post("/pods", json={**body(), "cmd": ["/bin/sh", "-c", "x"]})
        assert bad.status_code == 422 and bad.headers["content-type"] == "application/problem+json"
        assert bad.json() == {
            "title": "Unprocessable Entity", "status": 422, "detail": "Request validation failed.",
            "errors": ["$: additional properties 'cmd' not allowed"],
        }
        assert http.post("/pods", json={**body(), "args": ["x"]}).status_code == 422
        fake.balance = 0
        assert http.post("/pods", json=body()).status_code == 402
    assert fake.pods() == []


def test_a_lost_create_answer_still_makes_the_pod(fake: FakeRunPod) -> None:
    fake.lose_create_answer(502)
    with client(fake) as http:
        assert http.post("/pods", json=body()).status_code == 502
    assert [p["name"] for p in fake.pods()] == ["mvp-r-1-1-1"]


def test_delete_failing_then_gone_and_429_with_retry_after(fake: FakeRunPod) -> None:
    fake.fail_delete(None, 1)
    fake.rate_limit("get", 1, retry_after=7)
    with client(fake) as http:
        pod_id = http.post("/pods", json=body()).json()["id"]
        limited = http.get(f"/pods/{pod_id}")
        assert limited.status_code == 429 and limited.headers["retry-after"] == "7"
        assert http.delete(f"/pods/{pod_id}").status_code == 500
        assert http.delete(f"/pods/{pod_id}").status_code == 204
        assert http.get(f"/pods/{pod_id}").status_code == 404
        assert http.delete(f"/pods/{pod_id}").status_code == 404
    assert fake.pods() == [] and fake.destroyed_by(pod_id) == "account"


def test_generic_or_missing_user_agent_meets_cloudflare(fake: FakeRunPod) -> None:
    with httpx.Client(base_url=fake.api_url, timeout=5) as http:  # python-httpx/…
        answer = http.get("/pods", headers={"Authorization": f"Bearer {fake.api_key}"})
    assert answer.status_code == 403 and answer.text == "error code: 1010"
    assert answer.headers["content-type"].startswith("text/plain")
    assert fake.cloudflare_blocks == 1
    fake.cloudflare_blocks = 0  # the fixture asserts none happened; this one was on purpose


def test_pod_scoped_keys_act_on_their_own_pod_only(fake: FakeRunPod) -> None:
    with client(fake) as http:
        mine = http.post("/pods", json=body()).json()["id"]
        other = http.post("/pods", json=body("mvp-r-1-1-2")).json()["id"]
    key = fake.instance_env(mine)["RUNPOD_API_KEY"]
    with client(fake, key) as pod:
        assert pod.get(f"/pods/{mine}").status_code == 200
        assert pod.get(f"/pods/{other}").status_code == 403
        assert pod.get("/pods").status_code == 403
        assert pod.delete(f"/pods/{mine}").status_code == 204
    assert fake.destroyed_by(mine) == "instance" and len(fake.scope_violations) == 2
    assert [p["id"] for p in fake.pods()] == [other]


def test_unknown_and_missing_keys_are_401(fake: FakeRunPod) -> None:
    with httpx.Client(base_url=fake.api_url, headers=UA, timeout=5) as http:
        assert http.get("/pods").json()["detail"] == "missing bearer token"
        assert http.get("/pods", headers={"Authorization": "Bearer nope"}).status_code == 401


def test_scripted_faults_drop_or_answer_once(fake: FakeRunPod) -> None:
    fake.script("list", Fault(status=503), Fault(drop=True))
    with client(fake) as http:
        assert http.get("/pods").status_code == 503
        with pytest.raises(httpx.RemoteProtocolError):
            http.get("/pods")
        assert http.get("/pods").status_code == 200


def _exchange(method: str, path: str, status: int, answer: object, *, request: object = None,
              ctype: str = "application/json") -> Exchange:
    req = RecordedRequest(method, path, {}, {"authorization": "Bearer k",
                          "content-type": "application/json"}, request)
    return Exchange(None, req, status, answer, ctype, {})


def test_the_contract_check_catches_what_the_document_forbids() -> None:
    assert DEVIATIONS  # named, with their reason
    bad_request = _exchange("POST", "/v2/pods", 201, None, request={"name": "x", "cmd": []})
    assert any("'cmd'" in p.what for p in check_exchange(bad_request))  # no named deviation
    assert "pod-cmd" not in DEVIATIONS
    bad_pod = _exchange("GET", "/v2/pods/abc", 200, {"id": "abc"})
    assert any("required" in p.what for p in check_exchange(bad_pod))
    assert check_exchange(_exchange("PATCH", "/v2/catalog/gpus", 200, {"gpus": []}))
    assert check_exchange(_exchange("GET", "/v2/nowhere", 200, {}))
    wrong_type = _exchange("GET", "/v2/pods", 400, {"detail": "x"}, ctype="text/html")
    assert check_exchange(wrong_type)
    cloudflare = _exchange("GET", "/v2/pods", 403, "error code: 1010", ctype="text/plain")
    assert check_exchange(cloudflare) == []


def test_account_secrets_answer_as_runpods_docs_say_and_fill_a_pods_env(
    fake: FakeRunPod,
) -> None:
    """POST/DELETE /v2/account/secrets (docs pages; DEVIATIONS["account-secrets"]): 201 with
    the metadata, never the value; the documented name rules; 204 then 404; a pod's env
    reference filled in only while the secret exists."""
    with client(fake) as http:
        made = http.post("/account/secrets", json={"name": "mvp_k", "value": "s3cr3t"})
        assert made.status_code == 201 and "value" not in made.json()
        secret_id = made.json()["id"]
        again = http.post("/account/secrets", json={"name": "mvp_k", "value": "x"})
        assert again.status_code == 409
        for name in ("runpod_k", "RunPod_k", "1k", "", "k" * 192, "a b"):
            refused = http.post("/account/secrets", json={"name": name, "value": "x"})
            assert refused.status_code == 400, name
        pod = http.post("/pods", json={**body(), "env": {"K": "{{ RUNPOD_SECRET_mvp_k }}"}})
        pod_id = pod.json()["id"]
        assert fake.container_env(pod_id)["K"] == "s3cr3t"
        assert "s3cr3t" not in str(pod.json()) and fake.env_of(pod_id)["K"].startswith("{{")
        assert http.delete(f"/account/secrets/{secret_id}").status_code == 204
        assert http.delete(f"/account/secrets/{secret_id}").status_code == 404
        assert fake.container_env(pod_id)["K"] == "{{ RUNPOD_SECRET_mvp_k }}"
    judged = [x for x in fake.exchanges if x.op in ("secret_create", "secret_delete")]
    good = [x for x in judged if x.status in (201, 204, 404, 409)]
    assert all(check_exchange(x) == [] for x in good)
    bad = [x for x in judged if x.status == 400]
    assert all(check_exchange(x) for x in bad), "the contract lets a bad secret name through"
    assert "account-secrets" in DEVIATIONS
