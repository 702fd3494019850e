"""The run's two secrets, its OpenAI key and its prompt RPC token, are each 256 random bits,
URL-safe, and new for every run: a constant (or a short) one would open every user's RPC and
endpoint with one value (README "Security")."""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from mvp_tui.config import ConfigPaths, load_config
from mvp_tui.engine.run import RunEngine
from mvp_tui.lease.endpoint_record import load_endpoint, new_api_key, new_rpc_token

URL_SAFE = re.compile(r"[A-Za-z0-9_-]+")
MAKERS: dict[str, tuple[Callable[[], str], str]] = {
    "api key": (new_api_key, "mvp-"),
    "rpc token": (new_rpc_token, "mvp-rpc-"),
}


def random_bits(secret: str, prefix: str) -> int:
    """The bits behind the prefix: unpadded base64url, decoded strictly."""
    assert secret.startswith(prefix), secret
    body = secret.removeprefix(prefix)
    assert URL_SAFE.fullmatch(body), f"{secret!r} is not URL-safe"
    raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
    assert base64.urlsafe_b64encode(raw).rstrip(b"=").decode() == body
    return len(raw) * 8


@pytest.mark.parametrize("kind", list(MAKERS))
def test_each_secret_is_256_url_safe_random_bits_and_never_repeats(kind: str) -> None:
    make, prefix = MAKERS[kind]
    made = [make() for _ in range(64)]
    assert all(random_bits(secret, prefix) >= 256 for secret in made)
    assert len(set(made)) == len(made), f"a {kind} repeated within 64 calls"
    # Random bits, not a counter or a clock: every position of the body varies.
    bodies = [secret.removeprefix(prefix) for secret in made]
    varying = sum(len({body[i] for body in bodies}) > 1 for i in range(len(bodies[0])))
    assert varying >= len(bodies[0]) - 1  # the last character holds 2 spare bits of 6


def _engine(tmp_path: Path, name: str) -> RunEngine:
    env = {"MVP_PROVIDER": "local", "MVP_STATE_DIR": str(tmp_path / "state")}
    config = load_config(env=env, paths=ConfigPaths(default=tmp_path / f"{name}.toml"))
    return RunEngine(config, lambda _event: None, environ={})


async def test_two_runs_write_records_with_their_own_key_and_token(tmp_path: Path) -> None:
    """Two runs' endpoint records (what the RPC's clients and `mvp-tui endpoint` read) hold
    different keys and tokens, each 256 random bits."""
    runs = [_engine(tmp_path, "one"), _engine(tmp_path, "two")]
    try:
        records = []
        for engine in runs:
            engine.store.run_dir(engine.ctx.run_id).mkdir(parents=True)
            engine.link.keep_endpoint(serving=False)
            record = load_endpoint(engine.store, engine.ctx.run_id)
            assert record is not None
            assert (record.api_key, record.rpc_token) == (engine.ctx.api_key, engine.ctx.rpc_token)
            assert random_bits(record.api_key, "mvp-") >= 256
            assert random_bits(record.rpc_token, "mvp-rpc-") >= 256
            records.append(record)
        assert runs[0].ctx.run_id != runs[1].ctx.run_id
        first, second = records
        assert first.api_key != second.api_key
        assert first.rpc_token != second.rpc_token
        assert first.rpc_token not in (first.api_key, second.api_key)
    finally:
        for engine in runs:
            await engine.aclose()
