"""The fake RunPod's network volumes (issue 20 item 6): the document's `/network-volumes`
endpoints, each exchange held to the OpenAPI document by the contract check, and a pod that
mounts a volume only in the volume's data center."""

from __future__ import annotations

from tests.fakes.runpod_server import FakeRunPod
from tests.runpod.conftest import assert_contract
from tests.runpod.test_fake import body, client


def test_volumes_are_created_listed_read_grown_and_deleted_as_the_document_says(
    fake: FakeRunPod,
) -> None:
    with client(fake) as http:
        asked = {"name": "mvp-models", "size": 50, "dataCenter": "EU-RO-1"}
        made = http.post("/network-volumes", json=asked)
        assert made.status_code == 201
        volume = made.json()
        assert volume["type"] == "STANDARD" and volume["size"] == 50
        assert http.get("/network-volumes").json() == {"networkVolumes": [volume]}
        assert http.get(f"/network-volumes/{volume['id']}").json() == volume
        assert http.patch(f"/network-volumes/{volume['id']}", json={"size": 60}).status_code == 200
        assert http.patch(f"/network-volumes/{volume['id']}", json={"size": 20}).status_code == 400
        assert http.patch(f"/network-volumes/{volume['id']}", json={}).status_code == 422
        bad = http.post("/network-volumes", json={"name": "x", "size": 5, "dataCenter": "EU-RO-1"})
        assert bad.status_code == 422 and "size" in bad.json()["errors"][0]
        extra = {"name": "x", "size": 10, "dataCenter": "EU-RO-1", "region": "eu"}
        assert http.post("/network-volumes", json=extra).status_code == 422
        assert http.delete(f"/network-volumes/{volume['id']}").status_code == 204
        assert http.delete(f"/network-volumes/{volume['id']}").status_code == 404
        assert http.get(f"/network-volumes/{volume['id']}").status_code == 404
    assert fake.volumes() == []
    assert_contract(fake)


def test_a_pod_mounts_a_volume_only_in_its_data_center(fake: FakeRunPod) -> None:
    with client(fake) as http:
        asked = {"name": "m", "size": 10, "dataCenter": "EU-RO-1"}
        volume = http.post("/network-volumes", json=asked).json()
        mount = {"network": [{"volumeId": volume["id"], "path": "/runpod-volume"}]}
        elsewhere = http.post(
            "/pods", json={**body(), "mounts": mount, "dataCenterIds": ["US-TX-3"]}
        )
        assert elsewhere.status_code == 400 and "data center" in elsewhere.json()["detail"]
        missing = {"network": [{"volumeId": "vol9999999", "path": "/runpod-volume"}]}
        assert http.post("/pods", json={**body(), "mounts": missing}).status_code == 400
        placed = http.post("/pods", json={**body(), "mounts": mount, "dataCenterIds": ["EU-RO-1"]})
        assert placed.status_code == 201 and placed.json()["mounts"] == mount
    assert_contract(fake)
