"""The boot guard in Vast's `onstart` (issue 19 item 5), run as the container would run it:
the create body the provider sent is recorded by the fake, its `onstart` runs under /bin/sh
with the container's env (the create's env, the instance id and its own key, the run's API
URL) against the fake on loopback. No agent attaches within the grace → the instance destroys
itself with its own key; an agent that attached stands it down; Vast's 4096-char cap holds
with the user's own onstart merged."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from mvp_tui.config import ConfigError, ConfigPaths, load_config
from mvp_tui.lease.settings import WalkSettings
from mvp_tui.node.switch import boot_guard_report
from mvp_tui.providers.base import CreateRequest, ProviderError, SelectionPolicy
from mvp_tui.providers.boot_guard import guard_script
from mvp_tui.providers.prefetch import prefetch_script
from mvp_tui.providers.vastai.boot import VAST_ONSTART_CAP, vast_onstart, vast_start_lines
from mvp_tui.providers.vastai.client import VastAiProvider, build_create_body
from mvp_tui.providers.vastai.node_api import GUARD as VAST
from tests.fakes.container import Container, wait_until
from tests.fakes.vastai_server import FakeVast

GRACE_S = 2


async def rent(
    fake: FakeVast, provider: VastAiProvider, onstart: str | None = None, grace_s: int = GRACE_S
) -> int:
    """One instance created through the provider, with the env the engine's create sends."""
    fake.add_offer()
    (offer,) = await provider.search_offers(SelectionPolicy(require_verified=False))
    env = {"MVP_RUN_ID": "r1", "MVP_VASTAI_API_URL": fake.url, "MVP_BOOT_GRACE_S": str(grace_s)}
    request = CreateRequest(label="mvp-r1-1-1", image="img", env=env, disk_gb=10, onstart=onstart)
    result = await provider.create(offer, request)
    assert result.provider_id is not None
    return int(result.provider_id)


def container(fake: FakeVast, instance: int, tmp_path: Path, **env: str) -> Container:
    """The instance's container as Vast starts it: its recorded onstart, its env."""
    script = fake.onstart_of(instance)
    assert script is not None
    full = {**fake.container_env(instance), **env}
    return Container({k: v for k, v in full.items() if v}, tmp_path / "guard", script=script)


def only_tools(tmp_path: Path, *names: str) -> str:
    """A PATH holding just these programs (an image without python3, or without curl too)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("mkdir", "chmod", "rm", "mv", "date", "sleep", "grep", *names):
        target = next(Path(d) / name for d in os.environ["PATH"].split(":")
                      if (Path(d) / name).is_file())
        (bin_dir / name).symlink_to(target)
    return str(bin_dir)


def instance_key_deletes(fake: FakeVast, instance: int) -> list[dict[str, str]]:
    key = fake.instance_env(instance)["CONTAINER_API_KEY"]
    mine = f"Bearer {key}"
    return [r.headers for r in fake.requests
            if r.method == "DELETE" and r.headers.get("authorization") == mine]


@pytest.mark.parametrize("tool", ["python3", "curl"])
async def test_no_agent_within_the_grace_and_the_instance_destroys_itself(
    fake: FakeVast, provider: VastAiProvider, tmp_path: Path, tool: str
) -> None:
    instance = await rent(fake, provider)
    path = None if tool == "python3" else only_tools(tmp_path, "curl")
    script = fake.onstart_of(instance) or ""
    env = {**fake.container_env(instance), "HOME": str(tmp_path)}
    with Container(env, tmp_path / "guard", script=script, path=path) as node:
        assert node.verdict() == f"armed {tool} {GRACE_S}"
        wait_until(lambda: fake.destroyed_by(instance) is not None, GRACE_S + 30, "self-destroy")
        took = time_since(node.started_at or 0.0)
        node.wait_log("gone", 30)  # the next DELETE found it gone: the guard is done
        node.wait_ended(10)
    assert took >= GRACE_S, f"fired after {took:.2f} s, before its {GRACE_S} s grace"
    assert fake.destroyed_by(instance) == "instance" and fake.billing() == []
    assert fake.scope_violations == []
    deletes = instance_key_deletes(fake, instance)
    assert deletes and all(h["user-agent"] == "mvp-boot-guard/1" for h in deletes)
    key = fake.instance_env(instance)["CONTAINER_API_KEY"]
    assert key not in script  # the key is the container's, never in the create request
    for file in (tmp_path / "guard").iterdir():
        assert key not in file.read_text(errors="replace"), file


async def test_an_attached_agent_stands_the_guard_down(
    fake: FakeVast, provider: VastAiProvider, tmp_path: Path
) -> None:
    instance = await rent(fake, provider, grace_s=3)
    with container(fake, instance, tmp_path) as node:
        node.verdict()
        status, detail = boot_guard_report(node.env, "vastai")  # the agent, as it starts
        assert (status, detail["state"], detail["armed"]) == ("ready", "armed", True)
        assert detail["tool"] == "python3" and detail["grace_s"] == 3
        node.wait_log("stood down", 10)
        node.wait_ended(10)  # the guard is gone: it can never fire
        started = node.started_at or 0.0
        # And past the grace the instance still runs (a bounded look, not a sleep).
        wait_until(lambda: time_since(started) > 3 + 1.5 or fake.destroyed() != [], 10, "grace")
    assert fake.destroyed() == [] and instance_key_deletes(fake, instance) == []
    assert "destroying" not in node.log()


def time_since(start: float) -> float:
    return time.monotonic() - start


async def test_a_failed_destroy_is_retried_until_vast_says_gone(
    fake: FakeVast, provider: VastAiProvider, tmp_path: Path
) -> None:
    instance = await rent(fake, provider, grace_s=1)
    fake.fail_destroy(instance, times=2, status=500)
    with container(fake, instance, tmp_path, MVP_BOOT_GUARD_RETRY_S="1") as node:
        node.wait_log("gone", 30)
    log = node.log()
    assert log.count("destroy: HTTP 500") == 2 and "destroy: HTTP 200" in log
    assert fake.destroyed_by(instance) == "instance"


async def test_a_404_auth_error_is_a_bad_key_not_gone(
    fake: FakeVast, provider: VastAiProvider, tmp_path: Path
) -> None:
    instance = await rent(fake, provider, grace_s=1)
    fake.auth_error_status = 404  # Vast's other answer to a wrong key: 404 auth_error
    wrong = {"CONTAINER_API_KEY": "not-this-instances-key-0000", "MVP_BOOT_GUARD_RETRY_S": "1"}
    with container(fake, instance, tmp_path, **wrong) as node:
        node.wait_log("destroy: HTTP 404", 30, count=2)
        assert "gone" not in node.log()
    assert fake.billing() != []


@pytest.mark.parametrize(
    ("env", "path_tools", "why"),
    [
        ({"CONTAINER_API_KEY": ""}, None, "failed no CONTAINER_API_KEY in the container env"),
        ({"CONTAINER_ID": "", "VAST_CONTAINERLABEL": ""}, None, "failed no usable CONTAINER_ID"),
        ({}, (), "failed this image has neither python3 nor curl"),
        ({"MVP_BOOT_GRACE_S": "0"}, None, "off"),
    ],
)
async def test_a_guard_that_cannot_run_says_why_and_sends_nothing(
    fake: FakeVast, provider: VastAiProvider, tmp_path: Path,
    env: dict[str, str], path_tools: tuple[str, ...] | None, why: str,
) -> None:
    instance = await rent(fake, provider)
    script = fake.onstart_of(instance) or ""
    full = {k: v for k, v in {**fake.container_env(instance), **env}.items() if v}
    path = None if path_tools is None else only_tools(tmp_path, *path_tools)
    with Container(full, tmp_path / "guard", script=script, path=path) as node:
        assert node.verdict().startswith(why)
        node.wait_ended(10)
        status, detail = boot_guard_report(node.env, "vastai")
    assert status == ("ready" if why == "off" else "failed")
    assert detail["armed"] is False
    if why != "off":
        assert detail["reason"].startswith("the boot guard cannot run: " + why[len("failed ") :])
    assert instance_key_deletes(fake, instance) == [] and fake.billing() != []


@pytest.mark.parametrize(
    ("tail", "why"),
    [
        ("?@127.0.0.1", "is not an https base URL"),  # urllib, curl: the host before '?'
        ("#@127.0.0.1", "is not an https base URL"),
        (None, "is not an https base URL"),  # plain http off loopback (TEST-NET-1)
    ],
)
async def test_the_guard_sends_the_key_to_no_url_it_refuses(
    fake: FakeVast, provider: VastAiProvider, tmp_path: Path, tail: str | None, why: str
) -> None:
    """The guard checks the API URL again on the node before the instance key goes there:
    the dashboard's check is not the only one."""
    instance = await rent(fake, provider, grace_s=1)
    script = fake.onstart_of(instance) or ""
    url = fake.url + tail if tail is not None else "http://192.0.2.1:9"
    full = {**fake.container_env(instance), "MVP_VASTAI_API_URL": url}
    with Container(full, tmp_path / "guard", script=script) as node:
        assert node.verdict() == f"failed MVP_VASTAI_API_URL {why}"
        node.wait_ended(10)
        assert "@" not in node.verdict()  # the URL itself is never echoed
    assert instance_key_deletes(fake, instance) == [] and fake.billing() != []


async def test_the_id_comes_from_vasts_label_when_container_id_is_unset(
    fake: FakeVast, provider: VastAiProvider, tmp_path: Path
) -> None:
    instance = await rent(fake, provider, grace_s=1)
    with container(fake, instance, tmp_path, CONTAINER_ID="") as node:
        node.wait_log("gone", 30)
    assert fake.destroyed_by(instance) == "instance"


async def test_the_users_onstart_runs_after_the_guard_with_its_shebang_first(
    fake: FakeVast, provider: VastAiProvider, tmp_path: Path
) -> None:
    user = '#!/bin/sh\necho "user onstart ran" > "$USER_MARK"\n'
    instance = await rent(fake, provider, onstart=user, grace_s=30)
    script = fake.onstart_of(instance) or ""
    assert script.startswith("#!/bin/sh\n" + vast_start_lines())  # then the user's lines
    with container(fake, instance, tmp_path, USER_MARK=str(tmp_path / "user-ran")) as node:
        assert node.verdict() == "armed python3 30"
        wait_until((tmp_path / "user-ran").exists, 10, "the user's onstart")
        node.stand_down()
        node.wait_log("stood down", 10)


def test_the_guard_fits_vasts_cap_with_room_for_the_users_onstart() -> None:
    guard = vast_start_lines()  # the pinned host key's install, the guard, the prefetch
    assert guard_script(VAST) in guard and prefetch_script() in guard
    room = VAST_ONSTART_CAP - len(guard) - 1
    # Host key ~620, guard ~2,190 (with its own API URL check), prefetch ~630: a user's own
    # onstart keeps about 650.
    assert room >= 650, f"the start lines ({len(guard)} chars) leave a user's onstart {room}"
    assert len(vast_onstart("x" * room)) == VAST_ONSTART_CAP
    with pytest.raises(ValueError, match="exceeds Vast's 4096-character cap"):
        vast_onstart("x" * (room + 1))
    request = CreateRequest(label="l", image="i", env={}, disk_gb=10, onstart="x" * (room + 1))
    with pytest.raises(ProviderError, match=f"at most {room} characters"):
        build_create_body(request)


def test_a_too_long_onstart_is_refused_when_the_config_loads(tmp_path: Path) -> None:
    room = VAST_ONSTART_CAP - len(guard_script(VAST) + prefetch_script()) - 1
    path = tmp_path / "config.toml"
    path.write_text(f'[provider]\nkind = "vastai"\n\n[vastai]\napi_key = "key-123456"\n'
                    f'onstart = "{"y" * (room + 1)}"\n')
    config = load_config(env={}, paths=ConfigPaths(explicit=path, explicit_source="flag --config"))
    with pytest.raises(ConfigError, match=r"\[vastai\] onstart is .* at most"):
        WalkSettings.from_config(config)


def test_the_fake_refuses_an_onstart_over_vasts_cap(fake: FakeVast) -> None:
    import json
    import urllib.error
    import urllib.request

    offer = fake.add_offer()
    body = {"client_id": "me", "image": "img", "disk": 10.0, "onstart": "z" * 4097}
    request = urllib.request.Request(
        f"{fake.url}/api/v0/asks/{offer}/", json.dumps(body).encode(), method="PUT",
        headers={"Authorization": f"Bearer {fake.api_key}", "Content-Type": "application/json"},
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 400
    assert json.loads(refused.value.read())["error"] == "invalid_args"
    assert fake.instances() == []


@pytest.mark.parametrize("tool", ["python3", "curl"])
async def test_a_410_on_the_v0_destroy_is_never_gone_and_the_guard_destroys_on_v1(
    fake: FakeVast, provider: VastAiProvider, tmp_path: Path, tool: str
) -> None:
    """v0's single-instance DELETE retired (410 `deprecated_endpoint`, peers 2026-12-07 V7):
    the guard does not stop there; its next tries go to `/api/v1/instances/{id}/` until that
    says gone."""
    instance = await rent(fake, provider, grace_s=1)
    fake.retired_v0 = {"destroy"}
    path = None if tool == "python3" else only_tools(tmp_path, "curl")
    env = {**fake.container_env(instance), "HOME": str(tmp_path), "MVP_BOOT_GUARD_RETRY_S": "1"}
    with Container(env, tmp_path / "guard", script=fake.onstart_of(instance) or "",
                   path=path) as node:
        node.wait_log("gone", 40)
        node.wait_ended(10)
    assert fake.destroyed_by(instance) == "instance" and fake.billing() == []
    key = fake.instance_env(instance)["CONTAINER_API_KEY"]
    paths = [r.path for r in fake.requests
             if r.method == "DELETE" and r.headers.get("authorization") == f"Bearer {key}"]
    assert paths[0] == f"/api/v0/instances/{instance}/"
    assert set(paths[1:]) == {f"/api/v1/instances/{instance}/"} and len(paths) >= 3
    log = node.log()
    assert "destroy: HTTP 410" in log and log.index("HTTP 410") < log.index("gone")
    assert fake.scope_violations == []
