"""Issue 24, seeds 000-002, the account SSH key: a registration is listed again to check it
took (an error with the fix when it did not); the seed's line, with the SHA256 fingerprint,
when the key is found or registered; `ssh_public_fingerprint` in the `config` phase's
`provider_config`. Against the fake marketplaces (tests/fakes)."""

from __future__ import annotations

import json
from pathlib import Path

import asyncssh
import pytest

from mvp_tui.config import ConfigPaths, load_config
from mvp_tui.datastream.channels import MVP_ORCH_BOOTSTRAP, LogStream, node_log_channel
from mvp_tui.engine.events import AccountKeyReady
from mvp_tui.engine.run import RunEngine
from mvp_tui.events import EngineEvent
from mvp_tui.providers.base import ProviderError
from mvp_tui.providers.runpod.client import RunPodProvider
from mvp_tui.providers.vastai.client import VastAiProvider
from mvp_tui.ssh.public_key import public_fingerprint
from tests.fakes.runpod_server import FakeRunPod
from tests.fakes.runpod_server import Fault as RunPodFault
from tests.fakes.vastai_server import FakeVast, Fault

SSH_LIST = ("GET", "/api/v0/ssh/")


def _identity(tmp_path: Path, *, with_pub: bool = True) -> tuple[Path, asyncssh.SSHKey]:
    key = asyncssh.generate_private_key("ssh-ed25519", comment="mvp@test")
    path = tmp_path / "id_ed25519"
    path.write_bytes(key.export_private_key("openssh"))
    path.chmod(0o600)
    if with_pub:
        path.with_name("id_ed25519.pub").write_bytes(key.export_public_key("openssh"))
    return path, key


def _public(key: asyncssh.SSHKey) -> str:
    return key.export_public_key("openssh").decode().strip()


async def test_a_vast_registration_is_listed_again(tmp_path: Path) -> None:
    _, key = _identity(tmp_path)
    with FakeVast() as fake:
        provider = VastAiProvider(api_key=fake.api_key, api_url=fake.url, timeout_s=5.0)
        try:
            assert await provider.ensure_ssh_key(_public(key)) is True
        finally:
            await provider.aclose()
        calls = [(r.method, r.path) for r in fake.requests]
    assert calls == [SSH_LIST, ("POST", "/api/v0/ssh/"), SSH_LIST]


async def test_a_vast_registration_that_did_not_take_is_an_error_with_the_fix(
    tmp_path: Path,
) -> None:
    _, key = _identity(tmp_path)
    with FakeVast() as fake:
        # Vast answers success, yet the account does not hold the key afterwards.
        fake.script("ssh_create", Fault(status=200, body={"success": True}))
        provider = VastAiProvider(api_key=fake.api_key, api_url=fake.url, timeout_s=5.0)
        try:
            with pytest.raises(ProviderError) as info:
                await provider.ensure_ssh_key(_public(key))
        finally:
            await provider.aclose()
    assert "does not list it" in info.value.message
    assert "console.vast.ai" in info.value.fix
    assert fake.api_key not in str(info.value) + info.value.fix


async def test_a_runpod_registration_that_did_not_take_is_an_error_with_the_fix(
    tmp_path: Path,
) -> None:
    _, key = _identity(tmp_path)
    with FakeRunPod() as fake:
        fake.script("ssh_keys_put", RunPodFault(status=200, body={"keys": []}))
        provider = RunPodProvider(api_key=fake.api_key, api_url=fake.api_url, timeout_s=5.0)
        try:
            with pytest.raises(ProviderError) as info:
                await provider.ensure_ssh_key(_public(key))
        finally:
            await provider.aclose()
        lists = [r for r in fake.requests if r.method == "GET" and r.path.endswith("ssh-keys")]
    assert len(lists) == 2  # before the PUT, and again after it
    assert "does not list it" in info.value.message
    assert "runpod.io" in info.value.fix


def _engine(tmp_path: Path, fake: FakeVast, identity: Path, events: list[EngineEvent]) -> RunEngine:
    config = tmp_path / "config.toml"
    config.write_text(
        f'[provider]\nkind = "vastai"\n\n[vastai]\napi_key = "{fake.api_key}"\n'
        f'api_url = "{fake.url}"\nssh_identity = "{identity}"\n'
    )
    loaded = load_config(
        env={"MVP_STATE_DIR": str(tmp_path / "state"), "SSH_AUTH_SOCK": ""},
        paths=ConfigPaths(explicit=config, explicit_source="flag --config"),
    )
    return RunEngine(loaded, events.append, environ={})


@pytest.mark.parametrize("already_there", [False, True])
async def test_the_seed_line_names_the_identity_and_its_fingerprint(
    tmp_path: Path, already_there: bool
) -> None:
    identity, key = _identity(tmp_path)
    events: list[EngineEvent] = []
    with FakeVast() as fake:
        if already_there:
            fake.account_keys.append(_public(key))
        run = _engine(tmp_path, fake, identity, events)
        try:
            await run.leasing.prepare_ssh_identity()
        finally:
            await run.aclose()
    fingerprint = key.get_fingerprint("sha256")
    (ready,) = [e for e in events if isinstance(e, AccountKeyReady)]
    assert ready.line == (
        f"VastAI SSH identity {identity} fingerprint {fingerprint} registered for account"
    )
    assert ready.registered_now is not already_there
    channel = node_log_channel(run.node_id, LogStream.PROVIDER)
    provider_lines = [f.payload.decode() for f in run.hub.tail(channel).frames]
    assert any(ready.line in text for text in provider_lines)  # the provider channel too


@pytest.mark.parametrize("with_pub", [True, False])
def test_the_config_phase_carries_the_identitys_fingerprint(tmp_path: Path, with_pub: bool) -> None:
    identity, key = _identity(tmp_path, with_pub=with_pub)
    with FakeVast() as fake:
        run = _engine(tmp_path, fake, identity, [])
    run.started()
    frames = run.hub.tail(MVP_ORCH_BOOTSTRAP).frames
    records = [json.loads(f.payload) for f in frames]
    (config,) = [r for r in records if r["phase"] == "config"]
    expected = key.get_fingerprint("sha256")
    assert config["detail"]["provider_config"]["ssh_public_fingerprint"] == expected
    assert public_fingerprint(identity) == expected


def test_a_node_without_ssh_has_no_fingerprint_in_its_config(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[provider]\nkind = "local"\n')
    config = load_config(
        env={"MVP_STATE_DIR": str(tmp_path / "state")},
        paths=ConfigPaths(explicit=path, explicit_source="flag --config"),
    )
    run = RunEngine(config, lambda _e: None, environ={})
    run.started()
    records = [json.loads(f.payload) for f in run.hub.tail(MVP_ORCH_BOOTSTRAP).frames]
    (phase,) = [r for r in records if r["phase"] == "config"]
    assert "ssh_public_fingerprint" not in phase["detail"]["provider_config"]
