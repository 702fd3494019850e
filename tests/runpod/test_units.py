"""Pure parts of the RunPod provider: pod rows as lease states and SSH endpoints, catalog
rows as offers, and the walk order (floor, cap on out-of-stock types, re-sort)."""

from __future__ import annotations

from typing import Any

import pytest

from mvp_tui.providers.base import LeaseState
from mvp_tui.providers.runpod.catalog import (
    CatalogGpu,
    MalformedCatalog,
    WalkPolicy,
    parse_gpu,
    read_catalog,
    resort,
    split_offer_id,
    walk_order,
)
from mvp_tui.providers.runpod.client import lease_status, ssh_endpoint


def same(text: str) -> str:
    return text


def pod(**fields: Any) -> dict[str, Any]:
    row: dict[str, Any] = {"id": "p1", "name": "mvp-r-1-1-1", "status": "RUNNING", "cost": 0.5,
                           "ssh": {"proxy": None, "direct": None}, "runtime": None}
    row.update(fields)
    return row


def test_running_needs_a_direct_endpoint_and_the_proxy_never_counts() -> None:
    proxy = {"host": "ssh.runpod.io", "port": 22, "username": "p1-64411eb2", "command": "ssh"}
    status = lease_status(pod(ssh={"proxy": proxy, "direct": None}), "root", same)
    assert status.state is LeaseState.PENDING and status.ssh is None
    ports = [
        {"private": 8888, "public": 1, "type": "http", "ip": "1.2.3.4"},
        {"private": 22, "public": 40022, "type": "tcp", "ip": "1.2.3.4"},
    ]
    runtime = {"ports": ports}
    endpoint = ssh_endpoint(pod(runtime=runtime), "root")
    assert endpoint is not None and (endpoint.host, endpoint.port) == ("1.2.3.4", 40022)
    assert ssh_endpoint(pod(runtime={"ports": [{"private": 22, "public": None, "ip": None}]}),
                        "root") is None


@pytest.mark.parametrize(
    ("status", "state"),
    [("PROVISIONING", LeaseState.PENDING), ("STARTING", LeaseState.PENDING),
     ("EXITED", LeaseState.STOPPED), ("ERROR", LeaseState.DEAD),
     ("TERMINATED", LeaseState.GONE), ("SOMETHING_NEW", LeaseState.PENDING)],
)
def test_pod_statuses_map_to_lease_states(status: str, state: LeaseState) -> None:
    assert lease_status(pod(status=status), "root", same).state is state


def test_a_secret_in_a_pod_name_is_redacted() -> None:
    status = lease_status(
        pod(name="mvp-SECRETKEY123"), "root", lambda t: t.replace("SECRETKEY123", "<r>")
    )
    assert status.label == "mvp-<r>"


def gpu(
    name: str, price: float, stock: str = "HIGH", memory: int = 24, cloud: str = "SECURE"
) -> CatalogGpu:
    return CatalogGpu(f"NVIDIA {name}", name, memory, cloud, price, 8, stock)


def test_auto_order_tries_at_most_cap_cheaper_out_of_stock_types_first() -> None:
    gpus = [gpu("a", 0.1, "NONE"), gpu("b", 0.2, "NONE"), gpu("c", 0.3), gpu("d", 0.4, "NONE"),
            gpu("e", 0.5, "LOW"), gpu("f", 0.05, memory=8)]
    order = walk_order(gpus, WalkPolicy(min_vram_gb=16, max_out_of_stock=1))
    assert [g.name for g in order.gpus] == ["a", "c", "e"]
    assert order.out_of_stock == {"SECURE:NVIDIA a"}
    again = walk_order(gpus, WalkPolicy(min_vram_gb=16), tried=["SECURE:NVIDIA c"])
    assert [g.name for g in again.gpus] == ["a", "b", "d", "e"]  # d is cheaper than e now
    nothing = walk_order([gpu("a", 0.1, "NONE")], WalkPolicy())
    assert nothing.gpus == () and nothing.skipped


def test_resort_puts_the_fresh_order_first_and_drops_earlier_out_of_stock_types() -> None:
    remaining = [gpu(n, p).offer(1) for n, p in (("b", 0.2), ("c", 0.3), ("d", 0.4))]
    fresh = walk_order([gpu("d", 0.4), gpu("c", 0.3, "NONE")], WalkPolicy(max_out_of_stock=0))
    order = resort(remaining, fresh, 1, frozenset({"SECURE:NVIDIA b"}))
    assert [o.gpu_name for o in order] == ["d", "c"]


def test_catalog_rows_are_read_per_cloud_and_bad_rows_skipped() -> None:
    row = {"id": "NVIDIA X", "name": "X", "memory": 24, "secure": True, "community": False,
           "price": {"secure": 0.4, "community": 0.0}, "maxCount": {"secure": 8, "community": 0},
           "availability": "MEDIUM", "dataCenters": [{"id": "EU-RO-1", "name": "r",
                                                      "availability": "MEDIUM"}]}
    secure = parse_gpu(row, "SECURE")
    assert secure is not None and secure.data_centers == ("EU-RO-1",)
    assert parse_gpu(row, "COMMUNITY") is None
    page = read_catalog({"gpus": [row, {"id": 3}, "x"]}, "SECURE")
    assert len(page.gpus) == 1 and len(page.skipped) == 2
    with pytest.raises(MalformedCatalog):
        read_catalog({"types": []}, "SECURE")
    assert split_offer_id("SECURE:NVIDIA A40") == ("SECURE", "NVIDIA A40")
    assert split_offer_id("7001") is None
